/* stage.c - device buffers staged through host memory, in pieces.
 *
 * The algorithms read and write host memory. A call on an adapter's stream
 * whose buffers are device memory therefore runs as npieces calls of the
 * same collective, piece i on the element range [a, a + len) of every block
 * of its buffers (allgather's receive buffer and reduce_scatter's send
 * buffer hold one block per rank; the others one block). Cutting by element
 * range rather than by rank block keeps every piece a valid call of the same
 * kind, whatever the algorithm, so nothing below this file knows about
 * staging; each piece takes its own sequence number (the enqueue reserved
 * them), so peers match pieces as they match calls.
 *
 * A piece lives in one slot of the stream's staging pool, laid out as the
 * piece's in-place call: the receive side at offset 0 and the send side
 * where an in-place call would put it (allgather: this rank's block;
 * reduce_scatter: the whole send image, the result at this rank's block).
 * So one slot serves both sides, and a device-to-device call runs in place.
 *
 * The pipeline, with K slots: before piece i runs, the device-to-host copies
 * of the next pieces are started into free slots (up to K - 1 ahead); piece
 * i runs on the network while they proceed; then its host-to-device copy is
 * started and the loop moves on. So the copy in of piece i+1, the transfer
 * of piece i and the copy out of piece i-1 overlap, and a slot is reused
 * once its copy out has finished. The pool is allocated on the first staged
 * call of the stream and kept (a larger one replaces it only when a call
 * needs larger slots than LOOM_STAGE_CHUNK, e.g. one element per rank of
 * many ranks).
 *
 * Sides that need no copy: a host buffer that an algorithm can use where it
 * is (DIRECT), or a buffer whose content does not matter on this rank
 * (NONE: broadcast's buffer at a non-root before the call and at the root
 * after it; reduce's receive buffer at a non-root). A host buffer of the
 * blocked side cut into several pieces is packed into the slot by the CPU
 * (PACK). */
#include "build_config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll.h"
#include "base/config.h"
#include "stream.h"
#include "base/util.h"

enum stage_where { AT_ALL = 0, AT_ROOT, AT_NONROOT };

/* How each kind's buffers are laid out, and on which ranks each side's
 * content matters. A kind without a row cannot be staged. */
struct stage_layout {
    unsigned char staged;
    unsigned char send_blocked, recv_blocked; /* one block per rank */
    unsigned char send_where, recv_where;
};

static const struct stage_layout stage_layouts[LOOM_OP_KIND_COUNT] = {
    [LOOM_OP_ALLREDUCE] = {.staged = 1},
    [LOOM_OP_ALLGATHER] = {.staged = 1, .recv_blocked = 1},
    [LOOM_OP_REDUCE_SCATTER] = {.staged = 1, .send_blocked = 1},
    /* the root's buffer is only read, the others' only written */
    [LOOM_OP_BROADCAST] = {.staged = 1, .send_where = AT_ROOT, .recv_where = AT_NONROOT},
    [LOOM_OP_REDUCE] = {.staged = 1, .recv_where = AT_ROOT},
};

enum stage_side { SIDE_NONE, SIDE_DIRECT, SIDE_DEV, SIDE_PACK };

static int side_matters(unsigned where, int is_root)
{
    return where == AT_ALL || (where == AT_ROOT) == !!is_root;
}

static int is_dev(struct loom_stream *s, const void *p)
{
    return p && s->hooks.is_device_ptr(s->user, p);
}

/* Elements per piece: LOOM_STAGE_CHUNK bytes of the larger side. The same
 * on every rank (kind, dtype, rank count and configuration only). */
static uint64_t piece_elems(const struct loom_comm *comm, const struct loom_op *op,
                            const struct stage_layout *l)
{
    size_t e = loom_dtype_size(op->dtype);
    size_t mult = (l->send_blocked || l->recv_blocked) ? (size_t)comm->nranks : 1;
    uint64_t n = loom_config()->stage_chunk / (e * mult);
    return n ? n : 1;
}

