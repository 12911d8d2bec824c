# src/bootstrap: rendezvous through rank 0, the out-of-band service, unique ids.
libloom_core_la_SOURCES += \
	src/bootstrap/bootstrap.h \
	src/bootstrap/bootstrap.c \
	src/bootstrap/boot_io.h \
	src/bootstrap/boot_io.c \
	src/bootstrap/boot_wire.h \
	src/bootstrap/boot_wire.c \
	src/bootstrap/uniqueid.c \
	src/bootstrap/oob.h \
	src/bootstrap/oob_priv.h \
	src/bootstrap/oob.c \
	src/bootstrap/oob_job.c \
	src/bootstrap/oob_service.c \
	src/bootstrap/oob_in.c \
	src/bootstrap/oob_out.c \
	src/bootstrap/oob_wire.h \
	src/bootstrap/oob_wire.c \
	src/bootstrap/agree.h \
	src/bootstrap/agree.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_bootstrap tests/unit/check_auth
TESTS += tests/unit/check_bootstrap tests/unit/check_auth
tests_unit_check_bootstrap_SOURCES = tests/unit/check_bootstrap.c tests/support/mp_util.h
tests_unit_check_bootstrap_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_bootstrap_LDADD = $(TEST_LIBS)
tests_unit_check_auth_SOURCES = tests/unit/check_auth.c
tests_unit_check_auth_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_auth_LDADD = $(TEST_LIBS)
endif
