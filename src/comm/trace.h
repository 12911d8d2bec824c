/* trace.h - the flight recorder: each communicator's last LOOM_TRACE_LEN
 * calls with their state, dumped as JSON to LOOM_TRACE_DIR on a timeout, an
 * abort, or SIGUSR1, so that a hung or failed job can be read afterwards.
 * Its stamps are the kernel's tick (loom_tick_ns): they say which call hung
 * and for how long, in milliseconds, at the cost of a few ns a call. */
#ifndef LOOM_TRACE_H
#define LOOM_TRACE_H

#include <stdint.h>

#include "loom.h"

#define LOOM_TRACE_LEN 64

enum loom_trace_state {
    LOOM_TRACE_QUEUED = 0,
    LOOM_TRACE_RUNNING,
    LOOM_TRACE_DONE,
    LOOM_TRACE_FAILED
};

struct loom_trace_rec {
    uint64_t seq;
    uint32_t desc;          /* the call's fingerprint (coll.h)             */
    uint64_t count;
    int state;
    loom_result_t result;
    uint64_t t_enqueue_ns, t_start_ns, t_end_ns;
};

struct loom_comm;
struct loom_op;

/* enqueue and end_locked: comm->lock held; start and end take it.
 * running: the call starts as it is queued (a blocking call run on its
 * caller's thread), so its start is its enqueue stamp: one clock read less
 * on the path every small call takes. */
void loom_trace_enqueue(struct loom_comm *comm, const struct loom_op *op, int running);
void loom_trace_start(struct loom_comm *comm, const struct loom_op *op);
void loom_trace_end(struct loom_comm *comm, const struct loom_op *op,
                    loom_result_t res);
void loom_trace_end_locked(struct loom_comm *comm, const struct loom_op *op, loom_result_t res);
/* Write comm's record to LOOM_TRACE_DIR (when set). reason: "timeout",
 * "abort", "signal". Never called with comm->lock held. */
void loom_trace_dump(struct loom_comm *comm, const char *reason);
/* Track live communicators for SIGUSR1 (installs the handler once, when
 * LOOM_TRACE_DIR is set and SIGUSR1 is not otherwise handled). */
void loom_trace_register(struct loom_comm *comm);
/* The out-of-band answer to "which call are you in?" (LOOM_OOB_TAG_CALL):
 * this rank's latest calls, newest first, at most LOOM_TRACE_ANSWER of
 * them: count u32, then per call seq u64 | desc u32 | state u32 | count u64.
 * Runs on the out-of-band thread. */
#define LOOM_TRACE_ANSWER 8
#define LOOM_TRACE_ANSWER_REC 24
size_t loom_trace_answer(void *comm, int from, void *out, size_t cap);
void loom_trace_unregister(struct loom_comm *comm);

#endif
