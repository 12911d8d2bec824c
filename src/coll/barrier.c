/* barrier.c - dissemination barrier: in round k every rank sends an empty
 * message to rank + 2^k and receives one from rank - 2^k; after
 * ceil(log2 n) rounds every rank has heard, indirectly, from all.
 *
 * When n is a power of two the rounds pair ranks instead (rank XOR 2^k),
 * the same number of rounds with the partners of recursive doubling: the
 * peers a small allreduce already talks to, whose connections the
 * communicator opens at creation. A barrier then opens no connection of
 * its own (a rank holds fewer sockets), and a rank that finds a peer gone
 * learns it from a partner that saw the cause, not from a first connection
 * to a rank that has already left. */
#include "build_config.h"

#include "coll.h"
#include "ring_math.h"
#include "base/util.h"

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
    int paired = (n & (n - 1)) == 0;
    for (int k = 1; k < n; k <<= 1) {
        int from = paired ? comm->rank ^ k : loom_mod((int64_t)comm->rank - k, n);
        int to = paired ? comm->rank ^ k : (comm->rank + k) % n;
        LOOM_CHECK(loom_p2p_post(&w, &req[0], from, 0, &none, 0));
        LOOM_CHECK(loom_p2p_post(&w, &req[1], to, 1, &none, 0));
        LOOM_CHECK(loom_p2p_wait_all(&w, req, 2));
    }
    return LOOM_SUCCESS;
}
