# src/comm: the communicator's state as every layer above the transports
# sees it (struct loom_comm), its errors and scratch, call descriptors and
# their fingerprints, the flight recorder.
libloom_core_la_SOURCES += \
	src/comm/comm.h \
	src/comm/state.c \
	src/comm/op.h \
	src/comm/op.c \
	src/comm/algo.h \
	src/comm/redop.h \
	src/comm/redop.c \
	src/comm/algo.c \
	src/comm/wait.h \
	src/comm/wait.c \
	src/comm/trace.h \
	src/comm/trace.c
