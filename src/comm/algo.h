/* algo.h - the algorithms Loom has, by name, and LOOM_ALGO's overrides: part
 * of a communicator's state (comm->algo_forced), read once at creation and
 * used by the shared-memory engine and the algorithms alike. */
#ifndef LOOM_ALGO_H
#define LOOM_ALGO_H

#include <stddef.h>

#include "op.h"

enum loom_algo {
    LOOM_ALGO_AUTO = 0,
    LOOM_ALGO_RING,              /* allreduce, allgather, reduce_scatter          */
    LOOM_ALGO_RD,                /* recursive doubling allreduce                  */
    LOOM_ALGO_CHAIN,             /* pipelined chain: broadcast, reduce            */
    LOOM_ALGO_BINOMIAL,          /* binomial tree broadcast                       */
    LOOM_ALGO_DISSEMINATION,     /* barrier                                    */
    LOOM_ALGO_TREE,              /* pipelined double binary tree allreduce        */
    LOOM_ALGO_RHD,               /* recursive halving-doubling allreduce          */
    LOOM_ALGO_BRUCK,             /* Bruck / recursive doubling allgather          */
    LOOM_ALGO_SCATTER_ALLGATHER, /* broadcast: scatter + ring allgather    */
    LOOM_ALGO_SHM,               /* every collective, one server, shared memory  */
    LOOM_ALGO_HIER,              /* allreduce: shm inside servers, network across */
    LOOM_ALGO_SHM_COPY,          /* shm, forced through the segment's slots       */
    LOOM_ALGO_SHM_READ,          /* shm, forced to ranks reading their peers      */
    LOOM_ALGO_SHM_PUSH,          /* shm, forced to the evenly split read and write */
    LOOM_ALGO_SHM_LL,            /* shm, forced to the small-message lines        */
    LOOM_ALGO_SHM_PIPE,          /* shm, forced to the pipelined segment chunks   */
    LOOM_ALGO_COUNT
};

/* The shared-memory engine, whichever way it moves the data. */
static inline int loom_algo_is_shm(int algo)
{
    return algo == LOOM_ALGO_SHM || algo == LOOM_ALGO_SHM_COPY || algo == LOOM_ALGO_SHM_READ ||
           algo == LOOM_ALGO_SHM_PUSH || algo == LOOM_ALGO_SHM_LL || algo == LOOM_ALGO_SHM_PIPE;
}

const char *loom_algo_name(enum loom_algo algo);

/* Does algo serve that collective? */
int loom_algo_serves(enum loom_algo algo, enum loom_op_kind kind);

/* Parse LOOM_ALGO ("ring", "allreduce=rd,broadcast=chain"). Writes the
 * override for each op kind (LOOM_ALGO_AUTO where none). Returns -1 and a
 * message in err for a bad value. */
int loom_algo_parse(const char *spec, enum loom_algo out[LOOM_OP_KIND_COUNT],
                    char *err, size_t errlen);

#endif
