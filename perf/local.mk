# perf/local.mk: the nccl-tests-compatible benchmarks, one small file per
# collective around one shared driver (perf/common.c), and the plot script.
#
# Installed as loom-<coll>_perf; in the build tree perf/<coll>_perf is a
# symbolic link to the same program, so nccl-tests habits work there too.
PERF_COMMON = perf/common.c perf/common.h perf/join.c perf/join.h \
	perf/coll_check.h
PERF_LINKS = perf/all_reduce_perf perf/all_gather_perf perf/broadcast_perf \
	perf/reduce_scatter_perf perf/reduce_perf

bin_PROGRAMS += perf/loom-all_reduce_perf perf/loom-all_gather_perf \
	perf/loom-broadcast_perf perf/loom-reduce_scatter_perf \
	perf/loom-reduce_perf

perf_loom_all_reduce_perf_SOURCES = perf/all_reduce_perf.c $(PERF_COMMON)
perf_loom_all_reduce_perf_LDADD = $(LOOM_INTERNAL_LIBS)
perf_loom_all_gather_perf_SOURCES = perf/all_gather_perf.c $(PERF_COMMON)
perf_loom_all_gather_perf_LDADD = $(LOOM_INTERNAL_LIBS)
perf_loom_broadcast_perf_SOURCES = perf/broadcast_perf.c $(PERF_COMMON)
perf_loom_broadcast_perf_LDADD = $(LOOM_INTERNAL_LIBS)
perf_loom_reduce_scatter_perf_SOURCES = perf/reduce_scatter_perf.c $(PERF_COMMON)
perf_loom_reduce_scatter_perf_LDADD = $(LOOM_INTERNAL_LIBS)
perf_loom_reduce_perf_SOURCES = perf/reduce_perf.c $(PERF_COMMON)
perf_loom_reduce_perf_LDADD = $(LOOM_INTERNAL_LIBS)

noinst_SCRIPTS = $(PERF_LINKS)
CLEANFILES += $(PERF_LINKS) perf/loom-perf-plot
perf/all_reduce_perf: perf/loom-all_reduce_perf$(EXEEXT)
	$(AM_V_GEN)rm -f $@ && ln -s loom-all_reduce_perf$(EXEEXT) $@
perf/all_gather_perf: perf/loom-all_gather_perf$(EXEEXT)
	$(AM_V_GEN)rm -f $@ && ln -s loom-all_gather_perf$(EXEEXT) $@
perf/broadcast_perf: perf/loom-broadcast_perf$(EXEEXT)
	$(AM_V_GEN)rm -f $@ && ln -s loom-broadcast_perf$(EXEEXT) $@
perf/reduce_scatter_perf: perf/loom-reduce_scatter_perf$(EXEEXT)
	$(AM_V_GEN)rm -f $@ && ln -s loom-reduce_scatter_perf$(EXEEXT) $@
perf/reduce_perf: perf/loom-reduce_perf$(EXEEXT)
	$(AM_V_GEN)rm -f $@ && ln -s loom-reduce_perf$(EXEEXT) $@

# perf/compare-peers: Loom beside Open MPI and Gloo from ../shared/peers,
# interleaved per cell (python3; not installed, not run by make check).
EXTRA_DIST += perf/compare-peers

# perf/verbs-model-compare: two builds over verbs on the software model,
# interleaved per cell (python3 and gcc; not installed, not run by make check).
EXTRA_DIST += perf/verbs-model-compare

# perf/plot: busbw and time against size for result files (sh, awk,
# gnuplot); installed as loom-perf-plot, with the version filled in.
EXTRA_DIST += perf/plot
bin_SCRIPTS = perf/loom-perf-plot
perf/loom-perf-plot: $(srcdir)/perf/plot Makefile
	$(AM_V_GEN)$(MKDIR_P) perf && \
	sed 's/[@]PACKAGE_VERSION[@]/$(PACKAGE_VERSION)/' $(srcdir)/perf/plot >$@.tmp && \
	chmod +x $@.tmp && mv -f $@.tmp $@

TESTS += tests/integration/test_perf.sh
EXTRA_DIST += tests/integration/test_perf.sh
EXTRA_DIST += docs/perf.md docs/scale.md

# Growth with the number of ranks (docs/scale.md): one rank of a measurement
# (public API only, so the same source measures an older build too), the
# driver that runs it for N = 8..512, and the model that extrapolates.
noinst_PROGRAMS += perf/scale_probe
perf_scale_probe_SOURCES = perf/scale_probe.c
perf_scale_probe_LDADD = libloom.la
EXTRA_DIST += perf/scale-growth perf/scale-model perf/scale_bytes.c

# perf/torch_bench.py: torch.distributed backend loom against gloo (needs
# python3 with torch; not run by make check).
EXTRA_DIST += perf/torch_bench.py

# Seconds from a kill -9 to the first good collective on the shrunk
# communicator (runs tests/integration/shrink_job; docs/shrink.md).
EXTRA_DIST += perf/shrink-time
