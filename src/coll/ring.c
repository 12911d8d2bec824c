/* ring.c - ring reduce-scatter and allgather, chunked and pipelined; ring
 * allreduce is the one followed by the other (see ring_math.h for the step
 * arithmetic).
 *
 * Every step's segment is cut into chunks of LOOM_CHUNK_SIZE. The send of
 * chunk c at step t waits only for chunk c of step t-1 to have arrived (and
 * been reduced), so reducing one chunk overlaps moving the next, and the
 * steps overlap each other. Receives are posted up to RING_WINDOW ahead. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "base/util.h"

#define RING_WINDOW 8

struct ring_plan {
    int n, pos;
    int t_begin, t_end;      /* steps; t < n-1 reduce                     */
    int left, right;         /* ranks                                     */
    size_t elem;
    uint64_t chunk;          /* elements per chunk                        */
    /* segment j: elements [seg_off(j), +seg_len(j)) of the buffers */
    uint64_t count;          /* PART: total count; BLOCK: elements a block */
    int blocked;             /* 0: balanced parts by position; 1: blocks by rank */
    const int *ring;
    const char *src;         /* this rank's contribution (reduce steps)    */
    char *work;              /* partial and final results                  */
    char *final_dst;         /* where segment pos's final reduction goes (NULL: work) */
    loom_reduce_fn fn;
    int avg_n;               /* divide segment pos by this after reducing  */
    /* allgather out of place: this rank's block is sent from own_src (it
     * sits at own_off in work) and copied into work once the first sends
     * are under way, so the copy overlaps the network */
    const char *own_src;
    size_t own_off, own_len;
    loom_dtype_t dtype;
};

static void seg_range(const struct ring_plan *p, int j, uint64_t *off,
                      uint64_t *len)
{
    if (p->blocked) {
        *off = (uint64_t)p->ring[j] * p->count;
        *len = p->count;
    } else {
        loom_ring_part(p->count, p->n, j, off, len);
    }
}

/* A cursor over the (step, chunk) units of one direction. */
struct cursor {
    int t;
    uint64_t c;
    uint64_t nc;        /* chunks at step t                                 */
    int is_send;
};

static uint64_t step_chunks(const struct ring_plan *p, int t, int is_send)
{
    int seg = is_send ? loom_ring_send_seg(p->pos, t, p->n)
                      : loom_ring_recv_seg(p->pos, t, p->n);
    uint64_t off, len;
    seg_range(p, seg, &off, &len);
    return loom_nchunks(len, p->chunk);
}

static void cursor_init(struct cursor *k, const struct ring_plan *p, int is_send)
{
    k->is_send = is_send;
    k->t = p->t_begin;
    k->c = 0;
    k->nc = 0;
    while (k->t < p->t_end && (k->nc = step_chunks(p, k->t, is_send)) == 0)
        k->t++;
}

static void cursor_next(struct cursor *k, const struct ring_plan *p)
{
    if (++k->c < k->nc)
        return;
    k->c = 0;
    k->t++;
    while (k->t < p->t_end && (k->nc = step_chunks(p, k->t, k->is_send)) == 0)
        k->t++;
}

static int cursor_end(const struct cursor *k, const struct ring_plan *p)
{
    return k->t >= p->t_end;
}

/* Byte range of chunk c of segment seg. */
static void chunk_range(const struct ring_plan *p, int seg, uint64_t c,
                        size_t *off, size_t *len)
{
    uint64_t so, sl;
    seg_range(p, seg, &so, &sl);
    uint64_t first = c * p->chunk;
    uint64_t n = sl - first < p->chunk ? sl - first : p->chunk;
    *off = (size_t)((so + first) * p->elem);
    *len = (size_t)(n * p->elem);
}

static size_t seg_first_byte(const struct ring_plan *p, int seg)
{
    uint64_t so, sl;
    seg_range(p, seg, &so, &sl);
    return (size_t)(so * p->elem);
}

/* Is recv unit (t, c) complete, given the completion cursor? */
static int recv_done(const struct cursor *done, int t, uint64_t c)
{
    return done->t > t || (done->t == t && done->c > c);
}

