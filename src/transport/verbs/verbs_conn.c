/* verbs_conn.c - the verbs transport's part of its connections: one RC
 * queue pair per peer in use, its blob (verbs_proto.h: queue pair number,
 * PSN, GID, the CTS ring) and its hooks into the link layer
 * (common/link.h), which does the rest: the exchange through the
 * out-of-band service, the TCP control socket per peer for liveness and
 * failure notices, deadlines.
 *
 * The start hook creates the queue pair (INIT, receives posted) before the
 * blob goes out; applying the peer's blob moves it to RTR and RTS before
 * this rank answers, so it is ready to receive before the peer can send.
 * When both start at once each applies the other's blob and neither
 * answers: still one pair. A peer whose process ends closes its control
 * socket: its peers learn it at once, not after the queue pair's retries
 * run out. */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "log.h"
#include "util.h"
#include "bootstrap/oob.h"
#include "transport/verbs/verbs_priv.h"

_Static_assert(LOOM_VERBS_BLOB_MAX <= LOOM_LINK_BLOB_MAX, "a blob fits the link's");
_Static_assert(LOOM_VERBS_TOKEN_LEN == LOOM_LINK_TOKEN_LEN, "the blob carries the link's token");

static void blob_of(struct loom_tx *tx, int r, struct loom_verbs_blob *b)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    *b = (struct loom_verbs_blob){
        .comm_id = tx->params.comm_id,
        .from = (uint32_t)tx->params.rank,
        .to = (uint32_t)r,
        .nonce = vp->nonce,
        .qpn = p->qp->qp_num,
        .psn = p->psn,
        .lid = vp->choice.lid,
        .mtu = vp->local.mtu,
        .port = vp->local.port,
        .gid_index = vp->local.gid_index,
        .flags = (uint8_t)((vp->local.ethernet ? LOOM_VERBS_BLOB_F_ETHERNET : 0) |
                           (p->lk.have_blob ? LOOM_VERBS_BLOB_F_REPLY : 0)),
        .cts_entries = vp->tune.cts_entries,
        .cts_addr = (uintptr_t)p->rblock,
        .cts_rkey = p->rmr->rkey,
        .max_msg = vp->max_msg,
    };
    memcpy(b->gid, vp->choice.gid, 16);
    memcpy(b->token, p->lk.token, LOOM_VERBS_TOKEN_LEN);
}

static size_t blob_encode(struct loom_tx *tx, int r, uint8_t *out)
{
    struct loom_verbs_blob b;
    blob_of(tx, r, &b);
    return loom_verbs_blob_encode(&b, out, LOOM_VERBS_BLOB_MAX);
}

/* Grow the completion queue for one more queue pair: a CQ smaller than
 * the work its queue pairs may complete could overrun. */
static loom_result_t cq_grow(struct loom_tx *tx, int more)
{
    struct vx_priv *vp = tx->priv;
    vp->cq_need += more;
    if (vp->cq_need <= vp->cq->cqe)
        return LOOM_SUCCESS;
    int want = vp->cq_need * 2;
    int err = vp->ibv->resize_cq(vp->cq, want);
    if (err) {
        vp->cq_need -= more;
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "verbs: cannot grow the completion queue to %d entries: %s", want, strerror(err));
        return loom_verbs_errno_result(err);
    }
    return LOOM_SUCCESS;
}

