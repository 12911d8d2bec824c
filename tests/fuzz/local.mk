# tests/fuzz/local.mk: libFuzzer targets (configure --enable-fuzzing CC=clang).
# The library sources are listed here so they are compiled with the fuzzer's
# instrumentation; cJSON and libcrypto themselves are the system libraries.
EXTRA_DIST += tests/fuzz/run-fuzz.sh tests/fuzz/run-fuzz-wire.sh
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_ranktable
tests_fuzz_fuzz_ranktable_SOURCES = tests/fuzz/fuzz_ranktable.c \
	$(LOOM_RANKTABLE_SOURCES) \
	src/base/result.c \
	src/base/config.c \
	src/base/log.c
tests_fuzz_fuzz_ranktable_CPPFLAGS = $(AM_CPPFLAGS) $(CJSON_CFLAGS)
tests_fuzz_fuzz_ranktable_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_ranktable_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_ranktable_LDADD = $(CJSON_LIBS) -lm

# Wire decoders: the tcp frame header and its receive-path check ...
noinst_PROGRAMS += tests/fuzz/fuzz_frame
tests_fuzz_fuzz_frame_SOURCES = tests/fuzz/fuzz_frame.c \
	src/transport/tcp/tcp_frame.c \
	src/transport/tcp/tcp_check.c \
	src/base/auth.c \
	src/base/result.c \
	src/base/config.c \
	src/base/log.c
tests_fuzz_fuzz_frame_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_fuzz_fuzz_frame_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_frame_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_frame_LDADD = $(CRYPTO_LIBS) -lm

# ... and the hellos' payloads (bootstrap, tcp) the handshake carries.
noinst_PROGRAMS += tests/fuzz/fuzz_handshake
tests_fuzz_fuzz_handshake_SOURCES = tests/fuzz/fuzz_handshake.c \
	src/bootstrap/boot_wire.c \
	src/transport/tcp/tcp_frame.c \
	src/base/auth.c \
	src/base/result.c \
	src/base/config.c \
	src/base/log.c
tests_fuzz_fuzz_handshake_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_fuzz_fuzz_handshake_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_handshake_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_handshake_LDADD = $(CRYPTO_LIBS) -lm
endif

# The handshake every Loom socket opens with: its decoders and both sides'
# state machines.
EXTRA_DIST += tests/fuzz/run-fuzz-sockets.sh
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_net_handshake
tests_fuzz_fuzz_net_handshake_SOURCES = tests/fuzz/fuzz_net_handshake.c \
	src/net/handshake.c \
	src/net/net.c \
	src/base/auth.c \
	src/base/result.c \
	src/base/config.c \
	src/base/log.c
tests_fuzz_fuzz_net_handshake_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_fuzz_fuzz_net_handshake_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_net_handshake_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_net_handshake_LDADD = $(CRYPTO_LIBS) -lm
endif

# The out-of-band service's codec (what a job's listening port parses).
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_oob
tests_fuzz_fuzz_oob_SOURCES = tests/fuzz/fuzz_oob.c \
	src/bootstrap/oob_wire.c \
	src/base/result.c \
	src/base/config.c \
	src/base/log.c
tests_fuzz_fuzz_oob_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_oob_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_oob_LDADD = -lm
endif
