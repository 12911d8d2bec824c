/* rd.c - recursive doubling allreduce, for small messages: log2(n) rounds
 * of whole-buffer exchange. With n not a power of two, the first 2r ranks
 * (r = n - p, p the largest power of two <= n) pair up: even ones hand
 * their data to the odd neighbour and get the result back at the end (the
 * fold of tree_math.h, as rhd.c). */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "tree_math.h"
#include "base/util.h"

loom_result_t loom_rd_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, rank = comm->rank;
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    char *buf = op->recvbuf, *tmp;
    struct loom_tx_req *req;
    LOOM_CHECK(loom_allreduce_begin(comm, op, "rd", bytes, 2, &tmp, &req));
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    int p = loom_pow2_floor(n);
    int v = loom_fold_vrank(rank, n, p); /* -1 when folded out */
    if (rank < 2 * (n - p)) {
        if (v < 0) {
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank + 1, buf, bytes, NULL, 0));
        } else {
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank - 1, NULL, 0, tmp, bytes));
            /* lower rank's data first, so every rank reduces in one order */
            fn(buf, tmp, buf, op->count);
        }
    }
    if (v >= 0) {
        for (int mask = 1; mask < p; mask <<= 1) {
            int pv = v ^ mask;
            LOOM_CHECK(loom_p2p_exchange(&w, req, loom_fold_rank(pv, n, p), buf, bytes,
                                         tmp, bytes));
            if (pv < v)
                fn(buf, tmp, buf, op->count);
            else
                fn(buf, buf, tmp, op->count);
        }
    }
    if (rank < 2 * (n - p)) {
        if (v < 0)
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank + 1, NULL, 0, buf, bytes));
        else
            LOOM_CHECK(loom_p2p_exchange(&w, req, rank - 1, buf, bytes, NULL, 0));
    }
    if (op->op == LOOM_AVG)
        loom_reduce_avg_finish(buf, op->count, op->dtype, n);
    return LOOM_SUCCESS;
}

int loom_rd_partners(int rank, int n, int *out, int max)
{
    int p = loom_pow2_floor(n), v = loom_fold_vrank(rank, n, p), k = 0;
    if (rank < 2 * (n - p) && k < max)
        out[k++] = v < 0 ? rank + 1 : rank - 1;
    for (int mask = 1; v >= 0 && mask < p && k < max; mask <<= 1)
        out[k++] = loom_fold_rank(v ^ mask, n, p);
    return k;
}
