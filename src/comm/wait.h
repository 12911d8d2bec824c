/* wait.h - the waiting policy every wait of a call shares (the network's in
 * coll/p2p.c, shared memory's in shm/wait.c): how long a call may go
 * without progress (LOOM_TIMEOUT) and when it says what it waits for
 * (LOOM_STALL_WARN). How to wait (spin, yield, sleep in a transport or on a
 * futex) is each wait's own. */
#ifndef LOOM_WAIT_H
#define LOOM_WAIT_H

#include <stdint.h>

#include "comm.h"

struct loom_wait {
    uint64_t since_ns;   /* when this stretch without progress began (0: none) */
    int stall_warned;    /* LOOM_STALL_WARN said once for this call             */
};

/* Nothing moved since w->since_ns (set it when progress stops; clear it
 * when something moves): LOOM_SUCCESS, or LOOM_ERROR_TIMEOUT once
 * LOOM_TIMEOUT has passed, with comm's error naming the call and what it
 * waited for ("to receive from rank 3 (...) (4096 bytes)", "for rank 2 (...)
 * in shared memory") and comm->blame set to blame (-1: nobody). The stall
 * warning is logged once, after LOOM_STALL_WARN. */
loom_result_t loom_wait_check(struct loom_wait *w, struct loom_comm *comm,
                              const struct loom_op *op, uint64_t now_ns,
                              const char *waiting, int blame);

#endif
