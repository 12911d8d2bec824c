# src/ranktable: HCCL rank tables (JSON via cJSON) -> validated loom_ranktable.
LOOM_RANKTABLE_SOURCES = \
	src/ranktable/ranktable_internal.h \
	src/ranktable/text.h \
	src/ranktable/text.c \
	src/ranktable/set.h \
	src/ranktable/set.c \
	src/ranktable/diag.c \
	src/ranktable/parse.c \
	src/ranktable/validate.c \
	src/ranktable/ranktable.c

libloom_core_la_SOURCES += $(LOOM_RANKTABLE_SOURCES)
