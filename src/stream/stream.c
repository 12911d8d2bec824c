/* stream.c - host streams, hook streams, tickets and events. Device-buffer
 * staging is stage.c. */
#include "build_config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll.h"
#include "stream.h"
#include "base/util.h"

/* A hook's copy of the caller's struct: fields past its struct_size stay
 * NULL, so an adapter built against an older loom.h keeps working. */
static loom_result_t stream_create(const loom_stream_hooks *hooks, void *user_stream,
                                   struct loom_stream **stream)
{
    if (!hooks || !stream)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (hooks->struct_size < offsetof(loom_stream_hooks, destroy) ||
        hooks->struct_size > 4096) {
        loom_set_thread_error("loom_stream_create_hooks: hooks->struct_size %zu is "
                              "not a loom_stream_hooks size",
                              hooks->struct_size);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    loom_stream_hooks h;
    memset(&h, 0, sizeof h);
    memcpy(&h, hooks, hooks->struct_size < sizeof h ? hooks->struct_size : sizeof h);
    h.struct_size = sizeof h;
    if ((h.copy_to_host || h.copy_to_device) && !h.is_device_ptr) {
        loom_set_thread_error("loom_stream_create_hooks: copy hooks need is_device_ptr");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    int nasync = !!h.stage_alloc + !!h.stage_free + !!h.copy_async + !!h.copy_query;
    if (nasync != 0 && (nasync != 4 || !h.is_device_ptr)) {
        loom_set_thread_error("loom_stream_create_hooks: stage_alloc, stage_free, "
                              "copy_async and copy_query come together, with "
                              "is_device_ptr");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct loom_stream *s = calloc(1, sizeof *s);
    if (!s)
        return LOOM_ERROR_NO_MEMORY;
    s->hooks = h;
    s->user = user_stream;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->enqueue_lock, NULL);
    pthread_cond_init(&s->cv, NULL);
    *stream = s;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_stream_create_hooks(const loom_stream_hooks *hooks, void *user_stream,
                                                loom_stream_t *stream)
{
    return stream_create(hooks, user_stream, stream);
}

/* The host stream needs no hooks: ordering and completion are the tickets
 * every stream keeps. */
static const loom_stream_hooks host_hooks = {
    .struct_size = sizeof(loom_stream_hooks),
    .name = "host",
};

loom_result_t loom_stream_new_host(struct loom_stream **stream)
{
    return stream_create(&host_hooks, NULL, stream);
}

LOOM_API loom_result_t loom_stream_create_host(loom_stream_t *stream)
{
    return loom_stream_new_host(stream);
}

static uint64_t first_outstanding(const struct loom_stream *s)
{
    return s->noutstanding ? s->outstanding[0] : UINT64_MAX;
}

loom_result_t loom_stream_drain(struct loom_stream *s)
{
    pthread_mutex_lock(&s->lock);
    /* and until the requests' callbacks have returned */
    while (s->noutstanding || s->callbacks_running)
        pthread_cond_wait(&s->cv, &s->lock);
    loom_result_t res = s->err;
    s->err = LOOM_SUCCESS;
    s->err_ticket = 0;
    pthread_mutex_unlock(&s->lock);
    return res;
}

LOOM_API loom_result_t loom_stream_synchronize(loom_stream_t s)
{
    if (!s)
        return LOOM_ERROR_INVALID_ARGUMENT;
    return loom_stream_drain(s);
}

void loom_stream_free(struct loom_stream *s)
{
    loom_stream_drain(s);
    loom_stage_pool_free(s);
    if (s->hooks.destroy)
        s->hooks.destroy(s->user);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->enqueue_lock);
    pthread_cond_destroy(&s->cv);
    free(s->outstanding);
    free(s);
}

LOOM_API loom_result_t loom_stream_destroy(loom_stream_t s)
{
    if (!s)
        return LOOM_ERROR_INVALID_ARGUMENT;
    loom_stream_free(s);
    return LOOM_SUCCESS;
}

const char *loom_stream_hook_error(struct loom_stream *s)
{
    const char *m = s->hooks.last_error ? s->hooks.last_error(s->user) : NULL;
    return m && *m ? m : "no detail from the hooks";
}

/* An enqueue failure: the message for loom_get_error_string(comm), not
 * sticky (as argument errors). comm->lock is held. */
static loom_result_t enqueue_error(struct loom_stream *s, struct loom_comm *comm,
                                   const struct loom_op *op, loom_result_t res,
                                   const char *what)
{
    if (comm->error == LOOM_SUCCESS)
        snprintf(comm->errmsg, sizeof comm->errmsg, "%s: stream \"%s\": %s: %s",
                 loom_op_kind_name(op->kind), s->hooks.name ? s->hooks.name : "?",
                 what, loom_stream_hook_error(s));
    return res;
}

loom_result_t loom_stream_enqueue(struct loom_stream *s, struct loom_comm *comm,
                                  struct loom_op *op)
{
    loom_result_t res;
    op->mark = NULL;
    op->wait_handle = NULL;
    char err[256];
    res = loom_stage_plan(s, comm, op, err, sizeof err);
    if (res < 0) {
        if (comm->error == LOOM_SUCCESS)
            snprintf(comm->errmsg, sizeof comm->errmsg, "%s", err);
        return res;
    }
    pthread_mutex_lock(&s->enqueue_lock);
    if (s->hooks.mark_ready) {
        res = s->hooks.mark_ready(s->user, &op->mark);
        if (res < 0) {
            pthread_mutex_unlock(&s->enqueue_lock);
            return enqueue_error(s, comm, op, res, "marking inputs ready");
        }
    }
    if (s->hooks.add_wait) {
        res = s->hooks.add_wait(s->user, &op->wait_handle);
        if (res < 0) {
            enqueue_error(s, comm, op, res, "making the stream wait");
            if (s->hooks.release_mark)
                s->hooks.release_mark(s->user, op->mark);
            pthread_mutex_unlock(&s->enqueue_lock);
            return res;
        }
    }
    pthread_mutex_lock(&s->lock);
    if (s->noutstanding == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        uint64_t *p = realloc(s->outstanding, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&s->lock);
            if (s->hooks.complete)
                s->hooks.complete(s->user, op->wait_handle, LOOM_ERROR_NO_MEMORY);
            if (s->hooks.release_mark)
                s->hooks.release_mark(s->user, op->mark);
            pthread_mutex_unlock(&s->enqueue_lock);
            return LOOM_ERROR_NO_MEMORY;
        }
        s->outstanding = p;
        s->cap = cap;
    }
    op->ticket = ++s->last_ticket;
    s->outstanding[s->noutstanding++] = op->ticket;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->enqueue_lock);
    return LOOM_SUCCESS;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Poll query_ready until the mark is reached. The user's stream may have
 * long work before it (a backward pass), so the wait backs off: spin for
 * 100 us (an op enqueued right behind a short kernel starts at once), then
 * yield for 1 ms, then sleep 50 us at a time. Abort and a communicator
 * that already failed end the wait: the op will not run, and completing it
 * early only lets the user's stream pass a call that failed anyway. */
static loom_result_t poll_ready(struct loom_stream *s, struct loom_comm *comm, void *mark)
{
    uint64_t start = loom_now_ns();
    for (unsigned n = 0;; n++) {
        loom_result_t res = s->hooks.query_ready(s->user, mark);
        if (res != LOOM_NOT_READY)
            return res;
        if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE))
            return LOOM_ERROR_ABORTED;
        uint64_t waited = loom_now_ns() - start;
        if (waited < 100000) {
            cpu_relax();
            continue;
        }
        if ((n & 63) == 0 && loom_comm_error(comm) < 0)
            return loom_comm_error(comm);
        if (waited < 1000000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

size_t loom_stream_outstanding_below(struct loom_stream *s, uint64_t ticket)
{
    pthread_mutex_lock(&s->lock);
    size_t n = 0;
    while (n < s->noutstanding && s->outstanding[n] < ticket)
        n++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

loom_result_t loom_stream_op_begin(struct loom_stream *s, struct loom_comm *comm,
                                   struct loom_op *op)
{
    /* stream order: earlier ops of this stream (maybe on other comms) first */
    pthread_mutex_lock(&s->lock);
    while (first_outstanding(s) < op->ticket)
        pthread_cond_wait(&s->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return loom_stream_op_begin_joined(s, comm, op);
}

loom_result_t loom_stream_op_begin_joined(struct loom_stream *s, struct loom_comm *comm,
                                          struct loom_op *op)
{
    loom_result_t res = LOOM_SUCCESS;
    if (s->hooks.query_ready)
        res = poll_ready(s, comm, op->mark);
    else if (s->hooks.wait_ready)
        res = s->hooks.wait_ready(s->user, op->mark);
    const char *detail = res < 0 && res != LOOM_ERROR_ABORTED && loom_comm_error(comm) == 0
                             ? loom_stream_hook_error(s) : NULL;
    if (s->hooks.release_mark)
        s->hooks.release_mark(s->user, op->mark);
    op->mark = NULL;
    if (res == LOOM_ERROR_ABORTED)
        loom_comm_set_error(comm, res, "%s #%llu: aborted while waiting for its inputs",
                            loom_op_kind_name(op->kind), (unsigned long long)op->seq);
    else if (detail)
        loom_comm_set_error(comm, res, "%s #%llu: stream \"%s\": waiting for the inputs: %s",
                            loom_op_kind_name(op->kind), (unsigned long long)op->seq,
                            s->hooks.name ? s->hooks.name : "?", detail);
    return res;
}

loom_result_t loom_stream_op_run(struct loom_stream *s, struct loom_comm *comm,
                                 struct loom_op *op)
{
    if (op->stage_dev)
        return loom_stage_run(s, comm, op);
    return loom_coll_run(comm, op);
}

void loom_stream_op_end(struct loom_stream *s, struct loom_op *op, loom_result_t res)
{
    if (s->hooks.complete)
        s->hooks.complete(s->user, op->wait_handle, res);
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->noutstanding; i++) {
        if (s->outstanding[i] == op->ticket) {
            memmove(&s->outstanding[i], &s->outstanding[i + 1],
                    (s->noutstanding - i - 1) * sizeof s->outstanding[0]);
            s->noutstanding--;
            break;
        }
    }
    if (res < 0 && (s->err_ticket == 0 || op->ticket < s->err_ticket)) {
        s->err_ticket = op->ticket;
        s->err = res;
    }
    struct loom_request *done = s->req_head ? loom_request_take_done(s) : NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->lock);
    if (done)
        loom_request_finish(s, done);
}

/* ---- events ------------------------------------------------------------ */

struct loom_event {
    struct loom_stream *stream;
    uint64_t ticket;
};

LOOM_API loom_result_t loom_event_create(loom_event_t *event)
{
    if (!event)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *event = calloc(1, sizeof **event);
    return *event ? LOOM_SUCCESS : LOOM_ERROR_NO_MEMORY;
}

LOOM_API loom_result_t loom_event_record(loom_event_t ev, loom_stream_t s)
{
    if (!ev || !s)
        return LOOM_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->lock);
    ev->stream = s;
    ev->ticket = s->last_ticket;
    pthread_mutex_unlock(&s->lock);
    return LOOM_SUCCESS;
}

static loom_result_t event_state(loom_event_t ev)
{
    struct loom_stream *s = ev->stream;
    if (s->err_ticket && s->err_ticket <= ev->ticket)
        return s->err;
    return first_outstanding(s) > ev->ticket ? LOOM_SUCCESS : LOOM_NOT_READY;
}

LOOM_API loom_result_t loom_event_query(loom_event_t ev)
{
    if (!ev)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (!ev->stream)
        return LOOM_SUCCESS; /* never recorded: nothing to wait for */
    pthread_mutex_lock(&ev->stream->lock);
    loom_result_t res = event_state(ev);
    pthread_mutex_unlock(&ev->stream->lock);
    return res;
}

LOOM_API loom_result_t loom_event_synchronize(loom_event_t ev)
{
    if (!ev)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (!ev->stream)
        return LOOM_SUCCESS;
    struct loom_stream *s = ev->stream;
    pthread_mutex_lock(&s->lock);
    loom_result_t res;
    while ((res = event_state(ev)) == LOOM_NOT_READY)
        pthread_cond_wait(&s->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return res;
}

LOOM_API loom_result_t loom_event_destroy(loom_event_t ev)
{
    free(ev);
    return LOOM_SUCCESS;
}
