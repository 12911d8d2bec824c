/* copy.c - two-copy collectives through the staging slots of the segment:
 * small messages (no system call at all) and the fallback where the kernel
 * forbids cross-memory attach.
 *
 * A step writes this rank's slot for the next epoch, finishes the phase,
 * waits for every local rank, then reads the slots. Slots alternate by
 * epoch parity: when a rank writes slot (e & 1) for epoch e, every peer has
 * reached e - 1, so it has finished reading what was written for e - 2. */
#include "build_config.h"

#include <string.h>

#include "shm_priv.h"
#include "util.h"

/* Write nothing or len bytes to my next slot, then step. Returns my slot
 * epoch (the one to read peers' slots with) in *ep. */
static loom_result_t step(struct loom_shm_ctx *x, uint32_t *ep)
{
    struct loom_shm *s = x->s;
    loom_shm_bump(s);
    *ep = s->epoch;
    return loom_shm_wait_all(x, s->epoch);
}

/* dst = slot_0 op slot_1 op ... in local rank order: every rank that does
 * this gets the same bits. */
static void reduce_slots(struct loom_shm *s, loom_reduce_fn fn, char *dst, uint32_t ep,
                         size_t off, size_t cnt)
{
    fn(dst, loom_shm_slot(s, 0, ep) + off, loom_shm_slot(s, 1, ep) + off, cnt);
    for (int j = 2; j < s->n; j++)
        fn(dst, dst, loom_shm_slot(s, j, ep) + off, cnt);
}

/* Every rank adds every rank's input, in the same order (for small counts
 * the redundant arithmetic costs less than a second step). With mid, the
 * hierarchical allreduce: then each rank hands its slice to mid and the
 * slices are gathered through the slots again. */
