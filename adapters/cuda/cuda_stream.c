/* cuda_stream.c - a Loom stream on a CUDA stream.
 *
 * Ordering (the hooks of loom.h). Each Loom stream owns two 32-bit words
 * in pinned, mapped host memory, on their own cache lines: ready and done.
 * Op k of the stream is numbered v = k (cyclic 32-bit, compared as
 * (int32_t)(a - b) >= 0, as cuStreamWaitValue32's GEQ does).
 *   - at enqueue (the caller's thread) cuStreamWriteValue32 puts v in ready
 *     on the user's stream, after the work that produces the inputs (the
 *     write carries a memory fence for that work), and
 *     cuStreamWaitValue32(done >= v) holds the user's stream until the op
 *     is done. Two driver calls, no host wait.
 *   - the progress thread sees ready >= v with a plain load, runs the op,
 *     and stores v into done: on success and on failure alike, so that the
 *     user's stream never stays blocked (the error is reported through the
 *     communicator and loom_stream_synchronize). The ops of a Loom stream
 *     complete in order (stream.c), so done only moves forward.
 * Where the driver refuses stream memory operations (older drivers, some
 * virtualised GPUs), events replace them: an event recorded at enqueue is
 * polled by the progress thread (cuEventQuery), and a one-thread kernel
 * (PTX below, compiled by the driver at load) holds the user's stream
 * until done >= v. Not cudaLaunchHostFunc: host functions run one at a
 * time on one driver thread, and a collective that waits on other ranks
 * must not occupy it.
 *
 * Staging. Device buffers go through the pinned slots stream.c asks for
 * (stage_alloc: page-aligned memory registered with cuMemHostRegister, so
 * that a same-server peer can also read it with process_vm_readv), copied
 * on two non-blocking streams of the adapter's own, one per direction so
 * that a piece's copy in and another's copy out run at once; an event per
 * slot says when its copy has finished (copy_query).
 *
 * Contexts: the caller's thread gets the stream's context pushed when
 * another one is current (and popped after); the progress thread, which is
 * Loom's, keeps the context of the stream it last served current. */
#include "build_config.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "loom_cuda.h"

#define CUDA_MAX_SLOTS 64  /* LOOM_STAGE_SLOTS's maximum */

/* The fallback's wait: spin (volatile loads from the mapped word) until
 * (int32_t)(*addr - value) >= 0. PTX 6.0 for sm_50, JIT-compiled by the
 * driver for whatever GPU runs it. */
