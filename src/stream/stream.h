/* stream.h - Loom streams: ordering ops against a user's stream through
 * hooks, tickets for events and synchronize, and staging of device buffers
 * (stage.c) in pieces through host memory. */
#ifndef LOOM_STREAM_H
#define LOOM_STREAM_H

#include <pthread.h>
#include <stdint.h>

#include "loom.h"
#include "comm/comm.h"

/* Host staging of one stream: one allocation from the adapter (stage_alloc,
 * or malloc for synchronous copy hooks) cut into nslots slots, reused by
 * every staged op of the stream. Only the thread running the stream's op
 * touches it (the ops of a stream run one at a time). */
struct loom_stage_pool {
    char *base;                 /* NULL until the first staged op          */
    size_t bytes;               /* of the allocation                       */
    size_t slot_bytes;
    int nslots;
    int async;                  /* the adapter's stage_alloc/copy_async    */
    unsigned char *busy;        /* slot has a copy not yet seen finished   */
};

struct loom_stream {
    loom_stream_hooks hooks;
    void *user;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    /* held across mark_ready, add_wait and the ticket, so that the hooks
     * see the ops of the stream in ticket order */
    pthread_mutex_t enqueue_lock;
    uint64_t last_ticket;       /* last ticket handed out                  */
    uint64_t *outstanding;      /* tickets enqueued and not complete, ascending */
    size_t noutstanding, cap;
    uint64_t err_ticket;        /* ticket of the first failed op (0: none)  */
    loom_result_t err;
    struct loom_stage_pool pool;
    /* requests not complete yet, ascending tickets (request.c) */
    struct loom_request *req_head, *req_tail;
    int callbacks_running;      /* taken off the list, callback not returned */
    /* the communicator of the last op enqueued (atomic): request waiters
     * help it (loom_comm_help); alive while an op of this stream is pending */
    struct loom_comm *hint_comm;
};

/* What the public stream calls do, for Loom's own streams (grouped calls
 * over several communicators): a host stream; wait until every op enqueued
 * on s is done and take its first error; drain and free s. */
loom_result_t loom_stream_new_host(struct loom_stream **s);
loom_result_t loom_stream_drain(struct loom_stream *s);
void loom_stream_free(struct loom_stream *s);

/* With s->lock held, after a ticket retired: take off s's list the
 * requests now complete (their result set), to be finished by
 * loom_request_finish once the lock is released. */
struct loom_request *loom_request_take_done(struct loom_stream *s);
/* Run their callbacks, free the ones freed meanwhile. No lock held. */
void loom_request_finish(struct loom_stream *s, struct loom_request *list);
/* What loom_request_wait calls to run a communicator's queued ops on the
 * waiting thread (returns 1 when it ran one); set by core. */
void loom_request_set_helper(int (*help)(struct loom_comm *comm));

/* Caller's thread, at enqueue, with comm->lock held: ticket, "inputs ready"
 * mark, the user's stream made to wait; decides whether the op is staged
 * (op->stage_dev, op->npieces). On failure comm->errmsg says why. */
loom_result_t loom_stream_enqueue(struct loom_stream *s, struct loom_comm *comm,
                                  struct loom_op *op);
/* Executing thread, before the op touches buffers: waits for earlier ops of
 * the stream, then for the inputs (polling query_ready when the hooks have
 * it, giving up on abort). Sets comm's error on failure. */
loom_result_t loom_stream_op_begin(struct loom_stream *s, struct loom_comm *comm,
                                   struct loom_op *op);
/* The same for an op that joins ops of the stream already running (the
 * point-to-point calls queued behind a running one, core/queue.c): only
 * the wait for its inputs. */
loom_result_t loom_stream_op_begin_joined(struct loom_stream *s, struct loom_comm *comm,
                                          struct loom_op *op);
/* How many ops of s enqueued before ticket are not complete. */
size_t loom_stream_outstanding_below(struct loom_stream *s, uint64_t ticket);
/* Executing thread: run the op, piece by piece through host staging when it
 * has device buffers (stage.c), else as it is. Sets comm's error on failure. */
loom_result_t loom_stream_op_run(struct loom_stream *s, struct loom_comm *comm,
                                 struct loom_op *op);
/* Executing thread, after the op (also after a failed begin or run):
 * release the user's stream with the result, retire the ticket. */
void loom_stream_op_end(struct loom_stream *s, struct loom_op *op,
                        loom_result_t res);

/* ---- stage.c ------------------------------------------------------------ */
/* At enqueue: which of op's buffers are device memory, and into how many
 * pieces the op is cut (op->stage_dev, op->npieces). LOOM_ERROR_NOT_SUPPORTED
 * (with a message in err) when device buffers cannot be staged. */
loom_result_t loom_stage_plan(struct loom_stream *s, const struct loom_comm *comm,
                              struct loom_op *op, char *err, size_t errlen);
/* Run a staged op (op->stage_dev != 0). */
loom_result_t loom_stage_run(struct loom_stream *s, struct loom_comm *comm,
                             struct loom_op *op);
/* Free the staging pool (stream destroy). */
void loom_stage_pool_free(struct loom_stream *s);

/* The hooks' last error message for this thread, or a generic one. */
const char *loom_stream_hook_error(struct loom_stream *s);

#endif
