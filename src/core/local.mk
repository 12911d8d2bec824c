# src/core: communicators' life (init from a table, a URL, the environment
# or a unique id; split; destroy; abort), the op queue and progress thread,
# the internal service path, launcher variables.
libloom_core_la_SOURCES += \
	src/core/core.h \
	src/core/life.c \
	src/core/shrink.c \
	src/core/queue.c \
	src/core/launch.h \
	src/core/launch.c \
	src/core/group.h \
	src/core/group.c

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
