/* cuda_model.c - the fake CUDA driver of cuda_model.h. */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devmem.h"
#include "cuda_model.h"

struct cuda_model_knobs cuda_model = {.ndevices = 2, .max_delay_us = 200};

#define FK_MAX_DEVICES 8
#define FK_MAX_REGS 64

struct CUctx_st {
    int device;
    struct CUstream_st *null_stream;
};

enum fcmd_kind { F_WRITE, F_WAIT, F_COPY, F_RECORD, F_WAIT_EVENT, F_KERNEL };

struct fcmd {
    enum fcmd_kind kind;
    uint32_t *word;
    uint32_t value;
    struct CUevent_st *ev;
    uint64_t gen;
    char *dst;
    const char *src;
    size_t dpitch, spitch, width, rows;
    void (*fn)(void *);
    void *arg;
    unsigned delay_us;
    int started;
    uint64_t ready_ns;
    struct fcmd *next;
};

struct CUstream_st {
    struct CUctx_st *ctx;
    struct fcmd *head, *tail;
    int running;
    int destroyed;
    struct CUstream_st *next;
};

struct CUevent_st {
    uint64_t recorded;              /* records enqueued (under the lock)            */
    uint64_t done;                  /* records run (atomic)                         */
    int destroyed;                  /* freed once its last record has run           */
    struct CUevent_st *prev, *next; /* every live event (fk.events)     */
};

struct CUmod_st {
    int unused;
};
struct CUfunc_st {
    int unused;
};

enum fk_entry {
    E_INIT,
    E_DRIVER_VERSION,
    E_ERROR_NAME,
    E_ERROR_STRING,
    E_DEVICE_COUNT,
    E_DEVICE_GET,
    E_PRIMARY_RETAIN,
    E_PRIMARY_RELEASE,
    E_CTX_GET,
    E_CTX_SET,
    E_CTX_PUSH,
    E_CTX_POP,
    E_CTX_DEVICE,
    E_STREAM_CTX,
    E_STREAM_CREATE,
    E_STREAM_DESTROY,
    E_STREAM_SYNC,
    E_EVENT_CREATE,
    E_EVENT_DESTROY,
    E_EVENT_RECORD,
    E_EVENT_QUERY,
    E_HOST_REGISTER,
    E_HOST_UNREGISTER,
    E_HOST_DEVPTR,
    E_PTR_ATTRS,
    E_MEMCPY,
    E_MEMCPY2D,
    E_WRITE32,
    E_WAIT32,
    E_MODULE_LOAD,
    E_MODULE_UNLOAD,
    E_MODULE_FUNCTION,
    E_LAUNCH,
    E_COUNT
};

const char *const cuda_model_entry_names[E_COUNT] = {"cuInit",
                                                     "cuDriverGetVersion",
                                                     "cuGetErrorName",
                                                     "cuGetErrorString",
                                                     "cuDeviceGetCount",
                                                     "cuDeviceGet",
                                                     "cuDevicePrimaryCtxRetain",
                                                     "cuDevicePrimaryCtxRelease",
                                                     "cuCtxGetCurrent",
                                                     "cuCtxSetCurrent",
                                                     "cuCtxPushCurrent",
                                                     "cuCtxPopCurrent",
                                                     "cuCtxGetDevice",
                                                     "cuStreamGetCtx",
                                                     "cuStreamCreate",
                                                     "cuStreamDestroy",
                                                     "cuStreamSynchronize",
                                                     "cuEventCreate",
                                                     "cuEventDestroy",
                                                     "cuEventRecord",
                                                     "cuEventQuery",
                                                     "cuMemHostRegister",
                                                     "cuMemHostUnregister",
                                                     "cuMemHostGetDevicePointer",
                                                     "cuPointerGetAttributes",
                                                     "cuMemcpyAsync",
                                                     "cuMemcpy2DAsync",
                                                     "cuStreamWriteValue32",
                                                     "cuStreamWaitValue32",
                                                     "cuModuleLoadData",
                                                     "cuModuleUnload",
                                                     "cuModuleGetFunction",
                                                     "cuLaunchKernel"};
