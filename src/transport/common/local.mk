# src/transport/common: what every transport that keeps its own peers
# (ofi, verbs) shares: the control channel's wire format and its failure
# notices.
libloom_core_la_SOURCES += \
	src/transport/common/link_wire.h \
	src/transport/common/link_wire.c \
	src/transport/common/link_notice.h \
	src/transport/common/link_notice.c

# libFuzzer target over its decoders (configure --enable-fuzzing CC=clang).
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_link
tests_fuzz_fuzz_link_SOURCES = tests/fuzz/fuzz_link.c \
	src/transport/common/link_wire.c \
	src/base/auth.c \
	src/base/result.c \
	src/base/config.c \
	src/base/log.c
tests_fuzz_fuzz_link_CPPFLAGS = $(AM_CPPFLAGS) $(CRYPTO_CFLAGS)
tests_fuzz_fuzz_link_CFLAGS = $(AM_CFLAGS) -g -fsanitize=fuzzer,address
tests_fuzz_fuzz_link_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer,address
tests_fuzz_fuzz_link_LDADD = $(CRYPTO_LIBS) -lm
endif