loom_result_t loom_stage_plan(struct loom_stream *s, const struct loom_comm *comm,
                              struct loom_op *op, char *err, size_t errlen)
{
    op->stage_dev = 0;
    op->npieces = 1;
    if (!s->hooks.is_device_ptr || op->kind == LOOM_OP_BARRIER)
        return LOOM_SUCCESS;
    const char *name = loom_op_kind_name(op->kind);
    if (op->kind == LOOM_OP_GROUP) {
        /* a group's calls run together, not in pieces: host buffers only */
        for (int i = 0; i < op->nsubs; i++)
            if (is_dev(s, op->subs[i].sendbuf) || is_dev(s, op->subs[i].recvbuf)) {
                snprintf(err, errlen, "group: call %d of %d passes a device buffer, "
                         "which a group on stream \"%s\" cannot stage", i + 1, op->nsubs,
                         s->hooks.name);
                return LOOM_ERROR_NOT_SUPPORTED;
            }
        return LOOM_SUCCESS;
    }
    if (op->count == 0 && op->kind != LOOM_OP_ALLTOALLV) /* its counts are apart */
        return LOOM_SUCCESS;
    if ((unsigned)op->kind >= LOOM_OP_KIND_COUNT || !stage_layouts[op->kind].staged) {
        if (is_dev(s, op->sendbuf) || is_dev(s, op->recvbuf)) {
            snprintf(err, errlen, "%s: device buffers cannot be staged for this call "
                     "on stream \"%s\"", name, s->hooks.name);
            return LOOM_ERROR_NOT_SUPPORTED;
        }
        return LOOM_SUCCESS;
    }
    const struct stage_layout *l = &stage_layouts[op->kind];
    /* any device buffer the call passes, also one whose content does not
     * matter on this rank (reduce's recvbuf at a non-root): every rank
     * that passes the same kinds of memory must cut the call the same way */
    unsigned dev = is_dev(s, op->sendbuf) ? 1 : 0;
    if (op->recvbuf == op->sendbuf ? dev != 0 : is_dev(s, op->recvbuf)) /* in place: asked once */
        dev |= 2;
    if (!dev)
        return LOOM_SUCCESS;
    if (!s->hooks.copy_async && !(s->hooks.copy_to_host && s->hooks.copy_to_device)) {
        snprintf(err, errlen, "%s: stream \"%s\" has device buffers but no copy hooks",
                 name, s->hooks.name);
        return LOOM_ERROR_NOT_SUPPORTED;
    }
    uint64_t per = piece_elems(comm, op, l);
    uint64_t n = (op->count + per - 1) / per;
    if (n > UINT32_MAX / 2) {
        snprintf(err, errlen, "%s: %llu elements make %llu pieces of LOOM_STAGE_CHUNK "
                 "(%zu bytes); raise LOOM_STAGE_CHUNK", name,
                 (unsigned long long)op->count, (unsigned long long)n,
                 loom_config()->stage_chunk);
        return LOOM_ERROR_NOT_SUPPORTED;
    }
    op->stage_dev = dev;
    op->npieces = (uint32_t)n;
    return LOOM_SUCCESS;
}

/* ---- the pool ------------------------------------------------------------- */

void loom_stage_pool_free(struct loom_stream *s)
{
    struct loom_stage_pool *p = &s->pool;
    if (p->base) {
        if (p->async)
            s->hooks.stage_free(s->user, p->base, p->bytes);
        else
            free(p->base);
    }
    free(p->busy);
    memset(p, 0, sizeof *p);
}

