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

/* Build a communicator from a connected transport (takes ownership). */
loom_result_t loom_comm_start(struct loom_comm *comm);

#endif
