/* link_tx.c - the vtable entries the link's transports share (link_tx.h). */
#include "build_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "util.h"
#include "transport/common/link_tx.h"

loom_result_t loom_link_errf(struct loom_tx *tx, loom_result_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tx->errmsg, sizeof tx->errmsg, fmt, ap);
    va_end(ap);
    return res;
}

loom_result_t loom_link_open(struct loom_tx *tx, const struct loom_link_ops *ops, size_t peer_size)
{
    const struct loom_tx_params *pr = &tx->params;
    if (pr->nranks < 1 || pr->rank < 0 || pr->rank >= pr->nranks)
        return loom_link_errf(tx, LOOM_ERROR_INVALID_ARGUMENT, "%s: rank %d of %d", ops->name,
                              pr->rank, pr->nranks);
    if (!pr->oob)
        return loom_link_errf(tx, LOOM_ERROR_INVALID_ARGUMENT,
                              "%s: no out-of-band service to connect through", ops->name);
    return loom_link_init(tx, ops, peer_size);
}

loom_result_t loom_link_isend(struct loom_tx *tx, struct loom_tx_req *req)
{
    return loom_link_of(tx)->ops->post(tx, req, 1);
}

loom_result_t loom_link_irecv(struct loom_tx *tx, struct loom_tx_req *req)
{
    return loom_link_of(tx)->ops->post(tx, req, 0);
}

/* One non-blocking look at everything; *wait_ms: how long a sleep may last
 * before a deadline needs looking at (-1: none). */
static void pass(struct loom_tx *tx, const struct loom_link_wait *w, int *wait_ms)
{
    loom_link_poll(tx);
    loom_link_of(tx)->ops->poll(tx);
    if (w->after_poll)
        w->after_poll(tx);
    int ms = loom_link_timeouts(tx);
    if (wait_ms)
        *wait_ms = ms;
}

/* Wait up to ms (0: a look) on the epoll set; handle what came. Returns how
 * many events, or -1 (errmsg says why); *woken: wake() was called. */
static int events(struct loom_tx *tx, const struct loom_link_wait *w, int ms, int *woken)
{
    struct loom_link *l = loom_link_of(tx);
    struct epoll_event evs[32];
    int k = epoll_wait(l->epfd, evs, 32, ms);
    if (k < 0 && errno != EINTR) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s: epoll_wait: %s", l->ops->name,
                 strerror(errno));
        return -1;
    }
    for (int i = 0; i < k; i++)
        if (!loom_link_event(tx, evs[i].data.u64, evs[i].events, woken) && w->event)
            w->event(tx, evs[i].data.u64, evs[i].events);
    return k < 0 ? 0 : k;
}

loom_result_t loom_link_progress(struct loom_tx *tx, int timeout_us, const struct loom_link_wait *w)
{
    struct loom_link *l = loom_link_of(tx);
    uint64_t before = w->finished(tx);
    int deadline_ms;
    pass(tx, w, &deadline_ms);
    if (l->err)
        return loom_link_take_err(tx);
    if (w->finished(tx) != before || l->shut)
        return LOOM_SUCCESS;
    if (timeout_us == 0) {
        int woken = 0;
        if (w->look && w->look(tx) && events(tx, w, 0, &woken) > 0)
            pass(tx, w, NULL);
        return l->err ? loom_link_take_err(tx) : LOOM_SUCCESS;
    }
    double until = timeout_us > 0 ? loom_now() + timeout_us * 1e-6 : 0;
    int state = 0;
    for (;;) {
        int ms = -1;
        if (timeout_us > 0) {
            double left = until - loom_now();
            if (left <= 0)
                return LOOM_SUCCESS;
            ms = (int)(left * 1e3) + 1;
        }
        if (deadline_ms >= 0 && (ms < 0 || deadline_ms < ms))
            ms = deadline_ms;
        if (w->before_sleep) {
            loom_result_t res = w->before_sleep(tx, &ms, &state);
            if (res < 0)
                return res;
            /* arming may have looked at the completion queue */
            if (l->err)
                return loom_link_take_err(tx);
            if (w->finished(tx) != before)
                return LOOM_SUCCESS;
        }
        int woken = 0;
        if (events(tx, w, ms, &woken) < 0)
            return LOOM_ERROR_SYSTEM;
        pass(tx, w, &deadline_ms);
        if (l->err)
            return loom_link_take_err(tx);
        if (woken || w->finished(tx) != before || l->shut)
            return LOOM_SUCCESS;
    }
}

void loom_link_finish(struct loom_tx *tx,
                      void (*drop)(struct loom_tx *tx, int r, loom_result_t res))
{
    struct loom_link *l = loom_link_of(tx);
    loom_link_goodbye(tx);
    if (l->peers)
        for (int r = 0; r < tx->params.nranks; r++)
            if (r != tx->params.rank)
                drop(tx, r, LOOM_ERROR_ABORTED);
    loom_link_free(tx);
}
