# tools/run.mk: loom-run, the local launcher, and its test.
bin_PROGRAMS += loom-run
loom_run_SOURCES = tools/loom-run.c
loom_run_LDADD = $(LOOM_INTERNAL_LIBS)

TESTS += tests/integration/test_loom_run.sh
EXTRA_DIST += tests/integration/test_loom_run.sh
