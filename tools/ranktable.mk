# tools/ranktable.mk: loom-ranktable (check | probe | generate).
bin_PROGRAMS += tools/loom-ranktable
PROBE_SOURCES = tools/probe.c tools/probe.h tools/probe_internal.h \
	tools/probe_pair.c tools/probe_rounds.c tools/probe_cutoff.c \
	tools/probe_stats.c tools/probe_report.c tools/probe_json.c \
	tools/probe_plot.c
tools_loom_ranktable_SOURCES = tools/loom-ranktable.c $(PROBE_SOURCES) \
	tools/ranktable_local.c tools/ranktable_local.h \
	tools/ranktable_v2.c tools/ranktable_v2.h
tools_loom_ranktable_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tools_loom_ranktable_LDADD = $(LOOM_INTERNAL_LIBS)

TESTS += tests/integration/test_probe.sh
EXTRA_DIST += tests/integration/test_probe.sh docs/probe.md

# The probe's schedule, checked for every rank count up to 65.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_probe
TESTS += tests/unit/check_probe
tests_unit_check_probe_SOURCES = tests/unit/check_probe.c $(PROBE_SOURCES)
tests_unit_check_probe_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) -I$(srcdir)/tools
tests_unit_check_probe_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_probe_LDADD = $(TEST_LIBS)
endif

# Cut-off hosts across network namespaces (exit 77 without them), and the
# made-up reports that --from-json and the heat map are tested on.
TESTS += tests/netns/probe.sh
EXTRA_DIST += tests/netns/probe.sh tests/integration/probe_synth.sh
