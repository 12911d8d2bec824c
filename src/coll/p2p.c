/* p2p.c - posting, progressing and waiting on transport requests, with the
 * spin -> yield -> sleep policy, abort and LOOM_TIMEOUT. */
#include "build_config.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "util.h"

/* After spin_us of no completion we yield the CPU between polls (other ranks
 * may share it); after this long we sleep in the transport. */
#define LOOM_YIELD_NS 2000000ull
#define LOOM_SLEEP_US 10000

void loom_waiter_init(struct loom_waiter *w, struct loom_comm *comm,
                      const struct loom_op *op)
{
    w->comm = comm;
    w->op = op;
    w->idle_since_ns = 0;
    w->spins = 0;
    w->stall_warned = 0;
}

static void describe_op(const struct loom_op *op, char *buf, size_t len)
{
    loom_op_format(loom_op_desc(op), op->count, op->seq, buf, len);
}

/* The transport saw a peer in another call: name both calls. */
static loom_result_t mismatch_failed(struct loom_waiter *w)
{
    struct loom_comm *comm = w->comm;
    struct loom_tx_mismatch *m = &comm->tx->mismatch;
    char mine[160], theirs[160];
    describe_op(w->op, mine, sizeof mine);
    uint64_t seq = loom_op_tag_seq(m->tag, w->op->seq);
    loom_op_format(m->desc, m->count, seq, theirs, sizeof theirs);
    comm->blame = m->peer;
    loom_comm_set_error(comm, LOOM_ERROR_MISMATCH,
                        "collective calls differ: rank %d called %s; %s called %s",
                        comm->rank, mine, loom_comm_describe(comm, m->peer), theirs);
    return LOOM_ERROR_MISMATCH;
}

loom_result_t loom_p2p_req_failed(struct loom_waiter *w,
                                  const struct loom_tx_req *req)
{
    char what[160];
    describe_op(w->op, what, sizeof what);
    loom_result_t res = req->status < 0 ? req->status : LOOM_ERROR_INTERNAL;
    if (w->comm->tx->mismatch.valid && !__atomic_load_n(&w->comm->aborted, __ATOMIC_ACQUIRE))
        return mismatch_failed(w);
    if (__atomic_load_n(&w->comm->aborted, __ATOMIC_ACQUIRE))
        res = LOOM_ERROR_ABORTED;
    if (res == LOOM_ERROR_ABORTED)
        loom_comm_set_error(w->comm, res, "%s: aborted", what);
    else
        loom_comm_set_error(w->comm, res, "%s failed: %s", what,
                            w->comm->tx->errmsg[0] ? w->comm->tx->errmsg
                                                   : loom_result_string(res));
    return res;
}

loom_result_t loom_p2p_post(struct loom_waiter *w, struct loom_tx_req *req,
                            int peer, int is_send, void *buf, size_t len)
{
    struct loom_comm *comm = w->comm;
    struct loom_tx *tx = comm->tx;
    if (!comm->peer_used[peer]) {
        /* connections are made on first use, by the transport */
        loom_result_t cres = tx->ops->connect(tx, peer);
        if (cres < 0) {
            req->peer = peer;
            req->status = cres;
            return loom_p2p_req_failed(w, req);
        }
        comm->peer_used[peer] = 1;
    }
    memset(req, 0, sizeof *req);
    req->peer = peer;
    req->is_send = is_send;
    req->buf = buf;
    req->len = len;
    req->tag = loom_op_tag(w->op->seq);
    req->desc = loom_op_desc(w->op);
    req->count = w->op->count;
    loom_result_t res = is_send ? tx->ops->isend(tx, req) : tx->ops->irecv(tx, req);
    if (res < 0) {
        req->status = res;
        return loom_p2p_req_failed(w, req);
    }
    return LOOM_SUCCESS;
}

static loom_result_t link_failed(struct loom_waiter *w, loom_result_t res)
{
    char what[160];
    describe_op(w->op, what, sizeof what);
    if (__atomic_load_n(&w->comm->aborted, __ATOMIC_ACQUIRE) || res == LOOM_ERROR_ABORTED) {
        loom_comm_set_error(w->comm, LOOM_ERROR_ABORTED, "%s: aborted", what);
        return LOOM_ERROR_ABORTED;
    }
    if (w->comm->tx->mismatch.valid)
        return mismatch_failed(w);
    loom_comm_set_error(w->comm, res, "%s failed: %s", what,
                        w->comm->tx->errmsg[0] ? w->comm->tx->errmsg
                                               : loom_result_string(res));
    return res;
}

loom_result_t loom_p2p_progress(struct loom_waiter *w)
{
    struct loom_tx *tx = w->comm->tx;
    loom_result_t res = tx->ops->progress(tx, 0);
    if (res < 0)
        return link_failed(w, res);
    return LOOM_SUCCESS;
}

