/* queue.c - the one enqueue path and the progress thread.
 *
 * Every call is validated by api.c, then submitted here: it gets the next
 * sequence number under the communicator's lock and is either run at once
 * on the caller's thread (a blocking call with nothing queued and nothing
 * running: no hand-off to another CPU, which costs ~50 us on small VMs) or
 * queued for the progress thread, which runs ops in order. */
#include "build_config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "comm.h"
#include "core.h"
#include "stream/stream.h"
#include "util.h"

/* The start of an op on this thread (lock not held): its stream's hooks
 * (joined: only the wait for its inputs, see run_chain), then the sticky
 * error and abort. LOOM_SUCCESS: run it. */
static loom_result_t op_begin(struct loom_comm *comm, struct loom_op *op, int joined)
{
    loom_result_t res = LOOM_SUCCESS;
    if (op->stream)
        res = joined ? loom_stream_op_begin_joined(op->stream, comm, op)
                     : loom_stream_op_begin(op->stream, comm, op);
    if (res < 0) {
        loom_comm_set_error(comm, res, "%s #%llu: the stream's hooks failed (%s)",
                            loom_op_kind_name(op->kind), (unsigned long long)op->seq,
                            loom_result_string(res));
    } else if ((res = loom_comm_error(comm)) < 0) {
        op->sticky = 1; /* an earlier call failed: said then */
    } else if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE)) {
        res = LOOM_ERROR_ABORTED;
    } else {
        loom_trace_start(comm, op);
    }
    return res;
}

/* The end of an op that ran (or could not start) with result res. */
static void op_end(struct loom_comm *comm, struct loom_op *op, loom_result_t res)
{
    loom_trace_end(comm, op, res);
    if (res == LOOM_ERROR_TIMEOUT)
        loom_trace_dump(comm, "timeout");
    if (res < 0 && comm->tx) {
        /* close the links so that peers waiting on us learn it at once,
         * and tell them which call failed and whom we blame */
        comm->tx->notice_seq = op->seq;
        comm->tx->notice_desc = loom_op_desc(op);
        comm->tx->notice_count = op->count;
        comm->tx->notice_culprit = comm->blame;
        comm->tx->ops->shutdown(comm->tx, res);
        /* The network steps' communicator (coll/hier.c, driven on this
         * thread only) fails with it: its peers on the other servers, who
         * may hear of this failure from nothing else, learn that this rank
         * failed in this call, not that it left in order when the
         * communicator is destroyed. (Its ranks are not this one's: no
         * culprit.) */
        struct loom_comm *sub = comm->hier_sub;
        if (sub && sub->tx) {
            sub->tx->notice_seq = op->seq;
            sub->tx->notice_desc = loom_op_desc(op);
            sub->tx->notice_count = op->count;
            sub->tx->notice_culprit = -1;
            sub->tx->ops->shutdown(sub->tx, res);
        }
    }
    if (op->stream && res < 0 && !op->sticky && res != LOOM_ERROR_ABORTED) {
        /* the caller of a stream's call learns only a code, at the stream's
         * synchronize: the reason is said here, as NCCL's WARN does */
        char msg[sizeof comm->errmsg];
        pthread_mutex_lock(&comm->lock);
        memcpy(msg, comm->errmsg, sizeof msg);
        pthread_mutex_unlock(&comm->lock);
        LOOM_WARN(LOOM_SUB_COLL, "rank %d: a call on a stream failed: %s", comm->rank,
                  msg[0] ? msg : loom_result_string(res));
    }
    if (op->stream)
        loom_stream_op_end(op->stream, op, res);
}

/* Run one op on this thread; never called with comm->lock held. */
static loom_result_t execute(struct loom_comm *comm, struct loom_op *op)
{
    loom_result_t res = op_begin(comm, op, 0);
    if (res == LOOM_SUCCESS) /* a stream op with device buffers runs in staged pieces */
        res = op->stream ? loom_stream_op_run(op->stream, comm, op) : loom_coll_run(comm, op);
    op_end(comm, op, res);
    return res;
}

/* A blocking call with nothing queued before it, run on its caller's
 * thread (lock held on entry, busy set; released on return). It takes the
 * lock once more, at its end: a small call's time is mostly this path's
 * (docs/shm.md), so the sticky error it checked while being numbered is not
 * read again, and its start is stamped when it was queued. */
static loom_result_t run_inline(struct loom_comm *comm, struct loom_op *op)
{
    pthread_mutex_unlock(&comm->lock);
    loom_result_t res = __atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE) ? LOOM_ERROR_ABORTED
                                                                          : loom_coll_run(comm, op);
    if (res < 0) {
        op_end(comm, op, res);
        pthread_mutex_lock(&comm->lock);
    } else {
        pthread_mutex_lock(&comm->lock);
        loom_trace_end_locked(comm, op, res);
    }
    comm->busy = 0;
    if (comm->head)
        pthread_cond_signal(&comm->work_cv);
    pthread_mutex_unlock(&comm->lock);
    return res;
}

