# src/shm: same-server ranks over shared memory; hierarchical allreduce.
libloom_core_la_SOURCES += \
	src/shm/shm.h \
	src/shm/shm_priv.h \
	src/shm/shm.c \
	src/shm/setup.c \
	src/shm/wait.c \
	src/shm/cma.c \
	src/shm/copy.c \
	src/shm/push.c \
	src/shm/pipe.c \
	src/shm/ll.c

check_PROGRAMS += tests/integration/test_shm
tests_integration_test_shm_SOURCES = tests/integration/test_shm.c \
	perf/coll_check.h tests/support/coll_one.h tests/support/harness.h
tests_integration_test_shm_LDADD = $(LOOM_INTERNAL_LIBS)
TESTS += tests/integration/test_shm

EXTRA_DIST += docs/shm.md