static const char cuda_wait_ptx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry loom_cuda_wait_geq(\n"
    "    .param .u64 loom_cuda_wait_geq_addr,\n"
    "    .param .u32 loom_cuda_wait_geq_value\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<4>;\n"
    "    .reg .b64 %rd<3>;\n"
    "    ld.param.u64 %rd1, [loom_cuda_wait_geq_addr];\n"
    "    ld.param.u32 %r1, [loom_cuda_wait_geq_value];\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "$L_spin:\n"
    "    ld.volatile.global.u32 %r2, [%rd2];\n"
    "    sub.s32 %r3, %r2, %r1;\n"
    "    setp.lt.s32 %p1, %r3, 0;\n"
    "    @%p1 bra $L_spin;\n"
    "    membar.sys;\n"
    "    ret;\n"
    "}\n";
#define CUDA_WAIT_KERNEL "loom_cuda_wait_geq"

struct cuda_stream {
    const struct loom_cuda_driver *d;
    CUstream user;
    CUcontext ctx;
    loom_cuda_sync_t sync;
    /* ready at offset 0, done at 64: written by different sides */
    char *page;
    uint32_t *ready, *done;
    CUdeviceptr ready_d, done_d;
    uint32_t seq;               /* the last op's number (enqueue lock held) */
    /* events mode */
    CUmodule mod;
    CUfunction wait_fn;
    pthread_mutex_t ev_lock;
    CUevent *ev_free;
    size_t nev_free, ev_cap;
    /* staging */
    CUstream copy_in, copy_out; /* device -> host, host -> device */
    CUevent slot_ev[CUDA_MAX_SLOTS];
};

static uint32_t cuda_first_seq; /* tests: start numbering near the wrap */

void loom_cuda_test_first_seq(uint32_t seq);
void loom_cuda_test_first_seq(uint32_t seq)
{
    cuda_first_seq = seq;
}

#define PAGE 4096

/* ---- contexts ------------------------------------------------------------ */

/* Make st's context current on a caller's thread; *pushed says whether
 * ctx_pop must undo it. */
static loom_result_t ctx_push(struct cuda_stream *st, int *pushed)
{
    CUcontext cur = NULL;
    *pushed = 0;
    if (st->d->ctx_get_current(&cur) == CUDA_SUCCESS && cur == st->ctx)
        return LOOM_SUCCESS;
    CUresult rc = st->d->ctx_push_current(st->ctx);
    if (rc != CUDA_SUCCESS)
        return loom_cuda_fail(st->d, rc, "cuCtxPushCurrent");
    *pushed = 1;
    return LOOM_SUCCESS;
}

static void ctx_pop(struct cuda_stream *st, int pushed)
{
    CUcontext c;
    if (pushed)
        st->d->ctx_pop_current(&c);
}

/* The progress thread: keep st's context current. */
static loom_result_t ctx_enter(struct cuda_stream *st)
{
    CUcontext cur = NULL;
    if (st->d->ctx_get_current(&cur) == CUDA_SUCCESS && cur == st->ctx)
        return LOOM_SUCCESS;
    CUresult rc = st->d->ctx_set_current(st->ctx);
    return rc == CUDA_SUCCESS ? LOOM_SUCCESS : loom_cuda_fail(st->d, rc, "cuCtxSetCurrent");
}

/* ---- events (fallback ordering) ------------------------------------------ */

static loom_result_t ev_get(struct cuda_stream *st, CUevent *ev)
{
    pthread_mutex_lock(&st->ev_lock);
    if (st->nev_free) {
        *ev = st->ev_free[--st->nev_free];
        pthread_mutex_unlock(&st->ev_lock);
        return LOOM_SUCCESS;
    }
    pthread_mutex_unlock(&st->ev_lock);
    CUresult rc = st->d->event_create(ev, CU_EVENT_DISABLE_TIMING);
    return rc == CUDA_SUCCESS ? LOOM_SUCCESS : loom_cuda_fail(st->d, rc, "cuEventCreate");
}

static void ev_put(struct cuda_stream *st, CUevent ev)
{
    pthread_mutex_lock(&st->ev_lock);
    if (st->nev_free == st->ev_cap) {
        size_t cap = st->ev_cap ? 2 * st->ev_cap : 16;
        CUevent *p = realloc(st->ev_free, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&st->ev_lock);
            st->d->event_destroy(ev);
            return;
        }
        st->ev_free = p;
        st->ev_cap = cap;
    }
    st->ev_free[st->nev_free++] = ev;
    pthread_mutex_unlock(&st->ev_lock);
}

/* ---- ordering hooks ------------------------------------------------------ */

static loom_result_t h_mark_ready(void *u, void **mark)
{
    struct cuda_stream *st = u;
    int pushed;
    loom_result_t res = ctx_push(st, &pushed);
    if (res < 0)
        return res;
    uint32_t v = st->seq + 1;
    CUresult rc;
    if (st->sync == LOOM_CUDA_SYNC_MEMOPS) {
        rc = st->d->stream_write_value32(st->user, st->ready_d, v,
                                         CU_STREAM_WRITE_VALUE_DEFAULT);
        if (rc != CUDA_SUCCESS)
            res = loom_cuda_fail(st->d, rc, "cuStreamWriteValue32");
        else
            *mark = (void *)(uintptr_t)v;
    } else {
        CUevent ev;
        res = ev_get(st, &ev);
        if (res == LOOM_SUCCESS) {
            rc = st->d->event_record(ev, st->user);
            if (rc != CUDA_SUCCESS) {
                res = loom_cuda_fail(st->d, rc, "cuEventRecord");
                ev_put(st, ev);
            } else {
                *mark = ev;
            }
        }
    }
    if (res == LOOM_SUCCESS)
        st->seq = v;
    ctx_pop(st, pushed);
    return res;
}

