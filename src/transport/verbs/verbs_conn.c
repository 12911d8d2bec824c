/* verbs_conn.c - the verbs transport's connections: one RC queue pair per
 * peer in use, made on first use through the out-of-band service, and one
 * TCP control socket per connected peer for liveness and notices.
 *
 * Connecting to peer p (whoever starts, one queue pair results):
 *  - a rank that starts (connect(p), or a first post to p) creates its
 *    queue pair (INIT, receives posted) and sends p its connection blob
 *    (verbs_proto.h) under LOOM_OOB_TAG_VERBS;
 *  - a rank that receives a blob from p applies it (RTR, RTS) after
 *    creating its own queue pair if it had none, and then, only if it had
 *    none, answers with its blob (so it is ready to receive before p can
 *    send). When both start at once each applies the other's blob and
 *    neither answers: still one pair;
 *  - once its queue pair is RTS, the lower rank of the two opens a TCP
 *    socket to the higher rank's OOB port (the service hands it to the
 *    transport: LOOM_OOB_KIND_VERBS) and sends a hello carrying the token
 *    the higher rank put in its blob, signed with the job key; the higher
 *    rank checks it, waits for its own queue pair to be RTS and answers ACK
 *    (signed too). Data moves only after that, when both queue pairs are
 *    RTS.
 * Blobs travel only through the out-of-band service, whose messages come
 * from ranks that passed the bootstrap's authentication; the control socket
 * accepts only a hello with the token of that exchange (and the job key's
 * proof), so a stranger cannot take a peer's place. A peer whose process
 * ends closes its control socket: its peers learn it at once (and a lost
 * host through TCP keepalive within LOOM_TIMEOUT), not after the queue
 * pair's retries run out. */
#include "build_config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "log.h"
#include "util.h"
#include "bootstrap/oob.h"
#include "transport/verbs/verbs_priv.h"

#define VX_TAG_CONN (LOOM_OOB_TAG_VERBS + 0)
#define VX_MAX_PENDING 256
#define VX_MAC_CTX "loom-verbs-ctl"

static const struct loom_link_proto vx_proto = {LOOM_VERBS_HELLO_MAGIC, LOOM_VERBS_FRAME_MAGIC,
                                                VX_MAC_CTX};

static void ctl_mac(struct vx_priv *vp, char role, const uint8_t *hello, uint8_t mac[32])
{
    loom_link_mac(&vx_proto, vp->key.set ? vp->key.bytes : NULL, vp->key.len, role, hello, mac);
}

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
                           (p->have_remote ? LOOM_VERBS_BLOB_F_REPLY : 0)),
        .cts_entries = vp->tune.cts_entries,
        .cts_addr = (uintptr_t)p->rblock,
        .cts_rkey = p->rmr->rkey,
        .max_msg = vp->max_msg,
    };
    memcpy(b->gid, vp->choice.gid, 16);
    memcpy(b->token, p->token, LOOM_VERBS_TOKEN_LEN);
}

static loom_result_t send_blob(struct loom_tx *tx, int r)
{
    struct loom_verbs_blob b;
    uint8_t buf[LOOM_VERBS_BLOB_MAX];
    blob_of(tx, r, &b);
    size_t n = loom_verbs_blob_encode(&b, buf, sizeof buf);
    loom_result_t res = loom_oob_send(tx->params.oob, r, VX_TAG_CONN, buf, n);
    if (res < 0)
        loom_verbs_fail_peer(tx, r, res, "could not be sent this rank's queue pair data: %s",
                             loom_oob_error(tx->params.oob));
    return res;
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
                 "verbs: cannot grow the completion queue to %d entries: %s", want,
                 strerror(err));
        return loom_verbs_errno_result(err);
    }
    return LOOM_SUCCESS;
}

