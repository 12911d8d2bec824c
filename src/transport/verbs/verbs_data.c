/* verbs_data.c - the verbs transport's data path (protocol: verbs_proto.h).
 *
 * Per peer and direction, in order:
 *  receive side: each posted receive is advertised chunk by chunk, a CTS
 *    entry per chunk written (RDMA write with immediate) into the sender's
 *    CTS ring while credits remain. A chunk lands in the receive's own
 *    buffer when it is registered (a registration-cache entry, or the mr
 *    the core passed), else in one of this rank's bounce slots, copied out
 *    when its immediate arrives;
 *  send side: each CTS entry that arrives (a receive completion with
 *    immediate data) is checked against the send it is for, then the chunk
 *    is written: straight from the send's registered buffer, inline when
 *    short, else through staging slots; the chunk's last write carries the
 *    immediate. A send is complete when its writes are (RC: acknowledged,
 *    so placed).
 * Work requests on the send queue are counted; data writes are signalled,
 * CTS writes only now and then (every quarter of the queue), and a
 * signalled completion frees every entry before it: verbs reclaims send
 * queue entries only as completions are polled. Every receive completion
 * is matched by one posted receive, reposted in batches. */
#include "build_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "log.h"
#include "util.h"
#include "transport/verbs/verbs_priv.h"

#define VX_RECV_BATCH 16

static void req_finish(struct loom_tx_req *req, loom_result_t status)
{
    req->status = status;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static void req_release(struct vx_priv *vp, struct loom_tx_req *req)
{
    struct vx_reqstate *rs = vx_rs(req);
    if (rs->ref)
        loom_regcache_put(vp->rc, rs->ref);
    rs->ref = NULL;
    rs->mr = NULL;
}

void loom_verbs_fail_reqs(struct loom_tx *tx, int r, loom_result_t res)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    struct loom_tx_req *req;
    for (int k = 1; k >= 0; k--) /* sends first */
        while ((req = loom_link_fifo_pop(&p->lk.reqs[k]))) {
            req_release(vp, req);
            if (!req->done)
                req_finish(req, res);
        }
    p->scur = p->radv = NULL;
}

/* ---- memory of a peer ---- */

static void *page_alloc(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len) != 0)
        return NULL;
    memset(p, 0, len);
    return p;
}

loom_result_t loom_verbs_peer_mem(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    const struct loom_verbs_tuning *t = &vp->tune;
    p->rlen = (size_t)t->cts_entries * LOOM_VERBS_CTS_LEN + (size_t)t->bounce_slots * t->slot_size;
    p->llen = (size_t)t->cts_entries * LOOM_VERBS_CTS_LEN + (size_t)t->stage_slots * t->slot_size;
    p->sq_depth = 2 * t->cts_entries + t->stage_slots + 16;
    p->rq_depth = 2 * t->cts_entries + VX_RECV_BATCH;
    p->rblock = page_alloc(p->rlen);
    p->lblock = page_alloc(p->llen);
    p->sqrec = calloc(p->sq_depth, sizeof *p->sqrec);
    p->ctsrec = calloc(t->cts_entries, sizeof *p->ctsrec);
    if (!p->rblock || !p->lblock || !p->sqrec || !p->ctsrec) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "verbs: out of memory for a peer's rings");
        return LOOM_ERROR_NO_MEMORY;
    }
    /* what peers write (CTS entries, bounce slots) apart from what only
     * this rank reads (CTS entries to send, staging): a peer's rkey
     * reaches the first region only */
    p->rmr = vp->ibv->reg_mr(vp->pd, p->rblock, p->rlen,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (p->rmr)
        p->lmr = vp->ibv->reg_mr(vp->pd, p->lblock, p->llen, IBV_ACCESS_LOCAL_WRITE);
    if (!p->rmr || !p->lmr) {
        int e = errno;
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "verbs: ibv_reg_mr of %zu bytes for a peer's rings: %s (is the locked-memory "
                 "limit, ulimit -l, too low?)",
                 p->rmr ? p->llen : p->rlen, strerror(e));
        return loom_verbs_errno_result(e);
    }
    return LOOM_SUCCESS;
}

