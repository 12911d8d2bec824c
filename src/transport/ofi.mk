# src/transport/ofi.mk: the libfabric transport (issue 17), built when
# configure finds libfabric (HAVE_OFI). Its sources are the only files that
# include <rdma/fabric.h>; libloom links libfabric only then.

# The registration cache, shared with the verbs transport: built always
# (it needs no libfabric), so either transport can use it.
libloom_core_la_SOURCES += \
	src/transport/regcache.h \
	src/transport/regcache.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_regcache
TESTS += tests/unit/check_regcache
tests_unit_check_regcache_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_regcache_LDADD = $(TEST_LIBS)
endif

if HAVE_OFI
libloom_core_la_SOURCES += \
	src/transport/ofi_priv.h \
	src/transport/ofi_conn.c \
	src/transport/ofi_data.c \
	src/transport/ofi.c
libloom_core_la_CPPFLAGS += $(OFI_CFLAGS)
libloom_core_la_LIBADD += $(OFI_LIBS)
LOOM_INTERNAL_LIBS += $(OFI_LIBS)
endif

# The transport's own cases (provider choice, split messages, registration,
# mismatch, kill -9, strangers, job key): built always, so that a build
# without libfabric reports them skipped with the reason.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_ofi
TESTS += tests/unit/check_ofi
tests_unit_check_ofi_SOURCES = tests/unit/check_ofi.c tests/unit/mp_util.h
tests_unit_check_ofi_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_ofi_LDADD = $(TEST_LIBS)
endif

# The collective matrix (test_coll) over ofi on tcp;ofi_rxm, shm and
# udp;ofi_rxd with shared memory off (every byte crosses libfabric); skips
# where the ofi transport is not built.
TESTS += tests/integration/test_coll_ofi.sh
EXTRA_DIST += tests/integration/test_coll_ofi.sh

# The 3-host network-namespace job (tests/netns/run.sh's cases) over ofi:
# skips where ofi is not built or namespaces are not permitted.
TESTS += tests/netns/ofi.sh
EXTRA_DIST += tests/netns/ofi.sh
EXTRA_DIST += docs/ofi.md
