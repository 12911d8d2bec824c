# tests/fuzz/local.mk: libFuzzer targets (configure --enable-fuzzing CC=clang).
# The library sources are listed here so they are compiled with the fuzzer's
# instrumentation; cJSON itself is the system library.
EXTRA_DIST += tests/fuzz/run-fuzz.sh
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_ranktable
tests_fuzz_fuzz_ranktable_SOURCES = tests/fuzz/fuzz_ranktable.c \
	$(LOOM_RANKTABLE_SOURCES) \
	src/core/result.c \
	src/core/config.c \
	src/core/log.c
tests_fuzz_fuzz_ranktable_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_ranktable_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_ranktable_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_ranktable_LDADD = $(CJSON_LIBS) -lm
endif
