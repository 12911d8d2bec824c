# src/api: the public calls of loom.h that are not a communicator's life:
# collectives and point-to-point (validated once, packed into one
# descriptor, submitted), the features string.
libloom_core_la_SOURCES += \
	src/api/api.c \
	src/api/info.c
