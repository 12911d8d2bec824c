# tools/ranktable.mk: loom-ranktable (check | probe | generate).
bin_PROGRAMS += tools/loom-ranktable
tools_loom_ranktable_SOURCES = tools/loom-ranktable.c tools/probe.c \
	tools/ranktable_local.c tools/ranktable_local.h \
	tools/probe.h tools/probe_internal.h tools/probe_pair.c \
	tools/probe_rounds.c tools/probe_report.c
tools_loom_ranktable_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tools_loom_ranktable_LDADD = $(LOOM_INTERNAL_LIBS)

TESTS += tests/integration/test_probe.sh
EXTRA_DIST += tests/integration/test_probe.sh docs/probe.md

# The probe's schedule, checked for every rank count up to 65.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_probe
TESTS += tests/unit/check_probe
tests_unit_check_probe_SOURCES = tests/unit/check_probe.c tools/probe.c \
	tools/probe.h tools/probe_internal.h tools/probe_pair.c \
	tools/probe_rounds.c tools/probe_report.c
tests_unit_check_probe_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS) -I$(srcdir)/tools
tests_unit_check_probe_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_probe_LDADD = $(TEST_LIBS)
endif
