# src/core: results, configuration, logging, communicators, op queue.
libloom_core_la_SOURCES += \
	src/core/util.h \
	src/core/result.c

# Configuration table and logging (wip-config).
libloom_core_la_SOURCES += \
	src/core/config.c \
	src/core/log.c