static loom_result_t ring_run(struct loom_comm *comm, struct loom_op *op,
                              struct ring_plan *p)
{
    if (p->n == 1 || p->t_begin >= p->t_end)
        return LOOM_SUCCESS;
    size_t chunk_bytes = (size_t)(p->chunk * p->elem);
    int reduces = p->t_begin < p->n - 1;
    char *tmp = NULL;
    if (reduces) {
        tmp = loom_comm_scratch(comm, RING_WINDOW * chunk_bytes);
        if (!tmp) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                                "ring: cannot allocate %zu bytes of scratch",
                                RING_WINDOW * chunk_bytes);
            return LOOM_ERROR_NO_MEMORY;
        }
    }
    struct loom_tx_req *rreq = loom_comm_reqs(comm, 2 * RING_WINDOW);
    if (!rreq) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "ring: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_tx_req *sreq = rreq + RING_WINDOW;

    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);

    struct cursor rpost, rdone, spost;
    cursor_init(&rpost, p, 0);
    cursor_init(&rdone, p, 0);
    cursor_init(&spost, p, 1);
    uint64_t nrpost = 0, nrdone = 0, nspost = 0, nsdone = 0;
    /* (t, c) of each posted receive slot, for the reduce when it lands */
    int slot_t[RING_WINDOW];
    uint64_t slot_c[RING_WINDOW];
    loom_result_t res;

    for (;;) {
        /* post receives ahead */
        while (!cursor_end(&rpost, p) && nrpost - nrdone < RING_WINDOW) {
            int slot = (int)(nrpost % RING_WINDOW);
            int seg = loom_ring_recv_seg(p->pos, rpost.t, p->n);
            size_t off, len;
            chunk_range(p, seg, rpost.c, &off, &len);
            char *dst = rpost.t < p->n - 1 ? tmp + (size_t)slot * chunk_bytes
                                           : p->work + off;
            slot_t[slot] = rpost.t;
            slot_c[slot] = rpost.c;
            res = loom_p2p_post(&w, &rreq[slot], p->left, 0, dst, len);
            if (res < 0)
                return res;
            nrpost++;
            cursor_next(&rpost, p);
        }
        /* post sends whose data is ready */
        while (!cursor_end(&spost, p) && nspost - nsdone < RING_WINDOW &&
               (spost.t == p->t_begin || recv_done(&rdone, spost.t - 1, spost.c))) {
            int slot = (int)(nspost % RING_WINDOW);
            int seg = loom_ring_send_seg(p->pos, spost.t, p->n);
            size_t off, len;
            chunk_range(p, seg, spost.c, &off, &len);
            const char *from = (spost.t == p->t_begin && reduces) ? p->src : p->work;
            if (spost.t == p->t_begin && p->own_src) {
                from = p->own_src;
                off -= p->own_off;
            }
            res = loom_p2p_post(&w, &sreq[slot], p->right, 1, (void *)(from + off),
                                len);
            if (res < 0)
                return res;
            nspost++;
            cursor_next(&spost, p);
        }
        res = loom_p2p_progress(&w);
        if (res < 0)
            return res;
        if (p->own_len) {
            memcpy(p->work + p->own_off, p->own_src, p->own_len);
            p->own_len = 0;
        }
        int moved = 0;
        /* complete receives in order, reducing as they land */
        while (nrdone < nrpost && rreq[nrdone % RING_WINDOW].done) {
            int slot = (int)(nrdone % RING_WINDOW);
            if (rreq[slot].status < 0)
                return loom_p2p_req_failed(&w, &rreq[slot]);
            int t = slot_t[slot];
            if (t < p->n - 1) {
                int seg = loom_ring_recv_seg(p->pos, t, p->n);
                size_t off, len;
                chunk_range(p, seg, slot_c[slot], &off, &len);
                char *dst = p->work + off;
                if (seg == p->pos && p->final_dst)
                    dst = p->final_dst + (off - seg_first_byte(p, seg));
                p->fn(dst, p->src + off, tmp + (size_t)slot * chunk_bytes,
                      len / p->elem);
                if (seg == p->pos && p->avg_n > 1)
                    loom_reduce_avg_finish(dst, len / p->elem, p->dtype, p->avg_n);
            }
            nrdone++;
            cursor_next(&rdone, p);
            moved = 1;
        }
        LOOM_CHECK(loom_p2p_reap(&w, sreq, RING_WINDOW, &nsdone, nspost, &moved));
        if (cursor_end(&rdone, p) && cursor_end(&spost, p) && nsdone == nspost)
            return LOOM_SUCCESS;
        LOOM_CHECK(loom_p2p_settle(
            &w, moved,
            nrdone < nrpost ? &rreq[nrdone % RING_WINDOW]
                            : (nsdone < nspost ? &sreq[nsdone % RING_WINDOW] : NULL)));
    }
}

