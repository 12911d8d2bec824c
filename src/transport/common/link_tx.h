/* link_tx.h - the vtable entries that every transport over the link layer
 * (ofi, verbs) runs the same way: set-up's checks, isend/irecv, the
 * progress loop and the start of finalize. A transport supplies its data
 * path through the link's post and poll hooks (link.h) and what differs in
 * its sleep through struct loom_link_wait. */
#ifndef LOOM_LINK_TX_H
#define LOOM_LINK_TX_H

#include <stdint.h>

#include "loom.h"
#include "transport/common/link.h"
#include "transport/transport.h"

struct loom_link_wait {
    /* Requests finished so far: a progress() that may wait returns once
     * this moves, not for traffic that finishes nothing. */
    uint64_t (*finished)(struct loom_tx *tx);
    /* After each look at the completion queue (ofi: retry refused posts).
     * May be NULL. */
    void (*after_poll)(struct loom_tx *tx);
    /* progress(0): whether to look at the control sockets this time too (a
     * system call each time would slow a spinning caller). NULL: never. */
    int (*look)(struct loom_tx *tx);
    /* Before a sleep of *ms (-1: none): arm what ends it, or shorten *ms;
     * *state is 0 at each progress() call, for the hook's own use. A
     * negative result (errmsg says why) ends progress. May be NULL. */
    loom_result_t (*before_sleep)(struct loom_tx *tx, int *ms, int *state);
    /* An epoll event whose tag is the transport's own. May be NULL. */
    void (*event)(struct loom_tx *tx, uint64_t tag, uint32_t events);
};

/* Declares a data path's entry points, which serve as the link's hooks
 * (contracts in link.h): loom_<x>_post (post), loom_<x>_poll_cq (poll),
 * loom_<x>_kick (up: move what can move on peer r) and loom_<x>_fail_reqs
 * (fail every pending request of peer r with res). */
#define LOOM_LINK_DATA_PATH(x)                                                                     \
    loom_result_t loom_##x##_post(struct loom_tx *tx, struct loom_tx_req *req, int is_send);       \
    int loom_##x##_poll_cq(struct loom_tx *tx);                                                    \
    void loom_##x##_kick(struct loom_tx *tx, int r);                                               \
    void loom_##x##_fail_reqs(struct loom_tx *tx, int r, loom_result_t res)

/* errmsg from fmt; returns res. */
loom_result_t loom_link_errf(struct loom_tx *tx, loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* init's first step: check params (rank, the OOB service), then
 * loom_link_init; else errmsg says why. */
loom_result_t loom_link_open(struct loom_tx *tx, const struct loom_link_ops *ops, size_t peer_size);
/* The vtable's isend and irecv: the post hook. */
loom_result_t loom_link_isend(struct loom_tx *tx, struct loom_tx_req *req);
loom_result_t loom_link_irecv(struct loom_tx *tx, struct loom_tx_req *req);
/* The vtable's progress: look at everything once; when no request finished
 * and timeout_us != 0, sleep on the link's epoll set (its sockets, the wake
 * and OOB eventfds, the transport's own descriptors) until one does, wake()
 * is called or the timeout passes. A failed link is returned once. */
loom_result_t loom_link_progress(struct loom_tx *tx, int timeout_us,
                                 const struct loom_link_wait *w);
/* finalize's first step: goodbye to the peers, drop(r, LOOM_ERROR_ABORTED)
 * for every other rank (the caller abandoned their requests), then
 * loom_link_free. */
void loom_link_finish(struct loom_tx *tx,
                      void (*drop)(struct loom_tx *tx, int r, loom_result_t res));

#endif
