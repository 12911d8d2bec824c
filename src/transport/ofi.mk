# src/transport/ofi.mk: the libfabric transport (issue 17), built when
# configure finds libfabric (HAVE_OFI). Its sources are the only files that
# include <rdma/fabric.h>.

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