const int cuda_model_nentries = E_COUNT;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work, idle;
    pthread_t engine;
    int started;
    struct CUctx_st ctx[FK_MAX_DEVICES];
    struct CUstream_st *streams;
    struct CUevent_st *events;
    CUresult sticky;
    struct devmem dev;
    char *managed;
    size_t managed_size, managed_used;
    struct {
        char *p;
        size_t n;
    } regs[FK_MAX_REGS];
    unsigned calls[E_COUNT], fail_nth[E_COUNT];
    CUresult fail_err[E_COUNT];
    unsigned copy_nth;
    CUresult copy_err;
    struct cuda_model_stats stats;
    struct CUmod_st module;
    struct CUfunc_st wait_fn;
    unsigned seed;
} fk = {.lock = PTHREAD_MUTEX_INITIALIZER,
        .work = PTHREAD_COND_INITIALIZER,
        .idle = PTHREAD_COND_INITIALIZER};

static __thread struct CUctx_st *ctx_stack[16];
static __thread int ctx_depth;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Count the call; an injected failure returns its error. */
static CUresult enter(enum fk_entry e)
{
    pthread_mutex_lock(&fk.lock);
    fk.calls[e]++;
    CUresult rc = CUDA_SUCCESS;
    if (fk.fail_nth[e] && --fk.fail_nth[e] == 0)
        rc = fk.fail_err[e];
    pthread_mutex_unlock(&fk.lock);
    return rc;
}
#define ENTER(e)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = enter(e);                                                                   \
        if (rc_ != CUDA_SUCCESS)                                                                   \
            return rc_;                                                                            \
    } while (0)

static CUresult sticky(void)
{
    return __atomic_load_n(&fk.sticky, __ATOMIC_ACQUIRE);
}

/* ---- memory ---------------------------------------------------------------- */

enum fk_mem { M_PAGEABLE, M_PINNED, M_DEVICE, M_MANAGED, M_BAD };

/* What p..p+n is (under the lock). */
static enum fk_mem classify(const void *p, size_t n)
{
    const char *c = p;
    if (devmem_contains(&fk.dev, c))
        return devmem_contains(&fk.dev, c + n - 1) || n == 0 ? M_DEVICE : M_BAD;
    if (c >= fk.managed && c < fk.managed + fk.managed_size)
        return c + n <= fk.managed + fk.managed_size ? M_MANAGED : M_BAD;
    for (int i = 0; i < FK_MAX_REGS; i++)
        if (fk.regs[i].p && c >= fk.regs[i].p && c < fk.regs[i].p + fk.regs[i].n)
            return c + n <= fk.regs[i].p + fk.regs[i].n ? M_PINNED : M_BAD;
    return M_PAGEABLE;
}

void *cuda_model_view(const void *p)
{
    if (devmem_contains(&fk.dev, p))
        return devmem_view(&fk.dev, p);
    return (void *)p;
}

void *cuda_model_malloc(size_t bytes)
{
    pthread_mutex_lock(&fk.lock);
    void *p = devmem_alloc(&fk.dev, bytes);
    pthread_mutex_unlock(&fk.lock);
    return p;
}

void *cuda_model_malloc_managed(size_t bytes)
{
    pthread_mutex_lock(&fk.lock);
    size_t off = (fk.managed_used + 255) & ~(size_t)255;
    void *p = NULL;
    if (off + bytes <= fk.managed_size) {
        p = fk.managed + off;
        fk.managed_used = off + bytes;
    }
    pthread_mutex_unlock(&fk.lock);
    return p;
}

static int reg_add(void *p, size_t n)
{
    for (int i = 0; i < FK_MAX_REGS; i++)
        if (!fk.regs[i].p) {
            fk.regs[i].p = p;
            fk.regs[i].n = n;
            return 0;
        }
    return -1;
}

static int reg_del(void *p)
{
    for (int i = 0; i < FK_MAX_REGS; i++)
        if (fk.regs[i].p == p) {
            fk.regs[i].p = NULL;
            return 0;
        }
    return -1;
}

void *cuda_model_malloc_pinned(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    pthread_mutex_lock(&fk.lock);
    if (p && reg_add(p, bytes ? bytes : 1) < 0) {
        free(p);
        p = NULL;
    }
    pthread_mutex_unlock(&fk.lock);
    return p;
}

