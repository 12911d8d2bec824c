# examples/local.mk: examples that are tests.
#   ddp_train.c   data-parallel training on the C API with gradient buckets
#   ddp_train.py  torch DistributedDataParallel with backend "loom"
#   reshard.py    merging and re-slicing a model-parallel checkpoint (numpy)
#   hybrid.py     2 data-parallel x 2 model-parallel groups by split (numpy)
# Each also runs through a kill -9 of a rank (ddp_train -k, the Python ones'
# --survive: python/loom/survive.py).
# make check runs each, bounded in time; the Python ones SKIP without the
# package (or, for ddp_train.py, torch).
noinst_PROGRAMS += examples/ddp_train
examples_ddp_train_SOURCES = examples/ddp_train.c
examples_ddp_train_LDADD = libloom.la -lm

EXTRA_DIST += examples/ddp_train.py examples/reshard.py examples/hybrid.py \
	examples/test_ddp_c.sh examples/test_python.sh
TESTS += examples/test_ddp_c.sh examples/test_python.sh