/* Make peer r's queue pair (INIT, receives posted) and memory. */
static loom_result_t make_qp(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    char d[256];
    vp->live[vp->nlive++] = r; /* at most once: state leaves VX_NONE below */
    loom_result_t res = loom_verbs_peer_mem(tx, r);
    if (res < 0) {
        loom_verbs_fail_peer(tx, r, res, "cannot be connected: %s", tx->errmsg);
        return res;
    }
    struct ibv_qp_init_attr ia = {
        .send_cq = vp->cq,
        .recv_cq = vp->cq,
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
        .cap = {
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
        loom_verbs_fail_peer(tx, r, loom_verbs_errno_result(e),
                             "cannot be connected: ibv_create_qp (%u send, %u receive "
                             "entries): %s", p->sq_depth, p->rq_depth, strerror(e));
        return loom_verbs_errno_result(e);
    }
    if (ia.cap.max_inline_data < vp->tune.inline_max)
        vp->tune.inline_max = ia.cap.max_inline_data;
    uint32_t psn;
    loom_link_token(&psn, sizeof psn);
    p->psn = psn & 0xffffffu;
    loom_link_token(p->token, sizeof p->token);
    res = cq_grow(tx, (int)(p->sq_depth + p->rq_depth));
    if (res < 0) {
        loom_verbs_fail_peer(tx, r, res, "cannot be connected: %s", tx->errmsg);
        return res;
    }
    int err = loom_verbs_qp_to_init(vp->ibv, p->qp, &vp->local);
    if (err) {
        loom_verbs_fail_peer(tx, r, loom_verbs_errno_result(err),
                             "cannot be connected: queue pair to INIT: %s", strerror(err));
        return loom_verbs_errno_result(err);
    }
    res = loom_verbs_post_recvs(tx, r, p->rq_depth);
    if (res < 0)
        return res;
    p->t_start = loom_now();
    LOOM_TRACE(LOOM_SUB_NET, "verbs: rank %d: queue pair %u for %s", tx->params.rank,
               p->qp->qp_num, loom_verbs_describe(tx, r, d, sizeof d));
    return LOOM_SUCCESS;
}

static void ctl_up(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    char d[256];
    p->ctl = VX_CTL_UP;
    p->state = VX_UP;
    p->ctl_have = 0;
    LOOM_TRACE(LOOM_SUB_NET, "verbs: rank %d: connected to %s in %.3f s", tx->params.rank,
               loom_verbs_describe(tx, r, d, sizeof d), loom_now() - p->t_start);
    loom_verbs_kick(tx, r);
}

/* The higher rank, its queue pair RTS and the hello checked: answer ACK. */
static void send_ack(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    uint8_t mac[32];
    ctl_mac(vp, 'A', p->ctl_in, mac);
    loom_verbs_ctl_send(tx, r, LOOM_LINK_ACK, 0, loom_get_le64(mac),
                        loom_get_le64(mac + 8), loom_get_le64(mac + 16));
    if (!p->failed)
        ctl_up(tx, r);
}

/* The lower rank, its queue pair RTS: open a control socket to the higher
 * rank's OOB port (its service hands it to its verbs transport). */
static void ctl_connect(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    char err[256];
    int fd = -1;
    loom_result_t res = loom_oob_connect_fd(tx->params.oob, r, &fd, err, sizeof err);
    if (res < 0) {
        /* every rank listened before any transport opened: a refusal
         * means the process is gone */
        loom_verbs_fail_peer(tx, r, res == LOOM_ERROR_REMOTE ? res : LOOM_ERROR_SYSTEM,
                             res == LOOM_ERROR_REMOTE
                                 ? "is gone: %s (the process exited or crashed)"
                                 : "cannot be reached for a control connection: %s", err);
        return;
    }
    loom_net_set_nodelay(fd);
    loom_net_set_keepalive(fd, tx->params.timeout);
    p->ctl_fd = fd;
    p->ctl = VX_CTL_CONNECTING;
    loom_verbs_epoll_add(tx, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, VX_EP_PEER(r));
}

/* Peer r's blob arrived (checked): connect our queue pair to its. */
static void apply_blob(struct loom_tx *tx, int r, const struct loom_verbs_blob *b)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    int answer = 0;
    if (p->state == VX_FAILED)
        return;
    if (p->have_remote) {
        loom_verbs_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
                             "sent its queue pair data twice (queue pair %u, then %u)",
                             p->remote.qpn, b->qpn);
        return;
    }
    if (p->state == VX_NONE) {
        if (make_qp(tx, r) < 0)
            return;
        answer = 1;
    }
    p->remote = *b;
    p->have_remote = 1;
    struct loom_verbs_remote rem = {.qpn = b->qpn, .psn = b->psn, .lid = b->lid, .mtu = b->mtu,
                                    .ethernet = !!(b->flags & LOOM_VERBS_BLOB_F_ETHERNET)};
    memcpy(rem.gid, b->gid, 16);
    int err = loom_verbs_qp_to_rtr(vp->ibv, p->qp, &vp->local, &rem);
    if (!err)
        err = loom_verbs_qp_to_rts(vp->ibv, p->qp, p->psn);
    if (err) {
        char gs[64];
        loom_verbs_gid_format(b->gid, gs, sizeof gs);
        loom_verbs_fail_peer(tx, r, loom_verbs_errno_result(err),
                             "cannot be connected: queue pair %u to RTR/RTS towards its "
                             "queue pair %u (GID %s, LID %u, MTU %d): %s", p->qp->qp_num,
                             b->qpn, gs, b->lid, loom_verbs_mtu_bytes(b->mtu), strerror(err));
        return;
    }
    p->state = VX_WAIT_CTL;
    if (answer && send_blob(tx, r) < 0)
        return;
    if (tx->params.rank < r)
        ctl_connect(tx, r);
    else if (p->ctl == VX_CTL_HELLO_OK)
        send_ack(tx, r); /* its hello came before our RTS */
}

