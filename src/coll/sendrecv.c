/* sendrecv.c - point-to-point calls: a lone send or receive, or the sends
 * and receives of a group, posted together and waited for together.
 *
 * Point-to-point is not collective: it takes none of the communicator's
 * call numbers. Each message carries its own: its place among the messages
 * from this sender to this receiver (both ends count them), with the
 * send's fingerprint (kind send, dtype, count, root = the sender), so a
 * receive that meets a send of another count or dtype, or a collective's
 * message, fails with LOOM_ERROR_MISMATCH naming both calls. Messages to
 * or from this rank itself (groups only) are paired here, in order, and
 * copied. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "base/util.h"

/* wop->exec while a group's batch runs: for culprit() */
struct batch {
    const struct loom_op *ops;
    const struct loom_tx_req *reqs;
    int n;
};

struct loom_coll_ext *loom_coll_ext_get(struct loom_comm *comm)
{
    if (comm->ext)
        return comm->ext;
    struct loom_coll_ext *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    size_t n = (size_t)comm->nranks;
    e->send_seq = calloc(n, sizeof *e->send_seq);
    e->recv_seq = calloc(n, sizeof *e->recv_seq);
    e->sent_desc = calloc(n, sizeof *e->sent_desc);
    e->sent_count = calloc(n, sizeof *e->sent_count);
    if (!e->send_seq || !e->recv_seq || !e->sent_desc || !e->sent_count) {
        comm->ext = e;
        loom_coll_ext_free(comm);
        return NULL;
    }
    comm->ext = e;
    return e;
}

void loom_coll_ext_free(struct loom_comm *comm)
{
    struct loom_coll_ext *e = comm->ext;
    if (!e)
        return;
    free(e->send_seq);
    free(e->recv_seq);
    free(e->sent_desc);
    free(e->sent_count);
    free(e->pack);
    free(e);
    comm->ext = NULL;
}

static const struct loom_op *culprit(const struct loom_op *group, int peer)
{
    const struct batch *b = group->exec;
    if (!b)
        return group;
    /* a receive is where a peer's message is checked; a send when the peer
     * found this rank's message wrong and said so */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < b->n; i++) {
            const struct loom_op *op = &b->ops[i];
            if (op->peer == peer && (op->kind == LOOM_OP_RECV) == (pass == 0) &&
                (!b->reqs[i].done || b->reqs[i].status < 0))
                return op;
        }
    return group;
}

int loom_p2p_involved(const struct loom_op *wop, const struct loom_tx_mismatch *m)
{
    return loom_op_kind_is_p2p(wop->kind) || wop->kind == LOOM_OP_GROUP ||
           (m->desc & 0xf) == LOOM_OP_SEND;
}

/* A message's fingerprint seen from rank me: the sender's send to me, or
 * (root == me) the peer's receive of my message. */
static void format_theirs(const struct loom_tx_mismatch *m, int me, uint64_t seq,
                          char *buf, size_t len)
{
    loom_dtype_t t = (loom_dtype_t)((m->desc >> 4) & 0xf);
    int root = (int)(m->desc >> 12);
    unsigned long long c = (unsigned long long)m->count;
    if ((m->desc & 0xf) != LOOM_OP_SEND)
        loom_op_format(m->desc, m->count, seq, buf, len);
    else if (root == me)
        snprintf(buf, len, "recv(%s, %llu, from rank %d) #%u", loom_dtype_name(t), c, me,
                 m->tag);
    else
        snprintf(buf, len, "send(%s, %llu, to rank %d) #%u", loom_dtype_name(t), c, me,
                 m->tag);
}

loom_result_t loom_p2p_mismatch(struct loom_comm *comm, const struct loom_op *wop,
                                const struct loom_tx_mismatch *m)
{
    const struct loom_op *op = wop->kind == LOOM_OP_GROUP ? culprit(wop, m->peer) : wop;
    char mine[160], theirs[160];
    /* a collective's tag holds the low 32 bits of its call number */
    uint64_t seq = loom_op_kind_is_p2p(op->kind) ? comm->next_seq : op->seq;
    format_theirs(m, comm->rank, (seq & ~0xffffffffull) | m->tag, theirs, sizeof theirs);
    int their_recv = (m->desc & 0xf) == LOOM_OP_SEND && (int)(m->desc >> 12) == comm->rank;
    struct loom_coll_ext *e = comm->ext;
    if (their_recv && !(op->kind == LOOM_OP_SEND && op->peer == m->peer && op->seq == m->tag)) {
        /* the peer objected to a message of ours that has left already */
        if (e && e->send_seq[m->peer] == m->tag) {
            struct loom_op sent = {.kind = LOOM_OP_SEND, .peer = m->peer,
                                   .dtype = (loom_dtype_t)((e->sent_desc[m->peer] >> 4) & 0xf),
                                   .count = e->sent_count[m->peer], .seq = m->tag};
            loom_op_describe(&sent, mine, sizeof mine);
        } else {
            snprintf(mine, sizeof mine, "send #%u to rank %d", m->tag, m->peer);
        }
    } else {
        loom_op_describe(op, mine, sizeof mine);
    }
    comm->blame = m->peer;
    loom_comm_set_error(comm, LOOM_ERROR_MISMATCH,
                        "point-to-point calls differ: rank %d called %s; %s called %s",
                        comm->rank, mine, loom_comm_describe(comm, m->peer), theirs);
    return LOOM_ERROR_MISMATCH;
}

