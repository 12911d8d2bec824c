# src/transport/verbs: the libibverbs transport, built when
# configure finds <infiniband/verbs.h> (HAVE_VERBS). Its sources are the only
# files that include <infiniband/verbs.h>; libloom does not link libibverbs
# (verbs_dl.c opens libibverbs.so.1 at first use), it only needs dlopen.
if HAVE_VERBS
libloom_core_la_SOURCES += \
	src/transport/verbs/verbs_api.h src/transport/verbs/verbs_dl.c \
	src/transport/verbs/verbs_gid.h src/transport/verbs/verbs_gid.c \
	src/transport/verbs/verbs_proto.h src/transport/verbs/verbs_proto.c \
	src/transport/verbs/verbs_qp.h src/transport/verbs/verbs_qp.c \
	src/transport/verbs/verbs_priv.h src/transport/verbs/verbs_conn.c \
	src/transport/verbs/verbs_data.c src/transport/verbs/verbs.c
libloom_core_la_LIBADD += $(DL_LIBS)
LOOM_INTERNAL_LIBS += $(DL_LIBS)

# The software model of verbs (tests only) and the suites that use it. A
# test program that links the model and runs with LOOM_TEST_VERBS_MODEL=1
# gets it instead of libibverbs (verbs_dl.c): the transport contract
# (check_transport's "verbs (software model)" configuration) and the
# collective matrix (test_coll_verbs) run over it.
if HAVE_CHECK
tests_unit_check_transport_SOURCES += tests/support/verbs_model.h tests/support/verbs_model.c
check_PROGRAMS += tests/unit/check_verbs
TESTS += tests/unit/check_verbs
tests_unit_check_verbs_SOURCES = tests/unit/check_verbs.c tests/support/mp_util.h \
	tests/support/tx_util.h \
	tests/support/verbs_model.h tests/support/verbs_model.c
tests_unit_check_verbs_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/tests/support
tests_unit_check_verbs_LDADD = $(TEST_LIBS)
endif

# libFuzzer target over the decoders (configure --enable-fuzzing CC=clang;
# tests/fuzz/run-fuzz-verbs.sh runs it).
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_verbs
tests_fuzz_fuzz_verbs_SOURCES = tests/fuzz/fuzz_verbs.c \
	src/transport/verbs/verbs_proto.c
tests_fuzz_fuzz_verbs_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_verbs_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
endif
endif
EXTRA_DIST += tests/fuzz/run-fuzz-verbs.sh

# On real RDMA hardware (tests/rdma/run.sh, which runs the rdma level of
# tests/run-matrix; it SKIPs without a device; docs/rdma.md): the digest
# program compares results of two transports bit for bit.
noinst_PROGRAMS += tests/rdma/digest
tests_rdma_digest_SOURCES = tests/rdma/digest.c
tests_rdma_digest_LDADD = libloom.la
EXTRA_DIST += tests/rdma/run.sh docs/rdma.md

# The collective matrix (test_coll) over the verbs transport on the model:
# the same program linked with the model, run by tests/run-matrix -t
# verbs:model (tests/matrix/verbs-model.matrix).
if HAVE_VERBS
check_PROGRAMS += tests/integration/test_coll_verbs
tests_integration_test_coll_verbs_SOURCES = tests/integration/test_coll.c \
	perf/coll_check.h tests/support/coll_one.h tests/support/harness.h \
	tests/support/verbs_model.h tests/support/verbs_model.c
tests_integration_test_coll_verbs_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/support
tests_integration_test_coll_verbs_LDADD = $(LOOM_INTERNAL_LIBS)
# Allreduce timing on the model, to compare two builds (docs/perf.md):
# built by make check, run by hand.
check_PROGRAMS += tests/integration/verbs_model_perf
tests_integration_verbs_model_perf_SOURCES = tests/integration/verbs_model_perf.c \
	tests/support/harness.h tests/support/verbs_model.h tests/support/verbs_model.c
tests_integration_verbs_model_perf_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/support
tests_integration_verbs_model_perf_LDADD = $(LOOM_INTERNAL_LIBS)
endif
