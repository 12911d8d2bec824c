# src/core: results, configuration, logging, communicators, op queue.
libloom_core_la_SOURCES += \
	src/core/util.h \
	src/core/comm.h \
	src/core/result.c \
	src/core/comm.c \
	src/core/queue.c \
	src/core/api.c
