/* core.h - the op queue and progress thread (queue.c), used by the public
 * calls above and by communicators' life beside it. */
#ifndef LOOM_CORE_H
#define LOOM_CORE_H

#include "comm/comm.h"

/* Validate, number and run or enqueue an op (the one enqueue path). */
loom_result_t loom_comm_submit(struct loom_comm *comm, struct loom_op *op);

/* The internal service path: a blocking collective for Loom's own set-up
 * (topology, shared memory, split) that runs in order with the user's calls
 * but takes no user sequence number (op->internal). */
loom_result_t loom_comm_internal(struct loom_comm *comm, enum loom_op_kind kind,
                                 const void *sendbuf, void *recvbuf, uint64_t count,
                                 loom_dtype_t dtype, loom_redop_t op);

/* A thread waiting for queued work runs the op at the head itself when no
 * one is running one (as the blocking path does), instead of paying for a
 * hand-off to the progress thread. Returns 1 when it ran an op. */
int loom_comm_help(struct loom_comm *comm);

/* A communicator of members member_ranks[0..nm) of parent (parent ranks,
 * in the new order; this rank is newrank), with id comm_id (the same on
 * every member) and its own view of the job's out-of-band service and its
 * own transport instance; keep_servers keeps the parent's rank-table
 * servers (shrink), else they are learnt by host (split). Collective over
 * the members. */
loom_result_t loom_comm_sub(struct loom_comm *parent, const int *member_ranks, int nm,
                            int newrank, uint64_t comm_id, int no_shm, int keep_servers,
                            struct loom_comm **newcomm);

/* The out-of-band receiver of a revocation from another rank (shrink.c):
 * runs on the service thread. */
void loom_comm_revoke_notice(void *comm, int from, const void *buf, size_t len);

/* Build a communicator from a connected transport (takes ownership). */
loom_result_t loom_comm_start(struct loom_comm *comm);

#endif
