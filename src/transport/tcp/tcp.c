/* tcp.c - the tcp transport's data path: FIFO-matched, striped messages over
 * non-blocking sockets, driven by a poll-first progress loop.
 *
 * Each direction between two ranks has LOOM_NSOCKS sockets of its own
 * (lanes, tcp_priv.h). A message of at most LOOM_TCP_SHARED_MAX bytes goes
 * on socket 0, shared by both directions, as one frame; a longer one goes
 * on its direction's first lane as one frame when it is at most
 * LOOM_TCP_STRIPE_MIN bytes (or there is one lane), else it is cut into
 * stripes of equal, page-rounded size, stripe s on lane s. Both sides derive
 * the cut from the length alone, and both post in the same order, so each
 * socket's queue of (request, stripe) entries matches the peer's. Every frame
 * carries a header (tcp_frame.h) that the receiver checks against what it
 * posted before it trusts the stream. Payloads land straight in the user's
 * buffer; what arrived past the posted receives (up to LOOM_TCP_RCACHE
 * bytes, the next calls' small frames) lands in the socket's cache, and is
 * checked and copied out when its receive is posted. */
#include "build_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "transport/common/link_notice.h"
#include "transport/tcp/tcp_check.h"
#include "transport/tcp/tcp_priv.h"
#include "auth.h"
#include "bootstrap/oob.h"
#include "config.h"

/* Frames gathered into one sendmsg/recvmsg. */
#define TCP_BATCH 8

static struct tcp_op *op_get(struct tcp_priv *tp)
{
    struct tcp_op *op = tp->free_ops;
    if (op) {
        tp->free_ops = op->next;
        return op;
    }
    return malloc(sizeof *op);
}

static void op_put(struct tcp_priv *tp, struct tcp_op *op)
{
    op->next = tp->free_ops;
    tp->free_ops = op;
}

