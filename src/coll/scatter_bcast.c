/* scatter_bcast.c - broadcast for large messages: the root scatters the
 * buffer in n parts down a binomial tree (rank v, relative to the root,
 * gets parts v .. v + lowbit(v) - 1 and passes on all but its own), then a
 * ring allgather over the relative ranks spreads every part. Each rank
 * moves about 2S bytes in all, against S per hop of a chain. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "base/util.h"

/* Bytes [*off, *off + *len) of parts [lo, hi). */
static void parts_span(const struct loom_op *op, int n, int lo, int hi,
                       size_t *off, size_t *len)
{
    size_t elem = loom_dtype_size(op->dtype);
    uint64_t o0, l0, o1, l1;
    loom_ring_part(op->count, n, lo, &o0, &l0);
    loom_ring_part(op->count, n, hi - 1, &o1, &l1);
    *off = (size_t)o0 * elem;
    *len = (size_t)(o1 + l1 - o0) * elem;
}

loom_result_t loom_scatter_allgather_broadcast(struct loom_comm *comm,
                                               struct loom_op *op)
{
    int n = comm->nranks;
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    if (n == 1 || bytes == 0)
        return LOOM_SUCCESS;
    char *buf = op->recvbuf;
    int v = loom_mod((int64_t)comm->rank - op->root, n);
    struct loom_tx_req *req = loom_comm_reqs(comm, 34);
    if (!req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "broadcast: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    int top = 1;
    while (top < n)
        top *= 2;
    int low = v ? (v & -v) : top;
    size_t off, len;
    if (v) {
        int hi = v + low < n ? v + low : n;
        parts_span(op, n, v, hi, &off, &len);
        if (len) {
            LOOM_CHECK(loom_p2p_post(&w, &req[0], (loom_binomial_parent(v) + op->root) % n,
                                     0, buf + off, len));
            LOOM_CHECK(loom_p2p_wait_all(&w, req, 1));
        }
    }
    int k = 0;
    for (int d = low / 2; d >= 1; d /= 2) {
        if (v + d >= n)
            continue;
        int hi = v + 2 * d < n ? v + 2 * d : n;
        parts_span(op, n, v + d, hi, &off, &len);
        if (len)
            LOOM_CHECK(loom_p2p_post(&w, &req[k++], (v + d + op->root) % n, 1, buf + off,
                                     len));
    }
    LOOM_CHECK(loom_p2p_wait_all(&w, req, k));
    /* ring allgather over relative ranks: step s sends part v - s */
    int right = (v + 1 + op->root) % n, left = (v - 1 + n + op->root) % n;
    for (int s = 0; s < n - 1; s++) {
        int sp = loom_mod((int64_t)v - s, n), rp = loom_mod((int64_t)v - s - 1, n);
        size_t soff, slen, roff, rlen;
        parts_span(op, n, sp, sp + 1, &soff, &slen);
        parts_span(op, n, rp, rp + 1, &roff, &rlen);
        k = 0;
        if (rlen)
            LOOM_CHECK(loom_p2p_post(&w, &req[k++], left, 0, buf + roff, rlen));
        if (slen)
            LOOM_CHECK(loom_p2p_post(&w, &req[k++], right, 1, buf + soff, slen));
        LOOM_CHECK(loom_p2p_wait_all(&w, req, k));
    }
    return LOOM_SUCCESS;
}
