# src/transport/tcp: the tcp transport (always built).
libloom_core_la_SOURCES += \
	src/transport/tcp/tcp_frame.h src/transport/tcp/tcp_frame.c \
	src/transport/tcp/tcp_check.h src/transport/tcp/tcp_check.c \
	src/transport/tcp/tcp_priv.h src/transport/tcp/tcp_conn.c src/transport/tcp/tcp.c

# Point-to-point benchmark: ping-pong latency, uni/bidirectional bandwidth.
noinst_PROGRAMS += perf/tcp_bench
perf_tcp_bench_SOURCES = perf/tcp_bench.c
perf_tcp_bench_CFLAGS = $(AM_CFLAGS)
perf_tcp_bench_LDADD = $(LOOM_INTERNAL_LIBS)

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_tcp
TESTS += tests/unit/check_tcp
tests_unit_check_tcp_SOURCES = tests/unit/check_tcp.c tests/support/mp_util.h
tests_unit_check_tcp_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_tcp_LDADD = $(TEST_LIBS)
endif