loom_result_t loom_verbs_conn_start(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (p->state != VX_NONE)
        return p->failed ? p->failed : LOOM_SUCCESS;
    loom_result_t res = make_qp(tx, r);
    if (res < 0)
        return res;
    p->state = VX_WAIT_BLOB;
    return send_blob(tx, r);
}

void loom_verbs_conn_poll_oob(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    for (;;) {
        int from = -1;
        void *buf = NULL;
        size_t len = 0;
        int got = loom_oob_poll(tx->params.oob, VX_TAG_CONN, -1, &from, &buf, &len);
        if (got < 0) {
            if (!vp->pending_err) {
                snprintf(tx->errmsg, sizeof tx->errmsg, "verbs: the out-of-band service "
                         "failed: %s", loom_oob_error(tx->params.oob));
                vp->pending_err = (loom_result_t)got;
            }
            return;
        }
        if (got == 0)
            return;
        struct loom_verbs_blob b;
        char why[256];
        if (from < 0 || from >= tx->params.nranks || from == tx->params.rank) {
            free(buf);
            continue;
        }
        if (loom_verbs_blob_decode(buf, len, tx->params.comm_id, tx->params.nranks,
                                   tx->params.rank, &b, why, sizeof why) != 0 ||
            b.from != (uint32_t)from) {
            if (!why[0] || b.from != (uint32_t)from)
                snprintf(why, sizeof why, "a blob that says it is from rank %u", b.from);
            loom_verbs_fail_peer(tx, from, LOOM_ERROR_PROTOCOL,
                                 "sent queue pair data this rank cannot use: %s", why);
        } else {
            apply_blob(tx, from, &b);
        }
        free(buf);
    }
}

/* ---- the control socket ---- */

void loom_verbs_ctl_send(struct loom_tx *tx, int r, uint16_t type, uint16_t flags,
                         uint64_t w0, uint64_t w1, uint64_t w2)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (p->ctl_fd < 0)
        return;
    struct loom_link_frame f = {.type = type, .flags = flags, .comm_id = tx->params.comm_id,
                                 .w0 = w0, .w1 = w1, .w2 = w2};
    uint8_t b[LOOM_LINK_FRAME_LEN];
    loom_link_frame_encode(&vx_proto, &f, b);
    /* 40 bytes on a socket that carries a handful: the kernel takes them
     * whole or the link is gone (best effort, never blocks) */
    ssize_t n = send(p->ctl_fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
}

void loom_verbs_conn_close(struct loom_tx *tx, int r)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (p->ctl_fd >= 0) {
        epoll_ctl(vp->epfd, EPOLL_CTL_DEL, p->ctl_fd, NULL);
        close(p->ctl_fd);
        p->ctl_fd = -1;
    }
}