/* The start hook: peer r's queue pair (INIT, receives posted) and memory. */
static loom_result_t make_qp(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    char d[256];
    loom_result_t res = loom_verbs_peer_mem(tx, r);
    if (res < 0) {
        loom_link_fail(tx, r, res, "cannot be connected: %s", tx->errmsg);
        return res;
    }
    struct ibv_qp_init_attr ia = {
        .send_cq = vp->cq,
        .recv_cq = vp->cq,
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
        .cap =
            {
                .max_send_wr = p->sq_depth,
                .max_recv_wr = p->rq_depth,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = vp->tune.inline_max,
            },
    };
    p->qp = vp->ibv->create_qp(vp->pd, &ia);
    if (!p->qp && vp->tune.inline_max) {
        /* an adapter without inline data: every write takes a gather entry */
        ia.cap.max_inline_data = 0;
        p->qp = vp->ibv->create_qp(vp->pd, &ia);
    }
    if (!p->qp) {
        int e = errno;
        loom_link_fail(tx, r, loom_verbs_errno_result(e),
                       "cannot be connected: ibv_create_qp (%u send, %u receive "
                       "entries): %s",
                       p->sq_depth, p->rq_depth, strerror(e));
        return loom_verbs_errno_result(e);
    }
    if (ia.cap.max_inline_data < vp->tune.inline_max)
        vp->tune.inline_max = ia.cap.max_inline_data;
    uint32_t psn;
    loom_link_token(&psn, sizeof psn);
    p->psn = psn & 0xffffffu;
    res = cq_grow(tx, (int)(p->sq_depth + p->rq_depth));
    if (res < 0) {
        loom_link_fail(tx, r, res, "cannot be connected: %s", tx->errmsg);
        return res;
    }
    int err = loom_verbs_qp_to_init(vp->ibv, p->qp, &vp->local);
    if (err) {
        loom_link_fail(tx, r, loom_verbs_errno_result(err),
                       "cannot be connected: queue pair to INIT: %s", strerror(err));
        return loom_verbs_errno_result(err);
    }
    res = loom_verbs_post_recvs(tx, r, p->rq_depth);
    if (res < 0)
        return res;
    LOOM_TRACE(LOOM_SUB_NET, "verbs: rank %d: queue pair %u for %s", tx->params.rank, p->qp->qp_num,
               loom_link_describe(tx, r, d, sizeof d));
    return LOOM_SUCCESS;
}

/* Peer r's blob: check it and connect our queue pair to its. */
static int blob_apply(struct loom_tx *tx, int r, const uint8_t *buf, size_t len)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    struct loom_verbs_blob b;
    char why[256] = "";
    if (loom_verbs_blob_decode(buf, len, tx->params.comm_id, tx->params.nranks, tx->params.rank, &b,
                               why, sizeof why) != 0 ||
        b.from != (uint32_t)r) {
        if (!why[0] || b.from != (uint32_t)r)
            snprintf(why, sizeof why, "a blob that says it is from rank %u", b.from);
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL, "sent queue pair data this rank cannot use: %s",
                       why);
        return -1;
    }
    p->remote = b;
    memcpy(p->lk.rtoken, b.token, LOOM_LINK_TOKEN_LEN);
    struct loom_verbs_remote rem = {.qpn = b.qpn,
                                    .psn = b.psn,
                                    .lid = b.lid,
                                    .mtu = b.mtu,
                                    .ethernet = !!(b.flags & LOOM_VERBS_BLOB_F_ETHERNET)};
    memcpy(rem.gid, b.gid, 16);
    int err = loom_verbs_qp_to_rtr(vp->ibv, p->qp, &vp->local, &rem);
    if (!err)
        err = loom_verbs_qp_to_rts(vp->ibv, p->qp, p->psn);
    if (err) {
        char gs[64];
        loom_verbs_gid_format(b.gid, gs, sizeof gs);
        loom_link_fail(tx, r, loom_verbs_errno_result(err),
                       "cannot be connected: queue pair %u to RTR/RTS towards its "
                       "queue pair %u (GID %s, LID %u, MTU %d): %s",
                       p->qp->qp_num, b.qpn, gs, b.lid, loom_verbs_mtu_bytes(b.mtu), strerror(err));
        return -1;
    }
    return 0;
}

/* writes outstanding: a completion in flight may name the real cause (an
 * access error the peer refused, before failing itself) */
static int busy(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    return vp->peers[r].sq_posted != vp->peers[r].sq_done;
}

/* stop the queue pair first: nothing more of the peer's lands in buffers
 * this rank is about to hand back (writes to a queue pair in the error
 * state are dropped), and what was posted is flushed */
static void lost(struct loom_tx *tx, int r, loom_result_t res)
{
    struct vx_priv *vp = tx->priv;
    if (vp->peers[r].qp)
        loom_verbs_qp_to_err(vp->ibv, vp->peers[r].qp);
    loom_verbs_fail_reqs(tx, r, res);
}

const struct loom_link_ops loom_verbs_link_ops = {
    .name = "verbs",
    .proto = {LOOM_VERBS_HELLO_MAGIC, LOOM_VERBS_FRAME_MAGIC, "loom-verbs-ctl"},
    .oob_tag = LOOM_OOB_TAG_VERBS + 0,
    .oob_kind = LOOM_OOB_KIND_VERBS,
    .blob_name = "queue pair data",
    .start = make_qp,
    .blob_encode = blob_encode,
    .blob_apply = blob_apply,
    .up = loom_verbs_kick,
    .post = loom_verbs_post,
    .poll = loom_verbs_poll_cq,
    .busy = busy,
    .lost = lost,
};
