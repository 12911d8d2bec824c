/* shm.h - ranks of one server talk through shared memory.
 *
 * Ranks that share a server (the rank table's server_id; the boot-id host
 * hash for tcp:// and split communicators), confirmed at creation to share
 * a kernel and to open one segment, run collectives through that segment
 * and, where the kernel permits, cross-memory attach (process_vm_readv)
 * straight from each other's buffers. With several servers of equal rank
 * counts, allreduce runs hierarchically: intra-server reduce-scatter, an
 * inter-server allreduce of each slice over the network, intra-server
 * allgather. LOOM_SHM=0 turns all of it off. */
#ifndef LOOM_SHM_H
#define LOOM_SHM_H

#include "core/comm.h"

/* At creation, after the local ranks are known and before the progress
 * thread starts, on the caller's thread. Collective over comm (uses
 * blocking collectives on it). Sets comm->shm, or leaves it NULL on every
 * rank when shared memory is off or could not be set up everywhere.
 * Fails only when comm's own collectives fail. */
loom_result_t loom_shm_setup(struct loom_comm *comm);

/* Unmaps the segment and frees the state (and the inter-server
 * sub-communicator). Safe with comm->shm == NULL. */
void loom_shm_destroy(struct loom_comm *comm);

/* Whether loom_shm_coll_run would run op. The same answer on every rank
 * for the same op (it depends only on shared setup results and the op). */
int loom_shm_usable(const struct loom_comm *comm, const struct loom_op *op);

/* Run op through shared memory when usable: *handled = 1 and the result;
 * otherwise *handled = 0 and LOOM_SUCCESS (the caller runs a network
 * algorithm). */
loom_result_t loom_shm_coll_run(struct loom_comm *comm, struct loom_op *op,
                                int *handled);

/* Announce op, which runs over the network (alltoall, gather, scatter),
 * so that a local rank waiting here in another call can name it. */
void loom_shm_note_call(struct loom_comm *comm, const struct loom_op *op);

/* The algorithm name loom_shm_coll_run uses for op ("shm", "hier"), or
 * NULL when it would not run op: for the selection log line. */
const char *loom_shm_algo_name(const struct loom_comm *comm,
                               const struct loom_op *op);

/* For tests: nonzero before a communicator is created makes it use the
 * two-copy path even where cross-memory attach works. */
extern int loom_shm_test_no_cma;

#endif