void loom_verbs_conn_take(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    int fd;
    char from[64];
    while (loom_oob_take_fd(tx->params.oob, LOOM_OOB_KIND_VERBS, &fd, from, sizeof from)) {
        struct vx_pending *np = vp->npending < VX_MAX_PENDING
                                    ? realloc(vp->pending, sizeof *np * (size_t)(vp->npending + 1))
                                    : NULL;
        if (!np) {
            close(fd); /* a flood: strangers do not get to queue */
            continue;
        }
        vp->pending = np;
        int i = vp->npending++;
        vp->pending[i] = (struct vx_pending){
            .fd = fd, .deadline = loom_now() + (tx->params.connect_timeout > 0
                                                    ? tx->params.connect_timeout : 60)};
        snprintf(vp->pending[i].from, sizeof vp->pending[i].from, "%s", from);
        loom_net_set_nonblock(fd);
        loom_net_set_nodelay(fd);
        loom_verbs_epoll_add(tx, fd, EPOLLIN | EPOLLRDHUP, VX_EP_PENDING(fd));
    }
}

static void pending_drop(struct loom_tx *tx, int i, int close_it)
{
    struct vx_priv *vp = tx->priv;
    int fd = vp->pending[i].fd;
    epoll_ctl(vp->epfd, EPOLL_CTL_DEL, fd, NULL);
    if (close_it)
        close(fd);
    vp->pending[i] = vp->pending[--vp->npending];
}

static void refuse(struct loom_tx *tx, int i, const char *why)
{
    struct vx_priv *vp = tx->priv;
    LOOM_WARN(LOOM_SUB_NET, "verbs: rank %d: refused a control connection from %s: %s",
              tx->params.rank, vp->pending[i].from[0] ? vp->pending[i].from : "?", why);
    pending_drop(tx, i, 1);
}

/* Bytes on a socket not yet known: a hello, checked as a whole. */
void loom_verbs_conn_pending_event(struct loom_tx *tx, int fd)
{
    struct vx_priv *vp = tx->priv;
    int i = 0;
    while (i < vp->npending && vp->pending[i].fd != fd)
        i++;
    if (i == vp->npending)
        return;
    struct vx_pending *pd = &vp->pending[i];
    ssize_t n = recv(fd, pd->in + pd->have, sizeof pd->in - pd->have, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        pending_drop(tx, i, 1);
        return;
    }
    if (n < 0)
        return;
    pd->have += (size_t)n;
    if (pd->have < sizeof pd->in)
        return;
    struct loom_link_hello h;
    char why[256];
    if (loom_link_hello_decode(&vx_proto, pd->in, &h) != 0) {
        refuse(tx, i, "not a Loom verbs hello");
        return;
    }
    int from = (int)h.from;
    if (h.comm_id != tx->params.comm_id || h.to != (uint32_t)tx->params.rank ||
        h.from >= (uint32_t)tx->params.nranks || from >= tx->params.rank) {
        snprintf(why, sizeof why, "a hello from rank %u to rank %u of communicator %016llx",
                 h.from, h.to, (unsigned long long)h.comm_id);
        refuse(tx, i, why);
        return;
    }
    struct vx_peer *p = &vp->peers[from];
    if ((h.flags & LOOM_LINK_HELLO_F_KEYED) != (vp->key.set ? LOOM_LINK_HELLO_F_KEYED : 0)) {
        refuse(tx, i, vp->key.set ? "it has no job key (LOOM_JOB_KEY) and this rank has one"
                                  : "it has a job key and this rank has none");
        return;
    }
    uint8_t mac[32];
    ctl_mac(vp, 'C', pd->in, mac);
    /* the token is this rank's secret for that peer, sent only through the
     * out-of-band service: compare in constant time */
    if (p->state == VX_NONE || p->state == VX_FAILED || p->ctl_fd >= 0 ||
        !loom_auth_equal(h.token, p->token, sizeof p->token)) {
        snprintf(why, sizeof why, "a hello as rank %d without the token this rank gave it", from);
        refuse(tx, i, why);
        return;
    }
    if (vp->key.set && !loom_auth_equal(h.mac, mac, sizeof mac)) {
        snprintf(why, sizeof why, "a hello as rank %d with a wrong job key proof", from);
        refuse(tx, i, why);
        return;
    }
    memcpy(p->ctl_in, pd->in, sizeof p->ctl_in); /* signed bytes, for the ACK */
    p->ctl_fd = fd;
    pending_drop(tx, i, 0);
    loom_net_set_keepalive(fd, tx->params.timeout);
    loom_verbs_epoll_add(tx, fd, EPOLLIN | EPOLLRDHUP, VX_EP_PEER(from));
    if (p->state == VX_WAIT_CTL)
        send_ack(tx, from);
    else
        p->ctl = VX_CTL_HELLO_OK; /* our queue pair is not RTS yet */
}