/* A pool whose slots hold slot_bytes; the old one is kept when it does. */
static loom_result_t pool_ensure(struct loom_stream *s, struct loom_comm *comm,
                                 const struct loom_op *op, size_t slot_bytes)
{
    struct loom_stage_pool *p = &s->pool;
    int nslots = loom_config()->stage_slots;
    slot_bytes = (slot_bytes + 4095) & ~(size_t)4095;
    if (slot_bytes < loom_config()->stage_chunk)
        slot_bytes = (loom_config()->stage_chunk + 4095) & ~(size_t)4095;
    if (p->base && p->slot_bytes >= slot_bytes && p->nslots == nslots)
        return LOOM_SUCCESS;
    loom_stage_pool_free(s);
    p->async = s->hooks.copy_async != NULL;
    p->bytes = slot_bytes * (size_t)nslots;
    p->busy = calloc((size_t)nslots, 1);
    loom_result_t res = LOOM_SUCCESS;
    void *base = NULL;
    if (!p->busy)
        res = LOOM_ERROR_NO_MEMORY;
    else if (p->async)
        res = s->hooks.stage_alloc(s->user, p->bytes, &base);
    else if (!(base = malloc(p->bytes)))
        res = LOOM_ERROR_NO_MEMORY;
    if (res < 0) {
        loom_comm_set_error(comm, res, "%s #%llu: cannot get %zu bytes of staging memory "
                            "for stream \"%s\": %s", loom_op_kind_name(op->kind),
                            (unsigned long long)op->seq, p->bytes, s->hooks.name,
                            p->async && p->busy ? loom_stream_hook_error(s)
                                                : "out of memory");
        free(p->busy);
        memset(p, 0, sizeof *p);
        return res;
    }
    p->base = base;
    p->slot_bytes = slot_bytes;
    p->nslots = nslots;
    LOOM_INFO(LOOM_SUB_STREAM, "stream \"%s\": staging pool of %d x %zu bytes (%s)",
              s->hooks.name, nslots, slot_bytes, p->async ? "pinned, async copies"
                                                          : "synchronous copies");
    return LOOM_SUCCESS;
}

/* ---- one staged call ---------------------------------------------------- */

