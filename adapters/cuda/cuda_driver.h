/* cuda_driver.h - the CUDA driver API as one table of function pointers.
 *
 * libloom_cuda links no CUDA library: the table is filled from libcuda.so.1
 * through dlopen on first use, so a host without a driver gets an error
 * ("no CUDA driver: ...") and never a failed load or a crash. Tests fill
 * the table with a fake driver instead (loom_cuda_driver_use).
 *
 * Each entry is the versioned symbol that cuda.h of CUDA 12/13 maps the
 * call to (cuStreamDestroy is cuStreamDestroy_v2 ...), so that the
 * prototypes below match what dlsym finds. */
#ifndef LOOM_CUDA_DRIVER_H
#define LOOM_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>

#include "loom.h"

struct loom_cuda_driver {
    CUresult (*init)(unsigned int flags);
    CUresult (*driver_get_version)(int *version);
    CUresult (*get_error_name)(CUresult err, const char **name);
    CUresult (*get_error_string)(CUresult err, const char **str);
    CUresult (*device_get_count)(int *count);
    CUresult (*device_get)(CUdevice *dev, int ordinal);
    CUresult (*primary_ctx_retain)(CUcontext *ctx, CUdevice dev);
    CUresult (*primary_ctx_release)(CUdevice dev);
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_set_current)(CUcontext ctx);
    CUresult (*ctx_push_current)(CUcontext ctx);
    CUresult (*ctx_pop_current)(CUcontext *ctx);
    CUresult (*ctx_get_device)(CUdevice *dev);
    CUresult (*stream_get_ctx)(CUstream s, CUcontext *ctx);
    CUresult (*stream_create)(CUstream *s, unsigned int flags);
    CUresult (*stream_destroy)(CUstream s);
    CUresult (*stream_synchronize)(CUstream s);
    CUresult (*event_create)(CUevent *ev, unsigned int flags);
    CUresult (*event_destroy)(CUevent ev);
    CUresult (*event_record)(CUevent ev, CUstream s);
    CUresult (*event_query)(CUevent ev);
    CUresult (*mem_host_register)(void *p, size_t bytes, unsigned int flags);
    CUresult (*mem_host_unregister)(void *p);
    CUresult (*mem_host_get_device_pointer)(CUdeviceptr *dptr, void *p, unsigned int flags);
    CUresult (*pointer_get_attributes)(unsigned int n, CUpointer_attribute *attrs,
                                       void **data, CUdeviceptr ptr);
    CUresult (*memcpy_async)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
    CUresult (*memcpy_2d_async)(const CUDA_MEMCPY2D *copy, CUstream s);
    /* optional: stream memory operations (CUDA 11.7+), else event polling */
    CUresult (*stream_write_value32)(CUstream s, CUdeviceptr addr, cuuint32_t value,
                                     unsigned int flags);
    CUresult (*stream_wait_value32)(CUstream s, CUdeviceptr addr, cuuint32_t value,
                                    unsigned int flags);
    /* for the event-polling fallback's wait kernel */
    CUresult (*module_load_data)(CUmodule *mod, const void *image);
    CUresult (*module_unload)(CUmodule mod);
    CUresult (*module_get_function)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*launch_kernel)(CUfunction fn, unsigned int gx, unsigned int gy,
                              unsigned int gz, unsigned int bx, unsigned int by,
                              unsigned int bz, unsigned int shmem, CUstream s,
                              void **params, void **extra);
};

/* The driver: loaded (and cuInit'ed) on the first call, from libcuda.so.1
 * or the table given to loom_cuda_driver_use. On failure *drv is NULL, the
 * thread's error message says why ("no CUDA driver: ...") and the result is
 * LOOM_ERROR_NOT_SUPPORTED. */
loom_result_t loom_cuda_driver(const struct loom_cuda_driver **drv);

/* Tests: use this table instead of libcuda.so.1 (before any other call).
 * The table must outlive every use. */
void loom_cuda_driver_use(const struct loom_cuda_driver *drv);

/* Tests: fill a table from the library at path (no cuInit). On failure the
 * thread's error says why. */
loom_result_t loom_cuda_driver_open(const char *path, struct loom_cuda_driver *drv);

/* The error of a driver call, in this thread's message buffer:
 * "call: CUDA_ERROR_NAME: description". Returns the matching result. */
loom_result_t loom_cuda_fail(const struct loom_cuda_driver *drv, CUresult rc,
                             const char *call);
/* Set this thread's message (printf style); returns res. */
loom_result_t loom_cuda_error(loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* This thread's last message ("" when none). */
const char *loom_cuda_last_error(void);

#endif
