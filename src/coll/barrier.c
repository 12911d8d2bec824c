/* barrier.c - dissemination barrier: in round k every rank sends an empty
 * message to rank + 2^k and receives one from rank - 2^k; after
 * ceil(log2 n) rounds every rank has heard, indirectly, from all. */
#include "build_config.h"

#include "coll.h"
#include "ring_math.h"
#include "util.h"

loom_result_t loom_dissemination_barrier(struct loom_comm *comm,
                                         struct loom_op *op)
{
    int n = comm->nranks;
    if (n == 1)
        return LOOM_SUCCESS;
    struct loom_tx_req *req = loom_comm_reqs(comm, 2);
    if (!req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "barrier: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    static char none;
    for (int k = 1; k < n; k <<= 1) {
        LOOM_CHECK(loom_p2p_post(&w, &req[0], loom_mod((int64_t)comm->rank - k, n),
                                 0, &none, 0));
        LOOM_CHECK(loom_p2p_post(&w, &req[1], (comm->rank + k) % n, 1, &none, 0));
        LOOM_CHECK(loom_p2p_wait_all(&w, req, 2));
    }
    return LOOM_SUCCESS;
}