/* A control frame from an established peer. */
static void handle_frame(struct loom_tx *tx, int r, const struct loom_link_frame *f)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (f->comm_id != tx->params.comm_id) {
        loom_verbs_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
                             "sent a control frame of communicator %016llx",
                             (unsigned long long)f->comm_id);
        return;
    }
    switch (f->type) {
    case LOOM_LINK_BYE:
        p->bye = 1; /* whether it was expected is judged after the CQ drains */
        return;
    case LOOM_LINK_PING:
        return;
    case LOOM_LINK_FAIL: {
        struct loom_link_notice n;
        char why[400];
        loom_link_notice_decode(f, &n);
        if (loom_link_notice_apply(tx, r, &n, loom_verbs_describe, why, sizeof why) ==
            LOOM_ERROR_MISMATCH) {
            loom_verbs_fail_peer(tx, r, LOOM_ERROR_MISMATCH, "%s", why);
            return;
        }
        /* it finished its earlier calls before it failed: its writes for
         * them were acknowledged, so their completions are here or about
         * to be; take those in the queue before its requests fail (the
         * notice came by another path than the data) */
        loom_verbs_poll_cq(tx);
        if (!p->failed)
            loom_verbs_fail_peer(tx, r, LOOM_ERROR_REMOTE, "%s", why);
        return;
    }
    default:
        loom_verbs_fail_peer(tx, r, LOOM_ERROR_PROTOCOL, "sent an unexpected control frame %u",
                             f->type);
    }
}

void loom_verbs_conn_ctl_event(struct loom_tx *tx, int r, uint32_t events)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    if (p->ctl_fd < 0 || p->failed)
        return;
    if (p->ctl == VX_CTL_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        getsockopt(p->ctl_fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            loom_verbs_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                                 "cannot be reached on its control address: %s", strerror(err));
            return;
        }
        struct loom_link_hello h = {.flags = vp->key.set ? LOOM_LINK_HELLO_F_KEYED : 0,
                                     .from = (uint32_t)tx->params.rank, .to = (uint32_t)r,
                                     .comm_id = tx->params.comm_id};
        memcpy(h.token, p->remote.token, sizeof h.token);
        /* the OOB service's preamble (it hands the socket over), then the
         * hello: 104 bytes on a new socket, taken whole */
        uint8_t b[LOOM_OOB_PREAMBLE_LEN + LOOM_LINK_HELLO_LEN];
        loom_oob_preamble(tx->params.oob, LOOM_OOB_KIND_VERBS, b);
        uint8_t *hb = b + LOOM_OOB_PREAMBLE_LEN;
        loom_link_hello_encode(&vx_proto, &h, hb);
        ctl_mac(vp, 'C', hb, h.mac);
        loom_link_hello_encode(&vx_proto, &h, hb);
        memcpy(p->ctl_in, hb, sizeof p->ctl_in); /* to check the ACK's proof */
        if (send(p->ctl_fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof b) {
            loom_verbs_fail_peer(tx, r, LOOM_ERROR_REMOTE, "dropped its control connection: %s",
                                 strerror(errno));
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = VX_EP_PEER(r)};
        epoll_ctl(vp->epfd, EPOLL_CTL_MOD, p->ctl_fd, &ev);
        p->ctl = VX_CTL_WAIT_ACK;
        p->ctl_have = 0;
        return;
    }
    /* frames: read what is there, 40 bytes at a time */
    for (;;) {
        uint8_t fb[LOOM_LINK_FRAME_LEN];
        ssize_t n = recv(p->ctl_fd, fb, sizeof fb, MSG_DONTWAIT | MSG_PEEK);
        if (n == 0) {
            /* without a goodbye it exited or crashed; but a completion in
             * flight may name the real cause (an access error it refused,
             * before failing itself): it gets a moment to arrive, judged in
             * loom_verbs_conn_timeouts */
            if (!p->bye && p->eof_at == 0)
                p->eof_at = loom_now();
            epoll_ctl(vp->epfd, EPOLL_CTL_DEL, p->ctl_fd, NULL);
            if (p->bye)
                loom_verbs_conn_close(tx, r);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            loom_verbs_fail_peer(tx, r, LOOM_ERROR_REMOTE, "lost its control connection: %s",
                                 strerror(errno));
            return;
        }
        if ((size_t)n < sizeof fb)
            return; /* the rest follows */
        if (recv(p->ctl_fd, fb, sizeof fb, MSG_DONTWAIT) != (ssize_t)sizeof fb)
            return;
        struct loom_link_frame f;
        if (loom_link_frame_decode(&vx_proto, fb, &f) != 0) {
            loom_verbs_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
                                 "sent bytes on its control connection that are not a frame");
            return;
        }
        if (p->ctl == VX_CTL_WAIT_ACK) {
            uint8_t mac[32], got[24];
            ctl_mac(vp, 'A', p->ctl_in, mac);
            loom_put_le64(got, f.w0);
            loom_put_le64(got + 8, f.w1);
            loom_put_le64(got + 16, f.w2);
            if (f.type != LOOM_LINK_ACK || f.comm_id != tx->params.comm_id ||
                (vp->key.set && !loom_auth_equal(got, mac, sizeof got))) {
                loom_verbs_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
                                     "answered the control hello with %s",
                                     f.type != LOOM_LINK_ACK ? "something else than ACK"
                                                                  : "a wrong job key proof");
                return;
            }
            ctl_up(tx, r);
            continue;
        }
        handle_frame(tx, r, &f);
        if (p->failed)
            return;
    }
}

