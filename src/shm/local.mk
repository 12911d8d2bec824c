# src/shm: same-server ranks over shared memory; hierarchical allreduce.
libloom_core_la_SOURCES += \
	src/shm/shm.h \
	src/shm/shm_priv.h \
	src/shm/shm.c \
	src/shm/setup.c \
	src/shm/wait.c \
	src/shm/cma.c \
	src/shm/copy.c
