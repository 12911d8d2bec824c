/* binomial.c - binomial tree broadcast for small messages from 6 ranks on
 * (below that the chain is at most one hop deeper and wins, coll.c):
 * ceil(log2 n) rounds, whole message per hop. Virtual ranks are relative to
 * the root. */
#include "build_config.h"

#include "coll.h"
#include "ring_math.h"
#include "base/util.h"

loom_result_t loom_binomial_broadcast(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks;
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    if (n == 1 || bytes == 0)
        return LOOM_SUCCESS;
    int v = loom_mod((int64_t)comm->rank - op->root, n);
    struct loom_tx_req *req = loom_comm_reqs(comm, 32);
    if (!req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "broadcast: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    int parent = loom_binomial_parent(v);
    if (parent >= 0) {
        LOOM_CHECK(loom_p2p_post(&w, &req[0], (parent + op->root) % n, 0,
                                 op->recvbuf, bytes));
        LOOM_CHECK(loom_p2p_wait_all(&w, req, 1));
    }
    /* children v + 2^k for 2^k below v's lowest set bit, farthest first */
    int low = v ? (v & -v) : 1 << 30;
    int nsend = 0;
    int top = 1;
    while (top * 2 < n)
        top *= 2;
    for (int k = top; k >= 1; k >>= 1) {
        if (k >= low || v + k >= n)
            continue;
        LOOM_CHECK(loom_p2p_post(&w, &req[nsend], (v + k + op->root) % n, 1,
                                 op->recvbuf, bytes));
        nsend++;
    }
    return loom_p2p_wait_all(&w, req, nsend);
}