static loom_result_t h_add_wait(void *u, void **handle)
{
    struct cuda_stream *st = u;
    int pushed;
    loom_result_t res = ctx_push(st, &pushed);
    if (res < 0)
        return res;
    uint32_t v = st->seq; /* the mark_ready just before, same lock */
    CUresult rc;
    if (st->sync == LOOM_CUDA_SYNC_MEMOPS) {
        rc = st->d->stream_wait_value32(st->user, st->done_d, v, CU_STREAM_WAIT_VALUE_GEQ);
        if (rc != CUDA_SUCCESS)
            res = loom_cuda_fail(st->d, rc, "cuStreamWaitValue32");
    } else {
        CUdeviceptr addr = st->done_d;
        void *params[] = {&addr, &v};
        rc = st->d->launch_kernel(st->wait_fn, 1, 1, 1, 1, 1, 1, 0, st->user, params, NULL);
        if (rc != CUDA_SUCCESS)
            res = loom_cuda_fail(st->d, rc, "cuLaunchKernel (" CUDA_WAIT_KERNEL ")");
    }
    if (res == LOOM_SUCCESS)
        *handle = (void *)(uintptr_t)v;
    ctx_pop(st, pushed);
    return res;
}

static loom_result_t h_query_ready(void *u, void *mark)
{
    struct cuda_stream *st = u;
    if (st->sync == LOOM_CUDA_SYNC_MEMOPS) {
        uint32_t v = (uint32_t)(uintptr_t)mark;
        uint32_t cur = __atomic_load_n(st->ready, __ATOMIC_ACQUIRE);
        return (int32_t)(cur - v) >= 0 ? LOOM_SUCCESS : LOOM_NOT_READY;
    }
    loom_result_t res = ctx_enter(st);
    if (res < 0)
        return res;
    CUresult rc = st->d->event_query((CUevent)mark);
    if (rc == CUDA_SUCCESS)
        return LOOM_SUCCESS;
    if (rc == CUDA_ERROR_NOT_READY)
        return LOOM_NOT_READY;
    return loom_cuda_fail(st->d, rc, "cuEventQuery (inputs ready)");
}

static loom_result_t h_wait_ready(void *u, void *mark)
{
    loom_result_t res;
    while ((res = h_query_ready(u, mark)) == LOOM_NOT_READY)
        sched_yield();
    return res;
}

static loom_result_t h_release_mark(void *u, void *mark)
{
    struct cuda_stream *st = u;
    if (st->sync == LOOM_CUDA_SYNC_EVENTS && mark)
        ev_put(st, (CUevent)mark);
    return LOOM_SUCCESS;
}

/* Also on failure: the user's stream must not stay blocked. */
static loom_result_t h_complete(void *u, void *handle, loom_result_t status)
{
    struct cuda_stream *st = u;
    __atomic_store_n(st->done, (uint32_t)(uintptr_t)handle, __ATOMIC_SEQ_CST);
    return LOOM_SUCCESS;
}

/* ---- staging hooks ------------------------------------------------------- */

/* Device (and managed) memory is staged; pinned and ordinary host memory
 * is used where it is. When the driver cannot tell, the buffer is staged:
 * with unified addressing the copies reach host memory too, while the CPU
 * would fault on device memory. */
static int h_is_device_ptr(void *u, const void *p)
{
    struct cuda_stream *st = u;
    int pushed;
    if (ctx_push(st, &pushed) < 0)
        return 1;
    unsigned int type = 0, managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[2] = {&type, &managed};
    CUresult rc = st->d->pointer_get_attributes(2, attrs, data, (CUdeviceptr)(uintptr_t)p);
    ctx_pop(st, pushed);
    if (rc != CUDA_SUCCESS)
        return 1;
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED || (managed & 0xff);
}

static loom_result_t h_stage_alloc(void *u, size_t bytes, void **host)
{
    struct cuda_stream *st = u;
    loom_result_t res = ctx_enter(st);
    if (res < 0)
        return res;
    CUresult rc;
    if (!st->copy_in && (rc = st->d->stream_create(&st->copy_in, CU_STREAM_NON_BLOCKING)))
        return loom_cuda_fail(st->d, rc, "cuStreamCreate (copies from the device)");
    if (!st->copy_out && (rc = st->d->stream_create(&st->copy_out, CU_STREAM_NON_BLOCKING)))
        return loom_cuda_fail(st->d, rc, "cuStreamCreate (copies to the device)");
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return loom_cuda_error(LOOM_ERROR_NO_MEMORY, "mmap of %zu bytes of staging memory "
                               "failed", bytes);
    rc = st->d->mem_host_register(p, bytes, CU_MEMHOSTREGISTER_PORTABLE);
    if (rc != CUDA_SUCCESS) {
        munmap(p, bytes);
        return loom_cuda_fail(st->d, rc, "cuMemHostRegister (staging)");
    }
    *host = p;
    return LOOM_SUCCESS;
}