void cuda_model_free_pinned(void *p)
{
    pthread_mutex_lock(&fk.lock);
    reg_del(p);
    pthread_mutex_unlock(&fk.lock);
    free(p);
}

void cuda_model_reset_memory(void)
{
    pthread_mutex_lock(&fk.lock);
    devmem_reset(&fk.dev);
    fk.managed_used = 0;
    pthread_mutex_unlock(&fk.lock);
}

struct cuda_model_stats cuda_model_stats(void)
{
    pthread_mutex_lock(&fk.lock);
    struct cuda_model_stats s = fk.stats;
    pthread_mutex_unlock(&fk.lock);
    return s;
}

/* ---- the GPU thread ---------------------------------------------------------- */

/* Unlink and free ev (the lock held). */
static void event_free(struct CUevent_st *ev)
{
    if (ev->prev)
        ev->prev->next = ev->next;
    else
        fk.events = ev->next;
    if (ev->next)
        ev->next->prev = ev->prev;
    free(ev);
}

static int cmd_ready(struct fcmd *c)
{
    switch (c->kind) {
    case F_WAIT:
        if (cuda_model.ignore_waits)
            break;
        if ((int32_t)(__atomic_load_n(c->word, __ATOMIC_ACQUIRE) - c->value) < 0)
            return 0;
        break;
    case F_WAIT_EVENT:
        if (__atomic_load_n(&c->ev->done, __ATOMIC_ACQUIRE) < c->gen)
            return 0;
        break;
    default: break;
    }
    if (!c->delay_us)
        return 1;
    uint64_t t = now_ns();
    if (!c->started) {
        c->started = 1;
        c->ready_ns = t + (uint64_t)c->delay_us * 1000u;
    }
    return t >= c->ready_ns;
}

/* Run c (the lock not held). */
static void cmd_run(struct fcmd *c)
{
    switch (c->kind) {
    case F_WRITE: __atomic_store_n(c->word, c->value, __ATOMIC_RELEASE); break;
    case F_COPY: {
        pthread_mutex_lock(&fk.lock);
        int fail = fk.copy_nth && --fk.copy_nth == 0;
        CUresult err = fk.copy_err;
        pthread_mutex_unlock(&fk.lock);
        if (fail) {
            __atomic_store_n(&fk.sticky, err, __ATOMIC_RELEASE);
            break;
        }
        for (size_t i = 0; i < c->rows; i++) {
            char *d = cuda_model_view(c->dst + i * c->dpitch);
            const char *s = cuda_model_view(c->src + i * c->spitch);
            memcpy(d, s, c->width);
        }
        break;
    }
    case F_RECORD:
        /* under the lock: cuEventDestroy decides by done whether to free */
        pthread_mutex_lock(&fk.lock);
        __atomic_store_n(&c->ev->done, c->gen, __ATOMIC_RELEASE);
        if (c->ev->destroyed && c->gen >= c->ev->recorded)
            event_free(c->ev);
        pthread_mutex_unlock(&fk.lock);
        break;
    case F_KERNEL: c->fn(c->arg); break;
    default: break;
    }
}

static void *engine(void *arg)
{
    pthread_mutex_lock(&fk.lock);
    for (;;) {
        int moved = 0;
        for (struct CUstream_st **pp = &fk.streams; *pp;) {
            struct CUstream_st *s = *pp;
            while (s->head && (sticky() || cmd_ready(s->head))) {
                struct fcmd *c = s->head;
                s->head = c->next;
                if (!s->head)
                    s->tail = NULL;
                s->running = 1;
                pthread_mutex_unlock(&fk.lock);
                if (!sticky())
                    cmd_run(c);
                free(c);
                pthread_mutex_lock(&fk.lock);
                s->running = 0;
                moved = 1;
            }
            if (s->destroyed && !s->head) {
                *pp = s->next;
                free(s);
            } else {
                pp = &s->next;
            }
        }
        if (moved) {
            pthread_cond_broadcast(&fk.idle);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&fk.work, &fk.lock, &ts);
    }
    return NULL;
}

static struct CUstream_st *stream_of(CUstream s)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return ctx_depth ? ctx_stack[ctx_depth - 1]->null_stream : NULL;
    return s;
}