struct stage_run {
    struct loom_stream *s;
    struct loom_comm *comm;
    struct loom_op *op;
    const struct stage_layout *l;
    enum stage_side send, recv;
    size_t e;                   /* element size                           */
    size_t nblocks;             /* blocks of the blocked side (nranks)    */
    uint64_t per;               /* elements per piece                     */
    uint32_t failed_piece;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static char *slot_base(struct stage_run *r, uint32_t piece)
{
    struct loom_stage_pool *p = &r->s->pool;
    return p->base + (size_t)(piece % (uint32_t)p->nslots) * p->slot_bytes;
}

static loom_result_t stage_fail(struct stage_run *r, uint32_t piece, loom_result_t res,
                                const char *what)
{
    struct loom_op *op = r->op;
    loom_comm_set_error(r->comm, res, "%s #%llu: stream \"%s\", piece %u of %u: %s: %s",
                        loom_op_kind_name(op->kind), (unsigned long long)op->seq,
                        r->s->hooks.name, piece + 1, op->npieces, what,
                        loom_stream_hook_error(r->s));
    return res;
}

/* Has slot k's last copy finished? With block set, wait until it has
 * (copies are short: spin, then yield). */
static loom_result_t slot_wait(struct stage_run *r, int k, int block)
{
    struct loom_stage_pool *p = &r->s->pool;
    if (!p->busy[k])
        return LOOM_SUCCESS;
    for (unsigned n = 0;; n++) {
        loom_result_t res = r->s->hooks.copy_query(r->s->user, k);
        if (res != LOOM_NOT_READY) {
            if (res == LOOM_SUCCESS)
                p->busy[k] = 0;
            return res;
        }
        if (!block)
            return LOOM_NOT_READY;
        if (n < 256)
            cpu_relax();
        else
            sched_yield();
    }
}

/* Copy rows x width bytes; contiguous rows go as one. Through the async
 * hook (slot k marked busy) or, for synchronous hooks, row by row; a PACK
 * side is copied by the CPU. */
static loom_result_t copy_rows(struct stage_run *r, int k, enum stage_side side,
                               int to_device, char *dst, size_t dpitch, const char *src,
                               size_t spitch, size_t width, size_t rows)
{
    struct loom_stream *s = r->s;
    if (rows > 1 && dpitch == width && spitch == width) {
        width *= rows;
        rows = 1;
    }
    if (side == SIDE_PACK) {
        for (size_t i = 0; i < rows; i++)
            memcpy(dst + i * dpitch, src + i * spitch, width);
        return LOOM_SUCCESS;
    }
    if (s->pool.async) {
        loom_result_t res = s->hooks.copy_async(s->user, k, to_device, dst, dpitch, src,
                                                spitch, width, rows);
        if (res == LOOM_SUCCESS)
            s->pool.busy[k] = 1;
        return res;
    }
    for (size_t i = 0; i < rows; i++) {
        loom_result_t res = to_device
            ? s->hooks.copy_to_device(s->user, dst + i * dpitch, src + i * spitch, width)
            : s->hooks.copy_to_host(s->user, dst + i * dpitch, src + i * spitch, width);
        if (res < 0)
            return res;
    }
    return LOOM_SUCCESS;
}

/* Piece i: its first element and length. */
static void piece_range(const struct stage_run *r, uint32_t i, uint64_t *a, uint64_t *len)
{
    *a = (uint64_t)i * r->per;
    *len = r->op->count - *a < r->per ? r->op->count - *a : r->per;
}

/* Byte offsets of the send and receive sides in a slot (the in-place
 * layout of the piece's call). */
static size_t send_off(const struct stage_run *r, uint64_t len)
{
    return r->l->recv_blocked ? (size_t)r->comm->rank * (size_t)len * r->e : 0;
}
static size_t recv_off(const struct stage_run *r, uint64_t len)
{
    return r->l->send_blocked ? (size_t)r->comm->rank * (size_t)len * r->e : 0;
}

/* Start bringing piece i's input into its slot. */
static loom_result_t piece_fill(struct stage_run *r, uint32_t i)
{
    if (r->send != SIDE_DEV && r->send != SIDE_PACK)
        return LOOM_SUCCESS;
    uint64_t a, len;
    piece_range(r, i, &a, &len);
    size_t w = (size_t)len * r->e, pitch = (size_t)r->op->count * r->e;
    char *slot = slot_base(r, i);
    const char *src = (const char *)r->op->sendbuf + (size_t)a * r->e;
    int k = (int)(i % (uint32_t)r->s->pool.nslots);
    if (r->l->send_blocked)
        return copy_rows(r, k, r->send, 0, slot, w, src, pitch, w, r->nblocks);
    return copy_rows(r, k, r->send, 0, slot + send_off(r, len), w, src, w, w, 1);
}

/* Start taking piece i's result out of its slot. */
static loom_result_t piece_drain(struct stage_run *r, uint32_t i)
{
    if (r->recv != SIDE_DEV && r->recv != SIDE_PACK)
        return LOOM_SUCCESS;
    uint64_t a, len;
    piece_range(r, i, &a, &len);
    size_t w = (size_t)len * r->e, pitch = (size_t)r->op->count * r->e;
    char *slot = slot_base(r, i);
    char *dst = (char *)r->op->recvbuf + (size_t)a * r->e;
    int k = (int)(i % (uint32_t)r->s->pool.nslots);
    if (r->l->recv_blocked)
        return copy_rows(r, k, r->recv, 1, dst, pitch, slot, w, w, r->nblocks);
    return copy_rows(r, k, r->recv, 1, dst, w, slot + recv_off(r, len), w, w, 1);
}

/* Run piece i as a call of its own. */
static loom_result_t piece_run(struct stage_run *r, uint32_t i)
{
    const struct loom_op *op = r->op;
    uint64_t a, len;
    piece_range(r, i, &a, &len);
    char *slot = slot_base(r, i);
    struct loom_op sub = *op;
    sub.seq = op->seq + i;
    sub.count = len;
    sub.stage_dev = 0;
    sub.npieces = 1;
    sub.next = NULL;
    size_t off = (size_t)a * r->e;
    char *sp = NULL, *rp = NULL;
    switch (r->send) {
    case SIDE_DEV:
    case SIDE_PACK: sp = slot + send_off(r, len); break;
    case SIDE_DIRECT: sp = (char *)op->sendbuf + (r->l->send_blocked ? 0 : off); break;
    case SIDE_NONE: break;
    }
    switch (r->recv) {
    case SIDE_DEV:
    case SIDE_PACK: rp = slot + recv_off(r, len); break;
    case SIDE_DIRECT: rp = (char *)op->recvbuf + (r->l->recv_blocked ? 0 : off); break;
    case SIDE_NONE: break;
    }
    /* broadcast is one buffer: the side that does not matter is the other */
    if (op->kind == LOOM_OP_BROADCAST) {
        if (!sp)
            sp = rp;
        if (!rp)
            rp = sp;
    }
    sub.sendbuf = sp;
    sub.recvbuf = rp;
    return loom_coll_run(r->comm, &sub);
}

static enum stage_side side_mode(int matters, int dev, int blocked, uint32_t npieces)
{
    if (!matters)
        return SIDE_NONE;
    if (dev)
        return SIDE_DEV;
    return blocked && npieces > 1 ? SIDE_PACK : SIDE_DIRECT;
}

/* After a failure: wait (bounded) for the copies still running, which
 * write into the pool or into the user's buffers. A pool whose copies do
 * not finish is dropped, not freed: the device may still write into it. */
static void drain_all(struct stage_run *r)
{
    struct loom_stage_pool *p = &r->s->pool;
    uint64_t until = loom_now_ns() + 10000000000ull;
    for (int k = 0; k < p->nslots; k++) {
        while (p->busy[k]) {
            loom_result_t res = r->s->hooks.copy_query(r->s->user, k);
            if (res != LOOM_NOT_READY)
                p->busy[k] = 0;
            else if (loom_now_ns() > until)
                break;
            else
                sched_yield();
        }
        if (p->busy[k]) {
            LOOM_WARN(LOOM_SUB_STREAM, "stream \"%s\": a staging copy did not finish in "
                      "10 s after a failure; its %zu-byte pool is abandoned",
                      r->s->hooks.name, p->bytes);
            free(p->busy);
            memset(p, 0, sizeof *p);
            return;
        }
    }
}

loom_result_t loom_stage_run(struct loom_stream *s, struct loom_comm *comm,
                             struct loom_op *op)
{
    const struct stage_layout *l = &stage_layouts[op->kind];
    int root = op->root == comm->rank;
    struct stage_run r = {
        .s = s,
        .comm = comm,
        .op = op,
        .l = l,
        .e = loom_dtype_size(op->dtype),
        .nblocks = (size_t)comm->nranks,
        .per = piece_elems(comm, op, l),
    };
    r.send = side_mode(side_matters(l->send_where, root), op->stage_dev & 1,
                       l->send_blocked, op->npieces);
    r.recv = side_mode(side_matters(l->recv_where, root), op->stage_dev & 2,
                       l->recv_blocked, op->npieces);
    size_t mult = (l->send_blocked || l->recv_blocked) ? r.nblocks : 1;
    loom_result_t res = pool_ensure(s, comm, op, (size_t)r.per * r.e * mult);
    if (res < 0)
        return res;
    uint32_t n = op->npieces, issued = 0, k = (uint32_t)s->pool.nslots;
    for (uint32_t i = 0; i < n; i++) {
        /* start the copies in of the pieces ahead whose slots are free;
         * the slots of pieces i and i+1 are waited for, so that piece
         * i+1's copy in runs while piece i is on the network (with three
         * slots or more, piece i-1's copy out runs then too) */
        while (issued < n && issued < i + k) {
            res = slot_wait(&r, (int)(issued % k), issued <= i + 1);
            if (res == LOOM_NOT_READY)
                break;
            if (res < 0) {
                stage_fail(&r, issued - (issued >= k ? k : 0), res,
                           "copying the result to the device");
                goto fail;
            }
            res = piece_fill(&r, issued);
            if (res < 0) {
                stage_fail(&r, issued, res, "starting the copy from the device");
                goto fail;
            }
            issued++;
        }
        res = slot_wait(&r, (int)(i % k), 1);
        if (res < 0) {
            stage_fail(&r, i, res, "copying the input from the device");
            goto fail;
        }
        if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE)) {
            res = LOOM_ERROR_ABORTED;
            loom_comm_set_error(comm, res, "%s #%llu: aborted after %u of %u pieces",
                                loom_op_kind_name(op->kind), (unsigned long long)op->seq,
                                i, n);
            goto fail;
        }
        res = piece_run(&r, i);
        if (res < 0)
            goto fail; /* the algorithm set comm's error */
        res = piece_drain(&r, i);
        if (res < 0) {
            stage_fail(&r, i, res, "starting the copy to the device");
            goto fail;
        }
    }
    for (uint32_t j = 0; j < k; j++) {
        res = slot_wait(&r, (int)j, 1);
        if (res < 0) {
            stage_fail(&r, n - 1, res, "copying the result to the device");
            goto fail;
        }
    }
    return LOOM_SUCCESS;
fail:
    drain_all(&r);
    return res;
}
