# src/bootstrap: rendezvous through rank 0, local address selection.
libloom_core_la_SOURCES += \
	src/bootstrap/bootstrap.h \
	src/bootstrap/bootstrap.c \
	src/bootstrap/boot_io.h \
	src/bootstrap/boot_io.c \
	src/bootstrap/netaddr.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_bootstrap
TESTS += tests/unit/check_bootstrap
tests_unit_check_bootstrap_SOURCES = tests/unit/check_bootstrap.c tests/unit/mp_util.h
tests_unit_check_bootstrap_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_bootstrap_LDADD = $(TEST_LIBS)
endif