static void req_finish(struct loom_tx_req *req, loom_result_t status)
{
    req->status = status;
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static void stripe_done(struct loom_tx_req *req)
{
    if (req->done)
        return;
    if (--req->priv[0] == 0)
        req_finish(req, LOOM_SUCCESS);
}

static void queue_push(struct tcp_queue *q, struct tcp_op *op)
{
    LOOM_FIFO_PUSH(q->head, q->tail, op);
}

static struct tcp_op *queue_pop(struct tcp_queue *q)
{
    struct tcp_op *op;
    LOOM_FIFO_POP(q->head, q->tail, op);
    return op;
}

static int sock_idle(const struct tcp_sock *sk)
{
    return !sk->sendq.head && !sk->recvq.head;
}

static void set_interest(struct tcp_priv *tp, struct tcp_sock *sk, uint32_t mask)
{
    if (sk->ep_mask == mask || sk->fd < 0 || sk->hup)
        return;
    struct epoll_event ev = {.events = mask, .data.ptr = sk};
    if (epoll_ctl(tp->epfd, EPOLL_CTL_MOD, sk->fd, &ev) == 0)
        sk->ep_mask = mask;
}

/* Wake for a large receive only once a good part of it can be read: fewer
 * wake-ups, larger copies. Never above what the posted receive still
 * needs, so the tail always wakes us. */
static void set_lowat(struct tcp_sock *sk)
{
    int want = 1;
    struct tcp_op *op = sk->recvq.head;
    if (op && !sk->sendq.head) {
        size_t left = LOOM_TCP_FRAME_LEN + op->len - op->done;
        if (left >= LOOM_TCP_LOWAT_MIN)
            want = left > LOOM_TCP_LOWAT_MAX ? LOOM_TCP_LOWAT_MAX : (int)left;
    }
    if (want != sk->lowat && setsockopt(sk->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0)
        sk->lowat = want;
}

static loom_result_t activate(struct loom_tx *tx, struct tcp_sock *sk)
{
    struct tcp_priv *tp = tx->priv;
    if (sk->active)
        return LOOM_SUCCESS;
    if (tp->nactive == tp->active_cap) {
        int cap = tp->active_cap ? tp->active_cap * 2 : 16;
        struct tcp_sock **a = realloc(tp->active, sizeof *a * (size_t)cap);
        if (!a)
            return LOOM_ERROR_NO_MEMORY;
        tp->active = a;
        tp->active_cap = cap;
    }
    tp->active[tp->nactive++] = sk;
    sk->active = 1;
    return LOOM_SUCCESS;
}

/* Mark peer r failed with res and the sentence msg: its requests fail, its
 * sockets close, and later posts fail at once with the same sentence. */
static void peer_down(struct loom_tx *tx, int r, loom_result_t res, const char *msg)
{
    struct tcp_priv *tp = tx->priv;
    struct tcp_peer *peer = &tp->peers[r];
    peer->failed = res;
    peer->failmsg = strdup(msg);
    for (int s = 0; s < tp->nsocks; s++) {
        struct tcp_sock *sk = &peer->socks[s];
        struct tcp_op *op;
        while ((op = queue_pop(&sk->sendq))) {
            if (!op->req->done)
                req_finish(op->req, res);
            op_put(tp, op);
        }
        while ((op = queue_pop(&sk->recvq))) {
            if (!op->req->done)
                req_finish(op->req, res);
            op_put(tp, op);
        }
        if (sk->fd >= 0)
            close(sk->fd); /* also leaves the epoll set */
        loom_tcp_hs_close(sk);
        sk->fd = -1;
        sk->ep_mask = 0;
        sk->cache_off = sk->cache_len = 0;
    }
}

/* A link broke: fail peer r, log it, and have progress report it. */
void loom_tcp_fail_peer(struct loom_tx *tx, int r, loom_result_t res, const char *fmt, ...)
{
    struct tcp_priv *tp = tx->priv;
    if (tp->peers[r].failed)
        return;
    char d[256], what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(tx->errmsg, sizeof tx->errmsg, "%s %s", loom_tcp_describe(tx, r, d, sizeof d), what);
    /* the op that waits on r returns this: INFO, shown once by the caller */
    LOOM_INFO(LOOM_SUB_NET, "tcp: rank %d: %s", tx->params.rank, tx->errmsg);
    peer_down(tx, r, res, tx->errmsg);
    tp->pending_err = res;
    if (!tx->blame)
        tx->blame = r + 1;
}

/* A failure notice (common/link_notice.h) in an ABORT frame: the FAIL
 * frame's flags in desc, its words in seq, count and len. */
static void notice_encode(const struct loom_link_notice *n, struct loom_tcp_frame *f)
{
    struct loom_link_frame lf;
    loom_link_notice_encode(n, &lf);
    f->tag = LOOM_TCP_CTL_ABORT;
    f->desc = lf.flags;
    f->seq = lf.w0;
    f->count = lf.w1;
    f->len = lf.w2;
}

static void notice_decode(const struct loom_tcp_frame *f, struct loom_link_notice *n)
{
    struct loom_link_frame lf = {.type = LOOM_LINK_FAIL,
                                 .flags = (uint16_t)f->desc,
                                 .w0 = f->seq,
                                 .w1 = f->count,
                                 .w2 = f->len};
    loom_link_notice_decode(&lf, n);
}

/* A control frame from peer r (see tcp_frame.h). Returns 1 when the link
 * stays usable (a goodbye on an idle socket), 0 when r is now failed. */
static int handle_control(struct loom_tx *tx, int r, const struct loom_tcp_frame *f,
                          int expected_data)
{
    struct tcp_priv *tp = tx->priv;
    if (f->tag == LOOM_TCP_CTL_BYE) {
        tp->peers[r].bye = 1;
        if (!expected_data)
            return 1;
        loom_tcp_fail_peer(tx, r, LOOM_ERROR_REMOTE,
                           "has left (it destroyed its communicator) while this rank "
                           "still expected a message from it");
        return 0;
    }
    if (f->tag == LOOM_TCP_CTL_ABORT) {
        struct loom_link_notice n;
        char why[400];
        notice_decode(f, &n);
        loom_result_t res = loom_link_notice_apply(tx, r, &n, loom_tcp_describe, why, sizeof why);
        loom_tcp_fail_peer(tx, r, res, "%s", why);
        return 0;
    }
    loom_tcp_fail_peer(tx, r, LOOM_ERROR_PROTOCOL, "sent an unknown control frame %u", f->tag);
    return 0;
}

/* Best effort, never blocks: a control frame on every socket of peer r whose
 * next byte would start a frame. */
static void send_control(struct loom_tx *tx, int r, uint32_t type, uint32_t desc, uint64_t seq,
                         uint64_t count, uint64_t word)
{
    struct tcp_priv *tp = tx->priv;
    struct loom_tcp_frame f = {.magic = LOOM_TCP_FRAME_MAGIC,
                               .version = LOOM_TCP_VERSION,
                               .stripe = LOOM_TCP_CONTROL_STRIPE,
                               .tag = type,
                               .desc = desc,
                               .comm_id = tx->params.comm_id,
                               .seq = seq,
                               .len = word,
                               .count = count};
    uint8_t hdr[LOOM_TCP_FRAME_LEN];
    loom_tcp_frame_encode(&f, hdr);
    for (int s = 0; s < tp->nsocks; s++) {
        struct tcp_sock *sk = &tp->peers[r].socks[s];
        /* A socket whose signed hello is out counts as up at the peer (it
         * reads the hello, proves the key back and watches the socket),
         * though this side still waits for the proof: it hears the frame
         * too, rather than an end of stream without a goodbye. */
        int fd = sk->fd >= 0 ? sk->fd : sk->hs && loom_hs_hello_sent(sk->hs) ? sk->hs_fd : -1;
        if (fd < 0 || (sk->sendq.head && sk->sendq.head->done))
            continue;
        if (send(fd, hdr, sizeof hdr, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
            continue; /* the link is already gone or full: nothing to add */
    }
}

/* A failure notice (an ABORT frame) to every socket of peer r. */
static void send_notice(struct loom_tx *tx, int r, const struct loom_link_notice *n)
{
    struct loom_tcp_frame f;
    notice_encode(n, &f);
    send_control(tx, r, f.tag, f.desc, f.seq, f.count, f.len);
}

/* A control frame of this communicator. */
static int is_control(struct loom_tx *tx, const struct loom_tcp_frame *f)
{
    return f->magic == LOOM_TCP_FRAME_MAGIC && f->stripe == LOOM_TCP_CONTROL_STRIPE &&
           f->comm_id == tx->params.comm_id;
}

/* Drop n bytes from the front of the cache. */
static void cache_consume(struct tcp_sock *sk, size_t n)
{
    sk->cache_off += n;
    sk->cache_len -= n;
    if (!sk->cache_len)
        sk->cache_off = 0;
}

/* The frame header at the front of sk's stream, for a socket with nothing
 * half-received: from the cache while it holds anything, else peeked from
 * the kernel. Returns as recv would: the bytes there (at most a header;
 * *f is decoded when they are a whole one), 0 at the end of the stream, -1
 * with errno. */
static ssize_t front_peek(struct tcp_sock *sk, struct loom_tcp_frame *f)
{
    uint8_t hdr[LOOM_TCP_FRAME_LEN];
    const uint8_t *at = hdr;
    ssize_t n;
    if (sk->cache_len) {
        at = sk->cache + sk->cache_off;
        n = sk->cache_len < sizeof hdr ? (ssize_t)sk->cache_len : (ssize_t)sizeof hdr;
    } else {
        n = recv(sk->fd, hdr, sizeof hdr, MSG_PEEK | MSG_DONTWAIT);
    }
    if (n == (ssize_t)sizeof hdr)
        loom_tcp_frame_decode(at, f);
    return n;
}

/* Take the whole header front_peek saw off the stream. 0 when done. */
static int front_take(struct tcp_sock *sk)
{
    uint8_t hdr[LOOM_TCP_FRAME_LEN];
    if (sk->cache_len) {
        cache_consume(sk, sizeof hdr);
        return 0;
    }
    return recv(sk->fd, hdr, sizeof hdr, MSG_DONTWAIT) == (ssize_t)sizeof hdr ? 0 : -1;
}

static size_t sock_recv(struct loom_tx *tx, struct tcp_sock *sk);
static int scan_controls(struct loom_tx *tx, int r);

/* A link to r ended (EOF, reset, broken pipe): before calling it a crash,
 * look for a control frame r left on any of its sockets at a frame boundary
 * (an abort notice may sit on another socket than the one that ended), then
 * read what r sent for the receives posted here: sockets do not keep order
 * between them, and a frame of another call r sent before it left names
 * the real cause. Returns 1 when that failed r. */
static int control_pending(struct loom_tx *tx, int r)
{
    struct tcp_priv *tp = tx->priv;
    struct tcp_peer *peer = &tp->peers[r];
    if (peer->draining)
        return 0;
    if (scan_controls(tx, r))
        return 1;
    peer->draining = 1;
    for (int s = 0; s < tp->nsocks && !peer->failed; s++)
        if (peer->socks[s].fd >= 0 && peer->socks[s].recvq.head)
            sock_recv(tx, &peer->socks[s]);
    peer->draining = 0;
    return peer->failed != 0;
}

static int scan_controls(struct loom_tx *tx, int r)
{
    struct tcp_priv *tp = tx->priv;
    struct tcp_peer *peer = &tp->peers[r];
    for (int s = 0; s < tp->nsocks && !peer->failed; s++) {
        struct tcp_sock *sk = &peer->socks[s];
        if (sk->fd < 0 || (sk->recvq.head && sk->recvq.head->done))
            continue;
        struct loom_tcp_frame f;
        if (front_peek(sk, &f) != LOOM_TCP_FRAME_LEN || !is_control(tx, &f) ||
            f.tag != LOOM_TCP_CTL_ABORT)
            continue;
        if (front_take(sk) == 0) {
            handle_control(tx, r, &f, 1);
            return 1;
        }
    }
    return 0;
}

static void fail_errno(struct loom_tx *tx, int r, int err)
{
    if (control_pending(tx, r))
        return;
    if (err == ECONNRESET || err == EPIPE)
        loom_tcp_fail_peer(tx, r, LOOM_ERROR_REMOTE, "reset the connection (%s)", strerror(err));
    else
        loom_tcp_fail_peer(tx, r, LOOM_ERROR_REMOTE, "link failed: %s", strerror(err));
}

/* Fill iov with the unmoved parts of up to TCP_BATCH queued ops; *nops
 * (when asked) says how many. */
static int build_iov(struct tcp_op *op, struct iovec *iov, int *nops)
{
    int n = 0, k = 0;
    for (; op && k < TCP_BATCH; op = op->next, k++) {
        if (op->done < LOOM_TCP_FRAME_LEN) {
            iov[n].iov_base = op->hdr + op->done;
            iov[n].iov_len = LOOM_TCP_FRAME_LEN - op->done;
            n++;
            if (op->len) {
                iov[n].iov_base = op->base;
                iov[n].iov_len = op->len;
                n++;
            }
        } else {
            size_t off = op->done - LOOM_TCP_FRAME_LEN;
            iov[n].iov_base = op->base + off;
            iov[n].iov_len = op->len - off;
            n++;
        }
    }
    if (nops)
        *nops = k;
    return n;
}

/* Send as much as the socket takes. Returns bytes moved. */
static size_t sock_send(struct loom_tx *tx, struct tcp_sock *sk)
{
    struct tcp_priv *tp = tx->priv;
    size_t moved = 0;
    while (sk->sendq.head) {
        struct iovec iov[2 * TCP_BATCH];
        struct msghdr msg = {.msg_iov = iov,
                             .msg_iovlen = (size_t)build_iov(sk->sendq.head, iov, NULL)};
        size_t asked = 0;
        for (size_t k = 0; k < msg.msg_iovlen; k++)
            asked += iov[k].iov_len;
        ssize_t n = sendmsg(sk->fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                fail_errno(tx, sk->peer, errno);
            break;
        }
        size_t left = (size_t)n;
        moved += left;
        while (left) {
            struct tcp_op *op = sk->sendq.head;
            size_t want = LOOM_TCP_FRAME_LEN + op->len - op->done;
            size_t take = left < want ? left : want;
            op->done += take;
            left -= take;
            if (take == want) {
                queue_pop(&sk->sendq);
                stripe_done(op->req);
                op_put(tp, op);
            }
        }
        if ((size_t)n < asked)
            break; /* the socket buffer is full: retrying would get EAGAIN */
    }
    return moved;
}

/* Check a frame header against the receive it lands in; 0 when it matches.
 * The rules are loom_tcp_frame_check's (tcp_check.c, also fuzzed). */
static int check_frame(struct loom_tx *tx, struct tcp_sock *sk, const struct tcp_op *op)
{
    struct loom_tcp_frame f;
    loom_tcp_frame_decode(op->hdr, &f);
    struct loom_tcp_expect e = {.comm_id = tx->params.comm_id,
                                .seq = op->seq,
                                .stripe = op->stripe,
                                .len = op->len,
                                .tag = op->req->tag,
                                .desc = op->req->desc,
                                .count = op->req->count,
                                .sock_index = sk->index};
    char why[300];
    enum loom_tcp_check rc = loom_tcp_frame_check(&f, &e, why, sizeof why);
    if (rc == LOOM_TCP_FRAME_OTHER_CALL && ((struct tcp_priv *)tx->priv)->no_fingerprint &&
        f.len == op->len)
        rc = LOOM_TCP_FRAME_OK; /* the core's envelope is to notice */
    switch (rc) {
    case LOOM_TCP_FRAME_OK: return 0;
    case LOOM_TCP_FRAME_CONTROL: handle_control(tx, sk->peer, &f, 1); return -1;
    case LOOM_TCP_FRAME_OTHER_CALL:
        /* a different collective call: the owner names both. The peer is
         * told which call this rank is in before the links close, since it
         * may not have read (or even been sent) this rank's frames: its
         * sends and this rank's travel on different sockets. */
        send_notice(tx, sk->peer,
                    &(struct loom_link_notice){.culprit = sk->peer,
                                               .code = LOOM_ERROR_MISMATCH,
                                               .seq = op->req->tag,
                                               .count = op->req->count,
                                               .desc = op->req->desc});
        tx->mismatch = (struct loom_tx_mismatch){
            .valid = 1, .peer = sk->peer, .tag = f.tag, .desc = f.desc, .count = f.count};
        loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_MISMATCH, "%s", why);
        return -1;
    default: loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_PROTOCOL, "%s", why); return -1;
    }
}

/* take bytes of the head receive op have landed (header first): check the
 * header once whole, finish the op once full. -1 when the frame failed the
 * check (the peer is failed, its queues are empty). */
static int recv_advance(struct loom_tx *tx, struct tcp_sock *sk, size_t take)
{
    struct tcp_op *op = sk->recvq.head;
    int had_hdr = op->done >= LOOM_TCP_FRAME_LEN;
    op->done += take;
    if (!had_hdr && op->done >= LOOM_TCP_FRAME_LEN && check_frame(tx, sk, op) != 0)
        return -1;
    if (op->done == LOOM_TCP_FRAME_LEN + op->len) {
        queue_pop(&sk->recvq);
        stripe_done(op->req);
        op_put(tx->priv, op);
    }
    return 0;
}

/* Copy what the cache holds into the posted receives, in stream order.
 * Returns bytes moved. */
static size_t cache_drain(struct loom_tx *tx, struct tcp_sock *sk)
{
    size_t moved = 0;
    while (sk->cache_len && sk->recvq.head) {
        struct tcp_op *op = sk->recvq.head;
        uint8_t *dst;
        size_t room;
        if (op->done < LOOM_TCP_FRAME_LEN) {
            dst = op->hdr + op->done;
            room = LOOM_TCP_FRAME_LEN - op->done;
        } else {
            dst = op->base + (op->done - LOOM_TCP_FRAME_LEN);
            room = LOOM_TCP_FRAME_LEN + op->len - op->done;
        }
        size_t take = room < sk->cache_len ? room : sk->cache_len;
        memcpy(dst, sk->cache + sk->cache_off, take);
        cache_consume(sk, take);
        moved += take;
        if (recv_advance(tx, sk, take) != 0)
            break;
    }
    return moved;
}

/* Receive into the posted buffers, and whatever else has arrived into the
 * cache. Returns bytes moved. */
static size_t sock_recv(struct loom_tx *tx, struct tcp_sock *sk)
{
    struct tcp_peer *peer = &((struct tcp_priv *)tx->priv)->peers[sk->peer];
    size_t moved = cache_drain(tx, sk);
    while (sk->recvq.head && sk->fd >= 0) {
        /* the cache is empty here: the drain stops only when it is */
        if (!sk->cache)
            sk->cache = malloc(LOOM_TCP_RCACHE); /* none: read only what is posted */
        struct iovec iov[2 * TCP_BATCH + 1];
        int nops;
        int niov = build_iov(sk->recvq.head, iov, &nops);
        size_t asked = 0;
        for (int k = 0; k < niov; k++)
            asked += iov[k].iov_len;
        if (sk->cache) {
            iov[niov].iov_base = sk->cache;
            iov[niov].iov_len = LOOM_TCP_RCACHE;
            asked += iov[niov++].iov_len;
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        ssize_t n = recvmsg(sk->fd, &msg, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                fail_errno(tx, sk->peer, errno);
            break;
        }
        if (n == 0) {
            if (!control_pending(tx, sk->peer))
                loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_REMOTE,
                                   "closed the connection without a goodbye (it exited or "
                                   "crashed)");
            break;
        }
        size_t left = (size_t)n;
        moved += left;
        /* the kernel filled the iov in order: the nops ops first */
        for (int k = 0; left && k < nops; k++) {
            struct tcp_op *op = sk->recvq.head;
            size_t want = LOOM_TCP_FRAME_LEN + op->len - op->done;
            size_t take = left < want ? left : want;
            left -= take;
            if (recv_advance(tx, sk, take) != 0)
                return moved;
        }
        sk->cache_off = 0;
        sk->cache_len = left;
        cache_drain(tx, sk);
        if (peer->failed)
            return moved;
        if ((size_t)n < asked)
            break; /* drained what had arrived: retrying would get EAGAIN */
    }
    return moved;
}

/* One non-blocking pass over every socket with queued work. */
static size_t scan_active(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    size_t moved = 0;
    for (int i = 0; i < tp->nactive;) {
        struct tcp_sock *sk = tp->active[i];
        if (sk->fd >= 0 && sk->sendq.head)
            moved += sock_send(tx, sk);
        if (sk->fd >= 0 && sk->recvq.head)
            moved += sock_recv(tx, sk);
        if (sock_idle(sk)) {
            sk->active = 0;
            /* A writable socket would wake every wait, so EPOLLOUT goes now;
             * EPOLLIN stays armed (most likely the next post wants it again)
             * and is dropped only if data arrives while nothing is posted. */
            if (sk->ep_mask & EPOLLOUT)
                set_interest(tp, sk, EPOLLIN | EPOLLRDHUP);
            tp->active[i] = tp->active[--tp->nactive];
        } else {
            i++;
        }
    }
    return moved;
}

static loom_result_t post(struct loom_tx *tx, struct loom_tx_req *req, int is_send)
{
    struct tcp_priv *tp = tx->priv;
    const int r = req ? req->peer : -1;
    if (!req || r < 0 || r >= tx->params.nranks || r == tx->params.rank ||
        (req->len && !req->buf)) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: invalid %s request (peer %d of %d, own rank %d)",
                 is_send ? "send" : "receive", r, tx->params.nranks, tx->params.rank);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    req->is_send = is_send;
    req->next = NULL;
    req->status = LOOM_SUCCESS;
    req->done = 0;
    struct tcp_peer *peer = &tp->peers[r];
    if (peer->failed) {
        loom_result_t res = peer->failed;
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s", peer->failmsg ? peer->failmsg : "");
        req_finish(req, res);
        return res;
    }
    /* The cut and the sockets depend only on the length and the lanes,
     * same on both sides; stripe s goes on lane s of this direction, or a
     * short message on socket 0 (tcp_priv.h). */
    const int lanes = tp->nsocks / 2;
    const int from = is_send ? tx->params.rank : r, to = is_send ? r : tx->params.rank;
    size_t chunk = req->len, nstripes = 1;
    if (lanes > 1 && req->len > LOOM_TCP_STRIPE_MIN) {
        chunk = (req->len + (size_t)lanes - 1) / (size_t)lanes;
        chunk = (chunk + LOOM_TCP_STRIPE_ALIGN - 1) & ~(size_t)(LOOM_TCP_STRIPE_ALIGN - 1);
        nstripes = (req->len + chunk - 1) / chunk;
    }
    struct tcp_op *ops[LOOM_TCP_MAX_SOCKS];
    for (size_t s = 0; s < nstripes; s++) {
        int si = loom_tcp_msg_sock(from, to, req->len, (int)s);
        if (peer->socks[si].cstate != TCP_CS_UP) {
            loom_result_t cr = loom_tcp_want_sock(tx, r, si);
            if (cr < 0) {
                while (s--)
                    op_put(tp, ops[s]);
                return cr;
            }
        }
        ops[s] = op_get(tp);
        if (!ops[s] || activate(tx, &peer->socks[loom_tcp_msg_sock(from, to, req->len, (int)s)]) !=
                           LOOM_SUCCESS) {
            if (ops[s])
                op_put(tp, ops[s]);
            while (s--)
                op_put(tp, ops[s]);
            snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: out of memory posting");
            return LOOM_ERROR_NO_MEMORY;
        }
    }
    uint64_t seq = is_send ? peer->send_seq++ : peer->recv_seq++;
    req->priv[0] = nstripes;
    for (size_t s = 0; s < nstripes; s++) {
        struct tcp_op *op = ops[s];
        struct tcp_sock *sk = &peer->socks[loom_tcp_msg_sock(from, to, req->len, (int)s)];
        size_t off = s * chunk;
        op->req = req;
        op->base = (uint8_t *)req->buf + off;
        op->len = req->len - off < chunk ? req->len - off : chunk;
        op->done = 0;
        op->seq = seq;
        op->stripe = (uint16_t)s;
        if (is_send) {
            struct loom_tcp_frame f = {.magic = LOOM_TCP_FRAME_MAGIC,
                                       .version = LOOM_TCP_VERSION,
                                       .stripe = (uint16_t)s,
                                       .tag = req->tag,
                                       .desc = req->desc,
                                       .comm_id = tx->params.comm_id,
                                       .seq = seq,
                                       .len = op->len,
                                       .count = req->count};
            loom_tcp_frame_encode(&f, op->hdr);
            queue_push(&sk->sendq, op);
        } else {
            queue_push(&sk->recvq, op);
        }
    }
    return LOOM_SUCCESS;
}

/* Connect on first use: socket 0 now, lanes when a long message needs one. */
static loom_result_t tcp_connect(struct loom_tx *tx, int peer)
{
    if (peer < 0 || peer >= tx->params.nranks || peer == tx->params.rank) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: cannot connect to rank %d of %d", peer,
                 tx->params.nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    return loom_tcp_want_sock(tx, peer, 0);
}

static loom_result_t tcp_isend(struct loom_tx *tx, struct loom_tx_req *req)
{
    return post(tx, req, 1);
}

static loom_result_t tcp_irecv(struct loom_tx *tx, struct loom_tx_req *req)
{
    return post(tx, req, 0);
}

static loom_result_t take_pending_err(struct loom_tx *tx)
{
    loom_result_t res = ((struct tcp_priv *)tx->priv)->pending_err;
    ((struct tcp_priv *)tx->priv)->pending_err = LOOM_SUCCESS;
    return res;
}

static void stop_watching(struct tcp_priv *tp, struct tcp_sock *sk)
{
    epoll_ctl(tp->epfd, EPOLL_CTL_DEL, sk->fd, NULL);
    sk->hup = 1;
    sk->ep_mask = 0;
}

/* An event on a socket with nothing posted: a control frame at the front
 * of the stream (in the cache when it holds anything, else in the kernel)
 * is read and acted on; the end of the stream without a goodbye fails the
 * peer (it exited or crashed between calls); data for a later receive stays
 * where it is, and only the peer's hang-up is still watched. (A control
 * frame is always followed by the end of the stream, so one read ahead into
 * the cache still brings an event here.) */
static void idle_event(struct loom_tx *tx, struct tcp_sock *sk, uint32_t events)
{
    struct tcp_priv *tp = tx->priv;
    struct tcp_peer *peer = &tp->peers[sk->peer];
    if (peer->failed)
        return;
    struct loom_tcp_frame f;
    ssize_t n = front_peek(sk, &f);
    if (n == 0) {
        if (peer->bye)
            stop_watching(tp, sk);
        else if (!control_pending(tx, sk->peer))
            loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_REMOTE,
                               "closed the connection without a goodbye (it exited or crashed)");
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            fail_errno(tx, sk->peer, errno);
        } else if (events & EPOLLERR) {
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(sk->fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err)
                fail_errno(tx, sk->peer, err);
        }
        return;
    }
    if (n == LOOM_TCP_FRAME_LEN && is_control(tx, &f)) {
        if (front_take(sk) == 0 && handle_control(tx, sk->peer, &f, 0))
            stop_watching(tp, sk); /* a goodbye: nothing more comes */
        return;
    }
    /* data for a later receive, or part of a header: the post reads it */
    if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
        stop_watching(tp, sk); /* the next post reads it, then the end */
    else
        set_interest(tp, sk, EPOLLRDHUP);
}

