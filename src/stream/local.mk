# src/stream: host and hook streams, events, device-buffer staging.
libloom_core_la_SOURCES += \
	src/stream/stream.h \
	src/stream/stream.c \
	src/stream/stage.c \
	src/stream/device.c \
	src/stream/request.c
EXTRA_DIST += docs/streams.md

if HAVE_CHECK
check_PROGRAMS += tests/integration/test_stage
tests_integration_test_stage_SOURCES = tests/integration/test_stage.c \
	tests/support/devmem.h tests/support/stage_one.h \
	perf/coll_check.h tests/support/coll_one.h \
	tests/support/harness.h
tests_integration_test_stage_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_stage_LDADD = $(TEST_LIBS)
TESTS += tests/integration/test_stage
endif
