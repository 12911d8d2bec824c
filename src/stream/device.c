/* device.c - the accelerator device a rank drives, for stream adapters. */
#include "build_config.h"

#include "base/config.h"
#include "comm/comm.h"

LOOM_API loom_result_t loom_comm_device(loom_comm_t comm, int *device)
{
    if (!comm || !device)
        return LOOM_ERROR_INVALID_ARGUMENT;
    int d = loom_config()->cuda_device;
    if (d < 0)
        d = comm->device_id;
    if (d < 0) {
        int size;
        loom_comm_local_place(comm, &d, &size);
    }
    *device = d;
    return LOOM_SUCCESS;
}