static size_t op_bytes(const struct loom_op *op)
{
    return (size_t)op->count * loom_dtype_size(op->dtype);
}

/* Sends to this rank itself meet its receives from itself, in order. */
static loom_result_t pair_self(struct loom_comm *comm, struct loom_op *ops, int n)
{
    int s = 0, r = 0;
    for (;;) {
        while (s < n && !(ops[s].kind == LOOM_OP_SEND && ops[s].peer == comm->rank))
            s++;
        while (r < n && !(ops[r].kind == LOOM_OP_RECV && ops[r].peer == comm->rank))
            r++;
        if (s == n && r == n)
            return LOOM_SUCCESS;
        char a[160], b[160];
        if (s == n || r == n) {
            loom_op_describe(&ops[s < n ? s : r], a, sizeof a);
            loom_comm_set_error(comm, LOOM_ERROR_MISMATCH,
                                "point-to-point calls differ: rank %d called %s in a "
                                "group that has no %s to match it",
                                comm->rank, a, s < n ? "receive from itself" : "send to itself");
            return LOOM_ERROR_MISMATCH;
        }
        if (ops[s].count != ops[r].count || ops[s].dtype != ops[r].dtype) {
            loom_op_describe(&ops[s], a, sizeof a);
            loom_op_describe(&ops[r], b, sizeof b);
            loom_comm_set_error(comm, LOOM_ERROR_MISMATCH,
                                "point-to-point calls differ: rank %d called %s and %s",
                                comm->rank, a, b);
            return LOOM_ERROR_MISMATCH;
        }
        if (ops[s].count)
            memmove(ops[r].recvbuf, ops[s].sendbuf, op_bytes(&ops[s]));
        s++;
        r++;
    }
}

loom_result_t loom_p2p_batch(struct loom_comm *comm, struct loom_op *wop,
                             struct loom_op *ops, int n)
{
    struct loom_coll_ext *e = loom_coll_ext_get(comm);
    struct loom_tx_req *reqs = loom_comm_reqs(comm, (size_t)n);
    if (!e || !reqs) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "point-to-point: out of memory for %d calls", n);
        return LOOM_ERROR_NO_MEMORY;
    }
    for (int i = 0; i < n; i++) {
        uint32_t *c = ops[i].kind == LOOM_OP_SEND ? e->send_seq : e->recv_seq;
        ops[i].seq = ++c[ops[i].peer];
        reqs[i].done = 1; /* until posted: self pairs are never posted */
        reqs[i].status = LOOM_SUCCESS;
    }
    loom_result_t res = pair_self(comm, ops, n);
    if (res < 0)
        return res;

    struct batch b = {.ops = ops, .reqs = reqs, .n = n};
    if (wop != ops)
        wop->exec = &b;
    /* receives first: a peer's message then finds its receive posted */
    for (int pass = 0; pass < 2 && res == LOOM_SUCCESS; pass++)
        for (int i = 0; i < n; i++) {
            struct loom_op *op = &ops[i];
            int is_send = op->kind == LOOM_OP_SEND;
            if (is_send != (pass == 1) || op->peer == comm->rank)
                continue;
            struct loom_waiter wi;
            loom_waiter_init(&wi, comm, op);
            res = loom_p2p_post(&wi, &reqs[i], op->peer, is_send,
                                is_send ? (void *)op->sendbuf : op->recvbuf,
                                op_bytes(op));
            if (res < 0)
                break;
            if (is_send) {
                e->sent_desc[op->peer] = loom_op_desc(op);
                e->sent_count[op->peer] = op->count;
            }
        }

    int posted = 0;
    for (int i = 0; i < n; i++)
        posted += !reqs[i].done;
    struct loom_waiter w;
    loom_waiter_init(&w, comm, wop);
    int seen = 0; /* requests found done in the last pass */
    while (res == LOOM_SUCCESS && posted) {
        if ((res = loom_p2p_progress(&w)) < 0)
            break;
        int ndone = 0;
        const struct loom_tx_req *blocker = NULL;
        for (int i = 0; i < n; i++) {
            if (!reqs[i].done) {
                if (!blocker)
                    blocker = &reqs[i];
                continue;
            }
            if (reqs[i].status < 0) {
                struct loom_waiter wi;
                loom_waiter_init(&wi, comm, &ops[i]);
                res = loom_p2p_req_failed(&wi, &reqs[i]);
                break;
            }
            ndone++;
        }
        if (res < 0 || !blocker)
            break;
        res = loom_p2p_settle(&w, ndone > seen, blocker);
        seen = ndone;
    }
    wop->exec = NULL;
    return res;
}
