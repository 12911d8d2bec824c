# tools/local.mk: loom-info (version, features, configuration).
bin_PROGRAMS += tools/loom-info
tools_loom_info_SOURCES = tools/loom-info.c
tools_loom_info_LDADD = $(LOOM_INTERNAL_LIBS)

# The example configuration, every variable commented out.
EXTRA_DIST += etc/loom.conf

# Every installed program answers --help and --version.
TESTS += tests/integration/test_cli.sh
EXTRA_DIST += tests/integration/test_cli.sh
