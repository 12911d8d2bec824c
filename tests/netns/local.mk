# tests/netns/: multi-host faults over network namespaces, and the soak test.
# netns_job is one rank of a job started by run.sh inside a namespace.
check_PROGRAMS += tests/netns/netns_job
tests_netns_netns_job_SOURCES = tests/netns/netns_job.c \
	perf/coll_check.h
tests_netns_netns_job_LDADD = $(LOOM_INTERNAL_LIBS)
# run.sh is the netns level of tests/run-matrix (tests/matrix/tcp.matrix,
# ofi-tcp+ofi_rxm.matrix); exit 77 (skip) where namespaces are not permitted.
EXTRA_DIST += tests/netns/run.sh tests/netns/lib.sh
# Rank tables on ordinary hosts: host-NIC tables, LOOM_ADDRESS, check
# --local, the seeds' one-device table with no network.
TESTS += tests/netns/addr.sh
EXTRA_DIST += tests/netns/addr.sh

# 4 ranks x 20,000 mixed, checked collectives; fd and RSS growth bounded.
check_PROGRAMS += tests/integration/test_soak
tests_integration_test_soak_SOURCES = tests/integration/test_soak.c \
	perf/coll_check.h tests/support/harness.h
tests_integration_test_soak_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_soak

EXTRA_DIST += scripts/sanitize.sh docs/testing.md
