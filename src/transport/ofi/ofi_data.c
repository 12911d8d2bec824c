/* ofi_data.c - the libfabric transport's data path: requests queued per
 * peer and direction, posted as tagged chunks once the peer's link is up
 * (ofi_priv.h describes the tags), completions read from the completion
 * queue and handed back in FIFO order per peer. A post the provider refuses
 * with -FI_EAGAIN is retried from progress(), after the queue was read.
 *
 * Registration (providers with FI_MR_LOCAL): messages up to a bounce slot
 * are copied through pre-registered slots; larger buffers are registered
 * through the registration cache (regcache.h: correct when a buffer is freed
 * and another allocated at the same address). FI_MR_ENDPOINT binds each
 * region to the endpoint; FI_MR_PROV_KEY lets the provider choose keys
 * (else each region gets its own); FI_MR_VIRT_ADDR and FI_MR_ALLOCATED
 * concern remote access and how buffers were allocated: no RMA is done and
 * every buffer is the user's allocated memory. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "log.h"
#include "util.h"
#include "transport/ofi/ofi_priv.h"

#define OX_BOUNCE_SLOTS 64
#define OX_BOUNCE_SIZE (16u * 1024)
#define OX_RC_ENTRIES 256
#define OX_RC_BYTES (4ull << 30)
#define OX_CQ_BATCH 32

static uint64_t g_mr_key = 1;

static loom_result_t mr_reg(struct loom_tx *tx, void *buf, size_t len, struct fid_mr **out)
{
    struct ox_priv *vp = tx->priv;
    struct fid_mr *mr = NULL;
    uint64_t key = __atomic_fetch_add(&g_mr_key, 1, __ATOMIC_RELAXED);
    int ret = fi_mr_reg(vp->domain, buf, len, FI_SEND | FI_RECV, 0, key, 0, &mr, NULL);
    if (!ret && vp->mr_endpoint) {
        ret = fi_mr_bind(mr, &vp->ep->fid, 0);
        if (!ret)
            ret = fi_mr_enable(mr);
        if (ret)
            fi_close(&mr->fid);
    }
    if (ret) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "ofi: fi_mr_reg of %zu bytes at %p: %s", len, buf,
                 loom_fi.strerror(-ret));
        return LOOM_ERROR_SYSTEM;
    }
    vp->counts.regs++;
    *out = mr;
    return LOOM_SUCCESS;
}

static loom_result_t rc_reg(void *ctx, void *buf, size_t len, void **handle)
{
    struct fid_mr *mr;
    loom_result_t res = mr_reg(ctx, buf, len, &mr);
    if (res == LOOM_SUCCESS)
        *handle = mr;
    return res;
}

static void rc_dereg(void *ctx, void *handle)
{
    (void)ctx;
    fi_close(&((struct fid_mr *)handle)->fid);
}

loom_result_t loom_ofi_data_init(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    if (!vp->need_reg)
        return LOOM_SUCCESS;
    struct loom_regcache_ops ops = {.reg = rc_reg, .dereg = rc_dereg};
    loom_result_t res = loom_regcache_new(&ops, tx, OX_RC_ENTRIES, OX_RC_BYTES, &vp->rc);
    if (res < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "ofi: cannot make a registration cache");
        return res;
    }
    vp->nbounce = OX_BOUNCE_SLOTS;
    vp->bounce_size = OX_BOUNCE_SIZE;
    if (posix_memalign((void **)&vp->bounce, 4096, (size_t)vp->nbounce * vp->bounce_size) ||
        !(vp->bounce_free = calloc(vp->nbounce, sizeof *vp->bounce_free))) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "ofi: out of memory for bounce slots");
        return LOOM_ERROR_NO_MEMORY;
    }
    res = mr_reg(tx, vp->bounce, (size_t)vp->nbounce * vp->bounce_size, &vp->bounce_mr);
    if (res < 0)
        return res;
    vp->bounce_desc = fi_mr_desc(vp->bounce_mr);
    for (uint32_t i = 0; i < vp->nbounce; i++)
        vp->bounce_free[vp->nbounce_free++] = vp->bounce + (size_t)i * vp->bounce_size;
    return LOOM_SUCCESS;
}

void loom_ofi_data_free(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    /* the endpoint is closed: nothing is in flight any more */
    for (struct ox_op *op = vp->inflight, *next; op; op = next) {
        next = op->next;
        free(op);
    }
    vp->inflight = NULL;
    for (struct ox_op *op = vp->ops_free, *next; op; op = next) {
        next = op->next;
        free(op);
    }
    vp->ops_free = NULL;
    if (vp->bounce_mr)
        fi_close(&vp->bounce_mr->fid);
    vp->bounce_mr = NULL;
    free(vp->bounce);
    free(vp->bounce_free);
    vp->bounce = NULL;
    vp->bounce_free = NULL;
    if (vp->rc)
        loom_regcache_free(vp->rc);
    vp->rc = NULL;
}