/* Wait up to ms (0: a look) on the epoll set and handle what came. */
static loom_result_t tcp_events(struct loom_tx *tx, int ms)
{
    struct tcp_priv *tp = tx->priv;
    struct epoll_event evs[64];
    int n = epoll_wait(tp->epfd, evs, 64, ms);
    if (n < 0 && errno != EINTR) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: epoll_wait: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    for (int i = 0; i < n; i++) {
        int kind = *(int *)evs[i].data.ptr;
        if (kind == TCP_EV_WAKE) {
            uint64_t v;
            if (read(tp->wake_fd, &v, sizeof v) < 0) {
                /* drained by an earlier pass */
            }
            continue;
        }
        if (kind == TCP_EV_IN) {
            loom_tcp_conn_event(tx, evs[i].data.ptr, evs[i].events);
            continue;
        }
        struct tcp_sock *sk = evs[i].data.ptr;
        if (sk->cstate != TCP_CS_UP) {
            loom_tcp_conn_event(tx, sk, evs[i].events);
            continue;
        }
        if (sk->active || sk->fd < 0)
            continue;
        idle_event(tx, sk, evs[i].events);
    }
    return LOOM_SUCCESS;
}

static loom_result_t tcp_progress(struct loom_tx *tx, int timeout_us)
{
    struct tcp_priv *tp = tx->priv;
    loom_tcp_conn_poll(tx);
    size_t moved = scan_active(tx);
    loom_result_t err = take_pending_err(tx);
    if (err < 0)
        return err;
    if (moved)
        return LOOM_SUCCESS;
    if (timeout_us == 0) {
        /* a look at the epoll set every 64th idle call, so that a caller
         * that only polls still accepts and finishes connections (a system
         * call each time would slow the spinning caller) */
        if (++tp->polls & 63)
            return LOOM_SUCCESS;
        LOOM_CHECK(tcp_events(tx, 0));
        loom_tcp_conn_poll(tx);
        scan_active(tx);
        return take_pending_err(tx);
    }

    for (int i = 0; i < tp->nactive; i++) {
        struct tcp_sock *sk = tp->active[i];
        if (sk->cstate != TCP_CS_UP)
            continue;
        set_interest(tp, sk,
                     (sk->sendq.head ? EPOLLOUT : 0u) | (sk->recvq.head ? EPOLLIN : 0u) |
                         EPOLLRDHUP);
        set_lowat(sk);
    }
    int ms = timeout_us < 0 ? -1 : (int)(((long long)timeout_us + 999) / 1000);
    double next = loom_tcp_conn_next(tx);
    if (next > 0) {
        int until = (int)((next - loom_now()) * 1000.0) + 1;
        if (until < 1)
            until = 1;
        if (ms < 0 || until < ms)
            ms = until;
    }
    LOOM_CHECK(tcp_events(tx, ms));
    loom_tcp_conn_poll(tx);
    scan_active(tx);
    return take_pending_err(tx);
}

