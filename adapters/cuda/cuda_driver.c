/* cuda_driver.c - libcuda.so.1 through dlopen into one table; errors that
 * name the call and CUDA's own name and text for the error. */
#include "build_config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"

static __thread char cuda_msg[512];

const char *loom_cuda_last_error(void)
{
    return cuda_msg;
}

loom_result_t loom_cuda_error(loom_result_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cuda_msg, sizeof cuda_msg, fmt, ap);
    va_end(ap);
    return res;
}

/* Names for the errors this adapter meets, for a driver that cannot name
 * them (the toolkit's stub library answers cuGetErrorName with an error). */
static const struct {
    CUresult rc;
    const char *name;
} cuda_names[] = {
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
};

loom_result_t loom_cuda_fail(const struct loom_cuda_driver *drv, CUresult rc,
                             const char *call)
{
    const char *name = NULL, *text = NULL;
    if (drv && drv->get_error_name && drv->get_error_name(rc, &name) != CUDA_SUCCESS)
        name = NULL;
    if (drv && drv->get_error_string && drv->get_error_string(rc, &text) != CUDA_SUCCESS)
        text = NULL;
    for (size_t i = 0; !name && i < sizeof cuda_names / sizeof cuda_names[0]; i++)
        if (cuda_names[i].rc == rc)
            name = cuda_names[i].name;
    char num[32];
    snprintf(num, sizeof num, "CUDA error %d", (int)rc);
    loom_cuda_error(0, "%s: %s: %s", call, name ? name : num,
                    text ? text : "(the driver has no text for it)");
    switch (rc) {
    case CUDA_ERROR_OUT_OF_MEMORY: return LOOM_ERROR_NO_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_INVALID_DEVICE: return LOOM_ERROR_INVALID_ARGUMENT;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return LOOM_ERROR_NOT_SUPPORTED;
    default: return LOOM_ERROR_SYSTEM;
    }
}

/* Symbols: the versioned names cuda.h maps each call to. Optional ones may
 * be missing from an older driver. */
#define SYM(field, name, optional) {name, offsetof(struct loom_cuda_driver, field), optional}
static const struct {
    const char *name;
    size_t offset;
    int optional;
} cuda_syms[] = {
    SYM(init, "cuInit", 0),
    SYM(driver_get_version, "cuDriverGetVersion", 0),
    SYM(get_error_name, "cuGetErrorName", 0),
    SYM(get_error_string, "cuGetErrorString", 0),
    SYM(device_get_count, "cuDeviceGetCount", 0),
    SYM(device_get, "cuDeviceGet", 0),
    SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain", 0),
    SYM(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", 0),
    SYM(ctx_get_current, "cuCtxGetCurrent", 0),
    SYM(ctx_set_current, "cuCtxSetCurrent", 0),
    SYM(ctx_push_current, "cuCtxPushCurrent_v2", 0),
    SYM(ctx_pop_current, "cuCtxPopCurrent_v2", 0),
    SYM(ctx_get_device, "cuCtxGetDevice", 0),
    SYM(stream_get_ctx, "cuStreamGetCtx", 0),
    SYM(stream_create, "cuStreamCreate", 0),
    SYM(stream_destroy, "cuStreamDestroy_v2", 0),
    SYM(stream_synchronize, "cuStreamSynchronize", 0),
    SYM(event_create, "cuEventCreate", 0),
    SYM(event_destroy, "cuEventDestroy_v2", 0),
    SYM(event_record, "cuEventRecord", 0),
    SYM(event_query, "cuEventQuery", 0),
    SYM(mem_host_register, "cuMemHostRegister_v2", 0),
    SYM(mem_host_unregister, "cuMemHostUnregister", 0),
    SYM(mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", 0),
    SYM(pointer_get_attributes, "cuPointerGetAttributes", 0),
    SYM(memcpy_async, "cuMemcpyAsync", 0),
    SYM(memcpy_2d_async, "cuMemcpy2DAsync_v2", 0),
    SYM(stream_write_value32, "cuStreamWriteValue32_v2", 1),
    SYM(stream_wait_value32, "cuStreamWaitValue32_v2", 1),
    SYM(module_load_data, "cuModuleLoadData", 0),
    SYM(module_unload, "cuModuleUnload", 0),
    SYM(module_get_function, "cuModuleGetFunction", 0),
    SYM(launch_kernel, "cuLaunchKernel", 0),
};

loom_result_t loom_cuda_driver_open(const char *path, struct loom_cuda_driver *drv)
{
    memset(drv, 0, sizeof *drv);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return loom_cuda_error(LOOM_ERROR_NOT_SUPPORTED, "no CUDA driver: cannot load %s (%s)",
                               path, dlerror());
    for (size_t i = 0; i < sizeof cuda_syms / sizeof cuda_syms[0]; i++) {
        void *fn = dlsym(lib, cuda_syms[i].name);
        if (!fn && !cuda_syms[i].optional) {
            loom_cuda_error(LOOM_ERROR_NOT_SUPPORTED,
                            "CUDA driver too old: %s has no %s (CUDA 11.7 or later is "
                            "needed)", path, cuda_syms[i].name);
            memset(drv, 0, sizeof *drv);
            dlclose(lib);
            return LOOM_ERROR_NOT_SUPPORTED;
        }
        memcpy((char *)drv + cuda_syms[i].offset, &fn, sizeof fn);
    }
    /* the library stays loaded for the process's life */
    return LOOM_SUCCESS;
}

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const struct loom_cuda_driver *cuda_given;
static struct loom_cuda_driver cuda_loaded;
static const struct loom_cuda_driver *cuda_drv;
static loom_result_t cuda_res;
static char cuda_why[1024]; /* longer than cuda_msg, which it quotes */

void loom_cuda_driver_use(const struct loom_cuda_driver *drv)
{
    cuda_given = drv;
}

static void cuda_load(void)
{
    const struct loom_cuda_driver *d = cuda_given;
    if (!d) {
        cuda_res = loom_cuda_driver_open("libcuda.so.1", &cuda_loaded);
        if (cuda_res < 0) {
            snprintf(cuda_why, sizeof cuda_why, "%s", cuda_msg);
            return;
        }
        d = &cuda_loaded;
    }
    CUresult rc = d->init(0);
    if (rc != CUDA_SUCCESS) {
        cuda_res = loom_cuda_fail(d, rc, "cuInit");
        if (rc == CUDA_ERROR_STUB_LIBRARY)
            snprintf(cuda_why, sizeof cuda_why, "no CUDA driver: libcuda.so.1 is the "
                     "toolkit's stub library, not a driver (%s)", cuda_msg);
        else if (rc == CUDA_ERROR_NO_DEVICE)
            snprintf(cuda_why, sizeof cuda_why, "no CUDA device (%s)", cuda_msg);
        else
            snprintf(cuda_why, sizeof cuda_why, "the CUDA driver cannot start (%s)",
                     cuda_msg);
        if (cuda_res != LOOM_ERROR_NO_MEMORY)
            cuda_res = LOOM_ERROR_NOT_SUPPORTED;
        return;
    }
    cuda_res = LOOM_SUCCESS;
    cuda_drv = d;
}

loom_result_t loom_cuda_driver(const struct loom_cuda_driver **drv)
{
    pthread_once(&cuda_once, cuda_load);
    *drv = cuda_drv;
    if (cuda_res < 0)
        loom_cuda_error(cuda_res, "%s", cuda_why);
    return cuda_res;
}