void loom_verbs_peer_mem_free(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (p->rmr)
        vp->ibv->dereg_mr(p->rmr);
    if (p->lmr)
        vp->ibv->dereg_mr(p->lmr);
    p->rmr = p->lmr = NULL;
    free(p->rblock);
    free(p->lblock);
    free(p->sqrec);
    free(p->ctsrec);
    p->rblock = p->lblock = NULL;
    p->sqrec = NULL;
    p->ctsrec = NULL;
}

static uint8_t *cts_ring(struct vx_peer *p, uint32_t n, uint32_t entries)
{
    return p->rblock + (size_t)loom_verbs_ring_index(n, entries) * LOOM_VERBS_CTS_LEN;
}

static uint8_t *bounce_slot(struct vx_priv *vp, struct vx_peer *p, uint32_t i)
{
    return p->rblock + (size_t)vp->tune.cts_entries * LOOM_VERBS_CTS_LEN +
           (size_t)i * vp->tune.slot_size;
}

static uint8_t *cts_out(struct vx_priv *vp, struct vx_peer *p, uint32_t n)
{
    return p->lblock + (size_t)loom_verbs_ring_index(n, vp->tune.cts_entries) * LOOM_VERBS_CTS_LEN;
}

static uint8_t *stage_slot(struct vx_priv *vp, struct vx_peer *p, uint32_t i)
{
    return p->lblock + (size_t)vp->tune.cts_entries * LOOM_VERBS_CTS_LEN +
           (size_t)i * vp->tune.slot_size;
}

/* ---- posting ---- */

loom_result_t loom_verbs_post_recvs(struct loom_tx *tx, int r, uint32_t n)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    struct ibv_recv_wr wrs[VX_RECV_BATCH];
    while (n) {
        uint32_t k = n < VX_RECV_BATCH ? n : VX_RECV_BATCH;
        for (uint32_t i = 0; i < k; i++)
            /* write with immediate places no data through a receive: no
             * scatter list */
            wrs[i] = (struct ibv_recv_wr){.wr_id = loom_verbs_wrid(r, LOOM_VERBS_WR_RECV, 0),
                                          .next = i + 1 < k ? &wrs[i + 1] : NULL,
                                          .sg_list = NULL,
                                          .num_sge = 0};
        struct ibv_recv_wr *bad = NULL;
        int err = vp->ibv->post_recv(p->qp, wrs, &bad);
        if (err) {
            loom_link_fail(tx, r, loom_verbs_errno_result(err),
                           "could not be given receives (ibv_post_recv: %s)", strerror(err));
            return loom_verbs_errno_result(err);
        }
        vp->counts.recv_wrs_posted += k;
        n -= k;
    }
    return LOOM_SUCCESS;
}

static uint32_t sq_room(const struct vx_peer *p)
{
    return p->sq_depth - 1 - (p->sq_posted - p->sq_done);
}

/* Post one work request to peer r's send queue (room checked). */
static int post_wr(struct loom_tx *tx, int r, struct ibv_send_wr *wr, struct vx_sqrec rec,
                   int signal)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (signal || p->sq_posted - p->sq_last_signal >= p->sq_depth / 4)
        wr->send_flags |= IBV_SEND_SIGNALED;
    wr->wr_id = loom_verbs_wrid(r, (enum loom_verbs_wr_kind)rec.kind, p->sq_posted);
    wr->next = NULL;
    p->sqrec[p->sq_posted % p->sq_depth] = rec;
    struct ibv_send_wr *bad = NULL;
    int err = vp->ibv->post_send(p->qp, wr, &bad);
    if (err) {
        loom_link_fail(tx, r, loom_verbs_errno_result(err),
                       "could not be written to (ibv_post_send: %s)", strerror(err));
        return -1;
    }
    if (wr->send_flags & IBV_SEND_SIGNALED)
        p->sq_last_signal = p->sq_posted + 1;
    p->sq_posted++;
    return 0;
}