static void tcp_wake(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    uint64_t one = 1;
    if (tp->wake_fd >= 0 && write(tp->wake_fd, &one, sizeof one) < 0) {
        /* saturated: a wake-up is pending anyway */
    }
}

static void tcp_oob_notify(void *ctx)
{
    tcp_wake(ctx);
}

static void tcp_shutdown(struct loom_tx *tx, loom_result_t res)
{
    struct tcp_priv *tp = tx->priv;
    if (!tp->peers)
        return;
    if (res >= 0)
        res = LOOM_ERROR_ABORTED;
    /* Tell the live peers first, so that ranks not waiting on the cause
     * learn of it now and can name it. */
    struct loom_link_notice n = loom_link_notice_of(tx, res);
    for (int r = 0; r < tx->params.nranks; r++) {
        if (r == tx->params.rank || tp->peers[r].failed || tp->peers[r].bye)
            continue;
        send_notice(tx, r, &n);
        /* half-close: the notice is followed by an end of stream, not by a
         * reset that could discard it; the sockets close at finalize */
        for (int s = 0; s < tp->nsocks; s++) {
            struct tcp_sock *sk = &tp->peers[r].socks[s];
            if (sk->fd < 0)
                continue;
            int *l = realloc(tp->lingering, sizeof *l * (size_t)(tp->nlingering + 1));
            if (!l)
                continue;
            tp->lingering = l;
            shutdown(sk->fd, SHUT_WR);
            epoll_ctl(tp->epfd, EPOLL_CTL_DEL, sk->fd, NULL);
            tp->lingering[tp->nlingering++] = sk->fd;
            sk->fd = -1;
        }
    }
    /* An orderly end, not a link failure: no warning, errmsg untouched. */
    for (int r = 0; r < tx->params.nranks; r++) {
        if (r == tx->params.rank || tp->peers[r].failed)
            continue;
        char d[256], msg[LOOM_TX_ERRLEN];
        snprintf(msg, sizeof msg,
                 "%s is unreachable: the transport was shut "
                 "down (%s)",
                 loom_tcp_describe(tx, r, d, sizeof d), loom_result_string(res));
        peer_down(tx, r, res, msg);
    }
    for (int i = 0; i < tp->nactive; i++)
        tp->active[i]->active = 0;
    tp->nactive = 0;
    loom_tcp_close_sockets(tx);
}

