# src/transport: the transport interface, registry and the tcp transport.
libloom_core_la_SOURCES += \
	src/transport/transport.h \
	src/transport/registry.c \
	src/transport/tcp_frame.h \
	src/transport/tcp_check.h \
	src/transport/tcp_check.c \
	src/transport/tcp_frame.c \
	src/transport/tcp_priv.h \
	src/transport/tcp_conn.c \
	src/transport/tcp.c

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

# The transport contract, over every transport in the registry.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_transport
TESTS += tests/unit/check_transport
tests_unit_check_transport_SOURCES = tests/unit/check_transport.c tests/support/mp_util.h
tests_unit_check_transport_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_transport_LDADD = $(TEST_LIBS)
endif
include $(srcdir)/src/transport/common/local.mk
