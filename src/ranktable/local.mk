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
tests_unit_check_ranktable_SOURCES = tests/unit/check_ranktable.c
tests_unit_check_ranktable_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_ranktable_LDADD = $(TEST_LIBS)
endif