static void tcp_finalize(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    if (!tp)
        return;
    if (tp->oob)
        loom_oob_set_notify(tp->oob, NULL, NULL);
    if (tp->peers)
        for (int r = 0; r < tx->params.nranks; r++)
            if (r != tx->params.rank && !tp->peers[r].failed)
                send_control(tx, r, LOOM_TCP_CTL_BYE, 0, 0, 0, 0);
    loom_tcp_close_sockets(tx);
    for (int i = 0; i < tp->nlingering; i++)
        close(tp->lingering[i]);
    free(tp->lingering);
    tp->lingering = NULL;
    tp->nlingering = 0;
    if (tp->epfd >= 0)
        close(tp->epfd);
    tp->epfd = -1;
    if (tp->wake_fd >= 0)
        close(tp->wake_fd);
    tp->wake_fd = -1;
    if (tp->key)
        loom_auth_key_clear(tp->key);
    free(tp->key);
    tp->key = NULL;
    free(tp->pending);
    tp->pending = NULL;
    /* Ops still queued belong to requests the caller abandoned. */
    if (tp->peers) {
        for (int r = 0; r < tx->params.nranks; r++) {
            struct tcp_peer *peer = &tp->peers[r];
            for (int s = 0; peer->socks && s < tp->nsocks; s++) {
                struct tcp_op *op;
                while ((op = queue_pop(&peer->socks[s].sendq)))
                    free(op);
                while ((op = queue_pop(&peer->socks[s].recvq)))
                    free(op);
                free(peer->socks[s].cache);
            }
            free(peer->socks);
            free(peer->failmsg);
        }
    }
    free(tp->peers);
    tp->peers = NULL;
    while (tp->free_ops) {
        struct tcp_op *op = tp->free_ops;
        tp->free_ops = op->next;
        free(op);
    }
    free(tp->active);
    tp->active = NULL;
    tp->nactive = tp->active_cap = 0;
}

