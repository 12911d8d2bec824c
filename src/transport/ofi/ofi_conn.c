/* ofi_conn.c - the libfabric transport's connections: each peer in use
 * learns the other's endpoint address through the out-of-band service, and
 * keeps one TCP control socket for liveness and failure notices (the same
 * design as verbs_conn.c).
 *
 * Connecting to peer p (whoever starts, one link results):
 *  - a rank that starts (connect(p), or a first post to p) sends p its blob
 *    (its endpoint address and a fresh token) under LOOM_OOB_TAG_OFI;
 *  - a rank that receives a blob from p inserts p's address in its address
 *    vector and, only if it had not started itself, answers with its own;
 *  - the lower rank of the two then opens a TCP socket to the higher rank's
 *    OOB port (the service hands it over: LOOM_OOB_KIND_OFI) and sends a
 *    hello carrying the higher rank's token, signed with the job key; the
 *    higher rank checks it and answers ACK (signed too). Data moves only
 *    after that.
 * Addresses come only through the out-of-band service (ranks that passed
 * the bootstrap's authentication) and receives are directed at them, so a
 * stranger's packets to the provider's port match nothing; with
 * LOOM_JOB_KEY nothing is posted for a peer until it has proven the key on
 * the control socket. A peer whose process ends closes its control socket:
 * its peers learn it at once, whatever the provider (an RDM endpoint cannot
 * tell a dead peer on an idle link). A rank that destroys its communicator
 * says goodbye with the number of messages it received from the peer: the
 * peer's sends among them are complete even if the provider never reports
 * them (udp;ofi_rxd's acknowledgement may not leave a closed endpoint). */
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
#include "wire.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "transport/ofi/ofi_priv.h"

#define OX_TAG_CONN (LOOM_OOB_TAG_OFI + 0)
#define OX_MAX_PENDING 256
#define OX_MAC_CTX "loom-ofi-ctl"
#define OX_BLOB_MAGIC 0x424f464cu  /* "LFOB" */
#define OX_HELLO_MAGIC 0x4843464cu /* "LFCH" */
#define OX_FRAME_MAGIC 0x4643464cu /* "LFCF" */
#define OX_VERSION 1
#define OX_BLOB_HDR (28 + LOOM_LINK_TOKEN_LEN)
#define OX_BLOB_F_REPLY 0x1u
#define LOOM_LINK_HELLO_F_KEYED 0x1u

/* ---- wire: the blob (hello and frames: common/link_wire.h) ---- */

/* magic u32 | version u16 | flags u16 | from u32 | to u32 | comm_id u64 |
 * addrlen u32 | token[32] | addr */
static size_t blob_encode(struct loom_tx *tx, int r, uint8_t *out)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    loom_put_le32(out, OX_BLOB_MAGIC);
    loom_put_le16(out + 4, OX_VERSION);
    loom_put_le16(out + 6, p->have_addr ? OX_BLOB_F_REPLY : 0);
    loom_put_le32(out + 8, (uint32_t)tx->params.rank);
    loom_put_le32(out + 12, (uint32_t)r);
    loom_put_le64(out + 16, tx->params.comm_id);
    loom_put_le32(out + 24, (uint32_t)vp->addrlen);
    memcpy(out + 28, p->token, LOOM_LINK_TOKEN_LEN);
    memcpy(out + OX_BLOB_HDR, vp->addr, vp->addrlen);
    return OX_BLOB_HDR + vp->addrlen;
}

static const struct loom_link_proto ox_proto = {OX_HELLO_MAGIC, OX_FRAME_MAGIC, OX_MAC_CTX};

static void ctl_mac(struct ox_priv *vp, char role, const uint8_t *hello, uint8_t mac[32])
{
    loom_link_mac(&ox_proto, vp->key.set ? vp->key.bytes : NULL, vp->key.len, role, hello, mac);
}

/* ---- address exchange ---- */

static loom_result_t send_blob(struct loom_tx *tx, int r)
{
    uint8_t buf[OX_BLOB_HDR + OX_ADDR_MAX];
    size_t n = blob_encode(tx, r, buf);
    loom_result_t res = loom_oob_send(tx->params.oob, r, OX_TAG_CONN, buf, n);
    if (res < 0)
        loom_ofi_fail_peer(tx, r, res, "could not be sent this rank's endpoint address: %s",
                           loom_oob_error(tx->params.oob));
    return res;
}

static void make_link(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    vp->live[vp->nlive++] = r; /* once: the state leaves OX_NONE now */
    loom_link_token(p->token, sizeof p->token);
    p->t_start = loom_now();
    p->state = OX_WAIT_BLOB;
}