/* Append c to stream s (the lock held). */
static void enqueue(struct CUstream_st *s, struct fcmd *c)
{
    c->next = NULL;
    if (s->tail)
        s->tail->next = c;
    else
        s->head = c;
    s->tail = c;
    pthread_cond_signal(&fk.work);
}

static CUresult push_cmd(CUstream hs, struct fcmd *tmpl)
{
    struct CUstream_st *s = stream_of(hs);
    if (!s)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fcmd *c = malloc(sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = *tmpl;
    pthread_mutex_lock(&fk.lock);
    enqueue(s, c);
    pthread_mutex_unlock(&fk.lock);
    return CUDA_SUCCESS;
}

/* ---- entries ---------------------------------------------------------------- */

static struct CUstream_st *new_stream(struct CUctx_st *ctx)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = ctx;
    pthread_mutex_lock(&fk.lock);
    s->next = fk.streams;
    fk.streams = s;
    pthread_mutex_unlock(&fk.lock);
    return s;
}

static CUresult f_init(unsigned int flags)
{
    ENTER(E_INIT);
    pthread_mutex_lock(&fk.lock);
    int start = !fk.started;
    fk.started = 1;
    pthread_mutex_unlock(&fk.lock);
    if (!start)
        return CUDA_SUCCESS;
    if (devmem_init(&fk.dev, 256u << 20) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fk.managed_size = 64u << 20;
    fk.managed = malloc(fk.managed_size);
    fk.seed = 12345;
    for (int d = 0; d < FK_MAX_DEVICES; d++) {
        fk.ctx[d].device = d;
        fk.ctx[d].null_stream = new_stream(&fk.ctx[d]);
    }
    if (!fk.managed || pthread_create(&fk.engine, NULL, engine, NULL) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_detach(fk.engine);
    return CUDA_SUCCESS;
}

static CUresult f_driver_get_version(int *v)
{
    ENTER(E_DRIVER_VERSION);
    *v = 13000;
    return CUDA_SUCCESS;
}

static CUresult f_get_error_name(CUresult err, const char **name)
{
    switch (err) {
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_NOT_READY: *name = "CUDA_ERROR_NOT_READY"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult f_get_error_string(CUresult err, const char **str)
{
    switch (err) {
    case CUDA_ERROR_INVALID_VALUE: *str = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *str = "out of memory"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *str = "operation not supported"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *str = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *str = "unspecified launch failure"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *str = "invalid device context"; break;
    case CUDA_ERROR_NOT_READY: *str = "device not ready"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult f_device_get_count(int *n)
{
    ENTER(E_DEVICE_COUNT);
    *n = cuda_model.ndevices;
    return CUDA_SUCCESS;
}

static CUresult f_device_get(CUdevice *dev, int ordinal)
{
    ENTER(E_DEVICE_GET);
    if (ordinal < 0 || ordinal >= cuda_model.ndevices || ordinal >= FK_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

static CUresult f_primary_retain(CUcontext *ctx, CUdevice dev)
{
    ENTER(E_PRIMARY_RETAIN);
    if (dev < 0 || dev >= cuda_model.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &fk.ctx[dev];
    return CUDA_SUCCESS;
}

static CUresult f_primary_release(CUdevice dev)
{
    ENTER(E_PRIMARY_RELEASE);
    return CUDA_SUCCESS;
}

static CUresult f_ctx_get(CUcontext *ctx)
{
    ENTER(E_CTX_GET);
    *ctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_set(CUcontext ctx)
{
    ENTER(E_CTX_SET);
    if (!ctx) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_depth)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_push(CUcontext ctx)
{
    ENTER(E_CTX_PUSH);
    if (!ctx || ctx_depth == 16)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

static CUresult f_ctx_pop(CUcontext *ctx)
{
    ENTER(E_CTX_POP);
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctx = ctx_stack[--ctx_depth];
    return CUDA_SUCCESS;
}

static CUresult f_ctx_device(CUdevice *dev)
{
    ENTER(E_CTX_DEVICE);
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = ctx_stack[ctx_depth - 1]->device;
    return CUDA_SUCCESS;
}

static CUresult f_stream_ctx(CUstream hs, CUcontext *ctx)
{
    ENTER(E_STREAM_CTX);
    if (hs == NULL || hs == CU_STREAM_LEGACY || hs == CU_STREAM_PER_THREAD) {
        if (!ctx_depth)
            return CUDA_ERROR_INVALID_CONTEXT;
        *ctx = ctx_stack[ctx_depth - 1];
        return CUDA_SUCCESS;
    }
    *ctx = hs->ctx;
    return CUDA_SUCCESS;
}

static CUresult f_stream_create(CUstream *s, unsigned int flags)
{
    ENTER(E_STREAM_CREATE);
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    *s = new_stream(ctx_stack[ctx_depth - 1]);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_stream_destroy(CUstream s)
{
    ENTER(E_STREAM_DESTROY);
    pthread_mutex_lock(&fk.lock);
    s->destroyed = 1;
    pthread_cond_signal(&fk.work);
    pthread_mutex_unlock(&fk.lock);
    return CUDA_SUCCESS;
}

int cuda_model_stream_wait(CUstream hs, double timeout_s)
{
    struct CUstream_st *s = stream_of(hs);
    uint64_t until = now_ns() + (uint64_t)(timeout_s * 1e9);
    pthread_mutex_lock(&fk.lock);
    int rc = 0;
    while (s && (s->head || s->running) && !sticky()) {
        if (now_ns() > until) {
            rc = -1;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&fk.idle, &fk.lock, &ts);
    }
    pthread_mutex_unlock(&fk.lock);
    return rc < 0 ? -1 : sticky() ? 1 : 0;
}

static CUresult f_stream_sync(CUstream s)
{
    ENTER(E_STREAM_SYNC);
    int rc = cuda_model_stream_wait(s, 60);
    if (rc < 0)
        return CUDA_ERROR_LAUNCH_TIMEOUT;
    return sticky();
}

static CUresult f_event_create(CUevent *ev, unsigned int flags)
{
    ENTER(E_EVENT_CREATE);
    if (sticky())
        return sticky();
    *ev = calloc(1, sizeof **ev);
    if (!*ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fk.lock);
    (*ev)->next = fk.events;
    if (fk.events)
        fk.events->prev = *ev;
    fk.events = *ev;
    pthread_mutex_unlock(&fk.lock);
    return CUDA_SUCCESS;
}

static CUresult f_event_destroy(CUevent ev)
{
    ENTER(E_EVENT_DESTROY);
    /* as CUDA: one still recorded on a stream goes when that record ran
     * (F_RECORD frees it); an event whose destroy failed stays listed */
    pthread_mutex_lock(&fk.lock);
    if (__atomic_load_n(&ev->done, __ATOMIC_ACQUIRE) >= ev->recorded)
        event_free(ev);
    else
        ev->destroyed = 1;
    pthread_mutex_unlock(&fk.lock);
    return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent ev, CUstream s)
{
    ENTER(E_EVENT_RECORD);
    if (sticky())
        return sticky();
    pthread_mutex_lock(&fk.lock);
    uint64_t gen = ++ev->recorded;
    pthread_mutex_unlock(&fk.lock);
    struct fcmd c = {.kind = F_RECORD, .ev = ev, .gen = gen};
    return push_cmd(s, &c);
}

static CUresult f_event_query(CUevent ev)
{
    ENTER(E_EVENT_QUERY);
    if (sticky())
        return sticky();
    pthread_mutex_lock(&fk.lock);
    uint64_t rec = ev->recorded;
    pthread_mutex_unlock(&fk.lock);
    return __atomic_load_n(&ev->done, __ATOMIC_ACQUIRE) >= rec ? CUDA_SUCCESS
                                                               : CUDA_ERROR_NOT_READY;
}

static CUresult f_host_register(void *p, size_t n, unsigned int flags)
{
    ENTER(E_HOST_REGISTER);
    pthread_mutex_lock(&fk.lock);
    int rc = classify(p, n) == M_PAGEABLE ? reg_add(p, n) : -1;
    if (rc == 0)
        fk.stats.host_registers++;
    pthread_mutex_unlock(&fk.lock);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
}

static CUresult f_host_unregister(void *p)
{
    ENTER(E_HOST_UNREGISTER);
    pthread_mutex_lock(&fk.lock);
    int rc = reg_del(p);
    pthread_mutex_unlock(&fk.lock);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static CUresult f_host_devptr(CUdeviceptr *d, void *p, unsigned int flags)
{
    ENTER(E_HOST_DEVPTR);
    pthread_mutex_lock(&fk.lock);
    enum fk_mem m = classify(p, 1);
    pthread_mutex_unlock(&fk.lock);
    if (m != M_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    *d = (CUdeviceptr)(uintptr_t)p; /* unified addressing */
    return CUDA_SUCCESS;
}

static CUresult f_ptr_attrs(unsigned int n, CUpointer_attribute *attrs, void **data,
                            CUdeviceptr ptr)
{
    ENTER(E_PTR_ATTRS);
    pthread_mutex_lock(&fk.lock);
    enum fk_mem m = classify((void *)(uintptr_t)ptr, 1);
    pthread_mutex_unlock(&fk.lock);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned int *)data[i] = m == M_DEVICE || m == M_MANAGED ? CU_MEMORYTYPE_DEVICE
                                       : m == M_PINNED                 ? CU_MEMORYTYPE_HOST
                                                                       : 0;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned char *)data[i] = m == M_MANAGED; break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

static CUresult copy_cmd(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width,
                         size_t rows, CUstream s)
{
    if (sticky())
        return sticky();
    pthread_mutex_lock(&fk.lock);
    size_t dspan = (rows - 1) * dpitch + width, sspan = (rows - 1) * spitch + width;
    enum fk_mem md = classify(dst, dspan), ms = classify(src, sspan);
    if (md == M_BAD || ms == M_BAD)
        fk.stats.bad_addresses++;
    if (md == M_PAGEABLE || ms == M_PAGEABLE)
        fk.stats.pageable_copies++;
    unsigned delay = cuda_model.max_delay_us ? (unsigned)rand_r(&fk.seed) % cuda_model.max_delay_us
                                             : 0;
    pthread_mutex_unlock(&fk.lock);
    if (md == M_BAD || ms == M_BAD)
        return CUDA_ERROR_INVALID_VALUE;
    struct fcmd c = {.kind = F_COPY,
                     .dst = dst,
                     .src = src,
                     .dpitch = dpitch,
                     .spitch = spitch,
                     .width = width,
                     .rows = rows,
                     .delay_us = delay};
    return push_cmd(s, &c);
}

static CUresult f_memcpy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    ENTER(E_MEMCPY);
    return copy_cmd((char *)(uintptr_t)dst, n, (const char *)(uintptr_t)src, n, n, 1, s);
}

static CUresult f_memcpy2d(const CUDA_MEMCPY2D *c, CUstream s)
{
    ENTER(E_MEMCPY2D);
    if (c->srcMemoryType != CU_MEMORYTYPE_UNIFIED || c->dstMemoryType != CU_MEMORYTYPE_UNIFIED ||
        c->srcXInBytes || c->srcY || c->dstXInBytes || c->dstY || c->srcPitch < c->WidthInBytes ||
        c->dstPitch < c->WidthInBytes || !c->Height)
        return CUDA_ERROR_INVALID_VALUE;
    return copy_cmd((char *)(uintptr_t)c->dstDevice, c->dstPitch,
                    (const char *)(uintptr_t)c->srcDevice, c->srcPitch, c->WidthInBytes, c->Height,
                    s);
}

static CUresult f_write32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
    ENTER(E_WRITE32);
    if (cuda_model.memops_refused)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (sticky())
        return sticky();
    if (cuda_model.write_at_enqueue) {
        __atomic_store_n((uint32_t *)(uintptr_t)addr, v, __ATOMIC_RELEASE);
        return CUDA_SUCCESS;
    }
    struct fcmd c = {.kind = F_WRITE, .word = (uint32_t *)(uintptr_t)addr, .value = v};
    return push_cmd(s, &c);
}

static CUresult f_wait32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
    ENTER(E_WAIT32);
    if (cuda_model.memops_refused)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (sticky())
        return sticky();
    if (flags != CU_STREAM_WAIT_VALUE_GEQ)
        return CUDA_ERROR_INVALID_VALUE;
    struct fcmd c = {.kind = F_WAIT, .word = (uint32_t *)(uintptr_t)addr, .value = v};
    return push_cmd(s, &c);
}

static CUresult f_module_load(CUmodule *m, const void *image)
{
    ENTER(E_MODULE_LOAD);
    /* the adapter's wait kernel, and nothing else */
    if (!strstr(image, ".entry loom_cuda_wait_geq(") || !strstr(image, "ld.volatile"))
        return CUDA_ERROR_INVALID_PTX;
    *m = &fk.module;
    return CUDA_SUCCESS;
}

static CUresult f_module_unload(CUmodule m)
{
    ENTER(E_MODULE_UNLOAD);
    return m == &fk.module ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult f_module_function(CUfunction *fn, CUmodule m, const char *name)
{
    ENTER(E_MODULE_FUNCTION);
    if (m != &fk.module || strcmp(name, "loom_cuda_wait_geq") != 0)
        return CUDA_ERROR_NOT_FOUND;
    *fn = &fk.wait_fn;
    return CUDA_SUCCESS;
}

static CUresult f_launch(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                         void **extra)
{
    ENTER(E_LAUNCH);
    if (sticky())
        return sticky();
    if (fn != &fk.wait_fn || !params || extra)
        return CUDA_ERROR_INVALID_HANDLE;
    CUdeviceptr addr = *(CUdeviceptr *)params[0];
    uint32_t v = *(uint32_t *)params[1];
    struct fcmd c = {.kind = F_WAIT, .word = (uint32_t *)(uintptr_t)addr, .value = v};
    return push_cmd(s, &c);
}

CUresult cuda_model_launch(CUstream s, void (*fn)(void *), void *arg, unsigned delay_us)
{
    if (sticky())
        return sticky();
    struct fcmd c = {.kind = F_KERNEL, .fn = fn, .arg = arg, .delay_us = delay_us};
    return push_cmd(s, &c);
}

void cuda_model_fail(const char *name, unsigned nth, CUresult err)
{
    pthread_mutex_lock(&fk.lock);
    for (int e = 0; e < E_COUNT; e++)
        if (strcmp(name, cuda_model_entry_names[e]) == 0) {
            fk.fail_nth[e] = nth;
            fk.fail_err[e] = err;
        }
    pthread_mutex_unlock(&fk.lock);
}

void cuda_model_fail_copy(unsigned nth, CUresult err)
{
    pthread_mutex_lock(&fk.lock);
    fk.copy_nth = nth;
    fk.copy_err = err;
    pthread_mutex_unlock(&fk.lock);
}

unsigned cuda_model_calls(const char *name)
{
    unsigned n = 0;
    pthread_mutex_lock(&fk.lock);
    for (int e = 0; e < E_COUNT; e++)
        if (strcmp(name, cuda_model_entry_names[e]) == 0)
            n = fk.calls[e];
    pthread_mutex_unlock(&fk.lock);
    return n;
}

static const struct loom_cuda_driver fake_table = {
    .init = f_init,
    .driver_get_version = f_driver_get_version,
    .get_error_name = f_get_error_name,
    .get_error_string = f_get_error_string,
    .device_get_count = f_device_get_count,
    .device_get = f_device_get,
    .primary_ctx_retain = f_primary_retain,
    .primary_ctx_release = f_primary_release,
    .ctx_get_current = f_ctx_get,
    .ctx_set_current = f_ctx_set,
    .ctx_push_current = f_ctx_push,
    .ctx_pop_current = f_ctx_pop,
    .ctx_get_device = f_ctx_device,
    .stream_get_ctx = f_stream_ctx,
    .stream_create = f_stream_create,
    .stream_destroy = f_stream_destroy,
    .stream_synchronize = f_stream_sync,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .mem_host_register = f_host_register,
    .mem_host_unregister = f_host_unregister,
    .mem_host_get_device_pointer = f_host_devptr,
    .pointer_get_attributes = f_ptr_attrs,
    .memcpy_async = f_memcpy,
    .memcpy_2d_async = f_memcpy2d,
    .stream_write_value32 = f_write32,
    .stream_wait_value32 = f_wait32,
    .module_load_data = f_module_load,
    .module_unload = f_module_unload,
    .module_get_function = f_module_function,
    .launch_kernel = f_launch,
};

const struct loom_cuda_driver *cuda_model_install(void)
{
    loom_cuda_driver_use(&fake_table);
    return &fake_table;
}
