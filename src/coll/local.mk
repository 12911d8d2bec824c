# src/coll: algorithms over point-to-point.
libloom_core_la_SOURCES += \
	src/coll/coll.h \
	src/coll/ring_math.h \
	src/coll/coll.c \
	src/coll/p2p.c \
	src/coll/ring.c \
	src/coll/rd.c \
	src/coll/chain.c \
	src/coll/binomial.c \
	src/coll/barrier.c
