/* stream.c - host streams, hook streams, events and device-buffer staging. */
#include "build_config.h"

#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "util.h"

LOOM_API loom_result_t loom_stream_create_hooks(const loom_stream_hooks *hooks,
                                                void *user_stream,
                                                loom_stream_t *stream)
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
    if ((hooks->copy_to_host || hooks->copy_to_device) && !hooks->is_device_ptr) {
        loom_set_thread_error("loom_stream_create_hooks: copy hooks need is_device_ptr");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct loom_stream *s = calloc(1, sizeof *s);
    if (!s)
        return LOOM_ERROR_NO_MEMORY;
    /* copy what the caller's struct has; newer fields stay NULL */
    size_t n = hooks->struct_size < sizeof s->hooks ? hooks->struct_size
                                                    : sizeof s->hooks;
    memcpy(&s->hooks, hooks, n);
    s->hooks.struct_size = sizeof s->hooks;
    s->user = user_stream;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cv, NULL);
    *stream = s;
    return LOOM_SUCCESS;
}

/* The host stream needs no hooks: ordering and completion are the tickets
 * every stream keeps. */
static const loom_stream_hooks host_hooks = {
    .struct_size = sizeof(loom_stream_hooks),
    .name = "host",
};

LOOM_API loom_result_t loom_stream_create_host(loom_stream_t *stream)
{
    return loom_stream_create_hooks(&host_hooks, NULL, stream);
}

static uint64_t first_outstanding(const struct loom_stream *s)
{
    return s->noutstanding ? s->outstanding[0] : UINT64_MAX;
}

LOOM_API loom_result_t loom_stream_synchronize(loom_stream_t s)
{
    if (!s)
        return LOOM_ERROR_INVALID_ARGUMENT;
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

LOOM_API loom_result_t loom_stream_destroy(loom_stream_t s)
{
    if (!s)
        return LOOM_ERROR_INVALID_ARGUMENT;
    loom_stream_synchronize(s);
    if (s->hooks.destroy)
        s->hooks.destroy(s->user);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cv);
    free(s->outstanding);
    free(s);
    return LOOM_SUCCESS;
}

loom_result_t loom_stream_enqueue(struct loom_stream *s, struct loom_op *op)
{
    loom_result_t res;
    op->mark = NULL;
    op->wait_handle = NULL;
    if (s->hooks.mark_ready) {
        res = s->hooks.mark_ready(s->user, &op->mark);
        if (res < 0)
            return res;
    }
    if (s->hooks.add_wait) {
        res = s->hooks.add_wait(s->user, &op->wait_handle);
        if (res < 0) {
            if (s->hooks.release_mark)
                s->hooks.release_mark(s->user, op->mark);
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
            return LOOM_ERROR_NO_MEMORY;
        }
        s->outstanding = p;
        s->cap = cap;
    }
    op->ticket = ++s->last_ticket;
    s->outstanding[s->noutstanding++] = op->ticket;
    pthread_mutex_unlock(&s->lock);
    return LOOM_SUCCESS;
}

/* Bytes of the send and receive regions of op. */
static void op_regions(const struct loom_op *op, int nranks, int rank,
                       size_t *sbytes, size_t *rbytes)
{
    size_t e = loom_dtype_size(op->dtype), c = (size_t)op->count;
    switch (op->kind) {
    case LOOM_OP_ALLGATHER: *sbytes = c * e; *rbytes = (size_t)nranks * c * e; break;
    case LOOM_OP_REDUCE_SCATTER: *sbytes = (size_t)nranks * c * e; *rbytes = c * e; break;
    case LOOM_OP_BARRIER: case LOOM_OP_GROUP: *sbytes = *rbytes = 0; break;
    case LOOM_OP_REDUCE: case LOOM_OP_GATHER:
        *sbytes = c * e;
        *rbytes = rank == op->root ? (op->kind == LOOM_OP_GATHER ? (size_t)nranks : 1) * c * e
                                   : 0;
        break;
    case LOOM_OP_SCATTER:
        *sbytes = rank == op->root ? (size_t)nranks * c * e : 0;
        *rbytes = c * e;
        break;
    case LOOM_OP_ALLTOALL: *sbytes = *rbytes = (size_t)nranks * c * e; break;
    case LOOM_OP_SEND: *sbytes = c * e; *rbytes = 0; break;
    case LOOM_OP_RECV: *sbytes = 0; *rbytes = c * e; break;
    default: *sbytes = *rbytes = c * e; break;
    }
}

