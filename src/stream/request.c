/* request.c - requests: a handle on the calls enqueued on a stream so far,
 * polled, waited on, or calling back once they complete.
 *
 * A request is the stream's ticket at its creation. Stream ops complete in
 * ticket order, so when an op retires (loom_stream_op_end, under the
 * stream's lock) every request whose ticket is now below the first ticket
 * still outstanding is complete: it is taken off the list with its result,
 * and its callback runs after the lock is released. Who frees the request
 * (the user's loom_request_free, or the completing thread when the user
 * freed it first) is settled by flags changed atomically, so neither the
 * stream nor a lock is needed once it is complete. */
#include "build_config.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "stream.h"
#include "base/util.h"

enum {
    REQ_DONE = 1,         /* result valid                               */
    REQ_CALLED = 2,       /* callback returned (or there was none)       */
    REQ_FREED = 4         /* the user called loom_request_free           */
};

struct loom_request {
    struct loom_stream *stream;
    uint64_t ticket;
    loom_request_fn fn;
    void *arg;
    loom_result_t result;
    int flags;            /* REQ_*, atomic                               */
    struct loom_request *next;
};

static uint64_t first_outstanding(const struct loom_stream *s)
{
    return s->noutstanding ? s->outstanding[0] : UINT64_MAX;
}

/* The result for a request at ticket t: that of an event recorded there. */
static loom_result_t result_at(const struct loom_stream *s, uint64_t t)
{
    return s->err_ticket && s->err_ticket <= t ? s->err : LOOM_SUCCESS;
}

struct loom_request *loom_request_take_done(struct loom_stream *s)
{
    uint64_t first = first_outstanding(s);
    struct loom_request *list = NULL, **tail = &list;
    while (s->req_head && s->req_head->ticket < first) {
        struct loom_request *r = s->req_head;
        s->req_head = r->next;
        r->result = result_at(s, r->ticket);
        r->next = NULL;
        __atomic_or_fetch(&r->flags, REQ_DONE, __ATOMIC_RELEASE);
        *tail = r;
        tail = &r->next;
        s->callbacks_running++;
    }
    if (!s->req_head)
        s->req_tail = NULL;
    return list;
}

/* The callback ran (or there was none): free r if the user already did. */
static void called(struct loom_request *r)
{
    if (__atomic_fetch_or(&r->flags, REQ_CALLED, __ATOMIC_ACQ_REL) & REQ_FREED)
        free(r);
}

void loom_request_finish(struct loom_stream *s, struct loom_request *list)
{
    int n = 0;
    while (list) {
        struct loom_request *r = list;
        list = r->next;
        if (r->fn)
            r->fn(r->arg, r->result);
        called(r);
        n++;
    }
    /* loom_stream_synchronize waits for this; s is not touched after */
    pthread_mutex_lock(&s->lock);
    s->callbacks_running -= n;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->lock);
}

LOOM_API loom_result_t loom_request_create(loom_stream_t s, loom_request_fn fn,
                                           void *arg, loom_request_t *request)
{
    if (!s || !request) {
        loom_set_thread_error("loom_request_create: %s is NULL", s ? "request" : "stream");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct loom_request *r = calloc(1, sizeof *r);
    if (!r)
        return LOOM_ERROR_NO_MEMORY;
    r->stream = s;
    r->fn = fn;
    r->arg = arg;
    pthread_mutex_lock(&s->lock);
    r->ticket = s->last_ticket;
    int now = first_outstanding(s) > r->ticket;
    if (now) {
        r->result = result_at(s, r->ticket);
        __atomic_store_n(&r->flags, REQ_DONE, __ATOMIC_RELEASE);
    } else if (s->req_tail) {
        s->req_tail->next = r;
        s->req_tail = r;
    } else {
        s->req_head = s->req_tail = r;
    }
    pthread_mutex_unlock(&s->lock);
    *request = r;
    if (now) {
        if (fn)
            fn(arg, r->result);
        called(r);
    }
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_request_test(loom_request_t r)
{
    if (!r)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE)
        return r->result;
    return LOOM_NOT_READY;
}

/* How a waiter runs its communicator's queued ops itself (core's
 * loom_comm_help, handed down when the first communicator starts: this
 * layer is below core). */
static int (*request_help)(struct loom_comm *comm);

void loom_request_set_helper(int (*help)(struct loom_comm *comm))
{
    __atomic_store_n(&request_help, help, __ATOMIC_RELEASE);
}

LOOM_API loom_result_t loom_request_wait(loom_request_t r)
{
    if (!r)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE)
        return r->result;
    struct loom_stream *s = r->stream;
    for (;;) {
        /* run queued ops here rather than wake the progress thread: a call
         * waited for at once then costs no hand-off. While r is pending an
         * op of s is, so hint_comm (its communicator or a later op's) is
         * alive. */
        struct loom_comm *c = __atomic_load_n(&s->hint_comm, __ATOMIC_ACQUIRE);
        int (*help)(struct loom_comm *) = __atomic_load_n(&request_help, __ATOMIC_ACQUIRE);
        if (c && help && help(c)) {
            if (__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE)
                return r->result;
            continue;
        }
        pthread_mutex_lock(&s->lock);
        /* the op is running elsewhere (or r is done): sleep until an op of
         * s ends, then look again */
        if (!(__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE))
            pthread_cond_wait(&s->cv, &s->lock);
        pthread_mutex_unlock(&s->lock);
        if (__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE)
            return r->result;
    }
}

LOOM_API loom_result_t loom_request_wait_timeout(loom_request_t r, int timeout_ms)
{
    if (!r || timeout_ms < 0)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE)
        return r->result;
    struct loom_stream *s = r->stream;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* s->cv's clock */
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int timed_out = 0;
    pthread_mutex_lock(&s->lock);
    /* an op of s ending broadcasts s->cv (loom_request_finish too) */
    while (!(__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE) && !timed_out)
        timed_out = pthread_cond_timedwait(&s->cv, &s->lock, &until) == ETIMEDOUT;
    pthread_mutex_unlock(&s->lock);
    if (__atomic_load_n(&r->flags, __ATOMIC_ACQUIRE) & REQ_DONE)
        return r->result;
    return LOOM_NOT_READY;
}

LOOM_API loom_result_t loom_request_free(loom_request_t r)
{
    if (!r)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (__atomic_fetch_or(&r->flags, REQ_FREED, __ATOMIC_ACQ_REL) & REQ_CALLED)
        free(r);
    return LOOM_SUCCESS;
}
