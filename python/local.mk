# python/local.mk: the loom Python package and the PyTorch backend (issue 19).
