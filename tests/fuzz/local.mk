# tests/fuzz/local.mk