loom_result_t loom_shm_copy_allreduce(struct loom_shm_ctx *x, const struct loom_shm_mid *mid)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    const char *send = op->sendbuf;
    char *recv = op->recvbuf;
    uint64_t per = s->slot_bytes / es;
    loom_result_t res;
    uint32_t ep;
    for (uint64_t off = 0; off < op->count; off += per) {
        uint64_t cnt = op->count - off < per ? op->count - off : per;
        memcpy(loom_shm_slot(s, s->me, s->epoch + 1), send + off * es, (size_t)cnt * es);
        res = step(x, &ep);
        if (res < 0)
            return res;
        reduce_slots(s, fn, recv + off * es, ep, 0, (size_t)cnt);
    }
    if (!mid) {
        if (op->op == LOOM_AVG)
            loom_reduce_avg_finish(recv, (size_t)op->count, op->dtype, x->comm->nranks);
        return LOOM_SUCCESS;
    }
    uint64_t moff, mlen;
    loom_shm_slice(op->count, s->n, s->me, &moff, &mlen);
    res = loom_shm_inter(x, mid, recv + moff * es, mlen);
    if (res < 0)
        return res;
    if (op->op == LOOM_AVG && mlen)
        loom_reduce_avg_finish(recv + moff * es, (size_t)mlen, op->dtype, x->comm->nranks);
    /* gather the slices: slice lengths differ by at most one element, so
     * every rank takes the same number of steps */
    uint64_t maxlen = (op->count + (uint64_t)s->n - 1) / (uint64_t)s->n;
    for (uint64_t c = 0; c < maxlen; c += per) {
        uint64_t cnt = mlen > c ? (mlen - c < per ? mlen - c : per) : 0;
        memcpy(loom_shm_slot(s, s->me, s->epoch + 1), recv + (moff + c) * es,
               (size_t)cnt * es);
        res = step(x, &ep);
        if (res < 0)
            return res;
        for (int j = 0; j < s->n; j++) {
            uint64_t o, l;
            loom_shm_slice(op->count, s->n, j, &o, &l);
            if (j == s->me || l <= c)
                continue;
            uint64_t k = l - c < per ? l - c : per;
            memcpy(recv + (o + c) * es, loom_shm_slot(s, j, ep), (size_t)k * es);
        }
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_shm_copy_allgather(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    size_t block = (size_t)op->count * es;
    uint64_t per = s->slot_bytes / es;
    const char *send = op->sendbuf;
    char *recv = op->recvbuf;
    for (uint64_t off = 0; off < op->count; off += per) {
        size_t b = (size_t)(op->count - off < per ? op->count - off : per) * es;
        memcpy(loom_shm_slot(s, s->me, s->epoch + 1), send + off * es, b);
        uint32_t ep;
        loom_result_t res = step(x, &ep);
        if (res < 0)
            return res;
        for (int j = 0; j < s->n; j++)
            if (j != s->me)
                memcpy(recv + (size_t)s->ranks[j] * block + off * es,
                       loom_shm_slot(s, j, ep), b);
    }
    char *mine = recv + (size_t)s->ranks[s->me] * block;
    if (send != mine)
        memcpy(mine, send, block);
    return LOOM_SUCCESS;
}

loom_result_t loom_shm_copy_broadcast(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    uint64_t per = s->slot_bytes / es;
    int root = loom_shm_local_of(s, op->root);
    char *buf = op->recvbuf;
    for (uint64_t off = 0; off < op->count; off += per) {
        size_t b = (size_t)(op->count - off < per ? op->count - off : per) * es;
        if (s->me == root)
            memcpy(loom_shm_slot(s, s->me, s->epoch + 1), buf + off * es, b);
        uint32_t ep;
        loom_result_t res = step(x, &ep);
        if (res < 0)
            return res;
        if (s->me != root)
            memcpy(buf + off * es, loom_shm_slot(s, root, ep), b);
    }
    return LOOM_SUCCESS;
}

/* Each step carries the same stretch of every block, local rank b's block
 * (the one at its comm rank in sendbuf) b-th. */
loom_result_t loom_shm_copy_reduce_scatter(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    uint64_t per = s->slot_bytes / es / (uint64_t)s->n;
    const char *send = op->sendbuf;
    char *recv = op->recvbuf;
    int mine = s->me;
    for (uint64_t off = 0; off < op->count; off += per) {
        uint64_t cnt = op->count - off < per ? op->count - off : per;
        char *slot = loom_shm_slot(s, s->me, s->epoch + 1);
        for (int b = 0; b < s->n; b++)
            memcpy(slot + (size_t)b * cnt * es,
                   send + ((uint64_t)s->ranks[b] * op->count + off) * es, (size_t)cnt * es);
        uint32_t ep;
        loom_result_t res = step(x, &ep);
        if (res < 0)
            return res;
        reduce_slots(s, fn, recv + off * es, ep, (size_t)mine * cnt * es, (size_t)cnt);
    }
    if (op->op == LOOM_AVG)
        loom_reduce_avg_finish(recv, (size_t)op->count, op->dtype, s->n);
    return LOOM_SUCCESS;
}

loom_result_t loom_shm_copy_reduce(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    uint64_t per = s->slot_bytes / es;
    const char *send = op->sendbuf;
    int root = loom_shm_local_of(s, op->root);
    for (uint64_t off = 0; off < op->count; off += per) {
        uint64_t cnt = op->count - off < per ? op->count - off : per;
        memcpy(loom_shm_slot(s, s->me, s->epoch + 1), send + off * es, (size_t)cnt * es);
        uint32_t ep;
        loom_result_t res = step(x, &ep);
        if (res < 0)
            return res;
        if (s->me == root)
            reduce_slots(s, fn, (char *)op->recvbuf + off * es, ep, 0, (size_t)cnt);
    }
    if (s->me == root && op->op == LOOM_AVG)
        loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, s->n);
    return LOOM_SUCCESS;
}

loom_result_t loom_shm_barrier(struct loom_shm_ctx *x)
{
    uint32_t ep;
    return step(x, &ep);
}