/* ---- receive side ---- */

static void complete_recv(struct loom_tx *tx, int r, struct loom_tx_req *req)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    loom_link_fifo_remove(&p->lk.reqs[0], req);
    req_release(vp, req);
    vp->counts.recvs++;
    req_finish(req, LOOM_SUCCESS);
}

/* Advertise chunks of the posted receives while credits last. */
static void advertise(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    uint32_t limit = vp->tune.cts_entries < p->remote.cts_entries ? vp->tune.cts_entries
                                                                  : p->remote.cts_entries;
    uint64_t max_write = vp->tune.max_write < p->remote.max_msg ? vp->tune.max_write
                                                                : p->remote.max_msg;
    while (p->radv && !p->lk.failed &&
           loom_verbs_credit_free(p->cts_posted, p->cts_landed, limit) && sq_room(p) > 0) {
        struct loom_tx_req *req = p->radv;
        struct vx_reqstate *rs = vx_rs(req);
        uint64_t off = p->radv_off, left = req->len - off;
        struct loom_verbs_cts c = {.msg = rs->msg,
                                   .offset = off,
                                   .msg_len = req->len,
                                   .count = req->count,
                                   .tag = req->tag,
                                   .desc = req->desc,
                                   .cts = p->cts_posted};
        int bounce = -1;
        if (rs->mr) {
            c.len = (uint32_t)(left < max_write ? left : max_write);
            c.addr = (uintptr_t)req->buf + off;
            c.rkey = rs->mr->rkey;
        } else if (req->len == 0) {
            c.len = 0; /* nothing lands: any address of ours will do */
            c.addr = (uintptr_t)bounce_slot(vp, p, 0);
            c.rkey = p->rmr->rkey;
        } else {
            if (p->bounce_posted - p->bounce_done >= vp->tune.bounce_slots)
                break;
            bounce = (int)(p->bounce_posted % vp->tune.bounce_slots);
            p->bounce_posted++;
            c.len = (uint32_t)(left < vp->tune.slot_size ? left : vp->tune.slot_size);
            c.addr = (uintptr_t)bounce_slot(vp, p, (uint32_t)bounce);
            c.rkey = p->rmr->rkey;
            c.flags = LOOM_VERBS_CTS_F_BOUNCE;
        }
        uint8_t *out = cts_out(vp, p, p->cts_posted);
        loom_verbs_cts_encode(&c, out);
        struct ibv_sge sge = {
            .addr = (uintptr_t)out, .length = LOOM_VERBS_CTS_LEN, .lkey = p->lmr->lkey};
        struct ibv_send_wr wr = {
            .sg_list = &sge,
            .num_sge = 1,
            .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
            .send_flags = vp->tune.inline_max >= LOOM_VERBS_CTS_LEN ? IBV_SEND_INLINE : 0,
            .imm_data = htonl(loom_verbs_imm_encode(LOOM_VERBS_IMM_CTS, p->cts_posted)),
            .wr.rdma = {.remote_addr = p->remote.cts_addr +
                                       (uint64_t)loom_verbs_ring_index(p->cts_posted,
                                                                       p->remote.cts_entries) *
                                           LOOM_VERBS_CTS_LEN,
                        .rkey = p->remote.cts_rkey}};
        p->ctsrec[loom_verbs_ring_index(p->cts_posted, vp->tune.cts_entries)] = (struct vx_ctsrec){
            .req = req, .off = off, .len = c.len, .bounce = bounce};
        if (post_wr(tx, r, &wr, (struct vx_sqrec){.kind = LOOM_VERBS_WR_CTS}, 0) < 0)
            return;
        vp->counts.cts_wrs++;
        p->cts_posted++;
        p->radv_off += c.len;
        if (p->radv_off >= req->len) {
            rs->flags |= VX_RS_ALL_ADVERTISED;
            p->radv = req->next;
            p->radv_off = 0;
        }
    }
}

