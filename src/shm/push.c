/* push.c - single-copy collectives whose work is split evenly between the
 * local ranks: a rank reads what it needs from its peers and writes its
 * share of the result straight into theirs (process_vm_writev), so no
 * rank waits while another copies, and a reduced chunk leaves while it is
 * still in this rank's cache.
 *
 * Every write goes to a part of a peer's buffer that only the writer
 * touches during the op, after the writer has read what it needed there:
 * in place is safe. Every op ends with all local ranks past its last
 * phase, so nobody writes into a buffer its owner has got back. */
#include "build_config.h"

#include "shm_priv.h"
#include "util.h"

/* Write len bytes at src into every peer's recvbuf at byte offset at. */
static loom_result_t write_all(struct loom_shm_ctx *x, const char *src, uint64_t at,
                               size_t len)
{
    struct loom_shm *s = x->s;
    for (int k = 1; k < s->n && len; k++) {
        int j = (s->me + k) % s->n;
        loom_result_t res = loom_shm_cma_write(x, j, s->ctrl[j].recvbuf + at, src, len);
        if (res < 0)
            return res;
    }
    return LOOM_SUCCESS;
}

/* Slice j belongs to local rank j: chunk by chunk, it reduces slice j of
 * every input into its recvbuf and at once writes the chunk into every
 * peer's recvbuf. Two phases (buffers published, everything written), no
 * wait between chunks. One owner per slice: the same bits everywhere. With
 * mid (hierarchical), the whole slice goes between servers first. */
loom_result_t loom_shm_push_allreduce(struct loom_shm_ctx *x, const struct loom_shm_mid *mid)
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
    /* at least one pass: mid is a collective every rank must join */
    uint64_t step = mid ? (len ? len : 1) : LOOM_SHM_CHUNK / es, c = 0;
    do {
        uint64_t cnt = len - c < step ? len - c : step;
        char *dst = recv + (off + c) * es;
        res = loom_shm_reduce_range(x, dst, send + (off + c) * es, off + c, cnt);
        if (res == LOOM_SUCCESS && mid)
            res = loom_shm_inter(x, mid, dst, cnt);
        if (res < 0)
            return res;
        if (op->op == LOOM_AVG && cnt)
            loom_reduce_avg_finish(dst, (size_t)cnt, op->dtype, x->comm->nranks);
        res = write_all(x, dst, (off + c) * es, (size_t)cnt * es);
        if (res < 0)
            return res;
        c += step;
    } while (c < len);
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}

/* The root writes slice j into local rank j while rank j reads the other
 * slices from the root: (n - 1) / n of the buffer per rank, root included. */
loom_result_t loom_shm_push_broadcast(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    int root = loom_shm_local_of(s, op->root);
    uint32_t e = s->epoch;
    loom_shm_publish(s, op->sendbuf, op->recvbuf);
    loom_result_t res;
    if (s->me == root) {
        res = loom_shm_wait_all(x, e + 1);
        for (int k = 1; res == LOOM_SUCCESS && k < s->n; k++) {
            int j = (s->me + k) % s->n;
            uint64_t o, l;
            loom_shm_slice(op->count, s->n, j, &o, &l);
            if (l)
                res = loom_shm_cma_write(x, j, s->ctrl[j].recvbuf + o * es,
                                         (const char *)op->sendbuf + o * es, (size_t)l * es);
        }
    } else {
        uint64_t o, l;
        loom_shm_slice(op->count, s->n, s->me, &o, &l);
        char *recv = op->recvbuf;
        res = loom_shm_wait(x, root, e + 1);
        uint64_t from = s->ctrl[root].sendbuf;
        if (res == LOOM_SUCCESS && o)
            res = loom_shm_cma_read(x, root, recv, from, (size_t)o * es);
        if (res == LOOM_SUCCESS && o + l < op->count)
            res = loom_shm_cma_read(x, root, recv + (o + l) * es, from + (o + l) * es,
                                    (size_t)(op->count - o - l) * es);
    }
    if (res < 0)
        return res;
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}

/* Slice j belongs to local rank j, which reduces it chunk by chunk and
 * writes each chunk into the root's recvbuf (the root reduces its own
 * slice in place). */
loom_result_t loom_shm_push_reduce(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    const char *send = op->sendbuf;
    int root = loom_shm_local_of(s, op->root);
    uint32_t e = s->epoch;
    loom_shm_publish(s, op->sendbuf, op->recvbuf);
    loom_result_t res = loom_shm_wait_all(x, e + 1);
    if (res < 0)
        return res;
    uint64_t off, len;
    loom_shm_slice(op->count, s->n, s->me, &off, &len);
    uint64_t step = LOOM_SHM_CHUNK / es;
    for (uint64_t c = 0; c < len; c += step) {
        uint64_t cnt = len - c < step ? len - c : step;
        char *dst = s->me == root ? (char *)op->recvbuf + (off + c) * es : s->out;
        res = loom_shm_reduce_range(x, dst, send + (off + c) * es, off + c, cnt);
        if (res < 0)
            return res;
        if (op->op == LOOM_AVG)
            loom_reduce_avg_finish(dst, (size_t)cnt, op->dtype, s->n);
        if (s->me != root) {
            res = loom_shm_cma_write(x, root, s->ctrl[root].recvbuf + (off + c) * es, dst,
                                     (size_t)cnt * es);
            if (res < 0)
                return res;
        }
    }
    loom_shm_bump(s);
    return loom_shm_wait_all(x, e + 2);
}
