# tools/ranktable.mk: loom-ranktable (check | generate).
bin_PROGRAMS += tools/loom-ranktable
tools_loom_ranktable_SOURCES = tools/loom-ranktable.c
tools_loom_ranktable_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tools_loom_ranktable_LDADD = $(LOOM_INTERNAL_LIBS)
