# src/transport/ofi: the libfabric transport, built when
# configure finds libfabric's headers (HAVE_OFI). Its sources are the only
# files that include <rdma/fabric.h>; libloom does not link libfabric
# (ofi_dl.c opens libfabric.so.1 when ofi is chosen), it only needs dlopen.

if HAVE_OFI
libloom_core_la_SOURCES += \
	src/transport/ofi/ofi_api.h src/transport/ofi/ofi_dl.c \
	src/transport/ofi/ofi_priv.h src/transport/ofi/ofi_conn.c src/transport/ofi/ofi_data.c \
	src/transport/ofi/ofi.c
libloom_core_la_CPPFLAGS += $(OFI_CFLAGS)
endif

# The transport's own cases (provider choice, split messages, registration,
# mismatch, kill -9, strangers, job key): built always, so that a build
# without libfabric reports them skipped with the reason.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_ofi
TESTS += tests/unit/check_ofi
tests_unit_check_ofi_SOURCES = tests/unit/check_ofi.c tests/support/mp_util.h \
	tests/support/tx_util.h
tests_unit_check_ofi_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/tests/support
tests_unit_check_ofi_LDADD = $(TEST_LIBS)
endif

EXTRA_DIST += docs/ofi.md

# How a job ends when it is signalled (tcp, ofi, Python, PyTorch), that a
# job that does not choose ofi maps no provider library, and a host without
# libfabric. signal_rank links the shared libloom, as users' programs do.
check_PROGRAMS += tests/integration/signal_rank
tests_integration_signal_rank_SOURCES = tests/integration/signal_rank.c
tests_integration_signal_rank_LDADD = libloom.la
tests_integration_signal_rank_LDFLAGS = -no-install
TESTS += tests/integration/test_signals.sh
EXTRA_DIST += tests/integration/test_signals.sh tests/integration/signal_rank.py