loom_result_t loom_p2p_idle(struct loom_waiter *w,
                            const struct loom_tx_req *blocker)
{
    struct loom_comm *comm = w->comm;
    if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE))
        return link_failed(w, LOOM_ERROR_ABORTED);
    uint64_t now = 0;
    if (w->idle_since_ns == 0) {
        w->idle_since_ns = loom_now_ns();
        w->spins = 0;
        return LOOM_SUCCESS;
    }
    /* More ranks than CPUs here: the peer we wait for may need this CPU. */
    if (comm->oversubscribed)
        sched_yield();
    /* Read the clock every 32 spins only: it is the costliest part. */
    if ((++w->spins & 31) != 0 && w->spins < (1u << 20))
        return LOOM_SUCCESS;
    now = loom_now_ns();
    uint64_t idle = now - w->idle_since_ns;
    if (comm->timeout > 0 && (double)idle * 1e-9 > comm->timeout) {
        char what[160];
        describe_op(w->op, what, sizeof what);
        if (blocker)
            comm->blame = blocker->peer;
        if (blocker)
            loom_comm_set_error(
                comm, LOOM_ERROR_TIMEOUT,
                "%s: no progress for %.0f s (LOOM_TIMEOUT) waiting %s %s (%zu bytes)",
                what, comm->timeout, blocker->is_send ? "to send to" : "to receive from",
                loom_comm_describe(comm, blocker->peer), blocker->len);
        else
            loom_comm_set_error(comm, LOOM_ERROR_TIMEOUT,
                                "%s: no progress for %.0f s (LOOM_TIMEOUT)", what,
                                comm->timeout);
        return LOOM_ERROR_TIMEOUT;
    }
    if (comm->stall_warn > 0 && !w->stall_warned &&
        (double)idle * 1e-9 > comm->stall_warn) {
        char what[160];
        describe_op(w->op, what, sizeof what);
        w->stall_warned = 1;
        if (blocker)
            LOOM_WARN(LOOM_SUB_COLL,
                      "%s: no progress for %.0f s (LOOM_STALL_WARN): waiting %s %s "
                      "(%zu bytes, message of this call)",
                      what, (double)idle * 1e-9,
                      blocker->is_send ? "to send to" : "to receive from",
                      loom_comm_describe(comm, blocker->peer), blocker->len);
        else
            LOOM_WARN(LOOM_SUB_COLL, "%s: no progress for %.0f s (LOOM_STALL_WARN)",
                      what, (double)idle * 1e-9);
    }
    if (idle < (uint64_t)comm->spin_us * 1000ull)
        return LOOM_SUCCESS;
    if (idle < LOOM_YIELD_NS) {
        sched_yield();
        return LOOM_SUCCESS;
    }
    struct loom_tx *tx = comm->tx;
    loom_result_t res = tx->ops->progress(tx, LOOM_SLEEP_US);
    if (res < 0)
        return link_failed(w, res);
    if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE))
        return link_failed(w, LOOM_ERROR_ABORTED);
    return LOOM_SUCCESS;
}

loom_result_t loom_p2p_wait_all(struct loom_waiter *w, struct loom_tx_req *reqs,
                                int n)
{
    int first = 0;
    for (;;) {
        loom_result_t res = loom_p2p_progress(w);
        if (res < 0)
            return res;
        int moved = 0;
        while (first < n && reqs[first].done) {
            if (reqs[first].status < 0)
                return loom_p2p_req_failed(w, &reqs[first]);
            first++;
            moved = 1;
        }
        if (first == n)
            return LOOM_SUCCESS;
        if (moved) {
            loom_waiter_active(w);
        } else {
            res = loom_p2p_idle(w, &reqs[first]);
            if (res < 0)
                return res;
        }
    }
}

loom_result_t loom_p2p_exchange(struct loom_waiter *w, struct loom_tx_req *req, int peer,
                                void *sbuf, size_t slen, void *rbuf, size_t rlen)
{
    int k = 0;
    if (rlen)
        LOOM_CHECK(loom_p2p_post(w, &req[k++], peer, 0, rbuf, rlen));
    if (slen)
        LOOM_CHECK(loom_p2p_post(w, &req[k++], peer, 1, sbuf, slen));
    return loom_p2p_wait_all(w, req, k);
}

loom_result_t loom_p2p_reap(struct loom_waiter *w, struct loom_tx_req *reqs,
                            uint64_t window, uint64_t *ndone, uint64_t npost,
                            int *moved)
{
    while (*ndone < npost && reqs[*ndone % window].done) {
        if (reqs[*ndone % window].status < 0)
            return loom_p2p_req_failed(w, &reqs[*ndone % window]);
        (*ndone)++;
        *moved = 1;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_p2p_settle(struct loom_waiter *w, int moved,
                              const struct loom_tx_req *blocker)
{
    if (moved) {
        loom_waiter_active(w);
        return LOOM_SUCCESS;
    }
    return loom_p2p_idle(w, blocker);
}
