# src/coll: algorithms over point-to-point.
libloom_core_la_SOURCES += \
	src/coll/coll.h \
	src/coll/ring_math.h \
	src/coll/coll.c \
	src/coll/p2p.c \
	src/coll/ring.c \
	src/coll/rd.c \
	src/coll/chain.c \
	src/coll/binomial.c \
	src/coll/barrier.c \
	src/coll/tree_math.h \
	src/coll/tree.c \
	src/coll/rhd.c \
	src/coll/bruck.c \
	src/coll/scatter_bcast.c \
	src/coll/hier.c \
	src/coll/sendrecv.c \
	src/coll/tagged.c \
	src/coll/alltoall.c \
	src/coll/alltoallv.c \
	src/coll/gather.c \
	src/coll/coalesce.c \
	src/coll/group_run.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_algos
TESTS += tests/unit/check_algos
tests_unit_check_algos_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_algos_LDADD = $(TEST_LIBS)
endif

check_PROGRAMS += tests/integration/test_algos
tests_integration_test_algos_SOURCES = tests/integration/test_algos.c \
	perf/coll_check.h tests/support/coll_one.h tests/support/harness.h
tests_integration_test_algos_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_algos

check_PROGRAMS += tests/integration/test_group
tests_integration_test_group_SOURCES = tests/integration/test_group.c tests/support/rank_util.h \
	perf/coll_check.h tests/support/harness.h
tests_integration_test_group_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_group

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_p2p
TESTS += tests/unit/check_p2p
tests_unit_check_p2p_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_p2p_LDADD = $(TEST_LIBS)
endif

check_PROGRAMS += tests/integration/test_p2p
tests_integration_test_p2p_SOURCES = tests/integration/test_p2p.c tests/support/rank_util.h \
	perf/coll_check.h tests/support/harness.h
tests_integration_test_p2p_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_p2p
