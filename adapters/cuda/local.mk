# adapters/cuda/local.mk: libloom_cuda, the CUDA stream adapter (issue 20),
# built when configure finds CUDA (HAVE_CUDA). The only code that includes
# CUDA headers.
