# tests/: the communicator-level suites (module suites live in each
# module's local.mk).
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_coll
TESTS += tests/unit/check_coll
tests_unit_check_coll_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_coll_LDADD = $(TEST_LIBS)
endif

check_PROGRAMS += tests/integration/test_coll
tests_integration_test_coll_SOURCES = tests/integration/test_coll.c \
	perf/coll_check.h tests/support/coll_one.h tests/support/harness.h
tests_integration_test_coll_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_coll

if HAVE_CHECK
check_PROGRAMS += tests/integration/test_comm
tests_integration_test_comm_SOURCES = tests/integration/test_comm.c \
	perf/coll_check.h tests/support/harness.h
tests_integration_test_comm_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_comm_LDADD = $(TEST_LIBS)
TESTS += tests/integration/test_comm
endif

TESTS += tests/integration/test_coll_two_server.sh
EXTRA_DIST += tests/integration/test_coll_two_server.sh
TESTS += tests/integration/test_kill_two_server.sh
EXTRA_DIST += tests/integration/test_kill_two_server.sh

if HAVE_CHECK
TESTS += tests/integration/test_tcp_path.sh
EXTRA_DIST += tests/integration/test_tcp_path.sh
endif

# Many ranks on one host (64): exact results, and file descriptors per rank
# bounded by the peers the algorithms use (connections on first use).
check_PROGRAMS += tests/integration/test_scale
tests_integration_test_scale_SOURCES = tests/integration/test_scale.c \
	tests/support/harness.h
tests_integration_test_scale_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_scale
EXTRA_DIST += tests/static/static_link.sh tests/static/hello_static.c

# Launchers: loom-run with env:// programs, torchrun-style and srun-style
# variables by hand, mpirun (where Open MPI is installed); the perf tools
# without a rank table; each failure shown once.
check_PROGRAMS += tests/integration/launch_join
tests_integration_launch_join_SOURCES = tests/integration/launch_join.c
tests_integration_launch_join_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_launch.sh
EXTRA_DIST += tests/integration/test_launch.sh

# Layers point down only: an include or a call that points up fails.
TESTS += scripts/check-layers
EXTRA_DIST += scripts/check-layers
# ... and it fails on a planted violation of each of its rules.
TESTS += scripts/check-layers-test
EXTRA_DIST += scripts/check-layers-test

# .clang-format, checked on the lines a change touches (CI runs
# scripts/check-format against the base); the checker's own test.
TESTS += scripts/check-format-test
EXTRA_DIST += .clang-format scripts/check-format scripts/check-format-test

# Losing ranks and going on: kill -9 mid-loop, revoke, shrink, 100 more
# allreduces checked by every survivor (tcp, shm, 2-server, ofi).
check_PROGRAMS += tests/integration/shrink_job
tests_integration_shrink_job_SOURCES = tests/integration/shrink_job.c
tests_integration_shrink_job_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_shrink.sh
EXTRA_DIST += tests/integration/test_shrink.sh

# torch's own distributed suite on gloo and loom (tests/torch/dist_suite.py):
# make check runs check_suite.sh's bounded part; run_suite.sh is the whole.
EXTRA_DIST += tests/torch/dist_suite.py tests/torch/check_suite.sh tests/torch/run_suite.sh
if HAVE_TORCH
TESTS += tests/torch/check_suite.sh
endif

# The transport test matrix: tests/run-matrix -t TRANSPORT -l LEVEL runs a
# level's cases on a transport, less its config's skips (tests/matrix/).
# make check runs each config below at its check_levels.
TEST_EXTENSIONS = .matrix
MATRIX_LOG_COMPILER = $(SHELL) $(srcdir)/tests/run-matrix
TESTS += tests/matrix/tcp.matrix tests/matrix/ofi-tcp+ofi_rxm.matrix \
	tests/matrix/ofi-shm.matrix tests/matrix/ofi-udp+ofi_rxd.matrix \
	tests/matrix/verbs-model.matrix
EXTRA_DIST += tests/run-matrix tests/rdma/cases.sh tests/rdma/hosts.sh tests/matrix/tcp.matrix \
	tests/matrix/ofi-tcp+ofi_rxm.matrix tests/matrix/ofi-shm.matrix \
	tests/matrix/ofi-udp+ofi_rxd.matrix tests/matrix/verbs-model.matrix \
	tests/matrix/verbs.matrix tests/matrix/ofi-verbs+ofi_rxm.matrix \
	tests/matrix/ofi-efa.matrix
