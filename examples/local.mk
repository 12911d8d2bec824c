# examples/local.mk: examples that are tests (issue 19).