/* How long a peer whose control socket ended may still deliver the
 * completion that names the cause, when writes to it are outstanding:
 * microseconds on an adapter, but the process polling may be descheduled
 * on a loaded host. */
#define VX_EOF_GRACE 0.5

int loom_verbs_conn_timeouts(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    double now = loom_now();
    double limit = tx->params.connect_timeout > 0 ? tx->params.connect_timeout : 120;
    int next_ms = -1;
    for (int i = 0; i < vp->npending;) {
        if (now > vp->pending[i].deadline)
            refuse(tx, i, "it said nothing before the connection timeout");
        else
            i++;
    }
    for (int i = 0; i < vp->nlive; i++) {
        int r = vp->live[i];
        struct vx_peer *p = &vp->peers[r];
        if (p->bye_at > 0 && !p->failed && (p->rhead || p->shead)) {
            /* a goodbye with requests pending: what it wrote before may
             * still be on its way to the completion queue */
            if (now - p->bye_at >= VX_EOF_GRACE)
                loom_verbs_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                                     "has left (it destroyed its communicator) while this rank "
                                     "still expected %s", p->rhead ? "a message from it"
                                                                   : "to send it a message");
            else
                next_ms = 10;
            continue;
        }
        if (p->eof_at > 0 && !p->failed) {
            int outstanding = p->sq_posted != p->sq_done;
            if (!outstanding || now - p->eof_at >= VX_EOF_GRACE)
                loom_verbs_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                                     "closed its control connection without a goodbye (it "
                                     "exited or crashed)");
            else
                next_ms = 10;
            continue;
        }
        if ((p->state != VX_WAIT_BLOB && p->state != VX_WAIT_CTL) || now - p->t_start <= limit)
            continue;
        loom_verbs_fail_peer(tx, r, LOOM_ERROR_TIMEOUT,
                             "did not connect within %.0f s (%s)", limit,
                             p->state == VX_WAIT_BLOB
                                 ? "its queue pair data never came through the out-of-band "
                                   "service"
                                 : tx->params.rank < r
                                       ? "it did not answer the control hello"
                                       : "no control hello came from it");
    }
    return next_ms;
}
