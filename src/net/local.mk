# src/net: sockets and addresses (numeric and by interface), port bases.
libloom_core_la_SOURCES += \
	src/net/net.h \
	src/net/net.c \
	src/net/netaddr.c
