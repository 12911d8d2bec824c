# perf/local.mk
