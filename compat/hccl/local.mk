# compat/hccl/local.mk: libloom_hccl and <hccl/hccl.h>.
#
# A library of its own over Loom's public API, so that libloom exports no
# Hccl* symbol; its headers install under $(includedir)/loom-hccl, which only
# `pkg-config --cflags loom-hccl` adds, so that <hccl/hccl.h> is never found
# in place of a real CANN installation's.
lib_LTLIBRARIES += libloom_hccl.la
LOOM_HCCL_SOURCES = \
	compat/hccl/hccl_internal.h \
	compat/hccl/hccl_map.c \
	compat/hccl/hccl_comm.c \
	compat/hccl/hccl_coll.c
LOOM_HCCL_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/compat/hccl/include \
	-I$(srcdir)/compat/acl/include -I$(srcdir)/compat/hccl
libloom_hccl_la_SOURCES = $(LOOM_HCCL_SOURCES)
libloom_hccl_la_CPPFLAGS = $(LOOM_HCCL_CPPFLAGS) -DLOOM_HCCL_BUILDING_LIBRARY
libloom_hccl_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libloom_hccl_la_LIBADD = libloom.la
libloom_hccl_la_LDFLAGS = -version-info $(LOOM_LT_VERSION) -no-undefined

loomhccldir = $(includedir)/loom-hccl/hccl
loomhccl_HEADERS = \
	compat/hccl/include/hccl/hccl.h \
	compat/hccl/include/hccl/hccl_types.h

# Directories under the prefix are written relative to it, as configure
# writes loom.pc, so that pkg-config --define-prefix relocates both.
pkgconfig_DATA += loom-hccl.pc
loom-hccl.pc: $(srcdir)/compat/hccl/loom-hccl.pc.in Makefile
	$(AM_V_GEN)sed -e 's|@prefix[@]|$(prefix)|g' \
		-e 's|@exec_prefix[@]|$(exec_prefix)|g' \
		-e 's|@libdir[@]|$(libdir)|g' \
		-e 's|@includedir[@]|$(includedir)|g' \
		-e 's|@pkglibdir[@]|$(pkglibdir)|g' \
		-e 's|@VERSION[@]|$(PACKAGE_VERSION)|g' \
		-e '/^prefix=/!s|=$(prefix)\([/]\{0,1\}\)|=$${prefix}\1|' \
		$(srcdir)/compat/hccl/loom-hccl.pc.in >$@
CLEANFILES += loom-hccl.pc
EXTRA_DIST += compat/hccl/loom-hccl.pc.in docs/hccl.md

# The program written against HCCL's documentation: built with nothing but
# the HCCL include folder and the ACL one hccl.h includes (no Loom header,
# no build_config.h), linked with libloom_hccl.
check_PROGRAMS += compat/hccl/tests/hccl_api_test
compat_hccl_tests_hccl_api_test_SOURCES = compat/hccl/tests/hccl_api_test.c
compat_hccl_tests_hccl_api_test_CPPFLAGS = -I$(srcdir)/compat/hccl/include \
	-I$(srcdir)/compat/acl/include
compat_hccl_tests_hccl_api_test_LDADD = libloom_hccl.la
# 2, 3, 4 ranks; the 2-server loopback table; root info; the headers in
# strict C99 and C++; across network namespaces when permitted.
TESTS += compat/hccl/tests/test_hccl.sh
EXTRA_DIST += compat/hccl/tests/test_hccl.sh

# Tables, values, one-rank communicators, environment and argument errors:
# the library's sources built into the suite, so that it reaches the tables.
if HAVE_CHECK
check_PROGRAMS += compat/hccl/tests/check_hccl
TESTS += compat/hccl/tests/check_hccl
compat_hccl_tests_check_hccl_SOURCES = compat/hccl/tests/check_hccl.c \
	$(LOOM_HCCL_SOURCES)
compat_hccl_tests_check_hccl_CPPFLAGS = $(LOOM_HCCL_CPPFLAGS)
compat_hccl_tests_check_hccl_CFLAGS = $(TEST_CFLAGS)
compat_hccl_tests_check_hccl_LDADD = $(TEST_LIBS)
endif

# HCCL's 11 example programs, written for these tests from their
# documentation, built by the test as the examples' Makefiles build them
# (C++14 -Werror against the build tree's CANN-shaped folder, compat/ascend)
# and run on 2, 4 and 8 devices (threads), on the 2-server loopback table and
# across network namespaces (processes).
TESTS += compat/hccl/tests/test_hccl_samples.sh
EXTRA_DIST += compat/hccl/tests/test_hccl_samples.sh \
	compat/hccl/tests/hccl_test_lib.sh \
	compat/hccl/tests/samples/sample.h \
	compat/hccl/tests/samples/send_recv.cc \
	compat/hccl/tests/samples/batch_send_recv_ring.cc \
	compat/hccl/tests/samples/allreduce.cc \
	compat/hccl/tests/samples/broadcast.cc \
	compat/hccl/tests/samples/allgather.cc \
	compat/hccl/tests/samples/reduce_scatter.cc \
	compat/hccl/tests/samples/reduce.cc \
	compat/hccl/tests/samples/alltoall.cc \
	compat/hccl/tests/samples/alltoallv.cc \
	compat/hccl/tests/samples/alltoallvc.cc \
	compat/hccl/tests/samples/scatter.cc
