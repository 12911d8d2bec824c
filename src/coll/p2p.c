/* p2p.c - posting, progressing and waiting on transport requests, with the
 * spin -> yield -> sleep policy, abort and LOOM_TIMEOUT. */
#include "build_config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "comm/wait.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "base/util.h"

/* After spin_us of no completion we yield the CPU between polls (other ranks
 * may share it); after this long we sleep in the transport. */
#define LOOM_YIELD_NS 2000000ull
#define LOOM_SLEEP_US 10000
/* Waiting this long on one peer, a rank asks it (out of band) which calls it
 * made: a peer in another call is named as a mismatch instead of a hang,
 * whatever the transport, and a peer that is gone is named at once. */
#define LOOM_PROBE_NS 1000000000ull
/* A peer that left in order (its calls done, its communicator destroyed)
 * is "gone" to the out-of-band service while what it sent may still be
 * unread here: for this long after that verdict the transport may still
 * deliver it, or name the end itself (a goodbye, a reset). */
#define LOOM_GONE_GRACE_NS 1000000000ull

/* The envelope: what a message's call is, sent ahead of it (and checked by
 * the receiver) when the transport does not check fingerprints itself:
 * tag u32 | desc u32 | count u64 | len u64. */
#define LOOM_ENV_LEN 24
struct loom_env {
    struct loom_tx_req req;
    uint8_t hdr[LOOM_ENV_LEN];
    uint32_t tag, desc;          /* a receive's expectations            */
    uint64_t count, len;
    struct loom_env *next;
};

void loom_waiter_init(struct loom_waiter *w, struct loom_comm *comm,
                      const struct loom_op *op)
{
    w->comm = comm;
    w->op = op;
    w->idle_since_ns = 0;
    w->spins = 0;
    w->stall_warned = 0;
    w->probe_next_ns = 0;
    w->probe_peer = -1;
    w->gone_since_ns = 0;
}

static void describe_op(const struct loom_op *op, char *buf, size_t len)
{
    loom_op_describe(op, buf, len);
}

/* The transport saw a peer in another call: name both calls. */
static loom_result_t mismatch_failed(struct loom_waiter *w)
{
    struct loom_comm *comm = w->comm;
    struct loom_tx_mismatch *m = &comm->tx->mismatch;
    if (loom_p2p_involved(w->op, m))
        return loom_p2p_mismatch(comm, w->op, m); /* sendrecv.c */
    char mine[160], theirs[160];
    if (w->op->kind == LOOM_OP_ALLTOALLV) /* counts differ per peer */
        loom_op_describe_vpeer(w->op, comm->nranks, m->peer, mine, sizeof mine);
    else
        describe_op(w->op, mine, sizeof mine);
    uint64_t seq = loom_op_tag_seq(m->tag, w->op->seq);
    loom_op_format(m->desc, m->count, seq, theirs, sizeof theirs);
    comm->blame = m->peer;
    loom_comm_set_error(comm, LOOM_ERROR_MISMATCH,
                        "collective calls differ: rank %d called %s; %s called %s",
                        comm->rank, mine, loom_comm_describe(comm, m->peer), theirs);
    return LOOM_ERROR_MISMATCH;
}

/* Whom the transport blames, unless the call already blames someone. */
static void take_blame(struct loom_comm *comm)
{
    if (comm->blame < 0 && comm->tx->blame > 0)
        comm->blame = comm->tx->blame - 1;
}

