# tools/ranktable.mk
