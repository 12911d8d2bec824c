# src/bootstrap: rendezvous through rank 0, local address selection; the job
# key's HMAC helper (src/core/auth.c) used by the bootstrap and the tcp hello,
# and the tcp frame-header check (tcp_check.c, pure, shared with the fuzzer).
libloom_core_la_SOURCES += \
	src/core/auth.h \
	src/core/auth.c \
	src/transport/tcp_check.h \
	src/transport/tcp_check.c \
	src/bootstrap/bootstrap.h \
	src/bootstrap/bootstrap.c \
	src/bootstrap/boot_io.h \
	src/bootstrap/boot_io.c \
	src/bootstrap/boot_wire.h \
	src/bootstrap/boot_wire.c \
	src/bootstrap/netaddr.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_bootstrap tests/unit/check_auth
TESTS += tests/unit/check_bootstrap tests/unit/check_auth
tests_unit_check_bootstrap_SOURCES = tests/unit/check_bootstrap.c tests/unit/mp_util.h
tests_unit_check_bootstrap_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_bootstrap_LDADD = $(TEST_LIBS)
tests_unit_check_auth_SOURCES = tests/unit/check_auth.c
tests_unit_check_auth_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_auth_LDADD = $(TEST_LIBS)
endif