static void plan_init(struct ring_plan *p, struct loom_comm *comm,
                      const struct loom_op *op)
{
    memset(p, 0, sizeof *p);
    p->n = comm->nranks;
    p->pos = comm->ring_pos;
    p->left = comm->ring[loom_mod((int64_t)p->pos - 1, p->n)];
    p->right = comm->ring[loom_mod((int64_t)p->pos + 1, p->n)];
    p->elem = loom_dtype_size(op->dtype);
    p->chunk = comm->chunk_size / p->elem;
    if (p->chunk == 0)
        p->chunk = 1;
    p->ring = comm->ring;
    p->dtype = op->dtype;
}

loom_result_t loom_ring_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    struct ring_plan p;
    plan_init(&p, comm, op);
    p.t_begin = 0;
    p.t_end = 2 * (p.n - 1);
    p.count = op->count;
    p.src = op->sendbuf;
    p.work = op->recvbuf;
    p.fn = loom_reduce_get(op->dtype, op->op);
    p.avg_n = op->op == LOOM_AVG ? p.n : 0;
    return ring_run(comm, op, &p);
}

loom_result_t loom_ring_allgather(struct loom_comm *comm, struct loom_op *op)
{
    struct ring_plan p;
    plan_init(&p, comm, op);
    size_t block = (size_t)op->count * p.elem;
    char *mine = (char *)op->recvbuf + (size_t)comm->rank * block;
    if (op->sendbuf != mine && block) {
        if (p.n == 1) {
            memcpy(mine, op->sendbuf, block);
        } else {
            p.own_src = op->sendbuf;
            p.own_off = (size_t)comm->rank * block;
            p.own_len = block;
        }
    }
    p.t_begin = p.n - 1;
    p.t_end = 2 * (p.n - 1);
    p.count = op->count;
    p.blocked = 1;
    p.work = op->recvbuf;
    return ring_run(comm, op, &p);
}

loom_result_t loom_ring_reduce_scatter(struct loom_comm *comm,
                                       struct loom_op *op)
{
    struct ring_plan p;
    plan_init(&p, comm, op);
    size_t block = (size_t)op->count * p.elem;
    p.t_begin = 0;
    p.t_end = p.n - 1;
    p.count = op->count;
    p.blocked = 1;
    p.src = op->sendbuf;
    p.fn = loom_reduce_get(op->dtype, op->op);
    p.avg_n = op->op == LOOM_AVG ? p.n : 0;
    p.final_dst = op->recvbuf;
    if (p.n == 1) {
        if (op->recvbuf != op->sendbuf && block)
            memmove(op->recvbuf, op->sendbuf, block);
        return LOOM_SUCCESS;
    }
    /* Partial sums of the other ranks' blocks live in a buffer of the full
     * size, after the ring window's chunks (which ring_run takes first). */
    size_t chunk_bytes = (size_t)(p.chunk * p.elem);
    size_t need = RING_WINDOW * chunk_bytes + (size_t)p.n * block;
    char *s = loom_comm_scratch(comm, need);
    if (!s) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "reduce_scatter: cannot allocate %zu bytes", need);
        return LOOM_ERROR_NO_MEMORY;
    }
    p.work = s + RING_WINDOW * chunk_bytes;
    return ring_run(comm, op, &p);
}