static struct ox_op *op_get(struct ox_priv *vp)
{
    struct ox_op *op = vp->ops_free;
    if (op)
        vp->ops_free = op->next;
    else if (!(op = malloc(sizeof *op)))
        return NULL;
    memset(op, 0, sizeof *op);
    return op;
}

static void op_unlink(struct ox_priv *vp, struct ox_op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        vp->inflight = op->next;
    if (op->next)
        op->next->prev = op->prev;
}

static void op_put(struct ox_priv *vp, struct ox_op *op)
{
    if (op->bounce)
        vp->bounce_free[vp->nbounce_free++] = op->bounce;
    op->next = vp->ops_free;
    vp->ops_free = op;
}

/* Hand back finished requests at the head of a queue, in order. */
static void deliver(struct loom_tx *tx, int r, int is_send)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    struct loom_link_fifo *q = &p->lk.reqs[is_send];
    while (q->head && ox_rs(q->head)->landed) {
        struct loom_tx_req *req = loom_link_fifo_pop(q);
        struct ox_reqstate *rs = ox_rs(req);
        if (rs->ref)
            loom_regcache_put(vp->rc, rs->ref);
        rs->ref = NULL;
        req->status = rs->err;
        if (is_send) {
            vp->counts.sends++;
        } else {
            vp->counts.recvs++;
            p->recv_done++;
        }
        __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
    }
}

static void check_landed(struct loom_tx *tx, struct loom_tx_req *req)
{
    struct ox_reqstate *rs = ox_rs(req);
    if (rs->ndone == rs->posted && (rs->posted == rs->nchunks || rs->err)) {
        rs->landed = 1;
        deliver(tx, req->peer, req->is_send);
    }
}

/* Post chunk i of req: 0, 1 when the provider said -FI_EAGAIN (or no
 * bounce slot is free), -1 when the peer failed. */
static int post_chunk(struct loom_tx *tx, struct loom_tx_req *req, uint32_t i)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[req->peer];
    struct ox_reqstate *rs = ox_rs(req);
    size_t off = (size_t)i * rs->chunk;
    size_t clen = req->len - off < rs->chunk ? req->len - off : rs->chunk;
    uint8_t *buf = (uint8_t *)req->buf + off;
    void *desc = NULL;
    struct ox_op *op = op_get(vp);
    if (!op) {
        loom_link_fail(tx, req->peer, LOOM_ERROR_NO_MEMORY, ": out of memory posting");
        return -1;
    }
    if (vp->need_reg) {
        if (req->len <= vp->bounce_size) {
            if (!vp->nbounce_free) {
                op_put(vp, op);
                return 1;
            }
            op->bounce = vp->bounce_free[--vp->nbounce_free];
            if (req->is_send && clen)
                memcpy(op->bounce, buf, clen);
            buf = op->bounce;
            desc = vp->bounce_desc;
            vp->counts.bounced++;
        } else {
            if (!rs->ref) {
                void *h;
                loom_result_t res = loom_regcache_get(vp->rc, req->buf, req->len, &h, &rs->ref);
                if (res < 0) {
                    op_put(vp, op);
                    loom_link_fail(tx, req->peer, res, ": %s", tx->errmsg);
                    return -1;
                }
                rs->desc = fi_mr_desc((struct fid_mr *)h);
            }
            desc = rs->desc;
        }
    }
    op->req = req;
    op->peer = req->peer;
    op->is_send = req->is_send;
    op->len = clen;
    op->off = off;
    uint64_t tag = OX_TAG(i, req->len, rs->msg);
    ssize_t ret = req->is_send ? fi_tsend(vp->ep, buf, clen, desc, p->addr, tag, &op->ctx)
                               : fi_trecv(vp->ep, buf, clen, desc, p->addr, tag, 0, &op->ctx);
    if (ret == -FI_EAGAIN) {
        op_put(vp, op);
        vp->counts.eagains++;
        return 1;
    }
    if (ret) {
        op_put(vp, op);
        loom_link_fail(tx, req->peer, LOOM_ERROR_SYSTEM, ": %s of %zu bytes failed: %s",
                       req->is_send ? "fi_tsend" : "fi_trecv", clen, loom_fi.strerror((int)-ret));
        return -1;
    }
    op->prev = NULL;
    op->next = vp->inflight;
    if (vp->inflight)
        vp->inflight->prev = op;
    vp->inflight = op;
    p->inflight++;
    rs->posted++;
    vp->counts.chunks++;
    return 0;
}

