/* stream.h - Loom streams: ordering ops against a user's stream through
 * hooks, tickets for events and synchronize, and staging of device buffers. */
#ifndef LOOM_STREAM_H
#define LOOM_STREAM_H

#include <pthread.h>
#include <stdint.h>

#include "loom.h"
#include "core/comm.h"

struct loom_stream {
    loom_stream_hooks hooks;
    void *user;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    uint64_t last_ticket;       /* last ticket handed out                  */
    uint64_t *outstanding;      /* tickets enqueued and not complete, ascending */
    size_t noutstanding, cap;
    uint64_t err_ticket;        /* ticket of the first failed op (0: none)  */
    loom_result_t err;
    /* requests not complete yet, ascending tickets (request.c) */
    struct loom_request *req_head, *req_tail;
    int callbacks_running;      /* taken off the list, callback not returned */
    /* the communicator of the last op enqueued (atomic): request waiters
     * help it (loom_comm_help); alive while an op of this stream is pending */
    struct loom_comm *hint_comm;
};

/* With s->lock held, after a ticket retired: take off s's list the
 * requests now complete (their result set), to be finished by
 * loom_request_finish once the lock is released. */
struct loom_request *loom_request_take_done(struct loom_stream *s);
/* Run their callbacks, free the ones freed meanwhile. No lock held. */
void loom_request_finish(struct loom_stream *s, struct loom_request *list);

/* Caller's thread, at enqueue: ticket, "inputs ready" mark, the user's
 * stream made to wait. */
loom_result_t loom_stream_enqueue(struct loom_stream *s, struct loom_op *op);
/* Executing thread, before the op touches buffers: waits for earlier ops of
 * the stream, then for the inputs; stages device buffers into host memory
 * (op's pointers then point at the staging; *stage must be passed to end). */
struct loom_stage {
    void *host;                 /* staging allocation (NULL: none)          */
    void *dev_send, *dev_recv;  /* the user's device pointers               */
    void *host_recv;
    size_t recv_bytes;
    void *recv_dev_copyout;
};
loom_result_t loom_stream_op_begin(struct loom_stream *s, struct loom_op *op,
                                   int nranks, int rank, struct loom_stage *st);
/* Executing thread, after the op: copy results back, release the user's
 * stream, retire the ticket. */
void loom_stream_op_end(struct loom_stream *s, struct loom_op *op,
                        struct loom_stage *st, loom_result_t res);

#endif