/* Data for CTS number n landed (its last write's immediate arrived). */
static void on_data(struct loom_tx *tx, int r, uint32_t n)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    struct vx_ctsrec *rec = &p->ctsrec[loom_verbs_ring_index(n, vp->tune.cts_entries)];
    struct loom_tx_req *req = rec->req;
    struct vx_reqstate *rs = vx_rs(req);
    if (rec->bounce >= 0) {
        /* the completion comes after the data is placed [verbs: a receive
         * completion follows the placement of its message and of every
         * earlier one on the queue pair]: safe to read */
        memcpy((uint8_t *)req->buf + rec->off, bounce_slot(vp, p, (uint32_t)rec->bounce), rec->len);
        p->bounce_done++;
        vp->counts.copies_out++;
        vp->counts.bytes_copied += rec->len;
    } else {
        vp->counts.bytes_zcopy += rec->len;
    }
    rs->covered += rec->len;
    rec->req = NULL;
    p->cts_landed++;
    if (rs->covered == req->len && (rs->flags & VX_RS_ALL_ADVERTISED))
        complete_recv(tx, r, req);
}

/* ---- send side ---- */

static void complete_send(struct loom_tx *tx, int r, struct loom_tx_req *req)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    loom_link_fifo_remove(&p->lk.reqs[1], req);
    req_release(vp, req);
    vp->counts.sends++;
    req_finish(req, LOOM_SUCCESS);
}

/* The CTS entry for the send this rank is at does not fit it: fail, and
 * tell the peer on the control channel, naming it (as tcp does), so that
 * it names this rank's call. */
static void refuse_cts(struct loom_tx *tx, int r, struct loom_tx_req *req,
                       const struct loom_verbs_cts *c)
{
    int other_call = c->tag != req->tag || c->desc != req->desc || c->count != req->count;
    struct loom_link_notice n = {.culprit = r,
                                 .code = other_call ? LOOM_ERROR_MISMATCH : LOOM_ERROR_PROTOCOL,
                                 .seq = req->tag,
                                 .count = req->count,
                                 .desc = req->desc};
    struct loom_link_frame f;
    loom_link_notice_encode(&n, &f);
    loom_link_send(tx, r, f.type, f.flags, f.w0, f.w1, f.w2);
    if (other_call) {
        tx->mismatch = (struct loom_tx_mismatch){
            .valid = 1, .peer = r, .tag = c->tag, .desc = c->desc, .count = c->count};
        loom_link_fail(tx, r, LOOM_ERROR_MISMATCH,
                       "is in another collective call (call %u, 0x%08x, count %llu; this "
                       "rank is in call %u, 0x%08x, count %llu)",
                       c->tag, c->desc, (unsigned long long)c->count, req->tag, req->desc,
                       (unsigned long long)req->count);
    } else {
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL,
                       "posted a receive of %llu bytes for message %llu where this rank "
                       "sends %zu bytes (call %u)",
                       (unsigned long long)c->msg_len, (unsigned long long)c->msg, req->len,
                       req->tag);
    }
}

