# tools/run.mk: loom-run, the local launcher, and its test.
bin_PROGRAMS += tools/loom-run
tools_loom_run_SOURCES = tools/loom-run.c
tools_loom_run_LDADD = $(LOOM_INTERNAL_LIBS)

TESTS += tests/integration/test_loom_run.sh
EXTRA_DIST += tests/integration/test_loom_run.sh