static void ctl_up(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    char d[256];
    p->ctl = OX_CS_UP;
    p->state = OX_UP;
    p->ctl_have = 0;
    LOOM_TRACE(LOOM_SUB_NET, "ofi: rank %d: connected to %s in %.3f s", tx->params.rank,
               loom_ofi_describe(tx, r, d, sizeof d), loom_now() - p->t_start);
    loom_ofi_kick(tx, r);
}

static void send_ack(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    uint8_t mac[32];
    ctl_mac(vp, 'A', p->ctl_in, mac);
    loom_ofi_ctl_send(tx, r, LOOM_LINK_ACK, 0, loom_get_le64(mac), loom_get_le64(mac + 8),
                      loom_get_le64(mac + 16));
    if (!p->failed)
        ctl_up(tx, r);
}

static void ctl_connect(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    char err[256];
    int fd = -1;
    loom_result_t res = loom_oob_connect_fd(tx->params.oob, r, &fd, err, sizeof err);
    if (res < 0) {
        loom_ofi_fail_peer(tx, r, res == LOOM_ERROR_REMOTE ? res : LOOM_ERROR_SYSTEM,
                           res == LOOM_ERROR_REMOTE
                               ? "is gone: %s (the process exited or crashed)"
                               : "cannot be reached for a control connection: %s", err);
        return;
    }
    loom_net_set_nodelay(fd);
    loom_net_set_keepalive(fd, tx->params.timeout);
    p->ctl_fd = fd;
    p->ctl = OX_CS_CONNECTING;
    loom_ofi_epoll_add(tx, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, OX_EP_PEER(r));
}

static void apply_blob(struct loom_tx *tx, int r, const uint8_t *token, const void *addr)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    int answer = 0;
    if (p->state == OX_FAILED)
        return;
    if (p->have_addr) {
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_PROTOCOL, "sent its endpoint address twice");
        return;
    }
    if (p->state == OX_NONE) {
        make_link(tx, r);
        answer = 1;
    }
    fi_addr_t fa = FI_ADDR_UNSPEC;
    int n = fi_av_insert(vp->av, addr, 1, &fa, 0, NULL);
    if (n != 1) {
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_SYSTEM,
                           "cannot be reached: fi_av_insert of its address: %s",
                           n < 0 ? loom_fi.strerror(-n) : "not inserted");
        return;
    }
    p->addr = fa;
    p->have_addr = 1;
    if (vp->sndbuf) {
        memcpy(&p->sa, addr, vp->addrlen);
        p->salen = (socklen_t)vp->addrlen;
    }
    memcpy(p->rtoken, token, LOOM_LINK_TOKEN_LEN);
    p->state = OX_WAIT_CTL;
    if (answer && send_blob(tx, r) < 0)
        return;
    if (tx->params.rank < r)
        ctl_connect(tx, r);
    else if (p->ctl == OX_CS_HELLO_OK)
        send_ack(tx, r); /* its hello came first */
}

loom_result_t loom_ofi_conn_start(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (p->state != OX_NONE)
        return p->failed ? p->failed : LOOM_SUCCESS;
    make_link(tx, r);
    return send_blob(tx, r);
}

void loom_ofi_conn_poll_oob(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    for (;;) {
        int from = -1;
        void *buf = NULL;
        size_t len = 0;
        int got = loom_oob_poll(tx->params.oob, OX_TAG_CONN, -1, &from, &buf, &len);
        if (got < 0) {
            if (!vp->pending_err) {
                snprintf(tx->errmsg, sizeof tx->errmsg,
                         "ofi: the out-of-band service failed: %s",
                         loom_oob_error(tx->params.oob));
                vp->pending_err = (loom_result_t)got;
            }
            return;
        }
        if (got == 0)
            return;
        const uint8_t *b = buf;
        if (from < 0 || from >= tx->params.nranks || from == tx->params.rank) {
            free(buf);
            continue;
        }
        size_t alen = len >= OX_BLOB_HDR ? loom_get_le32(b + 24) : 0;
        if (len < OX_BLOB_HDR || loom_get_le32(b) != OX_BLOB_MAGIC ||
            loom_get_le16(b + 4) != OX_VERSION || alen == 0 || alen > OX_ADDR_MAX ||
            len != OX_BLOB_HDR + alen || loom_get_le32(b + 8) != (uint32_t)from ||
            loom_get_le32(b + 12) != (uint32_t)tx->params.rank ||
            loom_get_le64(b + 16) != tx->params.comm_id || alen != vp->addrlen)
            loom_ofi_fail_peer(tx, from, LOOM_ERROR_PROTOCOL,
                               "sent an endpoint address this rank cannot use (%zu bytes)",
                               len);
        else
            apply_blob(tx, from, b + 28, b + OX_BLOB_HDR);
        free(buf);
    }
}