/* Write what the CTS entries that arrived ask for. */
static void write_chunks(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    while (p->scur && !p->lk.failed && p->cts_used != p->cts_seen && sq_room(p) > 0) {
        struct loom_tx_req *req = p->scur;
        struct vx_reqstate *rs = vx_rs(req);
        struct loom_verbs_cts c;
        loom_verbs_cts_decode(cts_ring(p, p->cts_used, vp->tune.cts_entries), &c);
        char why[256];
        if (loom_verbs_cts_check(&c, p->cts_used, rs->msg, why, sizeof why) != 0) {
            loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL, "broke the protocol: %s", why);
            return;
        }
        if (c.tag != req->tag || c.desc != req->desc || c.count != req->count ||
            c.msg_len != req->len) {
            refuse_cts(tx, r, req, &c);
            return;
        }
        /* one write per piece: the registered buffer up to the port's
         * largest message; inline when short; else a staging slot */
        uint64_t left = c.len - p->cts_off;
        const uint8_t *src = (const uint8_t *)req->buf + c.offset + p->cts_off;
        struct ibv_sge sge = {0};
        struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1};
        struct vx_sqrec rec = {.kind = LOOM_VERBS_WR_DATA, .req = req};
        uint64_t piece;
        if (rs->mr) {
            piece = left < vp->tune.max_write ? left : vp->tune.max_write;
            sge = (struct ibv_sge){
                .addr = (uintptr_t)src, .length = (uint32_t)piece, .lkey = rs->mr->lkey};
            vp->counts.bytes_zcopy += piece;
        } else if (left <= vp->tune.inline_max) {
            piece = left;
            sge = (struct ibv_sge){.addr = (uintptr_t)src, .length = (uint32_t)piece};
            wr.num_sge = piece ? 1 : 0;
            wr.send_flags = piece ? IBV_SEND_INLINE : 0;
        } else {
            if (p->stage_posted - p->stage_done >= vp->tune.stage_slots)
                return; /* staging full: its writes complete first */
            piece = left < vp->tune.slot_size ? left : vp->tune.slot_size;
            uint8_t *slot = stage_slot(vp, p, p->stage_posted % vp->tune.stage_slots);
            memcpy(slot, src, piece);
            p->stage_posted++;
            rec.stage = 1;
            sge = (struct ibv_sge){
                .addr = (uintptr_t)slot, .length = (uint32_t)piece, .lkey = p->lmr->lkey};
            vp->counts.copies_in++;
            vp->counts.bytes_copied += piece;
        }
        int last = p->cts_off + piece == c.len;
        wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        if (last)
            wr.imm_data = htonl(loom_verbs_imm_encode(LOOM_VERBS_IMM_DATA, c.cts));
        wr.wr.rdma.remote_addr = c.addr + p->cts_off;
        wr.wr.rdma.rkey = c.rkey;
        rec.len = (uint32_t)piece;
        if (post_wr(tx, r, &wr, rec, 1) < 0)
            return;
        vp->counts.data_wrs++;
        rs->inflight++;
        p->cts_off += piece;
        if (!last)
            continue;
        p->cts_used++;
        p->cts_off = 0;
        rs->covered += c.len;
        if (c.offset + c.len == req->len) {
            rs->flags |= VX_RS_ALL_COVERED;
            p->scur = req->next;
        }
    }
}

/* Signalled completion of send-queue number n: it and every entry before
 * it are done. */
static void on_sq_done(struct loom_tx *tx, int r, uint32_t n)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (!loom_verbs_seq_in_window(n, p->sq_done, p->sq_posted - p->sq_done)) {
        loom_link_fail(tx, r, LOOM_ERROR_INTERNAL,
                       "completed send-queue entry %u, not among those posted (%u..%u)", n,
                       p->sq_done, p->sq_posted);
        return;
    }
    for (; p->sq_done != n + 1; p->sq_done++) {
        struct vx_sqrec *rec = &p->sqrec[p->sq_done % p->sq_depth];
        if (rec->kind != LOOM_VERBS_WR_DATA)
            continue;
        if (rec->stage)
            p->stage_done++;
        struct loom_tx_req *req = rec->req;
        struct vx_reqstate *rs = vx_rs(req);
        rs->written += rec->len;
        rs->inflight--;
        rec->req = NULL;
        if (rs->inflight == 0 && (rs->flags & VX_RS_ALL_COVERED))
            complete_send(tx, r, req);
    }
}

