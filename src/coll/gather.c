/* gather.c - gather and scatter, linear: the root posts one receive (or
 * send) per rank and the transport moves them together; every other rank
 * sends (or receives) one block. The root's link carries n - 1 blocks
 * whatever the shape, so a tree would only add hops for the sizes these
 * serve (re-sharding parameters, collecting results); its latency is that
 * of the slowest peer. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "base/util.h"

static loom_result_t linear(struct loom_comm *comm, struct loom_op *op, int to_root)
{
    int n = comm->nranks, me = comm->rank, root = op->root;
    size_t blk = (size_t)op->count * loom_dtype_size(op->dtype);
    const char *name = to_root ? "gather" : "scatter";
    if (blk == 0)
        return LOOM_SUCCESS;
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    if (me != root) {
        struct loom_tx_req *req = loom_comm_reqs(comm, 1);
        if (!req) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "%s: out of memory", name);
            return LOOM_ERROR_NO_MEMORY;
        }
        LOOM_CHECK(loom_p2p_post(&w, req, root, to_root,
                                 to_root ? (void *)op->sendbuf : op->recvbuf, blk));
        return loom_p2p_wait_all(&w, req, 1);
    }
    struct loom_tx_req *req = loom_comm_reqs(comm, (size_t)n);
    if (!req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "%s: out of memory", name);
        return LOOM_ERROR_NO_MEMORY;
    }
    int k = 0;
    for (int s = 1; s < n; s++) {
        int r = (root + s) % n;
        char *block = (char *)(to_root ? op->recvbuf : op->sendbuf) + (size_t)r * blk;
        LOOM_CHECK(loom_p2p_post(&w, &req[k++], r, !to_root, block, blk));
    }
    /* the root's own block (in place when it is already there) */
    const char *from = to_root ? op->sendbuf : (const char *)op->sendbuf + (size_t)root * blk;
    char *into = to_root ? (char *)op->recvbuf + (size_t)root * blk : op->recvbuf;
    if (from != into)
        memcpy(into, from, blk);
    return k ? loom_p2p_wait_all(&w, req, k) : LOOM_SUCCESS;
}

loom_result_t loom_linear_gather(struct loom_comm *comm, struct loom_op *op)
{
    return linear(comm, op, 1);
}

loom_result_t loom_linear_scatter(struct loom_comm *comm, struct loom_op *op)
{
    return linear(comm, op, 0);
}
