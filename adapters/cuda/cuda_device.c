/* cuda_device.c - is CUDA usable here, and which device a rank drives. */
#include "build_config.h"

#include <pthread.h>
#include <stdio.h>

#include "cuda_driver.h"
#include "loom_cuda.h"

LOOM_CUDA_API loom_result_t loom_cuda_available(const char **reason)
{
    const struct loom_cuda_driver *d;
    loom_result_t res = loom_cuda_driver(&d);
    if (res == LOOM_SUCCESS) {
        int n = 0;
        CUresult rc = d->device_get_count(&n);
        if (rc != CUDA_SUCCESS)
            res = loom_cuda_fail(d, rc, "cuDeviceGetCount");
        else if (n == 0)
            res = loom_cuda_error(LOOM_ERROR_NOT_SUPPORTED, "no CUDA device");
    }
    if (res < 0 && res != LOOM_ERROR_NO_MEMORY)
        res = LOOM_ERROR_NOT_SUPPORTED;
    if (reason)
        *reason = res == LOOM_SUCCESS ? "" : loom_cuda_last_error();
    return res;
}

/* Primary contexts this process retained, so that each is retained once. */
#define CUDA_MAX_DEVICES 1024
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[CUDA_MAX_DEVICES];

LOOM_CUDA_API loom_result_t loom_cuda_set_device(loom_comm_t comm, int *device)
{
    if (!comm || !device)
        return loom_cuda_error(LOOM_ERROR_INVALID_ARGUMENT,
                               "loom_cuda_set_device: comm and device must not be NULL");
    int want;
    loom_result_t res = loom_comm_device(comm, &want);
    if (res < 0)
        return loom_cuda_error(res, "loom_comm_device: %s", loom_result_string(res));
    const struct loom_cuda_driver *d;
    if ((res = loom_cuda_driver(&d)) < 0)
        return res;
    int n = 0;
    CUresult rc = d->device_get_count(&n);
    if (rc != CUDA_SUCCESS)
        return loom_cuda_fail(d, rc, "cuDeviceGetCount");
    if (want < 0 || want >= n || want >= CUDA_MAX_DEVICES)
        return loom_cuda_error(LOOM_ERROR_CONFIG, "this rank's device is %d (LOOM_CUDA_DEVICE, "
                               "else the rank table's device_id, else the local rank) but "
                               "this host has %d CUDA device%s: set LOOM_CUDA_DEVICE", want, n,
                               n == 1 ? "" : "s");
    CUdevice dev;
    if ((rc = d->device_get(&dev, want)) != CUDA_SUCCESS)
        return loom_cuda_fail(d, rc, "cuDeviceGet");
    pthread_mutex_lock(&primary_lock);
    if (!primary[want] && (rc = d->primary_ctx_retain(&primary[want], dev)) != CUDA_SUCCESS) {
        primary[want] = NULL;
        pthread_mutex_unlock(&primary_lock);
        return loom_cuda_fail(d, rc, "cuDevicePrimaryCtxRetain");
    }
    CUcontext ctx = primary[want];
    pthread_mutex_unlock(&primary_lock);
    if ((rc = d->ctx_set_current(ctx)) != CUDA_SUCCESS)
        return loom_cuda_fail(d, rc, "cuCtxSetCurrent");
    *device = want;
    return LOOM_SUCCESS;
}