/* ---- completions ---- */

static const char *wr_what(enum loom_verbs_wr_kind k)
{
    switch (k) {
    case LOOM_VERBS_WR_RECV: return "a receive for its writes";
    case LOOM_VERBS_WR_CTS: return "a clear-to-send write to it";
    case LOOM_VERBS_WR_DATA: return "an RDMA write of data to it";
    default: return "a work request";
    }
}

static void on_wc(struct loom_tx *tx, const struct ibv_wc *wc)
{
    struct vx_priv *vp = tx->priv;
    int r = loom_verbs_wrid_peer(wc->wr_id);
    enum loom_verbs_wr_kind kind = loom_verbs_wrid_kind(wc->wr_id);
    if (r < 0 || r >= tx->params.nranks || r == tx->params.rank)
        return;
    struct vx_peer *p = &vp->peers[r];
    if (p->lk.failed || !p->qp)
        return; /* flushes of a link already failed */
    if (wc->status != IBV_WC_SUCCESS) {
        struct loom_verbs_wc_error e = loom_verbs_wc_error(wc->status);
        if (wc->status == IBV_WC_WR_FLUSH_ERR)
            /* the first error of this queue pair came without a completion
             * here: the responder side of a remote error, or the device */
            loom_link_fail(tx, r, e.res,
                           ": the queue pair to it went to the error state (%s flushed, "
                           "%s); the peer's side names the cause",
                           wr_what(kind), e.name);
        else
            loom_link_fail(tx, r, e.res, ": %s failed with %s (%s, vendor error 0x%x): %s",
                           wr_what(kind), vp->ibv->wc_status_str(wc->status), e.name,
                           wc->vendor_err, e.hint);
        return;
    }
    if (wc->qp_num != p->qp->qp_num) {
        loom_link_fail(tx, r, LOOM_ERROR_INTERNAL,
                       "had a completion of queue pair %u, not its own (%u)", wc->qp_num,
                       p->qp->qp_num);
        return;
    }
    if (kind != LOOM_VERBS_WR_RECV) {
        on_sq_done(tx, r, (uint32_t)loom_verbs_wrid_index(wc->wr_id));
        return;
    }
    p->recv_owed++;
    enum loom_verbs_imm_kind ik;
    uint16_t s16;
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
        loom_verbs_imm_decode(ntohl(wc->imm_data), &ik, &s16) != 0) {
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL,
                       "sent something else than a write with immediate data (opcode %d, "
                       "immediate 0x%08x)",
                       wc->opcode, ntohl(wc->imm_data));
        return;
    }
    if (ik == LOOM_VERBS_IMM_CTS) {
        uint32_t n = loom_verbs_seq_expand(p->cts_seen, s16);
        if (n != p->cts_seen) {
            loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL, "sent clear-to-send #%u where #%u was due",
                           n, p->cts_seen);
            return;
        }
        p->cts_seen++;
        return;
    }
    uint32_t n = loom_verbs_seq_expand(p->cts_landed, s16);
    if (n != p->cts_landed || p->cts_landed == p->cts_posted) {
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL,
                       "wrote data for clear-to-send #%u where #%u was due (%u advertised)", n,
                       p->cts_landed, p->cts_posted);
        return;
    }
    on_data(tx, r, n);
}

