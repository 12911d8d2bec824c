/* rhd.c - recursive halving-doubling allreduce (Rabenseifner): a
 * reduce-scatter by recursive halving, then an allgather by recursive
 * doubling, over the largest power of two p <= n; the other n - p ranks
 * fold their data into a partner first and get the result back at the end
 * (tree_math.h). Each of the p blocks is reduced by one rank only and then
 * copied, so every rank ends with the same bytes. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "tree_math.h"
#include "util.h"

/* Elements [*off, *off + *len) of blocks [lo, hi) of count split p ways. */
static void blocks_span(uint64_t count, int p, int lo, int hi, uint64_t *off,
                        uint64_t *len)
{
    uint64_t o0, l0, o1, l1;
    loom_ring_part(count, p, lo, &o0, &l0);
    loom_ring_part(count, p, hi - 1, &o1, &l1);
    *off = o0;
    *len = o1 + l1 - o0;
}

/* Exchange with peer: send slen bytes from sbuf, receive rlen into rbuf
 * (either may be empty; both ends skip the same empty ones). */
static loom_result_t exchange(struct loom_waiter *w, struct loom_tx_req *req,
                              int peer, void *sbuf, size_t slen, void *rbuf,
                              size_t rlen)
{
    int k = 0;
    if (rlen)
        LOOM_CHECK(loom_p2p_post(w, &req[k++], peer, 0, rbuf, rlen));
    if (slen)
        LOOM_CHECK(loom_p2p_post(w, &req[k++], peer, 1, sbuf, slen));
    return loom_p2p_wait_all(w, req, k);
}

loom_result_t loom_rhd_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, rank = comm->rank;
    size_t elem = loom_dtype_size(op->dtype);
    size_t bytes = (size_t)op->count * elem;
    char *buf = op->recvbuf;
    if (op->sendbuf != op->recvbuf && bytes)
        memcpy(buf, op->sendbuf, bytes);
    if (n == 1 || bytes == 0)
        return LOOM_SUCCESS;
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    int p = loom_pow2_floor(n);
    int v = loom_fold_vrank(rank, n, p);
    size_t need = bytes; /* folded-in data; each halving step needs less */
    char *tmp = loom_comm_scratch(comm, need);
    struct loom_tx_req *req = loom_comm_reqs(comm, 2);
    if (!tmp || !req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "allreduce (rhd): cannot allocate %zu bytes", need);
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    if (rank < 2 * (n - p)) {
        if (v < 0) {
            LOOM_CHECK(exchange(&w, req, rank + 1, buf, bytes, NULL, 0));
        } else {
            LOOM_CHECK(exchange(&w, req, rank - 1, NULL, 0, tmp, bytes));
            fn(buf, tmp, buf, op->count); /* lower rank's data first */
        }
    }
    if (v >= 0) {
        int steps = 0;
        while ((1 << steps) < p)
            steps++;
        /* reduce-scatter: halve the range each step */
        for (int s = 0; s < steps; s++) {
            int mask = p >> (s + 1), pv = v ^ mask;
            int lo, hi, klo, khi, plo, phi;
            loom_rhd_range(v, p, s, &lo, &hi);
            loom_rhd_keep(v, mask, lo, hi, &klo, &khi);
            loom_rhd_keep(pv, mask, lo, hi, &plo, &phi);
            uint64_t ko, kl, so, sl;
            blocks_span(op->count, p, klo, khi, &ko, &kl);
            blocks_span(op->count, p, plo, phi, &so, &sl);
            LOOM_CHECK(exchange(&w, req, loom_fold_rank(pv, n, p), buf + so * elem,
                                sl * elem, tmp, kl * elem));
            if (pv < v)
                fn(buf + ko * elem, tmp, buf + ko * elem, kl);
            else
                fn(buf + ko * elem, buf + ko * elem, tmp, kl);
        }
        /* allgather: double it back, in the reverse order */
        for (int s = steps - 1; s >= 0; s--) {
            int mask = p >> (s + 1), pv = v ^ mask;
            int lo, hi, klo, khi, plo, phi;
            loom_rhd_range(v, p, s, &lo, &hi);
            loom_rhd_keep(v, mask, lo, hi, &klo, &khi);
            loom_rhd_keep(pv, mask, lo, hi, &plo, &phi);
            uint64_t ko, kl, so, sl;
            blocks_span(op->count, p, klo, khi, &ko, &kl);
            blocks_span(op->count, p, plo, phi, &so, &sl);
            if (s == steps - 1 && op->op == LOOM_AVG)
                loom_reduce_avg_finish(buf + ko * elem, kl, op->dtype, n);
            LOOM_CHECK(exchange(&w, req, loom_fold_rank(pv, n, p), buf + ko * elem,
                                kl * elem, buf + so * elem, sl * elem));
        }
    }
    if (rank < 2 * (n - p)) {
        if (v < 0)
            LOOM_CHECK(exchange(&w, req, rank + 1, NULL, 0, buf, bytes));
        else
            LOOM_CHECK(exchange(&w, req, rank - 1, buf, bytes, NULL, 0));
    }
    return LOOM_SUCCESS;
}