static loom_result_t h_stage_free(void *u, void *host, size_t bytes)
{
    struct cuda_stream *st = u;
    int pushed;
    loom_result_t res = ctx_push(st, &pushed);
    if (res == LOOM_SUCCESS) {
        /* no copy may still be running into it (stage.c waits for every
         * copy it started; this covers a failed one) */
        if (st->copy_in)
            st->d->stream_synchronize(st->copy_in);
        if (st->copy_out)
            st->d->stream_synchronize(st->copy_out);
        CUresult rc = st->d->mem_host_unregister(host);
        if (rc != CUDA_SUCCESS)
            res = loom_cuda_fail(st->d, rc, "cuMemHostUnregister (staging)");
        ctx_pop(st, pushed);
    }
    /* memory the driver may still count as registered stays mapped (a
     * leak), so that no later mapping at that address trips over it */
    if (res == LOOM_SUCCESS)
        munmap(host, bytes);
    return res;
}

static loom_result_t h_copy_async(void *u, int slot, int to_device, void *dst, size_t dpitch,
                                  const void *src, size_t spitch, size_t width, size_t rows)
{
    struct cuda_stream *st = u;
    if (slot < 0 || slot >= CUDA_MAX_SLOTS)
        return loom_cuda_error(LOOM_ERROR_INVALID_ARGUMENT, "staging slot %d out of range",
                               slot);
    loom_result_t res = ctx_enter(st);
    if (res < 0)
        return res;
    CUstream cs = to_device ? st->copy_out : st->copy_in;
    CUresult rc;
    if (!st->slot_ev[slot] &&
        (rc = st->d->event_create(&st->slot_ev[slot], CU_EVENT_DISABLE_TIMING)))
        return loom_cuda_fail(st->d, rc, "cuEventCreate (staging)");
    /* cuMemcpy2D's pitches are limited (2 GiB); longer ones row by row */
    if (rows == 1 || dpitch > INT32_MAX || spitch > INT32_MAX) {
        for (size_t i = 0; i < rows; i++) {
            rc = st->d->memcpy_async((CUdeviceptr)(uintptr_t)((char *)dst + i * dpitch),
                                     (CUdeviceptr)(uintptr_t)((const char *)src + i * spitch),
                                     width, cs);
            if (rc != CUDA_SUCCESS) {
                res = loom_cuda_fail(st->d, rc, "cuMemcpyAsync");
                if (i) /* the rows started must end before Loom moves on */
                    st->d->stream_synchronize(cs);
                return res;
            }
        }
    } else {
        CUDA_MEMCPY2D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
        c.srcDevice = (CUdeviceptr)(uintptr_t)src;
        c.srcPitch = spitch;
        c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
        c.dstPitch = dpitch;
        c.WidthInBytes = width;
        c.Height = rows;
        rc = st->d->memcpy_2d_async(&c, cs);
        if (rc != CUDA_SUCCESS)
            return loom_cuda_fail(st->d, rc, "cuMemcpy2DAsync");
    }
    rc = st->d->event_record(st->slot_ev[slot], cs);
    if (rc != CUDA_SUCCESS) {
        /* the copy was started but cannot be waited for: wait now, since
         * Loom will not ask about a copy that returned an error */
        res = loom_cuda_fail(st->d, rc, "cuEventRecord (staging)");
        st->d->stream_synchronize(cs);
        return res;
    }
    return LOOM_SUCCESS;
}

static loom_result_t h_copy_query(void *u, int slot)
{
    struct cuda_stream *st = u;
    if (slot < 0 || slot >= CUDA_MAX_SLOTS || !st->slot_ev[slot])
        return loom_cuda_error(LOOM_ERROR_INTERNAL, "staging slot %d has no copy", slot);
    loom_result_t res = ctx_enter(st);
    if (res < 0)
        return res;
    CUresult rc = st->d->event_query(st->slot_ev[slot]);
    if (rc == CUDA_SUCCESS)
        return LOOM_SUCCESS;
    if (rc == CUDA_ERROR_NOT_READY)
        return LOOM_NOT_READY;
    return loom_cuda_fail(st->d, rc, "cuEventQuery (staging copy)");
}

static const char *h_last_error(void *u)
{
    return loom_cuda_last_error();
}