int loom_verbs_poll_cq(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    struct ibv_wc wc[32];
    int total = 0;
    for (;;) {
        int n = vp->ibv->poll_cq(vp->cq, 32, wc);
        if (n < 0) {
            /* "In case of a CQ overrun ... the CQ cannot be used": every
             * link through it is lost */
            char why[320];
            snprintf(why, sizeof why,
                     ": its link is lost: the completion queue of %s failed (ibv_poll_cq "
                     "returned %d: overrun past its %d entries, or a device error)",
                     vp->choice.dev, n, vp->cq->cqe);
            for (int i = 0; i < vp->link.nlive; i++)
                if (!vp->peers[vp->link.live[i]].lk.failed)
                    loom_link_fail(tx, vp->link.live[i], LOOM_ERROR_SYSTEM, "%s", why);
            if (!vp->link.err) {
                snprintf(tx->errmsg, sizeof tx->errmsg, "verbs: rank %d: %s", tx->params.rank,
                         why + sizeof ": its link is lost: " - 1);
                vp->link.err = LOOM_ERROR_SYSTEM;
            }
            return -1;
        }
        for (int i = 0; i < n; i++)
            on_wc(tx, &wc[i]);
        total += n;
        vp->counts.cqes += (uint64_t)n;
        if (n < 32)
            break;
    }
    if (total)
        for (int i = 0; i < vp->link.nlive; i++)
            loom_verbs_kick(tx, vp->link.live[i]);
    return total;
}

void loom_verbs_kick(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (p->lk.state != LOOM_LINK_S_UP || p->lk.failed)
        return;
    if (p->recv_owed >= VX_RECV_BATCH) {
        uint32_t n = p->recv_owed;
        p->recv_owed = 0;
        if (loom_verbs_post_recvs(tx, r, n) < 0)
            return;
    }
    write_chunks(tx, r);
    advertise(tx, r);
}

/* ---- posting requests ---- */

loom_result_t loom_verbs_post(struct loom_tx *tx, struct loom_tx_req *req, int is_send)
{
    struct vx_priv *vp = tx->priv;
    const int r = req ? req->peer : -1;
    if (!req || r < 0 || r >= tx->params.nranks || r == tx->params.rank ||
        (req->len && !req->buf) || req->mem != LOOM_MEM_HOST) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "verbs: invalid %s request (peer %d of %d, own rank %d%s)",
                 is_send ? "send" : "receive", r, tx->params.nranks, tx->params.rank,
                 req && req->mem != LOOM_MEM_HOST ? ", device memory" : "");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    req->is_send = is_send;
    req->next = NULL;
    req->status = LOOM_SUCCESS;
    req->done = 0;
    memset(req->priv, 0, sizeof req->priv);
    struct vx_peer *p = &vp->peers[r];
    if (p->lk.state == LOOM_LINK_S_NONE)
        loom_link_start(tx, r); /* the core connects first; be lenient */
    if (p->lk.failed || vp->link.shut) {
        loom_result_t res = p->lk.failed ? p->lk.failed : LOOM_ERROR_ABORTED;
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s",
                 p->lk.failmsg ? p->lk.failmsg : "verbs: the transport was shut down");
        req_finish(req, res);
        return res;
    }
    struct vx_reqstate *rs = vx_rs(req);
    rs->msg = is_send ? ++p->send_msg : ++p->recv_msg;
    if (req->len >= vp->tune.zcopy_min) {
        struct ibv_mr *mr = req->mr;
        if (mr && (uintptr_t)req->buf >= (uintptr_t)mr->addr &&
            (uintptr_t)req->buf + req->len <= (uintptr_t)mr->addr + mr->length) {
            rs->mr = mr; /* the core's registration */
        } else {
            void *handle = NULL, *ref = NULL;
            if (loom_regcache_get(vp->rc, req->buf, req->len, &handle, &ref) == LOOM_SUCCESS) {
                rs->mr = handle;
                rs->ref = ref;
            } /* else: through bounce / staging slots, copied */
        }
    }
    if (is_send) {
        loom_link_fifo_push(&p->lk.reqs[1], req);
        if (!p->scur)
            p->scur = req;
    } else {
        loom_link_fifo_push(&p->lk.reqs[0], req);
        if (!p->radv) {
            p->radv = req;
            p->radv_off = 0;
        }
    }
    loom_verbs_kick(tx, r);
    return LOOM_SUCCESS;
}