/* ---- the control socket ---- */

void loom_ofi_ctl_send(struct loom_tx *tx, int r, uint16_t type, uint16_t flags, uint64_t w0,
                       uint64_t w1, uint64_t w2)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (p->ctl_fd < 0)
        return;
    struct loom_link_frame f = {.type = type, .flags = flags, .comm_id = tx->params.comm_id,
                         .w0 = w0, .w1 = w1, .w2 = w2};
    uint8_t b[LOOM_LINK_FRAME_LEN];
    loom_link_frame_encode(&ox_proto, &f, b);
    /* 40 bytes on a socket that carries a handful: taken whole, or the link
     * is gone (best effort, never blocks) */
    ssize_t n = send(p->ctl_fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
}

void loom_ofi_conn_close(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (p->ctl_fd >= 0) {
        epoll_ctl(vp->epfd, EPOLL_CTL_DEL, p->ctl_fd, NULL);
        close(p->ctl_fd);
        p->ctl_fd = -1;
    }
}

void loom_ofi_conn_take(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    int fd;
    char from[64];
    while (loom_oob_take_fd(tx->params.oob, LOOM_OOB_KIND_OFI, &fd, from, sizeof from)) {
        struct ox_pending *np = vp->npending < OX_MAX_PENDING
                                    ? realloc(vp->pending, sizeof *np * (size_t)(vp->npending + 1))
                                    : NULL;
        if (!np) {
            close(fd); /* a flood: strangers do not get to queue */
            continue;
        }
        vp->pending = np;
        int i = vp->npending++;
        vp->pending[i] = (struct ox_pending){
            .fd = fd, .deadline = loom_now() + (tx->params.connect_timeout > 0
                                                    ? tx->params.connect_timeout : 60)};
        snprintf(vp->pending[i].from, sizeof vp->pending[i].from, "%s", from);
        loom_net_set_nonblock(fd);
        loom_net_set_nodelay(fd);
        loom_ofi_epoll_add(tx, fd, EPOLLIN | EPOLLRDHUP, OX_EP_PENDING(fd));
    }
}

static void pending_drop(struct loom_tx *tx, int i, int close_it)
{
    struct ox_priv *vp = tx->priv;
    int fd = vp->pending[i].fd;
    epoll_ctl(vp->epfd, EPOLL_CTL_DEL, fd, NULL);
    if (close_it)
        close(fd);
    vp->pending[i] = vp->pending[--vp->npending];
}

static void refuse(struct loom_tx *tx, int i, const char *why)
{
    struct ox_priv *vp = tx->priv;
    LOOM_WARN(LOOM_SUB_NET, "ofi: rank %d: refused a control connection from %s: %s",
              tx->params.rank, vp->pending[i].from[0] ? vp->pending[i].from : "?", why);
    pending_drop(tx, i, 1);
}