static int is_dev(struct loom_stream *s, const void *p)
{
    return p && s->hooks.is_device_ptr && s->hooks.is_device_ptr(s->user, p);
}

static loom_result_t stage_in(struct loom_stream *s, struct loom_op *op, int nranks,
                              int rank, struct loom_stage *st)
{
    size_t sb, rb;
    if (op->kind == LOOM_OP_GROUP) {
        /* staging is per buffer; a group's buffers must be the host's */
        for (int i = 0; i < op->nsubs; i++) {
            op_regions(&op->subs[i], nranks, rank, &sb, &rb);
            if ((sb && is_dev(s, op->subs[i].sendbuf)) ||
                (rb && is_dev(s, op->subs[i].recvbuf)))
                return LOOM_ERROR_NOT_SUPPORTED;
        }
        return LOOM_SUCCESS;
    }
    op_regions(op, nranks, rank, &sb, &rb);
    int dsend = sb && is_dev(s, op->sendbuf);
    int drecv = rb && is_dev(s, op->recvbuf);
    if (!dsend && !drecv)
        return LOOM_SUCCESS;
    if (!s->hooks.copy_to_host || !s->hooks.copy_to_device)
        return LOOM_ERROR_NOT_SUPPORTED;
    uintptr_t s0 = (uintptr_t)op->sendbuf, r0 = (uintptr_t)op->recvbuf;
    int overlap = dsend && drecv && s0 < r0 + rb && r0 < s0 + sb;
    loom_result_t res;
    if (overlap) {
        /* one region holding both (in place) */
        uintptr_t lo = s0 < r0 ? s0 : r0;
        uintptr_t hi = s0 + sb > r0 + rb ? s0 + sb : r0 + rb;
        char *h = malloc(hi - lo);
        if (!h)
            return LOOM_ERROR_NO_MEMORY;
        res = s->hooks.copy_to_host(s->user, h, (void *)lo, hi - lo);
        if (res < 0) {
            free(h);
            return res;
        }
        st->host = h;
        st->dev_recv = op->recvbuf;
        op->sendbuf = h + (s0 - lo);
        op->recvbuf = h + (r0 - lo);
    } else {
        size_t total = (dsend ? sb : 0) + (drecv ? rb : 0);
        char *h = malloc(total ? total : 1);
        if (!h)
            return LOOM_ERROR_NO_MEMORY;
        st->host = h;
        if (dsend) {
            res = s->hooks.copy_to_host(s->user, h, op->sendbuf, sb);
            if (res < 0) {
                free(h);
                st->host = NULL;
                return res;
            }
            op->sendbuf = h;
            h += sb;
        }
        if (drecv) {
            st->dev_recv = op->recvbuf;
            op->recvbuf = h;
        }
    }
    st->host_recv = drecv ? op->recvbuf : NULL;
    st->recv_bytes = drecv ? rb : 0;
    return LOOM_SUCCESS;
}

loom_result_t loom_stream_op_begin(struct loom_stream *s, struct loom_op *op,
                                   int nranks, int rank, struct loom_stage *st)
{
    memset(st, 0, sizeof *st);
    /* stream order: earlier ops of this stream (maybe on other comms) first */
    pthread_mutex_lock(&s->lock);
    while (first_outstanding(s) < op->ticket)
        pthread_cond_wait(&s->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    loom_result_t res = LOOM_SUCCESS;
    if (s->hooks.wait_ready)
        res = s->hooks.wait_ready(s->user, op->mark);
    if (s->hooks.release_mark)
        s->hooks.release_mark(s->user, op->mark);
    op->mark = NULL;
    if (res < 0)
        return res;
    return stage_in(s, op, nranks, rank, st);
}

void loom_stream_op_end(struct loom_stream *s, struct loom_op *op,
                        struct loom_stage *st, loom_result_t res)
{
    if (st->host) {
        if (res == LOOM_SUCCESS && st->dev_recv && st->recv_bytes)
            res = s->hooks.copy_to_device(s->user, st->dev_recv, st->host_recv,
                                          st->recv_bytes);
        free(st->host);
        st->host = NULL;
    }
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
