# src/net: sockets and addresses (numeric and by interface), port bases.
libloom_core_la_SOURCES += \
	src/net/net.h \
	src/net/net.c \
	src/net/netaddr.c
libloom_core_la_SOURCES += \
	src/net/handshake.h \
	src/net/handshake.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_handshake
TESTS += tests/unit/check_handshake
tests_unit_check_handshake_SOURCES = tests/unit/check_handshake.c
tests_unit_check_handshake_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_handshake_LDADD = $(TEST_LIBS)
endif