void loom_ofi_conn_pending_event(struct loom_tx *tx, int fd)
{
    struct ox_priv *vp = tx->priv;
    int i = 0;
    while (i < vp->npending && vp->pending[i].fd != fd)
        i++;
    if (i == vp->npending)
        return;
    struct ox_pending *pd = &vp->pending[i];
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
    if (loom_link_hello_decode(&ox_proto, pd->in, &h) != 0) {
        refuse(tx, i, "not a Loom ofi hello");
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
    struct ox_peer *p = &vp->peers[from];
    if ((h.flags & LOOM_LINK_HELLO_F_KEYED) != (vp->key.set ? LOOM_LINK_HELLO_F_KEYED : 0)) {
        refuse(tx, i, vp->key.set ? "it has no job key (LOOM_JOB_KEY) and this rank has one"
                                  : "it has a job key and this rank has none");
        return;
    }
    uint8_t mac[32];
    ctl_mac(vp, 'C', pd->in, mac);
    if (p->state == OX_NONE || p->state == OX_FAILED || p->ctl_fd >= 0 ||
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
    memcpy(p->ctl_in, pd->in, sizeof p->ctl_in);
    p->ctl_fd = fd;
    pending_drop(tx, i, 0);
    loom_net_set_keepalive(fd, tx->params.timeout);
    loom_ofi_epoll_add(tx, fd, EPOLLIN | EPOLLRDHUP, OX_EP_PEER(from));
    if (p->state == OX_WAIT_CTL)
        send_ack(tx, from);
    else
        p->ctl = OX_CS_HELLO_OK; /* its address has not come yet */
}

/* Whether a request of a call before call seq is pending on p. Requests
 * carry their call's number as the core's tag (its low 31 bits, the top
 * bit for Loom's own calls, which count apart). */
static int earlier(uint32_t tag, uint64_t seq)
{
    uint32_t t = (uint32_t)(seq & 0x7fffffffu) | (seq >> 63 ? 0x80000000u : 0);
    return (tag & 0x80000000u) == (t & 0x80000000u) &&
           (int32_t)((tag - t) << 1) < 0;
}

static int earlier_pending(const struct ox_peer *p, uint64_t seq)
{
    for (int k = 0; k < 2; k++)
        for (const struct loom_tx_req *q = k ? p->shead : p->rhead; q; q = q->next)
            if (earlier(q->tag, seq))
                return 1;
    return 0;
}

static void handle_frame(struct loom_tx *tx, int r, const struct loom_link_frame *f)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (f->comm_id != tx->params.comm_id) {
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
                           "sent a control frame of communicator %016llx",
                           (unsigned long long)f->comm_id);
        return;
    }
    switch (f->type) {
    case LOOM_LINK_BYE:
        p->bye = 1;
        loom_ofi_sends_received(tx, r, f->w0);
        return;
    case LOOM_LINK_GOT: /* a FAIL follows: what it received is not failed */
        loom_ofi_sends_received(tx, r, f->w0);
        return;
    case LOOM_LINK_FAIL: {
        struct loom_link_notice n;
        char why[400];
        loom_link_notice_decode(f, &n);
        if (loom_link_notice_apply(tx, r, &n, loom_ofi_describe, why, sizeof why) ==
            LOOM_ERROR_MISMATCH) {
            loom_ofi_fail_peer(tx, r, LOOM_ERROR_MISMATCH, "%s", why);
            return;
        }
        if (p->held && !p->held_link)
            return; /* one notice is enough */
        if (p->held_link) { /* the notice says why the provider failed */
            free(p->held_why);
            p->held_why = NULL;
            p->held = 0;
            p->held_link = 0;
        }
        if (earlier_pending(p, n.seq) && (p->held_why = strdup(why)) != NULL) {
            p->held = LOOM_ERROR_REMOTE;
            p->held_seq = n.seq;
            p->held_at = loom_now();
            return;
        }
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE, "%s", why);
        return;
    }
    default:
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_PROTOCOL, "sent an unexpected control frame %u",
                           f->type);
    }
}