/* An op taken off the queue is done (lock held): a stream's op is freed, a
 * blocking call's waiter woken. */
static void finish(struct loom_comm *comm, struct loom_op *op, loom_result_t res)
{
    if (op->stream) {
        loom_op_release(op);
        free(op);
    } else {
        op->result = res;
        op->done = 1;
        pthread_cond_broadcast(&comm->done_cv);
    }
}

/* A lone send or receive on the host path: it runs as a point-to-point set
 * that the sends and receives queued right behind it join. */
static int p2p_lone(const struct loom_op *op)
{
    return loom_op_kind_is_p2p(op->kind) && !op->stage_dev;
}

/* Whether the head of the queue joins the running set: a send or receive
 * on the set's stream (or both blocking), whose stream has nothing
 * unfinished before it but the set's own nrun calls. Lock held. */
static int joins(struct loom_comm *comm, const struct loom_stream *stream, int nrun)
{
    const struct loom_op *op = comm->head;
    if (!op || !p2p_lone(op) || op->stream != stream)
        return 0;
    return !op->stream || loom_stream_outstanding_below(op->stream, op->ticket) == (size_t)nrun;
}

/* Runs first (a lone send or receive, taken off the queue; lock held on
 * entry and on return, busy set) with the sends and receives queued behind
 * it as they come, each completing on its own: a receive posted before a
 * send on the same communicator never waits for it, as in gloo and NCCL's
 * groups (two ranks that each receive, then send, on a stream). */
static void run_chain(struct loom_comm *comm, struct loom_op *first)
{
    pthread_mutex_unlock(&comm->lock);
    struct loom_p2p_set set;
    loom_p2p_set_init(&set, comm, NULL);
    int nrun = 0; /* taken off the queue, not finished */
    struct loom_stream *stream = first->stream;
    loom_result_t res = op_begin(comm, first, 0);
    if (res == LOOM_SUCCESS)
        res = loom_p2p_set_add(&set, first);
    if (res < 0) {
        loom_p2p_set_clear(&set);
        op_end(comm, first, res);
        pthread_mutex_lock(&comm->lock);
        finish(comm, first, res);
        return;
    }
    nrun = 1;
    while (res == LOOM_SUCCESS && nrun > 0) {
        struct loom_op *op = NULL;
        pthread_mutex_lock(&comm->lock);
        if (!comm->stop && joins(comm, stream, nrun)) {
            op = comm->head;
            comm->head = op->next;
            if (!comm->head)
                comm->tail = NULL;
        }
        pthread_mutex_unlock(&comm->lock);
        if (op) {
            nrun++;
            res = op_begin(comm, op, 1);
            if (res == LOOM_SUCCESS)
                res = loom_p2p_set_add(&set, op);
            if (res < 0) { /* the set fails with it, below */
                op_end(comm, op, res);
                pthread_mutex_lock(&comm->lock);
                finish(comm, op, res);
                pthread_mutex_unlock(&comm->lock);
                nrun--;
            }
            continue;
        }
        struct loom_op *done = NULL;
        res = loom_p2p_set_step(&set, &done);
        if (done) {
            op_end(comm, done, LOOM_SUCCESS);
            pthread_mutex_lock(&comm->lock);
            finish(comm, done, LOOM_SUCCESS);
            pthread_mutex_unlock(&comm->lock);
            nrun--;
        }
    }
    /* a failure: every call still in the set fails with it */
    struct loom_op *op;
    while ((op = loom_p2p_set_pop(&set)) != NULL) {
        op_end(comm, op, res);
        pthread_mutex_lock(&comm->lock);
        finish(comm, op, res);
        pthread_mutex_unlock(&comm->lock);
    }
    pthread_mutex_lock(&comm->lock);
}

/* Takes the queue's first op and runs it, lock held on entry and on return
 * (released while the op runs; busy keeps another thread from starting
 * the next). */
static void run_head(struct loom_comm *comm)
{
    struct loom_op *op = comm->head;
    comm->head = op->next;
    if (!comm->head)
        comm->tail = NULL;
    comm->busy = 1;
    if (p2p_lone(op)) {
        run_chain(comm, op);
    } else {
        pthread_mutex_unlock(&comm->lock);
        loom_result_t res = execute(comm, op);
        pthread_mutex_lock(&comm->lock);
        finish(comm, op, res);
    }
    comm->busy = 0;
}