/* tcp's own configuration rows (config.h); LOOM_SOCKET_SNDBUF is core's,
 * as ofi's tcp provider reads it too. */
struct tcp_knobs {
    int nsocks; /* LOOM_NSOCKS: lanes each way */
};
static struct tcp_knobs tcp_knobs;
static const struct loom_config_var tcp_rows[] = {
    {"LOOM_NSOCKS", LOOM_CONFIG_INT, "1", LOOM_CONFIG_FIELD(struct tcp_knobs, nsocks), 1, 16, 0,
     "TCP sockets per peer and direction; large messages are striped over them", NULL},
};
static struct loom_config_section tcp_section = {"tcp", tcp_rows,
                                                 sizeof tcp_rows / sizeof tcp_rows[0], &tcp_knobs};
LOOM_CONFIG_SECTION(tcp_section)

/* Set up an instance: an epoll set and a wake-up eventfd; sockets come on
 * first use (tcp_conn.c). Knobs: LOOM_NSOCKS lanes each way, LOOM_SOCKET_SNDBUF. */
static loom_result_t tcp_init(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    const struct loom_config *cfg = loom_config();
    const struct tcp_knobs *knobs = loom_config_values(&tcp_section);
    tp->epfd = tp->wake_fd = -1;
    tp->wake_kind = TCP_EV_WAKE;
    tp->oob = p->oob;
    if (p->nranks < 1 || p->rank < 0 || p->rank >= p->nranks || (p->nranks > 1 && !p->oob)) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: rank %d of %d ranks (out-of-band service %s) cannot be set up", p->rank,
                 p->nranks, p->oob ? "given" : "missing");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (knobs->nsocks < 1 || knobs->nsocks > LOOM_TCP_MAX_SOCKS / 2) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: %d sockets per peer and direction is not in 1..%d", knobs->nsocks,
                 LOOM_TCP_MAX_SOCKS / 2);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    tp->nsocks = 2 * knobs->nsocks; /* LOOM_NSOCKS lanes each way */
    tp->sndbuf = cfg->socket_sndbuf;
    tp->key = calloc(1, sizeof *tp->key);
    if (!tp->key)
        return LOOM_ERROR_NO_MEMORY;
    char kerr[400] = "";
    loom_result_t res = loom_auth_key_from_config(tp->key, kerr, sizeof kerr);
    if (res < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: rank %d: %s", p->rank, kerr);
        return res;
    }
    tp->peers = calloc((size_t)p->nranks, sizeof *tp->peers);
    if (!tp->peers) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: out of memory for %d peers", p->nranks);
        return LOOM_ERROR_NO_MEMORY;
    }
    for (int r = 0; r < p->nranks; r++) {
        struct tcp_peer *peer = &tp->peers[r];
        if (r == p->rank)
            continue;
        peer->socks = calloc((size_t)tp->nsocks, sizeof *peer->socks);
        if (!peer->socks) {
            snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: out of memory");
            return LOOM_ERROR_NO_MEMORY;
        }
        for (int k = 0; k < tp->nsocks; k++) {
            peer->socks[k].evkind = TCP_EV_SOCK;
            peer->socks[k].fd = -1;
            peer->socks[k].hs_fd = -1;
            peer->socks[k].peer = r;
            peer->socks[k].index = k;
        }
    }
    tp->epfd = epoll_create1(EPOLL_CLOEXEC);
    tp->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (tp->epfd < 0 || tp->wake_fd < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: epoll/eventfd: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tp->wake_kind};
    if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, tp->wake_fd, &ev) < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: epoll_ctl: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    if (tp->oob)
        loom_oob_set_notify(tp->oob, tcp_oob_notify, tx);
    const char *nofp = getenv("LOOM_TEST_TCP_NO_FINGERPRINT");
    if (nofp && *nofp == '1') {
        tp->no_fingerprint = 1;
        tx->caps &= ~LOOM_TX_CAP_FINGERPRINT;
    }
    snprintf(tx->info, sizeof tx->info, "tcp (%d socket%s per peer)", tp->nsocks,
             tp->nsocks == 1 ? "" : "s");
    LOOM_INFO(LOOM_SUB_NET,
              "tcp: rank %d ready; sockets are made on first use, %d per "
              "peer at most",
              p->rank, tp->nsocks);
    return LOOM_SUCCESS;
}

