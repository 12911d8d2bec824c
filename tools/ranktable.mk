# tools/ranktable.mk: loom-ranktable (check | probe | generate).
bin_PROGRAMS += tools/loom-ranktable
tools_loom_ranktable_SOURCES = tools/loom-ranktable.c tools/probe.c \
	tools/probe.h tools/probe_internal.h tools/probe_pair.c \
	tools/probe_rounds.c tools/probe_report.c
tools_loom_ranktable_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tools_loom_ranktable_LDADD = $(LOOM_INTERNAL_LIBS)

TESTS += tests/integration/test_probe.sh
EXTRA_DIST += tests/integration/test_probe.sh docs/probe.md
