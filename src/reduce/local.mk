# src/reduce: element-wise reduction kernels for every dtype x op.
# reduce_generic.c and reduce_x86.c raise their own optimisation level (a
# GCC pragma), because a per-target -O3 here would be overridden by the
# user's CFLAGS, which automake places last.
libloom_core_la_SOURCES += \
	src/reduce/reduce.h \
	src/reduce/reduce_impl.h \
	src/reduce/reduce_convert.h \
	src/reduce/reduce_gen.h \
	src/reduce/reduce.c \
	src/reduce/reduce_generic.c \
	src/reduce/reduce_x86.c

if HAVE_CHECK
check_PROGRAMS += tests/unit/check_reduce
TESTS += tests/unit/check_reduce
tests_unit_check_reduce_SOURCES = tests/unit/check_reduce.c
tests_unit_check_reduce_CFLAGS = $(TEST_CFLAGS)
tests_unit_check_reduce_LDADD = $(TEST_LIBS)
endif

# Micro-benchmark: GB/s of the kernels at 64 MiB against memcpy.
noinst_PROGRAMS += perf/reduce_bench
perf_reduce_bench_SOURCES = perf/reduce_bench.c
perf_reduce_bench_LDADD = $(LOOM_INTERNAL_LIBS)