const struct loom_transport loom_tcp_transport = {
    .struct_size = sizeof(struct loom_transport),
    .name = "tcp",
    .priv_size = sizeof(struct tcp_priv),
    /* Checks every frame's header against the receive (fingerprints); a
     * dead peer shows as a closed socket; idle links keepalive. */
    .caps = LOOM_TX_CAP_FINGERPRINT | LOOM_TX_CAP_LIVENESS,
    .available = NULL,
    /* An epoll set and a wake-up fd; no socket, no listener (peers reach
     * this rank through its out-of-band port). Never blocks. */
    .init = tcp_init,
    /* Socket 0 to peer now: opened by the higher rank, asked for through the
     * out-of-band service by the lower. Lanes for long messages come when a
     * post needs them. Never blocks; a socket not up within connect_timeout
     * fails the peer, named. */
    .connect = tcp_connect,
    /* Queue the frames; no system call (a socket not yet up is asked for).
     * A peer that failed before fails the request at once (done=1) and
     * returns its error. */
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    /* Non-blocking pass over sockets with queued work and connections being
     * made; when nothing moved and timeout_us != 0, epoll_wait for the
     * work's events, a connection's, or wake(); with timeout_us == 0, a
     * look at the epoll set every 64th such call (handshakes and idle links
     * move on for a caller that only polls). A failed link fails its
     * requests and is returned once, with errmsg naming the peer. */
    .progress = tcp_progress,
    /* Write the instance's eventfd. */
    .wake = tcp_wake,
    .mem_reg = NULL,
    .mem_dereg = NULL,
    /* Tell live peers why, fail every pending request with res; close every
     * socket. */
    .shutdown = tcp_shutdown,
    /* Goodbyes, then free everything. */
    .finalize = tcp_finalize,
};
