# src/ranktable: HCCL rank tables (JSON via cJSON) -> validated loom_ranktable.
LOOM_RANKTABLE_SOURCES = \
	src/ranktable/ranktable_internal.h \
	src/ranktable/text.h \
	src/ranktable/text.c \
	src/ranktable/set.h \
	src/ranktable/set.c \
	src/ranktable/diag.c \
	src/ranktable/walk.h \
	src/ranktable/parse.c \
	src/ranktable/legacy.c \
	src/ranktable/v2.c \
	src/ranktable/validate.c \
	src/ranktable/ranks.c \
	src/ranktable/endpoint.c \
	src/ranktable/ranktable.c

libloom_core_la_SOURCES += $(LOOM_RANKTABLE_SOURCES)

# Tests: the Check suite and the tool's integration test, with their corpus.
EXTRA_DIST += tests/data/ranktables tests/integration/test_ranktable_tool.sh \
	docs/ranktable.md
TESTS += tests/integration/test_ranktable_tool.sh
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_ranktable
TESTS += tests/unit/check_ranktable
tests_unit_check_ranktable_SOURCES = tests/unit/check_ranktable.c \
	tests/support/rt_corpus.h
tests_unit_check_ranktable_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_ranktable_LDADD = $(TEST_LIBS)
endif

# Version 2.0 (rank_list) tables: their corpus and Check suite, the tools
# and a job on loopback, the collective matrix from the shipped 2.0 table
# (jobs across network namespaces: tests/netns/addr.sh).
TESTS += tests/integration/test_ranktable_v2.sh \
	tests/integration/test_coll_two_server_v2.sh
EXTRA_DIST += tests/integration/test_ranktable_v2.sh \
	tests/integration/test_coll_two_server_v2.sh \
	tests/support/port_base.sh
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_ranktable_v2
TESTS += tests/unit/check_ranktable_v2
tests_unit_check_ranktable_v2_SOURCES = tests/unit/check_ranktable_v2.c \
	tests/support/rt_corpus.h
tests_unit_check_ranktable_v2_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_ranktable_v2_LDADD = $(TEST_LIBS)
endif
