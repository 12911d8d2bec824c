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
#include "base/util.h"

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

/* Step s of the halving for virtual rank v of p: the partner's virtual
 * rank, and the elements this rank keeps (*ko, *kl) and the partner keeps
 * (*so, *sl). The doubling runs the same steps in reverse. */
static int rhd_step(uint64_t count, int p, int v, int s, uint64_t *ko, uint64_t *kl,
                    uint64_t *so, uint64_t *sl)
{
    int mask = p >> (s + 1), pv = v ^ mask;
    int lo, hi, klo, khi, plo, phi;
    loom_rhd_range(v, p, s, &lo, &hi);
    loom_rhd_keep(v, mask, lo, hi, &klo, &khi);
    loom_rhd_keep(pv, mask, lo, hi, &plo, &phi);
    blocks_span(count, p, klo, khi, ko, kl);
    blocks_span(count, p, plo, phi, so, sl);
    return pv;
}

loom_result_t loom_rhd_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, rank = comm->rank;
    size_t elem = loom_dtype_size(op->dtype);
    size_t bytes = (size_t)op->count * elem;
    char *buf = op->recvbuf, *tmp;
    struct loom_tx_req *req;
    /* scratch: the folded-in data; each halving step needs less */
    LOOM_CHECK(loom_allreduce_begin(comm, op, "rhd", bytes, 2, &tmp, &req));
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    int p = loom_pow2_floor(n);
    int v = loom_fold_vrank(rank, n, p);
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    if (rank < 2 * (n - p)) {
        if (v < 0) {
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank + 1, buf, bytes, NULL, 0));
        } else {
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank - 1, NULL, 0, tmp, bytes));
            fn(buf, tmp, buf, op->count); /* lower rank's data first */
        }
    }
    if (v >= 0) {
        int steps = 0;
        while ((1 << steps) < p)
            steps++;
        /* reduce-scatter: halve the range each step */
        for (int s = 0; s < steps; s++) {
            uint64_t ko, kl, so, sl;
            int pv = rhd_step(op->count, p, v, s, &ko, &kl, &so, &sl);
            LOOM_CHECK(loom_p2p_exchange(&w, req, loom_fold_rank(pv, n, p),
                                         buf + so * elem, sl * elem, tmp, kl * elem));
            if (pv < v)
                fn(buf + ko * elem, tmp, buf + ko * elem, kl);
            else
                fn(buf + ko * elem, buf + ko * elem, tmp, kl);
        }
        /* allgather: double it back, in the reverse order */
        for (int s = steps - 1; s >= 0; s--) {
            uint64_t ko, kl, so, sl;
            int pv = rhd_step(op->count, p, v, s, &ko, &kl, &so, &sl);
            if (s == steps - 1 && op->op == LOOM_AVG)
                loom_reduce_avg_finish(buf + ko * elem, kl, op->dtype, n);
            LOOM_CHECK(loom_p2p_exchange(&w, req, loom_fold_rank(pv, n, p),
                                         buf + ko * elem, kl * elem, buf + so * elem,
                                         sl * elem));
        }
    }
    if (rank < 2 * (n - p)) {
        if (v < 0)
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank + 1, NULL, 0, buf, bytes));
        else
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank - 1, buf, bytes, NULL, 0));
    }
    return LOOM_SUCCESS;
}
