# src/base: results, configuration, logging, small utilities, wire fields and
# the job key -- the bottom layer, which includes nothing above it.
libloom_core_la_SOURCES += \
	src/base/util.h \
	src/base/wire.h \
	src/base/config.h \
	src/base/config.c \
	src/base/log.h \
	src/base/log.c \
	src/base/result.c \
	src/base/auth.h \
	src/base/auth.c \
	src/base/dl.h \
	src/base/dl.c
# dl.c: dlopen/dlvsym
libloom_core_la_LIBADD += $(DL_LIBS)
LOOM_INTERNAL_LIBS += $(DL_LIBS)
