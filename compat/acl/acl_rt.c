/* acl_rt.c - the ACL runtime calls of HCCL's programs on plain hosts
 * (libloom_acl, over Loom's public API only): devices are host memory, a
 * stream is a Loom host stream, so that an aclrtStream is the loom_stream_t
 * libloom_hccl takes.
 *
 * What the process holds (device and host allocations, streams, devices
 * set) is kept in one table under one lock, so that a call given a pointer
 * or a stream that this runtime did not hand out refuses it by name
 * instead of corrupting memory, and aclFinalize can name what is left. */
#include "build_config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>

#include "loom.h"

/* What a device is when nothing says: one Ascend server's 8 NPUs. */
#define ACL_DEFAULT_DEVICES 8
#define ACL_ALIGN 64

enum res_kind { RES_DEVICE_MEM, RES_HOST_MEM, RES_STREAM };
static const char *const res_names[] = {"device memory (aclrtMalloc)",
                                        "host memory (aclrtMallocHost)",
                                        "stream (aclrtCreateStream)"};

struct res {
    enum res_kind kind;
    void *ptr;
    size_t size;
    int device;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_inited;            /* aclInit done, aclFinalize not yet */
static int g_ndev = -1;         /* devices, found at aclInit         */
static int *g_dev_refs;         /* aclrtSetDevice count per device    */
static struct res *g_res;
static size_t g_nres, g_capres;

static __thread int t_device = -1;
static __thread char t_msg[512];

/* ---- messages ------------------------------------------------------------- */

static int quiet(void)
{
    const char *d = getenv("LOOM_DEBUG");
    return d && (strcmp(d, "NONE") == 0 || strcmp(d, "none") == 0);
}

static aclError fail(aclError code, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static aclError fail(aclError code, const char *what, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(t_msg, sizeof t_msg, "%s: %s (ACL error %d)", what, msg, code);
    if (!quiet())
        fprintf(stderr, "loom-acl: %s\n", t_msg);
    return code;
}

LOOM_ACL_API const char *aclGetRecentErrMsg(void)
{
    return t_msg;
}

/* ---- device count ----------------------------------------------------------- */

/* Decimal 1..INT_MAX: the value; else -1. */
static long parse_count(const char *s)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || v < 1 || v > INT_MAX ? -1 : v;
}

static const char *env_first(const char *a, const char *b)
{
    const char *v = getenv(a);
    if (v && *v)
        return v;
    v = getenv(b);
    return v && *v ? v : NULL;
}

/* The devices of this server in the rank table: those of the server of
 * RANK_ID (LOOM_RANK), or of the only server. 0 and *n, or an ACL code. */
static aclError table_devices(const char *what, const char *path, int *n)
{
    loom_ranktable_t *t = NULL;
    if (loom_ranktable_load(path, &t, NULL) != LOOM_SUCCESS)
        return fail(ACL_ERROR_INVALID_FILE, what, "rank table %s (RANK_TABLE_FILE) "
                    "does not load: loom-ranktable check %s says why", path, path);
    int nranks = 0, nservers = 0;
    loom_ranktable_nranks(t, &nranks);
    loom_ranktable_nservers(t, &nservers);
    const char *rs = env_first("RANK_ID", "LOOM_RANK");
    long rank = rs ? strtol(rs, NULL, 10) : (nservers == 1 ? 0 : -1);
    aclError rc = ACL_SUCCESS;
    loom_rank_info_t mine;
    if (rank < 0 || rank >= nranks ||
        loom_ranktable_rank_info(t, (int)rank, &mine) != LOOM_SUCCESS) {
        rc = fail(ACL_ERROR_INVALID_PARAM, what, "rank table %s has %d servers: set "
                  "RANK_ID (0..%d) to say which is this one, or LOOM_ACL_DEVICES",
                  path, nservers, nranks - 1);
    } else {
        *n = 0;
        for (int r = 0; r < nranks; r++) {
            loom_rank_info_t ri;
            if (loom_ranktable_rank_info(t, r, &ri) == LOOM_SUCCESS &&
                ri.server_index == mine.server_index)
                (*n)++;
        }
    }
    loom_ranktable_free(t);
    return rc;
}

static aclError find_devices(const char *what, int *n)
{
    const char *v = getenv("LOOM_ACL_DEVICES");
    if (v && *v) {
        long c = parse_count(v);
        if (c < 0 || c > 4096)
            return fail(ACL_ERROR_INVALID_PARAM, what, "LOOM_ACL_DEVICES=%s is not "
                        "a number of devices (1..4096)", v);
        *n = (int)c;
        return ACL_SUCCESS;
    }
    const char *path = env_first("RANK_TABLE_FILE", "LOOM_RANK_TABLE");
    if (path)
        return table_devices(what, path, n);
    *n = ACL_DEFAULT_DEVICES;
    return ACL_SUCCESS;
}

/* ---- init ----------------------------------------------------------------------- */

/* Under g_lock: ACL_SUCCESS when aclInit has run, else the reported code. */
static aclError need_init(const char *what)
{
    return g_inited ? ACL_SUCCESS
                    : fail(ACL_ERROR_UNINITIALIZE, what, "aclInit has not been called");
}

LOOM_ACL_API aclError aclInit(const char *configPath)
{
    const char *what = "aclInit";
    if (configPath && *configPath)
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED, what, "configuration file %s: "
                    "none of its settings (dump, profiling) applies on plain hosts; "
                    "pass NULL", configPath);
    pthread_mutex_lock(&g_lock);
    aclError rc = ACL_SUCCESS;
    int n = 0;
    if (g_inited)
        rc = fail(ACL_ERROR_REPEAT_INITIALIZE, what, "called twice without aclFinalize");
    else if ((rc = find_devices(what, &n)) == ACL_SUCCESS) {
        g_dev_refs = calloc((size_t)n, sizeof *g_dev_refs);
        if (!g_dev_refs)
            rc = fail(ACL_ERROR_BAD_ALLOC, what, "out of memory for %d devices", n);
        else {
            g_ndev = n;
            g_inited = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

LOOM_ACL_API aclError aclFinalize(void)
{
    const char *what = "aclFinalize";
    pthread_mutex_lock(&g_lock);
    aclError rc = ACL_SUCCESS;
    if (!g_inited) {
        rc = fail(ACL_ERROR_REPEAT_FINALIZE, what, "aclInit is not in effect");
    } else if (g_nres) {
        /* the programs free before finalizing; what is left is named, then
         * freed, so that a leak is seen but not kept */
        if (!quiet())
            fprintf(stderr, "loom-acl: %s: %zu resources were not freed, the first %s "
                    "of %zu bytes; freeing them\n", what, g_nres, res_names[g_res[0].kind],
                    g_res[0].size);
        for (size_t i = 0; i < g_nres; i++) {
            if (g_res[i].kind == RES_STREAM)
                loom_stream_destroy((loom_stream_t)g_res[i].ptr);
            else
                free(g_res[i].ptr);
        }
        g_nres = 0;
    }
    if (g_inited) {
        free(g_dev_refs);
        g_dev_refs = NULL;
        g_ndev = -1;
        g_inited = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- devices ----------------------------------------------------------------------- */

LOOM_ACL_API aclError aclrtGetDeviceCount(uint32_t *count)
{
    const char *what = "aclrtGetDeviceCount";
    if (!count)
        return fail(ACL_ERROR_INVALID_PARAM, what, "count is NULL");
    pthread_mutex_lock(&g_lock);
    aclError rc = need_init(what);
    if (rc == ACL_SUCCESS)
        *count = (uint32_t)g_ndev;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static aclError device_arg(const char *what, int32_t id)
{
    aclError rc = need_init(what);
    if (rc == ACL_SUCCESS && (id < 0 || id >= g_ndev))
        rc = fail(ACL_ERROR_INVALID_DEVICE, what, "device %d is not one of the %d "
                  "devices 0..%d (LOOM_ACL_DEVICES sets how many)", (int)id, g_ndev,
                  g_ndev - 1);
    return rc;
}

LOOM_ACL_API aclError aclrtSetDevice(int32_t deviceId)
{
    pthread_mutex_lock(&g_lock);
    aclError rc = device_arg("aclrtSetDevice", deviceId);
    if (rc == ACL_SUCCESS) {
        g_dev_refs[deviceId]++;
        t_device = deviceId;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

LOOM_ACL_API aclError aclrtGetDevice(int32_t *deviceId)
{
    const char *what = "aclrtGetDevice";
    if (!deviceId)
        return fail(ACL_ERROR_INVALID_PARAM, what, "deviceId is NULL");
    if (t_device < 0)
        return fail(ACL_ERROR_INVALID_DEVICE, what, "this thread has not called "
                    "aclrtSetDevice");
    *deviceId = t_device;
    return ACL_SUCCESS;
}

LOOM_ACL_API aclError aclrtResetDevice(int32_t deviceId)
{
    const char *what = "aclrtResetDevice";
    pthread_mutex_lock(&g_lock);
    aclError rc = device_arg(what, deviceId);
    if (rc == ACL_SUCCESS && g_dev_refs[deviceId] == 0)
        rc = fail(ACL_ERROR_INVALID_DEVICE, what, "device %d was not set "
                  "(aclrtSetDevice) or was reset already", (int)deviceId);
    if (rc == ACL_SUCCESS && --g_dev_refs[deviceId] == 0 && t_device == deviceId)
        t_device = -1;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- the table of what was handed out -------------------------------------------- */

/* Under g_lock. */
static aclError res_add(const char *what, enum res_kind kind, void *ptr, size_t size)
{
    if (g_nres == g_capres) {
        size_t cap = g_capres ? 2 * g_capres : 64;
        struct res *r = realloc(g_res, cap * sizeof *r);
        if (!r)
            return fail(ACL_ERROR_BAD_ALLOC, what, "out of memory");
        g_res = r;
        g_capres = cap;
    }
    g_res[g_nres++] = (struct res){.kind = kind, .ptr = ptr, .size = size,
                                   .device = t_device};
    return ACL_SUCCESS;
}

/* Under g_lock: the entry that ptr starts (exact) or lies in (!exact). */
static struct res *res_find(const void *ptr, int exact)
{
    for (size_t i = 0; i < g_nres; i++) {
        const char *b = g_res[i].ptr;
        if (g_res[i].kind == RES_STREAM) {
            if (b == ptr)
                return &g_res[i];
            continue;
        }
        if (b == ptr || (!exact && (const char *)ptr > b && (const char *)ptr < b + g_res[i].size))
            return &g_res[i];
    }
    return NULL;
}

static void res_remove(struct res *r)
{
    *r = g_res[--g_nres];
}

/* Release what ptr names, which must be a kind entry. */
static aclError res_release(const char *what, enum res_kind kind, void *ptr, void **out)
{
    if (!ptr)
        return fail(ACL_ERROR_INVALID_PARAM, what, "the pointer is NULL");
    pthread_mutex_lock(&g_lock);
    aclError rc = need_init(what);
    struct res *r = rc == ACL_SUCCESS ? res_find(ptr, 1) : NULL;
    if (rc == ACL_SUCCESS && (!r || r->kind != kind))
        rc = fail(kind == RES_STREAM ? ACL_ERROR_INVALID_RESOURCE_HANDLE
                                     : ACL_ERROR_INVALID_PARAM,
                  what, "%p is not %s%s%s", ptr, res_names[kind], r ? " but " : "",
                  r ? res_names[r->kind] : " (freed already, or never handed out)");
    if (rc == ACL_SUCCESS) {
        *out = r->ptr;
        res_remove(r);
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- memory ------------------------------------------------------------------------- */

static aclError alloc(const char *what, enum res_kind kind, void **p, size_t size)
{
    if (!p)
        return fail(ACL_ERROR_INVALID_PARAM, what, "the pointer to return is NULL");
    *p = NULL;
    if (size == 0)
        return fail(ACL_ERROR_INVALID_PARAM, what, "size is 0");
    pthread_mutex_lock(&g_lock);
    aclError rc = need_init(what);
    if (rc == ACL_SUCCESS && kind == RES_DEVICE_MEM && t_device < 0)
        rc = fail(ACL_ERROR_INVALID_DEVICE, what, "this thread has no current device: "
                  "call aclrtSetDevice first");
    void *m = NULL;
    if (rc == ACL_SUCCESS) {
        /* posix_memalign takes a size_t; rounding up may not overflow */
        if (size > SIZE_MAX - ACL_ALIGN || posix_memalign(&m, ACL_ALIGN, size) != 0)
            rc = fail(ACL_ERROR_BAD_ALLOC, what, "cannot allocate %zu bytes", size);
        else if ((rc = res_add(what, kind, m, size)) != ACL_SUCCESS)
            free(m);
        else
            *p = m;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

LOOM_ACL_API aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    /* a page policy (low 3 bits) and the memory-type and access flags */
    unsigned known = 0x7u | ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH |
                     ACL_MEM_ACCESS_USER_SPACE_READONLY;
    if ((unsigned)policy & ~known)
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc", "policy 0x%x is not an "
                    "aclrtMemMallocPolicy", (unsigned)policy);
    return alloc("aclrtMalloc", RES_DEVICE_MEM, devPtr, size);
}

LOOM_ACL_API aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    return alloc("aclrtMallocHost", RES_HOST_MEM, hostPtr, size);
}

LOOM_ACL_API aclError aclrtFree(void *devPtr)
{
    void *m;
    aclError rc = res_release("aclrtFree", RES_DEVICE_MEM, devPtr, &m);
    if (rc == ACL_SUCCESS)
        free(m);
    return rc;
}

LOOM_ACL_API aclError aclrtFreeHost(void *hostPtr)
{
    void *m;
    aclError rc = res_release("aclrtFreeHost", RES_HOST_MEM, hostPtr, &m);
    if (rc == ACL_SUCCESS)
        free(m);
    return rc;
}

/* Under g_lock: [p, p + n) within one aclrtMalloc allocation. */
static aclError check_device_range(const char *what, const char *side, const void *p,
                                   size_t n)
{
    struct res *r = res_find(p, 0);
    if (!r || r->kind != RES_DEVICE_MEM)
        return fail(ACL_ERROR_INVALID_PARAM, what, "%s %p is not device memory "
                    "(aclrtMalloc)%s", side, p, r ? "" : " of this process");
    size_t off = (size_t)((const char *)p - (const char *)r->ptr);
    if (n > r->size - off)
        return fail(ACL_ERROR_INVALID_PARAM, what, "%s: %zu bytes at offset %zu run past "
                    "its allocation of %zu", side, n, off, r->size);
    return ACL_SUCCESS;
}

LOOM_ACL_API aclError aclrtMemcpy(void *dst, size_t destMax, const void *src,
                                  size_t count, aclrtMemcpyKind kind)
{
    const char *what = "aclrtMemcpy";
    if ((unsigned)kind > ACL_MEMCPY_DEFAULT)
        return fail(ACL_ERROR_INVALID_PARAM, what, "kind %d is not an aclrtMemcpyKind",
                    (int)kind);
    if (count > destMax)
        return fail(ACL_ERROR_INVALID_PARAM, what, "count %zu is more than destMax %zu",
                    count, destMax);
    if (count && (!dst || !src))
        return fail(ACL_ERROR_INVALID_PARAM, what, "%s is NULL", dst ? "src" : "dst");
    pthread_mutex_lock(&g_lock);
    aclError rc = need_init(what);
    if (rc == ACL_SUCCESS && count) {
        int dev_dst = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
        int dev_src = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
        if (dev_dst)
            rc = check_device_range(what, "dst", dst, count);
        if (rc == ACL_SUCCESS && dev_src)
            rc = check_device_range(what, "src", src, count);
    }
    pthread_mutex_unlock(&g_lock);
    if (rc == ACL_SUCCESS && count)
        memmove(dst, src, count);
    return rc;
}

LOOM_ACL_API aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    const char *what = "aclrtMemset";
    if (count > maxCount)
        return fail(ACL_ERROR_INVALID_PARAM, what, "count %zu is more than maxCount %zu",
                    count, maxCount);
    pthread_mutex_lock(&g_lock);
    aclError rc = need_init(what);
    if (rc == ACL_SUCCESS && count)
        rc = check_device_range(what, "devPtr", devPtr, count);
    pthread_mutex_unlock(&g_lock);
    if (rc == ACL_SUCCESS && count)
        memset(devPtr, value, count);
    return rc;
}

/* ---- streams ------------------------------------------------------------------------ */

LOOM_ACL_API aclError aclrtCreateStream(aclrtStream *stream)
{
    const char *what = "aclrtCreateStream";
    if (!stream)
        return fail(ACL_ERROR_INVALID_PARAM, what, "stream is NULL");
    *stream = NULL;
    pthread_mutex_lock(&g_lock);
    aclError rc = need_init(what);
    pthread_mutex_unlock(&g_lock);
    if (rc != ACL_SUCCESS)
        return rc;
    loom_stream_t s = NULL;
    loom_result_t res = loom_stream_create_host(&s);
    if (res != LOOM_SUCCESS)
        return fail(ACL_ERROR_RT_FAILURE, what, "%s", loom_result_string(res));
    pthread_mutex_lock(&g_lock);
    rc = res_add(what, RES_STREAM, s, 0);
    pthread_mutex_unlock(&g_lock);
    if (rc != ACL_SUCCESS) {
        loom_stream_destroy(s);
        return rc;
    }
    *stream = s;
    return ACL_SUCCESS;
}

/* Under g_lock: stream was made by aclrtCreateStream and is alive. */
static aclError check_stream(const char *what, aclrtStream stream)
{
    aclError rc = need_init(what);
    if (rc != ACL_SUCCESS)
        return rc;
    struct res *r = res_find(stream, 1);
    if (!r || r->kind != RES_STREAM)
        return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE, what, "%p is not a stream of "
                    "aclrtCreateStream (destroyed already?)", stream);
    return ACL_SUCCESS;
}

LOOM_ACL_API aclError aclrtSynchronizeStream(aclrtStream stream)
{
    const char *what = "aclrtSynchronizeStream";
    if (!stream) /* the default stream: HCCL calls on it completed already */
        return ACL_SUCCESS;
    pthread_mutex_lock(&g_lock);
    aclError rc = check_stream(what, stream);
    pthread_mutex_unlock(&g_lock);
    if (rc != ACL_SUCCESS)
        return rc;
    loom_result_t res = loom_stream_synchronize((loom_stream_t)stream);
    if (res != LOOM_SUCCESS)
        return fail(ACL_ERROR_RT_FAILURE, what, "a call on the stream failed: %s "
                    "(the HCCL call's message above names why)",
                    loom_result_string(res));
    return ACL_SUCCESS;
}

LOOM_ACL_API aclError aclrtDestroyStream(aclrtStream stream)
{
    void *s;
    aclError rc = res_release("aclrtDestroyStream", RES_STREAM, stream, &s);
    if (rc != ACL_SUCCESS)
        return rc;
    /* what is enqueued completes first, as with ACL's destroy */
    loom_result_t res = loom_stream_synchronize((loom_stream_t)s);
    loom_result_t dres = loom_stream_destroy((loom_stream_t)s);
    if (res == LOOM_SUCCESS)
        res = dres;
    if (res != LOOM_SUCCESS)
        return fail(ACL_ERROR_RT_FAILURE, "aclrtDestroyStream", "%s",
                    loom_result_string(res));
    return ACL_SUCCESS;
}
