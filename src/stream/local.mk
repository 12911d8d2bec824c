# src/stream: host and hook streams, events, device-buffer staging.
libloom_core_la_SOURCES += \
	src/stream/stream.h \
	src/stream/stream.c \
	src/stream/request.c