static int kick_queue(struct loom_tx *tx, struct loom_tx_req *req)
{
    for (; req; req = req->next) {
        struct ox_reqstate *rs = ox_rs(req);
        while (rs->posted < rs->nchunks && !rs->err) {
            int k = post_chunk(tx, req, rs->posted);
            if (k)
                return k;
        }
    }
    return 0;
}

void loom_ofi_kick(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (p->lk.state != LOOM_LINK_S_UP || p->lk.failed)
        return;
    int k = kick_queue(tx, p->lk.reqs[0].head); /* receives first: ready for what comes */
    if (k < 0)
        return;
    if (k > 0)
        vp->eagain = 1;
    if (kick_queue(tx, p->lk.reqs[1].head) > 0)
        vp->eagain = 1;
}

loom_result_t loom_ofi_post(struct loom_tx *tx, struct loom_tx_req *req, int is_send)
{
    struct ox_priv *vp = tx->priv;
    int r = req->peer;
    req->is_send = is_send;
    req->done = 0;
    req->status = LOOM_SUCCESS;
    req->next = NULL;
    memset(req->priv, 0, sizeof req->priv);
    loom_result_t res = LOOM_SUCCESS;
    if (r < 0 || r >= tx->params.nranks || r == tx->params.rank) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "ofi: a request for rank %d of %d (own rank %d)", r,
                 tx->params.nranks, tx->params.rank);
        res = LOOM_ERROR_INVALID_ARGUMENT;
    } else if (req->mem != LOOM_MEM_HOST) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "ofi: device memory is not supported here");
        res = LOOM_ERROR_NOT_SUPPORTED;
    } else if (vp->link.shut || vp->peers[r].lk.failed) {
        struct ox_peer *p = &vp->peers[r];
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s",
                 p->lk.failmsg ? p->lk.failmsg : "ofi: the transport was shut down");
        res = p->lk.failed ? p->lk.failed : LOOM_ERROR_ABORTED;
    } else if (vp->peers[r].lk.state == LOOM_LINK_S_NONE) {
        res = loom_link_start(tx, r);
    }
    if (res < 0) {
        req->status = res;
        __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
        return res;
    }
    struct ox_peer *p = &vp->peers[r];
    struct ox_reqstate *rs = ox_rs(req);
    rs->msg = is_send ? p->send_msg++ : p->recv_msg++;
    rs->chunk = vp->chunk;
    if (req->len / rs->chunk >= OX_MAX_CHUNKS)
        rs->chunk = (req->len + OX_MAX_CHUNKS - 1) / OX_MAX_CHUNKS;
    rs->nchunks = req->len ? (uint32_t)((req->len + rs->chunk - 1) / rs->chunk) : 1;
    struct loom_link_fifo *q = &p->lk.reqs[is_send];
    loom_link_fifo_push(q, req);
    if (p->lk.state == LOOM_LINK_S_UP) {
        /* only this request can be unposted unless -FI_EAGAIN held others */
        struct ox_reqstate *hs = ox_rs(q->head);
        int k = kick_queue(tx, hs->posted < hs->nchunks ? q->head : req);
        if (k > 0)
            vp->eagain = 1;
    }
    return LOOM_SUCCESS;
}

