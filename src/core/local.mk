# src/core: results, configuration, logging, communicators, op queue.
libloom_core_la_SOURCES += \
	src/core/util.h \
	src/core/comm.h \
	src/core/op.h \
	src/core/op.c \
	src/core/config.h \
	src/core/log.h \
	src/core/result.c \
	src/core/info.c \
	src/core/comm.c \
	src/core/queue.c \
	src/core/api.c \
	src/core/auth.h \
	src/core/auth.c \
	src/core/trace.h \
	src/core/trace.c \
	src/core/config.c \
	src/core/launch.h \
	src/core/launch.c \
	src/core/log.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_config
TESTS += tests/unit/check_config
tests_unit_check_config_SOURCES = tests/unit/check_config.c
tests_unit_check_config_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_config_LDADD = $(TEST_LIBS)
endif

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_launch
TESTS += tests/unit/check_launch
tests_unit_check_launch_SOURCES = tests/unit/check_launch.c
tests_unit_check_launch_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_launch_LDADD = $(TEST_LIBS)
endif
