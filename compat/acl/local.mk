# compat/acl/local.mk: libloom_acl, the ACL runtime calls HCCL's programs
# use (acl/acl.h), on plain hosts; and the CANN-shaped folder that lets a
# program's own Makefile (-I$(ASCEND_HOME_PATH)/include
# -L$(ASCEND_HOME_PATH)/lib64 -lhccl -lascendcl) build against Loom.
#
# A library of its own over Loom's public API (libloom exports no acl*
# symbol). Its headers install beside hccl/hccl.h under
# $(includedir)/loom-hccl, and the CANN-shaped folder under
# $(pkglibdir)/ascend, never where a real CANN installation's would be
# found (`pkg-config --variable=ascend_home loom-hccl` names it).
lib_LTLIBRARIES += libloom_acl.la
libloom_acl_la_SOURCES = compat/acl/acl_rt.c
libloom_acl_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/compat/acl/include \
	-DLOOM_ACL_BUILDING_LIBRARY
libloom_acl_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libloom_acl_la_LIBADD = libloom.la
libloom_acl_la_LDFLAGS = -version-info $(LOOM_LT_VERSION) -no-undefined

LOOM_ACL_HDRS = \
	compat/acl/include/acl/acl.h \
	compat/acl/include/acl/acl_base.h \
	compat/acl/include/acl/acl_rt.h
loomacldir = $(includedir)/loom-hccl/acl
loomacl_HEADERS = $(LOOM_ACL_HDRS)

# The CANN-shaped folder: copies of the headers, and lib64/libhccl.so and
# lib64/libascendcl.so pointing at Loom's libraries in $(libdir) (by a
# relative link where pkglibdir is the usual $(libdir)/loom, so that a
# staged (DESTDIR) or moved install stays whole).
ascendhccldir = $(pkglibdir)/ascend/include/hccl
ascendhccl_HEADERS = \
	compat/hccl/include/hccl/hccl.h \
	compat/hccl/include/hccl/hccl_types.h
ascendacldir = $(pkglibdir)/ascend/include/acl
ascendacl_HEADERS = $(LOOM_ACL_HDRS)
install-data-hook: install-ascend-libs
install-ascend-libs:
	$(MKDIR_P) $(DESTDIR)$(pkglibdir)/ascend/lib64
	rm -f $(DESTDIR)$(pkglibdir)/ascend/lib64/libhccl.so \
		$(DESTDIR)$(pkglibdir)/ascend/lib64/libascendcl.so
	if test "$(pkglibdir)" = "$(libdir)/$(PACKAGE)"; then to=../../..; \
	else to='$(libdir)'; fi; \
	$(LN_S) $$to/libloom_hccl.so $(DESTDIR)$(pkglibdir)/ascend/lib64/libhccl.so && \
	$(LN_S) $$to/libloom_acl.so $(DESTDIR)$(pkglibdir)/ascend/lib64/libascendcl.so
uninstall-hook: uninstall-ascend-libs
uninstall-ascend-libs:
	rm -f $(DESTDIR)$(pkglibdir)/ascend/lib64/libhccl.so \
		$(DESTDIR)$(pkglibdir)/ascend/lib64/libascendcl.so
.PHONY: install-ascend-libs uninstall-ascend-libs

# The same shape in the build tree (compat/ascend), for the tests and for
# trying a program before installing: links to the sources' headers and to
# the libraries libtool builds in .libs.
noinst_DATA = compat/ascend/.stamp
compat/ascend/.stamp: Makefile
	$(AM_V_GEN)rm -rf compat/ascend && \
	$(MKDIR_P) compat/ascend/include/hccl compat/ascend/include/acl \
		compat/ascend/lib64 && \
	for h in hccl.h hccl_types.h; do \
		$(LN_S) $(abs_srcdir)/compat/hccl/include/hccl/$$h compat/ascend/include/hccl/$$h || exit 1; \
	done && \
	for h in acl.h acl_base.h acl_rt.h; do \
		$(LN_S) $(abs_srcdir)/compat/acl/include/acl/$$h compat/ascend/include/acl/$$h || exit 1; \
	done && \
	$(LN_S) $(abs_builddir)/.libs/libloom_hccl.so compat/ascend/lib64/libhccl.so && \
	$(LN_S) $(abs_builddir)/.libs/libloom_acl.so compat/ascend/lib64/libascendcl.so && \
	touch $@
CLEANFILES += compat/ascend/.stamp compat/ascend/include/hccl/hccl.h \
	compat/ascend/include/hccl/hccl_types.h compat/ascend/include/acl/acl.h \
	compat/ascend/include/acl/acl_base.h compat/ascend/include/acl/acl_rt.h \
	compat/ascend/lib64/libhccl.so compat/ascend/lib64/libascendcl.so

# The ACL runtime's own checks: devices, memory, copies, streams and every
# refusal, linked with libloom_acl.
if HAVE_CHECK
check_PROGRAMS += compat/acl/tests/check_acl
TESTS += compat/acl/tests/check_acl
compat_acl_tests_check_acl_SOURCES = compat/acl/tests/check_acl.c
compat_acl_tests_check_acl_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/compat/acl/include
compat_acl_tests_check_acl_CFLAGS = $(TEST_CFLAGS)
compat_acl_tests_check_acl_LDADD = libloom_acl.la libloom.la $(CHECK_LIBS)
endif