/* ---- life ------------------------------------------------------------------ */

/* Free what st holds. The user's stream may still have our operations
 * ahead of it (waits that are all satisfied, or a failed creation's
 * probe): it passes them before the words go. */
static void stream_free(struct cuda_stream *st)
{
    int pushed = 0;
    int ok = st->ctx && ctx_push(st, &pushed) == LOOM_SUCCESS;
    if (ok) {
        if (st->page)
            st->d->stream_synchronize(st->user);
        if (st->copy_in) {
            st->d->stream_synchronize(st->copy_in);
            st->d->stream_destroy(st->copy_in);
        }
        if (st->copy_out) {
            st->d->stream_synchronize(st->copy_out);
            st->d->stream_destroy(st->copy_out);
        }
        for (int k = 0; k < CUDA_MAX_SLOTS; k++)
            if (st->slot_ev[k])
                st->d->event_destroy(st->slot_ev[k]);
        for (size_t i = 0; i < st->nev_free; i++)
            st->d->event_destroy(st->ev_free[i]);
        if (st->mod)
            st->d->module_unload(st->mod);
        if (st->page && st->d->mem_host_unregister(st->page) == CUDA_SUCCESS)
            munmap(st->page, PAGE); /* else left mapped, as in h_stage_free */
        ctx_pop(st, pushed);
    }
    free(st->ev_free);
    pthread_mutex_destroy(&st->ev_lock);
    free(st);
}

static loom_result_t h_destroy(void *u)
{
    stream_free(u);
    return LOOM_SUCCESS;
}

/* Stream memory operations: there (driver 11.7+) and accepted on this
 * stream? Two no-op operations tell (the words hold the first number). */
static loom_result_t probe_memops(struct cuda_stream *st)
{
    if (!st->d->stream_write_value32 || !st->d->stream_wait_value32)
        return loom_cuda_error(LOOM_ERROR_NOT_SUPPORTED, "stream memory operations: the "
                               "driver has no cuStreamWriteValue32_v2 (CUDA < 11.7)");
    CUresult rc = st->d->stream_write_value32(st->user, st->ready_d, st->seq,
                                              CU_STREAM_WRITE_VALUE_DEFAULT);
    if (rc != CUDA_SUCCESS)
        return loom_cuda_fail(st->d, rc, "cuStreamWriteValue32");
    rc = st->d->stream_wait_value32(st->user, st->done_d, st->seq, CU_STREAM_WAIT_VALUE_GEQ);
    if (rc != CUDA_SUCCESS)
        return loom_cuda_fail(st->d, rc, "cuStreamWaitValue32");
    return LOOM_SUCCESS;
}

static loom_result_t setup_events(struct cuda_stream *st)
{
    CUresult rc = st->d->module_load_data(&st->mod, cuda_wait_ptx);
    if (rc != CUDA_SUCCESS) {
        st->mod = NULL;
        return loom_cuda_fail(st->d, rc, "cuModuleLoadData (the wait kernel's PTX)");
    }
    rc = st->d->module_get_function(&st->wait_fn, st->mod, CUDA_WAIT_KERNEL);
    if (rc != CUDA_SUCCESS)
        return loom_cuda_fail(st->d, rc, "cuModuleGetFunction (" CUDA_WAIT_KERNEL ")");
    return LOOM_SUCCESS;
}

