/* cma.c - single-copy collectives: each rank publishes its buffers'
 * addresses and peers read them with process_vm_readv.
 *
 * Every op ends with all local ranks past its last phase, so a rank never
 * reuses a buffer (or republishes an address) that a peer still reads. */
#include "build_config.h"

#include <string.h>

#include "shm_priv.h"
#include "util.h"

void loom_shm_publish(struct loom_shm *s, const void *send, const void *recv)
{
    struct loom_shm_ctrl *c = &s->ctrl[s->me];
    c->sendbuf = (uint64_t)(uintptr_t)send;
    c->recvbuf = (uint64_t)(uintptr_t)recv;
    loom_shm_bump(s); /* release: the addresses are visible with the epoch */
}

loom_result_t loom_shm_publish_slice(struct loom_shm_ctx *x, uint32_t *epoch, uint64_t *off,
                                     uint64_t *len)
{
    struct loom_shm *s = x->s;
    *epoch = s->epoch;
    loom_shm_publish(s, x->op->sendbuf, x->op->recvbuf);
    loom_result_t res = loom_shm_wait_all(x, *epoch + 1);
    if (res >= 0)
        loom_shm_slice(x->op->count, s->n, s->me, off, len);
    return res;
}

/* Reads peers through s->tmp (see shm_priv.h). */
loom_result_t loom_shm_reduce_range(struct loom_shm_ctx *x, char *dst, const char *mine,
                                  uint64_t off, uint64_t len)
{
    struct loom_shm *s = x->s;
    size_t es = loom_dtype_size(x->op->dtype);
    loom_reduce_fn fn = loom_reduce_get(x->op->dtype, x->op->op);
    uint64_t step = LOOM_SHM_CHUNK / es;
    for (uint64_t c = 0; c < len; c += step) {
        uint64_t cnt = len - c < step ? len - c : step;
        int first = 1;
        for (int k = 1; k < s->n; k++) {
            int j = (s->me + k) % s->n;
            loom_result_t res = loom_shm_cma_read(x, j, s->tmp,
                                                  s->ctrl[j].sendbuf + (off + c) * es,
                                                  (size_t)cnt * es);
            if (res < 0)
                return res;
            fn(dst + c * es, first ? mine + c * es : dst + c * es, s->tmp, (size_t)cnt);
            first = 0;
        }
        if (first && dst != mine)
            memmove(dst + c * es, mine + c * es, (size_t)cnt * es);
    }
    return LOOM_SUCCESS;
}

/* Slice j of the buffer belongs to local rank j: it reads slice j of every
 * peer's input once and reduces it into its recvbuf (only it reads that
 * slice of its own input, so in place is safe); then every rank copies the
 * other slices from their owners' recvbufs, after the owner has finished
 * (and so after every peer finished reading that slice of its input). One
 * owner computes each slice: float results are the same bits everywhere. */
loom_result_t loom_shm_cma_allreduce(struct loom_shm_ctx *x, const struct loom_shm_mid *mid)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    const char *send = op->sendbuf;
    char *recv = op->recvbuf;
    uint32_t e;
    uint64_t off, len;
    loom_result_t res = loom_shm_publish_slice(x, &e, &off, &len);
    if (res < 0)
        return res;
    res = loom_shm_reduce_range(x, recv + off * es, send + off * es, off, len);
    if (res < 0)
        return res;
    if (mid) {
        res = loom_shm_inter(x, mid, recv + off * es, len);
        if (res < 0)
            return res;
    }
    if (op->op == LOOM_AVG && len)
        loom_reduce_avg_finish(recv + off * es, (size_t)len, op->dtype, x->comm->nranks);
    loom_shm_bump(s);
    for (int k = 1; k < s->n; k++) {
        int j = (s->me + k) % s->n;
        uint64_t o, l;
        loom_shm_slice(op->count, s->n, j, &o, &l);
        res = loom_shm_wait(x, j, e + 2);
        if (res == LOOM_SUCCESS && l)
            res = loom_shm_cma_read(x, j, recv + o * es, s->ctrl[j].recvbuf + o * es,
                                    (size_t)l * es);
        if (res < 0)
            return res;
    }
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 3);
}

loom_result_t loom_shm_cma_allgather(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t block = (size_t)op->count * loom_dtype_size(op->dtype);
    char *recv = op->recvbuf;
    uint32_t e = s->epoch;
    loom_shm_publish(s, op->sendbuf, recv);
    /* group rank k is comm rank ranks[k]: blocks go by comm rank */
    char *mine = recv + (size_t)s->ranks[s->me] * block;
    if ((const char *)op->sendbuf != mine)
        memcpy(mine, op->sendbuf, block);
    for (int k = 1; k < s->n; k++) {
        int j = (s->me + k) % s->n;
        loom_result_t res = loom_shm_wait(x, j, e + 1);
        if (res == LOOM_SUCCESS)
            res = loom_shm_cma_read(x, j, recv + (size_t)s->ranks[j] * block,
                                    s->ctrl[j].sendbuf, block);
        if (res < 0)
            return res;
    }
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}

int loom_shm_local_of(const struct loom_shm *s, int r)
{
    for (int k = 0; k < s->n; k++)
        if (s->ranks[k] == r)
            return k;
    return -1;
}

loom_result_t loom_shm_cma_broadcast(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    int root = loom_shm_local_of(s, op->root);
    uint32_t e = s->epoch;
    loom_shm_publish(s, op->sendbuf, op->recvbuf);
    loom_result_t res;
    if (s->me != root) {
        res = loom_shm_wait(x, root, e + 1);
        if (res == LOOM_SUCCESS)
            res = loom_shm_cma_read(x, root, op->recvbuf, s->ctrl[root].sendbuf, bytes);
        if (res < 0)
            return res;
    }
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}

loom_result_t loom_shm_cma_reduce_scatter(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    uint64_t off = (uint64_t)s->ranks[s->me] * op->count;
    uint32_t e = s->epoch;
    loom_shm_publish(s, op->sendbuf, op->recvbuf);
    loom_result_t res = loom_shm_wait_all(x, e + 1);
    if (res == LOOM_SUCCESS)
        res = loom_shm_reduce_range(x, op->recvbuf, (const char *)op->sendbuf + off * es, off,
                           op->count);
    if (res < 0)
        return res;
    if (op->op == LOOM_AVG)
        loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, s->n);
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}

/* The root reads every peer's input (the others have nothing to write). */
loom_result_t loom_shm_cma_reduce(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    int root = loom_shm_local_of(s, op->root);
    uint32_t e = s->epoch;
    loom_shm_publish(s, op->sendbuf, op->recvbuf);
    loom_result_t res;
    if (s->me == root) {
        res = loom_shm_wait_all(x, e + 1);
        if (res == LOOM_SUCCESS)
            res = loom_shm_reduce_range(x, op->recvbuf, op->sendbuf, 0, op->count);
        if (res < 0)
            return res;
        if (op->op == LOOM_AVG)
            loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, s->n);
    }
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}
