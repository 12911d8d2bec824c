# adapters/cuda/local.mk: libloom_cuda, the CUDA stream adapter,
# built when configure finds CUDA's headers (HAVE_CUDA). The only code that
# includes CUDA headers. It links no CUDA library (the driver is reached
# through dlopen) and only libloom's public API.

# loom_cuda.h is generated (LOOM_CUDA_ADAPTER 0 or 1) and always installed,
# so that a program can include it and test whether the adapter exists.
nodist_include_HEADERS = include/loom_cuda.h

LOOM_CUDA_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/include $(CUDA_CPPFLAGS) \
	-I$(top_srcdir)/adapters/cuda

if HAVE_CUDA
pkgconfig_DATA += loom-cuda.pc

noinst_LTLIBRARIES += adapters/cuda/libloom_cuda_core.la
adapters_cuda_libloom_cuda_core_la_SOURCES = \
	adapters/cuda/cuda_driver.h \
	adapters/cuda/cuda_driver.c \
	adapters/cuda/cuda_stream.c \
	adapters/cuda/cuda_device.c
adapters_cuda_libloom_cuda_core_la_CPPFLAGS = $(LOOM_CUDA_CPPFLAGS) -DLOOM_BUILDING_CUDA_ADAPTER
adapters_cuda_libloom_cuda_core_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
adapters_cuda_libloom_cuda_core_la_LIBADD = $(DL_LIBS)

lib_LTLIBRARIES += adapters/cuda/libloom_cuda.la
adapters_cuda_libloom_cuda_la_SOURCES =
adapters_cuda_libloom_cuda_la_LIBADD = adapters/cuda/libloom_cuda_core.la libloom.la
adapters_cuda_libloom_cuda_la_LDFLAGS = -version-info $(LOOM_LT_VERSION) -no-undefined

# The adapter against a fake driver (no GPU needed): ordering, staging,
# errors injected at every driver call.
if HAVE_CHECK
check_PROGRAMS += adapters/cuda/tests/check_cuda
TESTS += adapters/cuda/tests/check_cuda
adapters_cuda_tests_check_cuda_SOURCES = \
	adapters/cuda/tests/check_cuda.c \
	tests/support/cuda_model.c \
	tests/support/cuda_model.h \
	tests/support/devmem.h tests/support/stage_one.h \
	perf/coll_check.h tests/support/harness.h
adapters_cuda_tests_check_cuda_CPPFLAGS = $(LOOM_CUDA_CPPFLAGS) \
	-I$(top_srcdir)/tests/support -DLOOM_TEST_CUDA_STUB='"$(CUDA_DIR)/lib64/stubs/libcuda.so"'
adapters_cuda_tests_check_cuda_CFLAGS = $(TEST_CFLAGS)
adapters_cuda_tests_check_cuda_LDADD = adapters/cuda/libloom_cuda_core.la $(TEST_LIBS) $(DL_LIBS)
endif

# On a real GPU, as an application uses the installed libraries; SKIP (77)
# with the reason where there is no driver or device.
if HAVE_CUDART
check_PROGRAMS += adapters/cuda/tests/test_cuda_device
TESTS += adapters/cuda/tests/test_cuda_device
adapters_cuda_tests_test_cuda_device_SOURCES = adapters/cuda/tests/test_cuda_device.c
adapters_cuda_tests_test_cuda_device_CPPFLAGS = $(LOOM_CUDA_CPPFLAGS)
adapters_cuda_tests_test_cuda_device_LDADD = adapters/cuda/libloom_cuda.la libloom.la $(CUDART_LIBS)
endif
endif

# tests/gpu: programs for a GPU machine (tests/gpu/run.sh builds and runs
# them); `make gpu-programs` compiles them wherever nvcc is (not part of
# make check: nvcc takes about a minute here). They link the shared
# libraries in the build tree (a --disable-shared build cannot).
EXTRA_DIST += tests/gpu/run.sh tests/gpu/gpu_coll.cu tests/gpu/gpu_perf.cu \
	tests/gpu/gpu_common.h
# sm_90 (H100/H200) natively, and PTX the driver compiles for any other
# GPU from Turing on; make GPU_NVCC_ARCH=... to change
GPU_NVCC_ARCH = -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_75,code=compute_75
GPU_NVCC_FLAGS = -O2 -std=c++17 $(GPU_NVCC_ARCH) -I$(top_srcdir)/include -I$(top_builddir)/include
if HAVE_CUDA
if HAVE_NVCC
GPU_NVCC_LINK = -L.libs -Ladapters/cuda/.libs -lloom_cuda -lloom \
	-Xlinker -rpath -Xlinker $(abs_top_builddir)/.libs \
	-Xlinker -rpath -Xlinker $(abs_top_builddir)/adapters/cuda/.libs
GPU_DEPS = $(top_srcdir)/tests/gpu/gpu_common.h libloom.la adapters/cuda/libloom_cuda.la
gpu-programs: tests/gpu/gpu_coll tests/gpu/gpu_perf
tests/gpu/gpu_coll: $(top_srcdir)/tests/gpu/gpu_coll.cu $(GPU_DEPS)
	@$(MKDIR_P) tests/gpu
	$(AM_V_GEN)$(NVCC) $(GPU_NVCC_FLAGS) -o $@ $(top_srcdir)/tests/gpu/gpu_coll.cu $(GPU_NVCC_LINK)
tests/gpu/gpu_perf: $(top_srcdir)/tests/gpu/gpu_perf.cu $(GPU_DEPS)
	@$(MKDIR_P) tests/gpu
	$(AM_V_GEN)$(NVCC) $(GPU_NVCC_FLAGS) -o $@ $(top_srcdir)/tests/gpu/gpu_perf.cu $(GPU_NVCC_LINK)
CLEANFILES += tests/gpu/gpu_coll tests/gpu/gpu_perf
else
gpu-programs:
	@echo "gpu-programs: nvcc was not found by configure (--with-cuda=DIR)" >&2; exit 1
endif
else
gpu-programs:
	@echo "gpu-programs: configure did not find CUDA (--with-cuda=DIR)" >&2; exit 1
endif
.PHONY: gpu-programs