static loom_result_t setup(struct cuda_stream *st, loom_cuda_sync_t want)
{
    CUresult rc;
    st->page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (st->page == MAP_FAILED) {
        st->page = NULL;
        return loom_cuda_error(LOOM_ERROR_NO_MEMORY, "mmap of the stream's words failed");
    }
    rc = st->d->mem_host_register(st->page, PAGE,
                                  CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (rc != CUDA_SUCCESS) {
        munmap(st->page, PAGE);
        st->page = NULL;
        return loom_cuda_fail(st->d, rc, "cuMemHostRegister (the stream's words)");
    }
    st->ready = (uint32_t *)st->page;
    st->done = (uint32_t *)(st->page + 64);
    st->seq = cuda_first_seq;
    *st->ready = *st->done = st->seq;
    CUdeviceptr base;
    rc = st->d->mem_host_get_device_pointer(&base, st->page, 0);
    if (rc != CUDA_SUCCESS)
        return loom_cuda_fail(st->d, rc, "cuMemHostGetDevicePointer (the stream's words)");
    st->ready_d = base;
    st->done_d = base + 64;
    loom_result_t res = LOOM_ERROR_NOT_SUPPORTED;
    if (want != LOOM_CUDA_SYNC_EVENTS) {
        res = probe_memops(st);
        if (res == LOOM_SUCCESS) {
            st->sync = LOOM_CUDA_SYNC_MEMOPS;
            return LOOM_SUCCESS;
        }
        if (want == LOOM_CUDA_SYNC_MEMOPS || res != LOOM_ERROR_NOT_SUPPORTED)
            return res;
    }
    st->sync = LOOM_CUDA_SYNC_EVENTS;
    return setup_events(st);
}

LOOM_CUDA_API loom_result_t loom_stream_create_cuda_ex(struct CUstream_st *stream,
                                                       const loom_cuda_options_t *opts,
                                                       loom_stream_t *out,
                                                       loom_cuda_sync_t *chosen)
{
    if (!out)
        return loom_cuda_error(LOOM_ERROR_INVALID_ARGUMENT,
                               "loom_stream_create_cuda: out is NULL");
    loom_cuda_sync_t want = LOOM_CUDA_SYNC_AUTO;
    if (opts) {
        if (opts->struct_size < sizeof *opts || opts->struct_size > 4096)
            return loom_cuda_error(LOOM_ERROR_INVALID_ARGUMENT, "loom_stream_create_cuda_ex: "
                                   "opts->struct_size %zu is not a loom_cuda_options_t size",
                                   opts->struct_size);
        want = opts->sync;
        if ((unsigned)want > LOOM_CUDA_SYNC_EVENTS)
            return loom_cuda_error(LOOM_ERROR_INVALID_ARGUMENT, "loom_stream_create_cuda_ex: "
                                   "sync %d is not a loom_cuda_sync_t", (int)want);
    }
    const struct loom_cuda_driver *d;
    loom_result_t res = loom_cuda_driver(&d);
    if (res < 0)
        return res;
    struct cuda_stream *st = calloc(1, sizeof *st);
    if (!st)
        return loom_cuda_error(LOOM_ERROR_NO_MEMORY, "loom_stream_create_cuda: out of memory");
    st->d = d;
    st->user = (CUstream)stream;
    pthread_mutex_init(&st->ev_lock, NULL);
    CUresult rc = d->stream_get_ctx(st->user, &st->ctx);
    if (rc != CUDA_SUCCESS) {
        res = loom_cuda_fail(d, rc, "cuStreamGetCtx");
        if (rc == CUDA_ERROR_INVALID_CONTEXT)
            loom_cuda_error(res, "cuStreamGetCtx: no current CUDA context for the default "
                            "stream: select a device first (cudaSetDevice or "
                            "loom_cuda_set_device)");
        st->ctx = NULL;
        stream_free(st);
        return res;
    }
    int pushed;
    res = ctx_push(st, &pushed);
    if (res == LOOM_SUCCESS) {
        res = setup(st, want);
        ctx_pop(st, pushed);
    }
    if (res < 0) {
        stream_free(st);
        return res;
    }
    loom_stream_hooks h = {
        .struct_size = sizeof h,
        .name = "cuda",
        .mark_ready = h_mark_ready,
        .wait_ready = h_wait_ready,
        .release_mark = h_release_mark,
        .add_wait = h_add_wait,
        .complete = h_complete,
        .is_device_ptr = h_is_device_ptr,
        .destroy = h_destroy,
        .query_ready = h_query_ready,
        .stage_alloc = h_stage_alloc,
        .stage_free = h_stage_free,
        .copy_async = h_copy_async,
        .copy_query = h_copy_query,
        .last_error = h_last_error,
    };
    res = loom_stream_create_hooks(&h, st, out);
    if (res < 0) {
        loom_cuda_error(res, "loom_stream_create_hooks: %s", loom_get_error_string(NULL));
        stream_free(st);
        return res;
    }
    if (chosen)
        *chosen = st->sync;
    return LOOM_SUCCESS;
}

LOOM_CUDA_API loom_result_t loom_stream_create_cuda(struct CUstream_st *stream,
                                                    loom_stream_t *out)
{
    return loom_stream_create_cuda_ex(stream, NULL, out, NULL);
}

LOOM_CUDA_API const char *loom_cuda_error_string(void)
{
    return loom_cuda_last_error();
}
