# src/transport/common: what every transport that keeps its own peers
# (ofi, verbs) shares: the link layer (connections, the control channel,
# its wire format and failure notices) and the registration cache.
# One module (header and source) a line.
libloom_core_la_SOURCES += \
	src/transport/common/link_wire.h src/transport/common/link_wire.c \
	src/transport/common/link_notice.h src/transport/common/link_notice.c \
	src/transport/common/link.h src/transport/common/link.c \
	src/transport/common/link_tx.h src/transport/common/link_tx.c

# The link layer under a fake transport whose peers are socket pairs.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_link
TESTS += tests/unit/check_link
tests_unit_check_link_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_link_LDADD = $(TEST_LIBS)
endif

# The registration cache: built always (it needs no libfabric or
# libibverbs), so either transport can use it.
libloom_core_la_SOURCES += src/transport/common/regcache.h src/transport/common/regcache.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_regcache
TESTS += tests/unit/check_regcache
tests_unit_check_regcache_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_regcache_LDADD = $(TEST_LIBS)
endif

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