void loom_ofi_conn_ctl_event(struct loom_tx *tx, int r, uint32_t events)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (p->ctl_fd < 0 || p->failed)
        return;
    if (p->ctl == OX_CS_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        getsockopt(p->ctl_fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                               "cannot be reached on its control address: %s", strerror(err));
            return;
        }
        struct loom_link_hello h = {.flags = vp->key.set ? LOOM_LINK_HELLO_F_KEYED : 0,
                             .from = (uint32_t)tx->params.rank, .to = (uint32_t)r,
                             .comm_id = tx->params.comm_id};
        memcpy(h.token, p->rtoken, sizeof h.token);
        uint8_t b[LOOM_OOB_PREAMBLE_LEN + LOOM_LINK_HELLO_LEN];
        loom_oob_preamble(tx->params.oob, LOOM_OOB_KIND_OFI, b);
        uint8_t *hb = b + LOOM_OOB_PREAMBLE_LEN;
        loom_link_hello_encode(&ox_proto, &h, hb);
        ctl_mac(vp, 'C', hb, h.mac);
        loom_link_hello_encode(&ox_proto, &h, hb);
        memcpy(p->ctl_in, hb, sizeof p->ctl_in);
        if (send(p->ctl_fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof b) {
            loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE, "dropped its control connection: %s",
                               strerror(errno));
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = OX_EP_PEER(r)};
        epoll_ctl(vp->epfd, EPOLL_CTL_MOD, p->ctl_fd, &ev);
        p->ctl = OX_CS_WAIT_ACK;
        p->ctl_have = 0;
        return;
    }
    for (;;) {
        uint8_t fb[LOOM_LINK_FRAME_LEN];
        ssize_t n = recv(p->ctl_fd, fb, sizeof fb, MSG_DONTWAIT | MSG_PEEK);
        if (n == 0) {
            /* without a goodbye it exited or crashed; completions in flight
             * get a moment to arrive (loom_ofi_conn_timeouts) */
            if (!p->bye && p->eof_at == 0)
                p->eof_at = loom_now();
            epoll_ctl(vp->epfd, EPOLL_CTL_DEL, p->ctl_fd, NULL);
            if (p->bye)
                loom_ofi_conn_close(tx, r);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE, "lost its control connection: %s",
                               strerror(errno));
            return;
        }
        if ((size_t)n < sizeof fb)
            return;
        if (recv(p->ctl_fd, fb, sizeof fb, MSG_DONTWAIT) != (ssize_t)sizeof fb)
            return;
        struct loom_link_frame f;
        if (loom_link_frame_decode(&ox_proto, fb, &f) != 0) {
            loom_ofi_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
                               "sent bytes on its control connection that are not a frame");
            return;
        }
        if (p->ctl == OX_CS_WAIT_ACK) {
            uint8_t mac[32], got[24];
            ctl_mac(vp, 'A', p->ctl_in, mac);
            loom_put_le64(got, f.w0);
            loom_put_le64(got + 8, f.w1);
            loom_put_le64(got + 16, f.w2);
            if (f.type != LOOM_LINK_ACK || f.comm_id != tx->params.comm_id ||
                (vp->key.set && !loom_auth_equal(got, mac, sizeof got))) {
                loom_ofi_fail_peer(tx, r, LOOM_ERROR_PROTOCOL,
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

/* How long a peer whose control socket ended may still complete what it
 * sent before (a provider may deliver it a little later); how long the
 * provider's error on a link waits for the peer's notice. */
#define OX_EOF_GRACE 0.5

void loom_ofi_conn_link_error(struct loom_tx *tx, int r, const char *why)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    if (p->failed || p->held_link)
        return;
    /* a notice already here wins (it was sent before the peer closed) */
    loom_ofi_conn_ctl_event(tx, r, EPOLLIN);
    if (p->failed)
        return;
    if (p->held) {
        /* its notice came, held for earlier requests: they will not
         * complete now */
        loom_ofi_fail_peer(tx, r, p->held, "%s", p->held_why);
        return;
    }
    if (p->ctl_fd < 0 || p->ctl != OX_CS_UP || p->eof_at > 0 || p->bye ||
        !(p->held_why = strdup(why))) {
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE, "%s", why);
        return;
    }
    p->held = LOOM_ERROR_REMOTE;
    p->held_link = 1;
    p->held_at = loom_now();
}

int loom_ofi_conn_timeouts(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
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
        struct ox_peer *p = &vp->peers[r];
        if (p->failed)
            continue;
        if (p->held_link) {
            /* its control socket ended (a goodbye or a crash) without a
             * notice: the provider's error stands */
            if (p->ctl_fd < 0 || p->eof_at > 0 || p->bye || now - p->held_at >= OX_EOF_GRACE)
                loom_ofi_fail_peer(tx, r, p->held, "%s", p->held_why);
            else
                next_ms = 10;
            continue;
        }
        if (p->held) {
            if (!earlier_pending(p, p->held_seq) || now - p->held_at >= OX_EOF_GRACE)
                loom_ofi_fail_peer(tx, r, p->held, "%s", p->held_why);
            else
                next_ms = 10;
            continue;
        }
        if (p->bye && (p->rhead || p->shead)) {
            if (p->bye_at == 0)
                p->bye_at = now;
            if (now - p->bye_at >= OX_EOF_GRACE)
                loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                                   "has left (it destroyed its communicator) while this rank "
                                   "still expected %s", p->rhead ? "a message from it"
                                                                 : "to send it a message");
            else
                next_ms = 10;
            continue;
        }
        if (p->eof_at > 0) {
            if (!(p->rhead || p->shead) || now - p->eof_at >= OX_EOF_GRACE)
                loom_ofi_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                                   "closed its control connection without a goodbye (it "
                                   "exited or crashed)");
            else
                next_ms = 10;
            continue;
        }
        if ((p->state != OX_WAIT_BLOB && p->state != OX_WAIT_CTL) || now - p->t_start <= limit)
            continue;
        loom_ofi_fail_peer(tx, r, LOOM_ERROR_TIMEOUT, "did not connect within %.0f s (%s)", limit,
                           p->state == OX_WAIT_BLOB
                               ? "its endpoint address never came through the out-of-band "
                                 "service"
                           : tx->params.rank < r ? "it did not answer the control hello"
                                                 : "no control hello came from it");
    }
    return next_ms;
}
