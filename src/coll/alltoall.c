/* alltoall.c - alltoall with equal blocks: every rank posts its n - 1
 * receives, then its n - 1 sends (to rank + 1, rank + 2, ... so that no
 * rank is everyone's first target), and waits for all of them; the
 * transport moves them together. Its own block is copied meanwhile. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "base/util.h"

loom_result_t loom_pairwise_alltoall(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, me = comm->rank;
    size_t blk = (size_t)op->count * loom_dtype_size(op->dtype);
    const char *src = op->sendbuf;
    char *dst = op->recvbuf;
    if (blk == 0)
        return LOOM_SUCCESS;
    if (n == 1) {
        if (src != dst)
            memcpy(dst, src, blk);
        return LOOM_SUCCESS;
    }
    if (src == dst) {
        /* in place: send from a copy */
        char *tmp = loom_comm_scratch(comm, (size_t)n * blk);
        if (!tmp) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                                "alltoall: cannot allocate %zu bytes", (size_t)n * blk);
            return LOOM_ERROR_NO_MEMORY;
        }
        memcpy(tmp, src, (size_t)n * blk);
        src = tmp;
    }
    struct loom_tx_req *req = loom_comm_reqs(comm, 2 * (size_t)(n - 1));
    if (!req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "alltoall: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    int k = 0;
    for (int s = 1; s < n; s++) {
        int from = (me - s + n) % n;
        LOOM_CHECK(loom_p2p_post(&w, &req[k++], from, 0, dst + (size_t)from * blk, blk));
    }
    for (int s = 1; s < n; s++) {
        int to = (me + s) % n;
        LOOM_CHECK(loom_p2p_post(&w, &req[k++], to, 1, (void *)(src + (size_t)to * blk),
                                 blk));
    }
    memcpy(dst + (size_t)me * blk, src + (size_t)me * blk, blk);
    return loom_p2p_wait_all(&w, req, k);
}
