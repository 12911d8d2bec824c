/* rd.c - recursive doubling allreduce, for small messages: log2(n) rounds
 * of whole-buffer exchange. With n not a power of two, the first 2r ranks
 * (r = n - p, p the largest power of two <= n) pair up: even ones hand
 * their data to the odd neighbour and get the result back at the end. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "util.h"

/* Real rank of the virtual rank v in the power-of-two group. */
static int rd_real(int v, int r)
{
    return v < r ? 2 * v + 1 : v + r;
}

loom_result_t loom_rd_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, rank = comm->rank;
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    char *buf = op->recvbuf;
    if (op->sendbuf != op->recvbuf && bytes)
        memcpy(buf, op->sendbuf, bytes);
    if (n == 1 || bytes == 0)
        return LOOM_SUCCESS;
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    char *tmp = loom_comm_scratch(comm, bytes);
    struct loom_tx_req *req = loom_comm_reqs(comm, 2);
    if (!tmp || !req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "allreduce: cannot allocate %zu bytes", bytes);
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    loom_result_t res;
    int p = loom_pow2_floor(n), r = n - p;
    int v; /* virtual rank, -1 when folded out */
    if (rank < 2 * r) {
        if (rank % 2 == 0) {
            LOOM_CHECK(loom_p2p_post(&w, &req[0], rank + 1, 1, buf, bytes));
            LOOM_CHECK(loom_p2p_wait_all(&w, req, 1));
            v = -1;
        } else {
            LOOM_CHECK(loom_p2p_post(&w, &req[0], rank - 1, 0, tmp, bytes));
            LOOM_CHECK(loom_p2p_wait_all(&w, req, 1));
            /* lower rank's data first, so every rank reduces in one order */
            fn(buf, tmp, buf, op->count);
            v = rank / 2;
        }
    } else {
        v = rank - r;
    }
    if (v >= 0) {
        for (int mask = 1; mask < p; mask <<= 1) {
            int pv = v ^ mask;
            int peer = rd_real(pv, r);
            LOOM_CHECK(loom_p2p_post(&w, &req[0], peer, 0, tmp, bytes));
            LOOM_CHECK(loom_p2p_post(&w, &req[1], peer, 1, buf, bytes));
            res = loom_p2p_wait_all(&w, req, 2);
            if (res < 0)
                return res;
            if (pv < v)
                fn(buf, tmp, buf, op->count);
            else
                fn(buf, buf, tmp, op->count);
        }
    }
    if (rank < 2 * r) {
        if (rank % 2 == 0) {
            LOOM_CHECK(loom_p2p_post(&w, &req[0], rank + 1, 0, buf, bytes));
            LOOM_CHECK(loom_p2p_wait_all(&w, req, 1));
        } else {
            LOOM_CHECK(loom_p2p_post(&w, &req[0], rank - 1, 1, buf, bytes));
            LOOM_CHECK(loom_p2p_wait_all(&w, req, 1));
        }
    }
    if (op->op == LOOM_AVG)
        loom_reduce_avg_finish(buf, op->count, op->dtype, n);
    return LOOM_SUCCESS;
}
