/*
 * acl/acl_rt.h - the ACL runtime calls that HCCL programs use, on plain
 * hosts (libloom_acl): a "device" is this host's memory, a stream is a Loom
 * host stream. Signatures, names and values as CANN documents them; the
 * header is Loom's own.
 *
 * Devices: aclrtGetDeviceCount answers LOOM_ACL_DEVICES when set, else the
 * devices of this server in the rank table (RANK_TABLE_FILE or
 * LOOM_RANK_TABLE; the server of RANK_ID or LOOM_RANK when the table has
 * several), else 8, one Ascend server's. Each thread has a current device
 * (aclrtSetDevice). A call that cannot be done here returns an ACL code
 * and says why on stderr ("loom-acl: CALL: WHY"; LOOM_DEBUG=NONE silences
 * it); aclGetRecentErrMsg returns the last message of the thread.
 */
#ifndef LOOM_ACL_RT_H
#define LOOM_ACL_RT_H

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
    ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000
} aclrtMemMallocPolicy;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
    ACL_MEMCPY_DEFAULT = 4
} aclrtMemcpyKind;

/* configPath: NULL or "" (a JSON configuration file is refused: nothing in
 * it applies here). Once per process until aclFinalize. */
LOOM_ACL_API aclError aclInit(const char *configPath);
/* Every device memory, host memory and stream must have been freed. */
LOOM_ACL_API aclError aclFinalize(void);

LOOM_ACL_API aclError aclrtGetDeviceCount(uint32_t *count);
/* Make deviceId (0 .. count - 1) this thread's current device. */
LOOM_ACL_API aclError aclrtSetDevice(int32_t deviceId);
LOOM_ACL_API aclError aclrtGetDevice(int32_t *deviceId);
/* Release one aclrtSetDevice of deviceId (any thread of the process). */
LOOM_ACL_API aclError aclrtResetDevice(int32_t deviceId);

/* Device memory of the current device: host memory aligned to 64 bytes.
 * size 0 is refused, as on an NPU. */
LOOM_ACL_API aclError aclrtMalloc(void **devPtr, size_t size,
                                  aclrtMemMallocPolicy policy);
LOOM_ACL_API aclError aclrtFree(void *devPtr);
LOOM_ACL_API aclError aclrtMallocHost(void **hostPtr, size_t size);
LOOM_ACL_API aclError aclrtFreeHost(void *hostPtr);
/* Copy count bytes; count <= destMax. The side kind names device must lie
 * within one aclrtMalloc allocation. */
LOOM_ACL_API aclError aclrtMemcpy(void *dst, size_t destMax, const void *src,
                                  size_t count, aclrtMemcpyKind kind);
LOOM_ACL_API aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value,
                                  size_t count);

/* A Loom host stream: the HCCL calls given it return once enqueued and run
 * in order; aclrtSynchronizeStream waits for them and returns
 * ACL_ERROR_RT_FAILURE when one failed (its message on stderr). */
LOOM_ACL_API aclError aclrtCreateStream(aclrtStream *stream);
LOOM_ACL_API aclError aclrtDestroyStream(aclrtStream stream);
LOOM_ACL_API aclError aclrtSynchronizeStream(aclrtStream stream);

/* The last failure message of this thread ("" when none). */
LOOM_ACL_API const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_ACL_RT_H */