loom_result_t loom_p2p_req_failed(struct loom_waiter *w,
                                  const struct loom_tx_req *req)
{
    take_blame(w->comm);
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

/* ---- envelopes ------------------------------------------------------------ */

/* Post the envelope that goes ahead of req (same peer, same direction). */
static loom_result_t env_post(struct loom_waiter *w, const struct loom_tx_req *req)
{
    struct loom_comm *comm = w->comm;
    struct loom_env *e = comm->env_free;
    if (e)
        comm->env_free = e->next;
    else if (!(e = calloc(1, sizeof *e)))
        return LOOM_ERROR_NO_MEMORY;
    e->tag = req->tag;
    e->desc = req->desc;
    e->count = req->count;
    e->len = req->len;
    if (req->is_send) {
        loom_put_le32(e->hdr, req->tag);
        loom_put_le32(e->hdr + 4, req->desc);
        loom_put_le64(e->hdr + 8, req->count);
        loom_put_le64(e->hdr + 16, req->len);
    }
    e->req = (struct loom_tx_req){.peer = req->peer, .is_send = req->is_send,
                                  .buf = e->hdr, .len = LOOM_ENV_LEN, .tag = req->tag,
                                  .desc = req->desc, .count = req->count};
    e->next = comm->env_busy;
    comm->env_busy = e;
    struct loom_tx *tx = comm->tx;
    loom_result_t res = req->is_send ? tx->ops->isend(tx, &e->req) : tx->ops->irecv(tx, &e->req);
    if (res < 0) {
        e->req.status = res;
        return loom_p2p_req_failed(w, &e->req);
    }
    return LOOM_SUCCESS;
}

static loom_result_t mismatch_failed(struct loom_waiter *w);

/* Check the envelopes that have arrived; free the finished ones. */
static loom_result_t env_check(struct loom_waiter *w)
{
    struct loom_comm *comm = w->comm;
    for (struct loom_env **pp = &comm->env_busy; *pp;) {
        struct loom_env *e = *pp;
        if (!e->req.done) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        e->next = comm->env_free;
        comm->env_free = e;
        if (e->req.is_send || e->req.status < 0)
            continue; /* a failure shows on the message itself */
        uint32_t tag = loom_get_le32(e->hdr), desc = loom_get_le32(e->hdr + 4);
        uint64_t count = loom_get_le64(e->hdr + 8), len = loom_get_le64(e->hdr + 16);
        if (tag == e->tag && desc == e->desc && count == e->count && len == e->len)
            continue;
        comm->tx->mismatch = (struct loom_tx_mismatch){
            .valid = 1, .peer = e->req.peer, .tag = tag, .desc = desc, .count = count};
        return mismatch_failed(w);
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_p2p_env_drain(struct loom_comm *comm, struct loom_op *op)
{
    if (!comm->env_busy)
        return LOOM_SUCCESS;
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    for (;;) {
        LOOM_CHECK(loom_p2p_progress(&w));
        if (!comm->env_busy)
            return LOOM_SUCCESS;
        LOOM_CHECK(loom_p2p_idle(&w, &comm->env_busy->req));
    }
}

void loom_p2p_env_free(struct loom_comm *comm)
{
    for (int k = 0; k < 2; k++) {
        struct loom_env *e = k ? comm->env_busy : comm->env_free;
        while (e) {
            struct loom_env *next = e->next;
            free(e);
            e = next;
        }
    }
    comm->env_busy = comm->env_free = NULL;
}

/* ---- "which call are you in?" ------------------------------------------------ */

/* Ask peer for its latest calls (the answer comes out of band). */
static void probe_ask(struct loom_waiter *w, int peer)
{
    if (w->probe_peer < 0 && loom_oob_lookup(w->comm->oob, peer, LOOM_OOB_TAG_CALL) == 0)
        w->probe_peer = peer;
}

/* Read the answer, if any: a peer whose call of this number is another one
 * is a mismatch, named with both calls; a peer that is gone is named. */
static loom_result_t probe_read(struct loom_waiter *w, const struct loom_tx_req *blocker,
                                uint64_t now)
{
    struct loom_comm *comm = w->comm;
    int peer = w->probe_peer;
    char why[512];
    loom_result_t pe = loom_oob_peer_error(comm->oob, peer, why, sizeof why);
    if (pe < 0) {
        if (!blocker || blocker->peer != peer) {
            /* no longer waiting for it: a later wait asks again */
            w->probe_peer = -1;
            w->gone_since_ns = 0;
            return LOOM_SUCCESS;
        }
        if (w->gone_since_ns == 0)
            w->gone_since_ns = now;
        if (now - w->gone_since_ns < LOOM_GONE_GRACE_NS)
            return LOOM_SUCCESS;
        char what[160];
        loom_op_describe(w->op, what, sizeof what);
        comm->blame = peer;
        loom_comm_set_error(comm, pe, "%s failed: %s (%s)", what,
                            loom_comm_describe(comm, peer), why);
        return pe;
    }
    void *buf = NULL;
    size_t len = 0;
    if (loom_oob_poll(comm->oob, LOOM_OOB_TAG_CALL, peer, NULL, &buf, &len) <= 0)
        return LOOM_SUCCESS;
    w->probe_peer = -1;
    const uint8_t *b = buf;
    uint32_t n = len >= 4 ? loom_get_le32(b) : 0;
    loom_result_t res = LOOM_SUCCESS;
    for (uint32_t k = 0; k < n && 4 + (k + 1) * LOOM_TRACE_ANSWER_REC <= len; k++) {
        const uint8_t *q = b + 4 + k * LOOM_TRACE_ANSWER_REC;
        uint64_t seq = loom_get_le64(q), count = loom_get_le64(q + 16);
        uint32_t desc = loom_get_le32(q + 8);
        if (seq != w->op->seq)
            continue;
        if (desc != loom_op_desc(w->op) || count != w->op->count) {
            comm->tx->mismatch = (struct loom_tx_mismatch){
                .valid = 1, .peer = peer, .tag = loom_op_tag(seq), .desc = desc,
                .count = count};
            res = mismatch_failed(w);
        }
        break;
    }
    free(buf);
    return res;
}

loom_result_t loom_p2p_post(struct loom_waiter *w, struct loom_tx_req *req,
                            int peer, int is_send, void *buf, size_t len)
{
    return loom_p2p_post_msg(w, req, peer, is_send, buf, len, loom_op_desc(w->op),
                             w->op->count);
}

loom_result_t loom_p2p_post_msg(struct loom_waiter *w, struct loom_tx_req *req,
                                int peer, int is_send, void *buf, size_t len,
                                uint32_t desc, uint64_t count)
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
    req->desc = desc;
    req->count = count;
    req->mem = w->op->mem;
    if (!(tx->caps & LOOM_TX_CAP_FINGERPRINT))
        LOOM_CHECK(env_post(w, req));
    loom_result_t res = is_send ? tx->ops->isend(tx, req) : tx->ops->irecv(tx, req);
    if (res < 0) {
        req->status = res;
        return loom_p2p_req_failed(w, req);
    }
    return LOOM_SUCCESS;
}

static loom_result_t link_failed(struct loom_waiter *w, loom_result_t res)
{
    take_blame(w->comm);
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
    if (w->comm->env_busy)
        return env_check(w);
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
    char waiting[320] = "";
    if (blocker)
        snprintf(waiting, sizeof waiting, "%s %s (%zu bytes)",
                 blocker->is_send ? "to send to" : "to receive from",
                 loom_comm_describe(comm, blocker->peer), blocker->len);
    struct loom_wait lw = {.since_ns = w->idle_since_ns, .stall_warned = w->stall_warned};
    loom_result_t tres = loom_wait_check(&lw, comm, w->op, now, waiting,
                                         blocker ? blocker->peer : -1);
    w->stall_warned = lw.stall_warned;
    if (tres < 0)
        return tres;
    if (blocker && idle >= LOOM_PROBE_NS && now >= w->probe_next_ns) {
        probe_ask(w, blocker->peer);
        w->probe_next_ns = now + LOOM_PROBE_NS;
    }
    if (w->probe_peer >= 0)
        LOOM_CHECK(probe_read(w, blocker, now));
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