static void op_done(struct loom_tx *tx, struct ox_op *op, size_t len, int err, int prov_err,
                    const char *perr)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[op->peer];
    struct loom_tx_req *req = op->req;
    if (err < 0)
        err = -err; /* shm reports negative errors */
    if (vp->sndbuf && !p->socks_tuned)
        loom_ofi_tune_sockets(tx, op->peer);
    op_unlink(vp, op);
    p->inflight--;
    if (req) {
        struct ox_reqstate *rs = ox_rs(req);
        char d[200];
        int longer = !req->is_send &&
                     (err == FI_ETRUNC || err == FI_EMSGSIZE || err == FI_ETOOSMALL);
        if (err && !longer) {
            /* not counted done: the request stays pending until the peer's
             * failure is known (or its goodbye says the message arrived) */
            char why[300];
            snprintf(why, sizeof why, ": a %s of %zu bytes failed: %s (provider error %d: %s)",
                     req->is_send ? "send" : "receive", req->len, loom_fi.strerror(err), prov_err,
                     perr ? perr : "");
            int peer = op->peer;
            op_put(vp, op);
            loom_link_data_error(tx, peer, why);
            return;
        }
        rs->ndone++;
        if (longer) {
            snprintf(tx->errmsg, sizeof tx->errmsg,
                     "%s sent a message longer than the %zu bytes this rank expected (%s)",
                     loom_link_describe(tx, op->peer, d, sizeof d), req->len,
                     loom_fi.strerror(err));
            if (!rs->err)
                rs->err = LOOM_ERROR_MISMATCH;
        } else if (!req->is_send) {
            if (len != op->len) {
                snprintf(tx->errmsg, sizeof tx->errmsg,
                         "%s sent a message of another length than the %zu bytes this rank "
                         "expected (a chunk of %zu bytes where %zu were posted)",
                         loom_link_describe(tx, op->peer, d, sizeof d), req->len, len, op->len);
                if (!rs->err)
                    rs->err = LOOM_ERROR_MISMATCH;
            }
        }
        if (op->bounce && !req->is_send && !err && len <= op->len)
            memcpy((uint8_t *)req->buf + op->off, op->bounce, len);
        op_put(vp, op);
        check_landed(tx, req);
        return;
    }
    op_put(vp, op);
}

int loom_ofi_poll_cq(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    int total = 0;
    for (;;) {
        struct fi_cq_tagged_entry e[OX_CQ_BATCH];
        ssize_t n = fi_cq_read(vp->cq, e, OX_CQ_BATCH);
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++)
                if (e[i].op_context)
                    op_done(tx, e[i].op_context, e[i].len, 0, 0, NULL);
            total += (int)n;
            if (n < OX_CQ_BATCH)
                break;
            continue;
        }
        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee = {0};
            ssize_t k = fi_cq_readerr(vp->cq, &ee, 0);
            if (k < 0)
                break;
            total++;
            const char *perr = fi_cq_strerror(vp->cq, ee.prov_errno, ee.err_data, NULL, 0);
            if (ee.op_context)
                op_done(tx, ee.op_context, ee.len, ee.err ? ee.err : FI_EOTHER, ee.prov_errno,
                        perr);
            continue;
        }
        snprintf(tx->errmsg, sizeof tx->errmsg, "ofi: fi_cq_read: %s", loom_fi.strerror((int)-n));
        vp->link.err = LOOM_ERROR_SYSTEM;
        break;
    }
    return total;
}

void loom_ofi_sends_received(struct loom_tx *tx, int r, uint64_t got)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    int any = 0;
    for (struct loom_tx_req *req = p->lk.reqs[1].head; req && ox_rs(req)->msg < got;
         req = req->next) {
        struct ox_reqstate *rs = ox_rs(req);
        if (rs->landed)
            continue;
        /* every chunk arrived, so every chunk was posted; the completions
         * still to come find no request */
        for (struct ox_op *op = vp->inflight; op; op = op->next)
            if (op->req == req)
                op->req = NULL;
        rs->landed = 1;
        any = 1;
    }
    if (any)
        deliver(tx, r, 1);
}

void loom_ofi_fail_reqs(struct loom_tx *tx, int r, loom_result_t res)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    /* ops still posted for the peer: nothing is to touch the requests any
     * more; receives are cancelled so that nothing lands in buffers handed
     * back (their completions, FI_ECANCELED, free the ops) */
    for (struct ox_op *op = vp->inflight; op; op = op->next) {
        if (op->peer != r || !op->req)
            continue;
        op->req = NULL;
        if (!op->is_send && vp->ep)
            fi_cancel(&vp->ep->fid, &op->ctx);
    }
    for (int k = 0; k < 2; k++) {
        struct loom_tx_req *req;
        while ((req = loom_link_fifo_pop(&p->lk.reqs[k]))) {
            struct ox_reqstate *rs = ox_rs(req);
            if (rs->ref)
                loom_regcache_put(vp->rc, rs->ref);
            rs->ref = NULL;
            req->status = res;
            __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
        }
    }
}
