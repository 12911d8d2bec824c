/* bruck.c - Bruck allgather: ceil(log2 n) steps for any n. At the step
 * with distance d, every rank sends the blocks it has gathered so far
 * (those of ranks r .. r+d-1, mod n) to r - d and receives as many from
 * r + d (tree_math.h). Blocks stay in their final place in recvbuf; a run
 * that wraps past the last rank travels as two messages, split at the same
 * block on both ends. For a power of two n this is recursive doubling. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "tree_math.h"
#include "base/util.h"

loom_result_t loom_bruck_allgather(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, r = comm->rank;
    size_t block = (size_t)op->count * loom_dtype_size(op->dtype);
    char *out = op->recvbuf;
    char *mine = out + (size_t)r * block;
    if (op->sendbuf != mine && block)
        memcpy(mine, op->sendbuf, block);
    if (n == 1 || block == 0)
        return LOOM_SUCCESS;
    struct loom_tx_req *req = loom_comm_reqs(comm, 4);
    if (!req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "allgather (bruck): out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    for (int dist = 1; dist < n; dist *= 2) {
        int cnt = loom_bruck_count(n, dist);
        int rfirst = (r + dist) % n;
        int s0, s1, r0, r1, k = 0;
        loom_wrap_split(r, cnt, n, &s0, &s1);
        loom_wrap_split(rfirst, cnt, n, &r0, &r1);
        int from = loom_bruck_recv_peer(r, n, dist), to = loom_bruck_send_peer(r, n, dist);
        LOOM_CHECK(loom_p2p_post(&w, &req[k++], from, 0, out + (size_t)rfirst * block,
                                 (size_t)r0 * block));
        if (r1)
            LOOM_CHECK(loom_p2p_post(&w, &req[k++], from, 0, out, (size_t)r1 * block));
        LOOM_CHECK(loom_p2p_post(&w, &req[k++], to, 1, mine, (size_t)s0 * block));
        if (s1)
            LOOM_CHECK(loom_p2p_post(&w, &req[k++], to, 1, out, (size_t)s1 * block));
        LOOM_CHECK(loom_p2p_wait_all(&w, req, k));
    }
    return LOOM_SUCCESS;
}
