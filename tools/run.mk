# tools/run.mk