static void *progress_main(void *arg)
{
    struct loom_comm *comm = arg;
    loom_log_set_rank(comm->rank);
    /* named for debuggers, top -H and the perf tools' per-thread CPU time */
    pthread_setname_np(pthread_self(), "loom-progress");
    int ran = 0; /* this thread ran an op since it last slept */
    pthread_mutex_lock(&comm->lock);
    for (;;) {
        if (!comm->head) {
            if (comm->stop)
                break;
            /* spin a little before sleeping: the next op often follows one
             * this thread ran. Woken for an op that a waiter ran itself
             * (loom_comm_help), it sleeps at once: spinning then only takes
             * a CPU from the ranks that are in the call. */
            pthread_mutex_unlock(&comm->lock);
            uint64_t until = loom_now_ns() + (ran ? (uint64_t)comm->spin_us * 1000ull : 0);
            ran = 0;
            while (!__atomic_load_n(&comm->head, __ATOMIC_ACQUIRE) &&
                   !__atomic_load_n(&comm->stop, __ATOMIC_ACQUIRE) &&
                   loom_now_ns() < until)
                sched_yield();
            pthread_mutex_lock(&comm->lock);
            if (!comm->head && !comm->stop) {
                comm->thread_sleeping = 1;
                pthread_cond_wait(&comm->work_cv, &comm->lock);
                comm->thread_sleeping = 0;
            }
            continue;
        }
        if (comm->busy) {
            /* an inline call or a helper is finishing. Asleep for append()
             * too: a helper's run_chain can take every queued op, and the
             * next op then comes with no one else to wake this thread. */
            comm->thread_sleeping = 1;
            pthread_cond_wait(&comm->work_cv, &comm->lock);
            comm->thread_sleeping = 0;
            continue;
        }
        run_head(comm);
        ran = 1;
    }
    pthread_mutex_unlock(&comm->lock);
    return NULL;
}

int loom_comm_help(struct loom_comm *comm)
{
    pthread_mutex_lock(&comm->lock);
    struct loom_op *op = comm->head;
    if (!op || comm->busy || comm->stop) {
        pthread_mutex_unlock(&comm->lock);
        return 0;
    }
    run_head(comm);
    if (comm->head)
        pthread_cond_signal(&comm->work_cv);
    pthread_mutex_unlock(&comm->lock);
    return 1;
}

loom_result_t loom_comm_start(struct loom_comm *comm)
{
    loom_request_set_helper(loom_comm_help);
    if (pthread_create(&comm->thread, NULL, progress_main, comm) != 0) {
        loom_set_thread_error("cannot start the progress thread");
        return LOOM_ERROR_SYSTEM;
    }
    comm->thread_started = 1;
    return LOOM_SUCCESS;
}

static void append(struct loom_comm *comm, struct loom_op *op)
{
    op->next = NULL;
    if (comm->tail)
        comm->tail->next = op;
    else
        __atomic_store_n(&comm->head, op, __ATOMIC_RELEASE);
    comm->tail = op;
    if (comm->thread_sleeping)
        pthread_cond_signal(&comm->work_cv);
}

loom_result_t loom_comm_submit(struct loom_comm *comm, struct loom_op *op)
{
    pthread_mutex_lock(&comm->lock);
    if (comm->error < 0) {
        loom_result_t err = comm->error;
        pthread_mutex_unlock(&comm->lock);
        return err;
    }
    /* point-to-point takes no call number (it is numbered per peer when it
     * runs); a group takes one per collective run; Loom's own set-up calls
     * count apart (no user call number) */
    uint32_t nseqs = loom_op_nseqs(op);
    uint64_t *counter = op->internal ? &comm->next_internal : &comm->next_seq;
    op->seq = nseqs ? (*counter + 1) | (op->internal ? LOOM_SEQ_INTERNAL : 0) : 0;
    *counter += nseqs;
    op->done = 0;
    /* A user's call starts without the last failed call's message (api.c);
     * a sticky error keeps its own. */
    if (!op->internal && comm->error == LOOM_SUCCESS)
        comm->errmsg[0] = '\0';
    if (!op->stream && !comm->busy && !comm->head) {
        comm->busy = 1;
        loom_trace_enqueue(comm, op, 1);
        return run_inline(comm, op);
    }
    loom_trace_enqueue(comm, op, 0);
    if (!op->stream) {
        append(comm, op);
        while (!op->done)
            pthread_cond_wait(&comm->done_cv, &comm->lock);
        pthread_mutex_unlock(&comm->lock);
        return op->result;
    }
    struct loom_op *q = malloc(sizeof *q);
    if (!q) {
        *counter -= nseqs;
        pthread_mutex_unlock(&comm->lock);
        return LOOM_ERROR_NO_MEMORY;
    }
    *q = *op;
    loom_result_t res = loom_stream_enqueue(q->stream, comm, q);
    if (res == LOOM_SUCCESS) /* whom a waiter on the stream may help */
        __atomic_store_n(&q->stream->hint_comm, comm, __ATOMIC_RELEASE);
    if (res < 0) {
        *counter -= nseqs;
        pthread_mutex_unlock(&comm->lock);
        free(q);
        return res;
    }
    /* a staged op runs as npieces calls, numbered from its own */
    comm->next_seq += q->npieces - 1;
    append(comm, q);
    pthread_mutex_unlock(&comm->lock);
    return LOOM_SUCCESS;
}

loom_result_t loom_comm_internal(struct loom_comm *comm, enum loom_op_kind kind,
                                 const void *sendbuf, void *recvbuf, uint64_t count,
                                 loom_dtype_t dtype, loom_redop_t redop)
{
    struct loom_op op = {.kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf,
                         .count = count, .dtype = dtype, .op = redop, .internal = 1};
    return loom_comm_submit(comm, &op);
}
