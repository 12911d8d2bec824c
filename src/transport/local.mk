# src/transport: the transport interface and the registry; each transport
# (tcp/, ofi/, verbs/) and what they share (common/) bring their own fragment.
libloom_core_la_SOURCES += \
	src/transport/transport.h \
	src/transport/registry.c

include $(srcdir)/src/transport/tcp/local.mk

# The transport contract, over every transport in the registry.
if HAVE_CHECK
check_PROGRAMS += tests/unit/check_transport
TESTS += tests/unit/check_transport
tests_unit_check_transport_SOURCES = tests/unit/check_transport.c tests/support/mp_util.h \
	tests/support/tx_util.h
tests_unit_check_transport_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_transport_LDADD = $(TEST_LIBS)
endif
include $(srcdir)/src/transport/common/local.mk
include $(srcdir)/src/transport/ofi/local.mk
include $(srcdir)/src/transport/verbs/local.mk
