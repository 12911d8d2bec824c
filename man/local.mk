# man/local.mk: the manual pages and the documents `make install` puts in
# place (man1dir, docdir). Pages are filled with the version and docdir at
# build time; the perf tools share one page (the others are .so links).
MAN_GENERATED = man/loom-run.1 man/loom-info.1 man/loom-ranktable.1 \
	man/loom-perf.1
man_MANS = $(MAN_GENERATED)
dist_man_MANS = man/loom-all_reduce_perf.1 man/loom-all_gather_perf.1 \
	man/loom-broadcast_perf.1 man/loom-reduce_scatter_perf.1 \
	man/loom-reduce_perf.1 man/loom-perf-plot.1
EXTRA_DIST += man/loom-run.1.in man/loom-info.1.in man/loom-ranktable.1.in \
	man/loom-perf.1.in
CLEANFILES += $(MAN_GENERATED)

MAN_SUBST = sed -e 's|[@]PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	-e 's|[@]docdir[@]|$(docdir)|g'
man/loom-run.1: $(srcdir)/man/loom-run.1.in Makefile
	$(AM_V_GEN)$(MKDIR_P) man && $(MAN_SUBST) $(srcdir)/man/loom-run.1.in >$@
man/loom-info.1: $(srcdir)/man/loom-info.1.in Makefile
	$(AM_V_GEN)$(MKDIR_P) man && $(MAN_SUBST) $(srcdir)/man/loom-info.1.in >$@
man/loom-ranktable.1: $(srcdir)/man/loom-ranktable.1.in Makefile
	$(AM_V_GEN)$(MKDIR_P) man && $(MAN_SUBST) $(srcdir)/man/loom-ranktable.1.in >$@
man/loom-perf.1: $(srcdir)/man/loom-perf.1.in Makefile
	$(AM_V_GEN)$(MKDIR_P) man && $(MAN_SUBST) $(srcdir)/man/loom-perf.1.in >$@

# The documents (each is also in EXTRA_DIST, from its module's fragment).
doc_DATA = README.md docs/launch.md docs/perf.md docs/probe.md \
	docs/ranktable.md docs/shm.md docs/testing.md docs/hccl.md \
	docs/streams.md docs/rdma.md docs/ofi.md docs/scale.md docs/shrink.md
EXTRA_DIST += docs/launch.md docs/shrink.md

# After `make install` (distcheck runs it): the pages and documents are
# there and render, installed programs run, and a program built against
# the installed library finds it through the run path the README shows.
installcheck-local:
	test -f "$(DESTDIR)$(man1dir)/loom-run.1"
	test -f "$(DESTDIR)$(man1dir)/loom-all_reduce_perf.1"
	test -f "$(DESTDIR)$(docdir)/launch.md"
	test -f "$(DESTDIR)$(docdir)/probe.md"
	if command -v groff >/dev/null 2>&1; then \
	  for p in man1/loom-run.1 man1/loom-info.1 man1/loom-ranktable.1 \
	      man1/loom-perf.1 man1/loom-reduce_perf.1 $(MAN3_CHECK); do \
	    w=$$(cd "$(DESTDIR)$(mandir)" && groff -man -ww -z -Tutf8 -s $$p 2>&1) || exit 1; \
	    test -z "$$w" || { echo "$$p: $$w"; exit 1; }; \
	  done; \
	fi
	"$(DESTDIR)$(bindir)/loom-info" --version | grep -q "$(PACKAGE_VERSION)"
	"$(DESTDIR)$(bindir)/loom-ranktable" check \
	  "$(DESTDIR)$(datadir)/loom/ranktables/single-4.json" >/dev/null
	$(CC) -I"$(DESTDIR)$(includedir)" -o installcheck-join \
	  $(srcdir)/tests/integration/launch_join.c -L"$(DESTDIR)$(libdir)" \
	  -Wl,-rpath,"$(DESTDIR)$(libdir)" -lloom
	LOOM_RANK=0 LOOM_NRANKS=1 ./installcheck-join url tcp://127.0.0.1:1 | \
	  grep -q 'rank 0 of 1 ok'
	rm -f installcheck-join

# Section 3: the C API, one page per family of calls (loom.3 lists them).
MAN3_PAGES = man/loom.3 man/loom_comm_init.3 man/loom_comm.3 \
	man/loom_allreduce.3 man/loom_send.3 man/loom_stream.3 \
	man/loom_redop.3 man/loom_ranktable.3 man/loom_comm_shrink.3
dist_man_MANS += $(MAN3_PAGES)
MAN3_CHECK = $(MAN3_PAGES:man/%=man3/%)

# Every page renders without a warning, and every public call of
# include/loom.h is named by a section-3 page.
TESTS += man/test_man.sh
EXTRA_DIST += man/test_man.sh
