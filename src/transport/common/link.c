/* link.c - the per-peer connection machinery shared by the transports that
 * keep their own peers (link.h says how a link comes up and how a notice
 * waits for the data it follows). */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "wire.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "transport/common/link.h"

void loom_link_epoll_add(struct loom_tx *tx, int fd, uint32_t events, uint64_t tag)
{
    struct loom_link *l = loom_link_of(tx);
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST)
        epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
}

static int hello_check(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen);

/* The OOB service's thread: a message or a socket arrived. */
static void oob_notify(void *ctx)
{
    struct loom_link *l = loom_link_of(ctx);
    uint64_t one = 1;
    if (l->oobfd >= 0 && write(l->oobfd, &one, sizeof one) < 0) {
        /* the counter is full: a notice is pending anyway */
    }
}

loom_result_t loom_link_init(struct loom_tx *tx, const struct loom_link_ops *ops, size_t peer_size)
{
    struct loom_link *l = loom_link_of(tx);
    l->ops = ops;
    l->epfd = l->wakefd = l->oobfd = -1;
    const struct loom_link_proto *lp = &ops->proto;
    l->hs = (struct loom_hs_proto)LOOM_HS_PROTO(ops->name, lp->mac_ctx, lp->hello_magic,
                                                lp->hello_magic, lp->hello_magic, LOOM_LINK_VERSION,
                                                LOOM_LINK_HELLO_LEN, hello_check);
    char kerr[256] = "";
    loom_result_t res = loom_auth_key_from_config(&l->key, kerr, sizeof kerr);
    if (res < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s: %s", ops->name, kerr);
        return res;
    }
    l->peers = calloc((size_t)tx->params.nranks, peer_size);
    l->live = calloc((size_t)tx->params.nranks, sizeof *l->live);
    if (!l->peers || !l->live) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s: out of memory", ops->name);
        return LOOM_ERROR_NO_MEMORY;
    }
    l->peer_size = peer_size;
    for (int r = 0; r < tx->params.nranks; r++)
        loom_link_peer(tx, r)->ctl_fd = -1;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->oobfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epfd < 0 || l->wakefd < 0 || l->oobfd < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s: epoll/eventfd: %s", ops->name,
                 strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    loom_link_epoll_add(tx, l->wakefd, EPOLLIN, LOOM_LINK_EP_WAKE);
    loom_link_epoll_add(tx, l->oobfd, EPOLLIN, LOOM_LINK_EP_OOB);
    if (tx->params.oob)
        loom_oob_set_notify(tx->params.oob, oob_notify, tx);
    return LOOM_SUCCESS;
}

void loom_link_wake(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    uint64_t one = 1;
    if (l->wakefd >= 0 && write(l->wakefd, &one, sizeof one) < 0) {
        /* the counter is full: a wake is pending anyway */
    }
}

void loom_link_free(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    if (!l->ops)
        return; /* init never ran */
    if (tx->params.oob)
        loom_oob_set_notify(tx->params.oob, NULL, NULL);
    if (l->peers) {
        for (int r = 0; r < tx->params.nranks; r++) {
            struct loom_link_peer *lp = loom_link_peer(tx, r);
            loom_link_close(tx, r);
            free(lp->failmsg);
            free(lp->held_why);
        }
        free(l->peers);
        l->peers = NULL;
    }
    free(l->live);
    l->live = NULL;
    l->nlive = 0;
    for (int i = 0; i < l->npending; i++) {
        close(l->pending[i].fd);
        loom_hs_free(&l->pending[i].hs);
    }
    free(l->pending);
    l->pending = NULL;
    l->npending = 0;
    int fds[3] = {l->epfd, l->wakefd, l->oobfd};
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    l->epfd = l->wakefd = l->oobfd = -1;
    loom_auth_key_clear(&l->key);
}

const char *loom_link_describe(struct loom_tx *tx, int rank, char *buf, size_t len)
{
    const char *d = NULL;
    if (tx->params.describe)
        d = tx->params.describe(tx->params.describe_ctx, rank);
    if (d)
        snprintf(buf, len, "%s", d);
    else
        snprintf(buf, len, "rank %d", rank);
    return buf;
}

static void unhold(struct loom_link_peer *lp)
{
    free(lp->held_why);
    lp->held_why = NULL;
    lp->held = 0;
    lp->held_data = 0;
}

void loom_link_fail(struct loom_tx *tx, int r, loom_result_t res, const char *fmt, ...)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->failed)
        return;
    char d[200], what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* "rank 3 (...) closed ...", or "rank 3 (...): the RDMA write ..." */
    snprintf(tx->errmsg, sizeof tx->errmsg, "%s%s%s", loom_link_describe(tx, r, d, sizeof d),
             what[0] == ':' ? "" : " ", what);
    LOOM_WARN(LOOM_SUB_NET, "%s: rank %d: %s", l->ops->name, tx->params.rank, tx->errmsg);
    lp->failed = res;
    lp->state = LOOM_LINK_S_FAILED;
    free(lp->failmsg);
    lp->failmsg = strdup(tx->errmsg);
    unhold(lp);
    l->ops->lost(tx, r, res);
    loom_link_close(tx, r);
    l->err = res;
    if (!tx->blame)
        tx->blame = r + 1;
}

void loom_link_close(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->ctl_fd >= 0) {
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, lp->ctl_fd, NULL);
        close(lp->ctl_fd);
        lp->ctl_fd = -1;
    }
    if (lp->hs) {
        loom_hs_free(lp->hs);
        free(lp->hs);
        lp->hs = NULL;
    }
}

void loom_link_send(struct loom_tx *tx, int r, uint16_t type, uint16_t flags, uint64_t w0,
                    uint64_t w1, uint64_t w2)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->ctl_fd < 0)
        return;
    struct loom_link_frame f = {
        .type = type, .flags = flags, .comm_id = tx->params.comm_id, .w0 = w0, .w1 = w1, .w2 = w2};
    uint8_t b[LOOM_LINK_FRAME_LEN];
    loom_link_frame_encode(&l->ops->proto, &f, b);
    /* 40 bytes on a socket that carries a handful: the kernel takes them
     * whole or the link is gone (best effort, never blocks) */
    ssize_t n = send(lp->ctl_fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
}

/* ---- the blob exchange ---- */

static loom_result_t send_blob(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    uint8_t buf[LOOM_LINK_BLOB_MAX];
    size_t n = l->ops->blob_encode(tx, r, buf);
    loom_result_t res = loom_oob_send(tx->params.oob, r, l->ops->oob_tag, buf, n);
    if (res < 0)
        loom_link_fail(tx, r, res, "could not be sent this rank's %s: %s", l->ops->blob_name,
                       loom_oob_error(tx->params.oob));
    return res;
}

static loom_result_t make_link(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    l->live[l->nlive++] = r; /* once: the state leaves NONE now */
    loom_link_token(lp->token, sizeof lp->token);
    lp->t_start = loom_now();
    lp->state = LOOM_LINK_S_WAIT_BLOB;
    return l->ops->start ? l->ops->start(tx, r) : LOOM_SUCCESS;
}

static void ctl_up(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    char d[256];
    lp->ctl = LOOM_LINK_CS_UP;
    lp->state = LOOM_LINK_S_UP;
    LOOM_TRACE(LOOM_SUB_NET, "%s: rank %d: connected to %s in %.3f s", l->ops->name,
               tx->params.rank, loom_link_describe(tx, r, d, sizeof d), loom_now() - lp->t_start);
    l->ops->up(tx, r);
}

/* The lower rank, its blob applied: open a control socket to the higher
 * rank's OOB port (its service hands it to the transport). */
static void ctl_connect(struct loom_tx *tx, int r)
{
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    char err[256];
    int fd = -1;
    loom_result_t res = loom_oob_connect_fd(tx->params.oob, r, &fd, err, sizeof err);
    if (res < 0) {
        /* every rank listened before any transport opened: a refusal
         * means the process is gone */
        loom_link_fail(tx, r, res == LOOM_ERROR_REMOTE ? res : LOOM_ERROR_SYSTEM,
                       res == LOOM_ERROR_REMOTE ? "is gone: %s (the process exited or crashed)"
                                                : "cannot be reached for a control connection: %s",
                       err);
        return;
    }
    loom_net_set_nodelay(fd);
    loom_net_set_keepalive(fd, tx->params.timeout);
    lp->ctl_fd = fd;
    lp->ctl = LOOM_LINK_CS_CONNECTING;
    loom_link_epoll_add(tx, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, LOOM_LINK_EP_PEER(r));
}

static void pending_step_held(struct loom_tx *tx);

static void apply_blob(struct loom_tx *tx, int r, const uint8_t *b, size_t len)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    int answer = 0;
    if (lp->state == LOOM_LINK_S_FAILED)
        return;
    if (lp->have_blob) {
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL, "sent its %s twice", l->ops->blob_name);
        return;
    }
    if (lp->state == LOOM_LINK_S_NONE) {
        if (make_link(tx, r) < 0)
            return;
        answer = 1;
    }
    if (l->ops->blob_apply(tx, r, b, len) != 0)
        return;
    lp->have_blob = 1;
    lp->state = LOOM_LINK_S_WAIT_CTL;
    /* answered after applying: ready to receive before r can send */
    if (answer && send_blob(tx, r) < 0)
        return;
    if (tx->params.rank < r)
        ctl_connect(tx, r);
    else
        pending_step_held(tx); /* its hello may have come first */
}

loom_result_t loom_link_start(struct loom_tx *tx, int r)
{
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->state != LOOM_LINK_S_NONE)
        return lp->failed ? lp->failed : LOOM_SUCCESS;
    loom_result_t res = make_link(tx, r);
    if (res < 0)
        return res;
    return send_blob(tx, r);
}

loom_result_t loom_link_connect(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    if (r < 0 || r >= tx->params.nranks || r == tx->params.rank) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s: connect to rank %d of %d (own rank %d)",
                 l->ops->name, r, tx->params.nranks, tx->params.rank);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->failed) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s", lp->failmsg);
        return lp->failed;
    }
    if (l->shut) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "%s: the transport was shut down", l->ops->name);
        return LOOM_ERROR_ABORTED;
    }
    return loom_link_start(tx, r);
}

loom_result_t loom_link_take_err(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    loom_result_t res = l->err;
    l->err = LOOM_SUCCESS;
    return res;
}

static void poll_oob(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    for (;;) {
        int from = -1;
        void *buf = NULL;
        size_t len = 0;
        int got = loom_oob_poll(tx->params.oob, l->ops->oob_tag, -1, &from, &buf, &len);
        if (got < 0) {
            if (!l->err) {
                snprintf(tx->errmsg, sizeof tx->errmsg, "%s: the out-of-band service failed: %s",
                         l->ops->name, loom_oob_error(tx->params.oob));
                l->err = (loom_result_t)got;
            }
            return;
        }
        if (got == 0)
            return;
        if (from >= 0 && from < tx->params.nranks && from != tx->params.rank)
            apply_blob(tx, from, buf, len);
        free(buf);
    }
}

/* ---- sockets handed over by the OOB service, their handshake running ---- */

/* A handshake's epoll events (the peer's hang-up too). */
static uint32_t hs_epoll(const struct loom_hs *hs)
{
    return (hs->events & POLLIN ? EPOLLIN : 0) | (hs->events & POLLOUT ? EPOLLOUT : 0) | EPOLLRDHUP;
}

static void refuse(struct loom_tx *tx, int i);
static void pending_event(struct loom_tx *tx, int fd);

static void take(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    int fd;
    char from[64];
    while (loom_oob_take_fd(tx->params.oob, l->ops->oob_kind, &fd, from, sizeof from)) {
        struct loom_link_pending *np = l->npending < LOOM_LINK_MAX_PENDING
                                           ? realloc(l->pending,
                                                     sizeof *np * (size_t)(l->npending + 1))
                                           : NULL;
        if (!np) {
            close(fd); /* a flood: strangers do not get to queue */
            continue;
        }
        l->pending = np;
        int i = l->npending++;
        struct loom_link_pending *pd = &l->pending[i];
        pd->fd = fd;
        snprintf(pd->from, sizeof pd->from, "%s", from);
        loom_net_set_nonblock(fd);
        loom_net_set_nodelay(fd);
        double limit = tx->params.connect_timeout > 0 ? tx->params.connect_timeout : 60;
        if (loom_hs_accept(&pd->hs, &l->hs, &l->key, fd, from, tx, limit) < 0) {
            refuse(tx, i);
            continue;
        }
        loom_link_epoll_add(tx, fd, hs_epoll(&pd->hs), LOOM_LINK_EP_PENDING(fd));
        pending_event(tx, fd);
    }
}

void loom_link_poll(struct loom_tx *tx)
{
    poll_oob(tx);
    take(tx);
}

static void pending_drop(struct loom_link *l, int i, int close_it)
{
    int fd = l->pending[i].fd;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
    if (close_it)
        close(fd);
    l->pending[i] = l->pending[--l->npending];
}

/* The handshake on pending socket i failed: log why, close it. A peer's
 * own socket that merely ended is not worth a warning. */
static void refuse(struct loom_tx *tx, int i)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_hs *hs = &l->pending[i].hs;
    if (hs->code == LOOM_ERROR_REMOTE && hs->received == 0)
        LOOM_INFO(LOOM_SUB_NET, "%s: rank %d: %s", l->ops->name, tx->params.rank, hs->err);
    else
        LOOM_WARN(LOOM_SUB_NET, "%s: rank %d: refused a control connection: %s", l->ops->name,
                  tx->params.rank, hs->err);
    loom_hs_free(hs);
    pending_drop(l, i, 1);
}

/* The handshake's payload check (accept side): a hello to this rank of
 * this communicator from a lower rank whose link this rank started, with
 * the token it gave that rank; held until that rank's blob is applied. */
static int hello_check(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen)
{
    struct loom_tx *tx = arg;
    struct loom_link_hello h;
    if (loom_link_hello_decode(payload, len, &h) != 0) {
        snprintf(why, whylen, "a hello of %zu bytes, expected %d", len, LOOM_LINK_HELLO_LEN);
        return LOOM_HS_DROP;
    }
    if (h.comm_id != tx->params.comm_id || h.to != (uint32_t)tx->params.rank ||
        h.from >= (uint32_t)tx->params.rank) {
        snprintf(why, whylen, "a hello from rank %u to rank %u of communicator %016llx", h.from,
                 h.to, (unsigned long long)h.comm_id);
        return LOOM_HS_DROP;
    }
    struct loom_link_peer *lp = loom_link_peer(tx, (int)h.from);
    /* the token is this rank's secret for that peer, sent only through the
     * out-of-band service: compare in constant time */
    if (lp->state == LOOM_LINK_S_NONE || lp->state == LOOM_LINK_S_FAILED || lp->ctl_fd >= 0 ||
        !loom_auth_equal(h.token, lp->token, sizeof lp->token)) {
        snprintf(why, whylen, "a hello as rank %u without the token this rank gave it", h.from);
        return LOOM_HS_DROP;
    }
    return lp->state == LOOM_LINK_S_WAIT_CTL ? LOOM_HS_ACCEPT : LOOM_HS_HOLD;
}

/* Step pending socket fd's handshake; once done, it is its peer's control
 * socket and the link is up. */
static void pending_event(struct loom_tx *tx, int fd)
{
    struct loom_link *l = loom_link_of(tx);
    int i = 0;
    while (i < l->npending && l->pending[i].fd != fd)
        i++;
    if (i == l->npending)
        return;
    struct loom_link_pending *pd = &l->pending[i];
    int rc = loom_hs_step(&pd->hs);
    if (rc < 0) {
        refuse(tx, i);
        return;
    }
    if (rc == LOOM_HS_AGAIN) {
        struct epoll_event ev = {.events = hs_epoll(&pd->hs), .data.u64 = LOOM_LINK_EP_PENDING(fd)};
        epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
        return;
    }
    size_t len = 0;
    const uint8_t *payload = loom_hs_payload(&pd->hs, &len);
    struct loom_link_hello h;
    loom_link_hello_decode(payload, len, &h); /* checked: hello_check */
    int from = (int)h.from;
    struct loom_link_peer *lp = loom_link_peer(tx, from);
    loom_hs_free(&pd->hs);
    lp->ctl_fd = fd;
    pending_drop(l, i, 0);
    loom_net_set_keepalive(fd, tx->params.timeout);
    loom_link_epoll_add(tx, fd, EPOLLIN | EPOLLRDHUP, LOOM_LINK_EP_PEER(from));
    ctl_up(tx, from);
}

/* A blob was applied: the handshakes it held go on. */
static void pending_step_held(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    for (int i = 0; i < l->npending;) {
        int fd = l->pending[i].fd, n = l->npending;
        if (l->pending[i].hs.events == 0)
            pending_event(tx, fd);
        if (l->npending == n)
            i++; /* else slot i holds another socket now */
    }
}

/* ---- frames on an established control socket ---- */

int loom_link_tag_earlier(uint32_t tag, uint64_t seq)
{
    uint32_t t = (uint32_t)(seq & 0x7fffffffu) | (seq >> 63 ? 0x80000000u : 0);
    return (tag & 0x80000000u) == (t & 0x80000000u) && (int32_t)((tag - t) << 1) < 0;
}

void loom_link_fifo_remove(struct loom_link_fifo *q, struct loom_tx_req *req)
{
    struct loom_tx_req *prev = NULL;
    for (struct loom_tx_req *x = q->head; x; prev = x, x = x->next)
        if (x == req) {
            LOOM_FIFO_UNLINK(q->head, q->tail, prev, x);
            x->next = NULL;
            return;
        }
}

static int earlier_pending(struct loom_tx *tx, int r, uint64_t seq)
{
    const struct loom_link_peer *lp = loom_link_peer(tx, r);
    for (int k = 0; k < 2; k++)
        for (const struct loom_tx_req *x = lp->reqs[k].head; x; x = x->next)
            if (loom_link_tag_earlier(x->tag, seq))
                return 1;
    return 0;
}

static int any_pending(struct loom_tx *tx, int r, int *recvs)
{
    const struct loom_link_peer *lp = loom_link_peer(tx, r);
    *recvs = lp->reqs[0].head != NULL;
    return lp->reqs[1].head || *recvs;
}

static void notice(struct loom_tx *tx, int r, const struct loom_link_frame *f)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    struct loom_link_notice n;
    char why[400];
    loom_link_notice_decode(f, &n);
    if (loom_link_notice_apply(tx, r, &n, loom_link_describe, why, sizeof why) ==
        LOOM_ERROR_MISMATCH) {
        loom_link_fail(tx, r, LOOM_ERROR_MISMATCH, "%s", why);
        return;
    }
    if (lp->held && !lp->held_data)
        return; /* one notice is enough */
    unhold(lp); /* a data path error held: the notice says why */
    lp->held_why = strdup(why);
    if (!lp->held_why) {
        loom_link_fail(tx, r, LOOM_ERROR_REMOTE, "%s", why);
        return;
    }
    /* held while draining: a data path error the drain meets is this
     * notice's failure (loom_link_data_error) */
    lp->held = LOOM_ERROR_REMOTE;
    lp->held_seq = n.seq;
    lp->held_at = loom_now();
    if (!l->draining) { /* a drain that meets a data path error reads frames */
        l->draining = 1;
        if (l->ops->drain)
            l->ops->drain(tx, r);
        else
            l->ops->poll(tx);
        l->draining = 0;
    }
    if (!lp->failed && !earlier_pending(tx, r, n.seq))
        loom_link_fail(tx, r, lp->held, "%s", lp->held_why);
}

static void handle_frame(struct loom_tx *tx, int r, const struct loom_link_frame *f)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (f->comm_id != tx->params.comm_id) {
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL, "sent a control frame of communicator %016llx",
                       (unsigned long long)f->comm_id);
        return;
    }
    switch (f->type) {
    case LOOM_LINK_BYE:
        lp->bye = 1; /* whether it was expected is judged in loom_link_timeouts */
        if (l->ops->got)
            l->ops->got(tx, r, f->w0);
        return;
    case LOOM_LINK_GOT: /* a FAIL follows: what it received is not failed */
        if (l->ops->got)
            l->ops->got(tx, r, f->w0);
        return;
    case LOOM_LINK_PING: return;
    case LOOM_LINK_FAIL: notice(tx, r, f); return;
    default:
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL, "sent an unexpected control frame %u", f->type);
    }
}

/* The lower rank's socket connected: send the OOB service's preamble (it
 * hands the socket over, 16 bytes on a new socket, taken whole) and start
 * the handshake, whose hello carries the token r gave this rank. */
static void start_hs(struct loom_tx *tx, int r, uint32_t events)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    int err = 0;
    socklen_t el = sizeof err;
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        return;
    getsockopt(lp->ctl_fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        loom_link_fail(tx, r, LOOM_ERROR_REMOTE, "cannot be reached on its control address: %s",
                       strerror(err));
        return;
    }
    uint8_t pre[LOOM_OOB_PREAMBLE_LEN];
    loom_oob_preamble(tx->params.oob, l->ops->oob_kind, pre);
    if (send(lp->ctl_fd, pre, sizeof pre, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof pre) {
        loom_link_fail(tx, r, LOOM_ERROR_REMOTE, "dropped its control connection: %s",
                       strerror(errno));
        return;
    }
    struct loom_link_hello h = {
        .from = (uint32_t)tx->params.rank, .to = (uint32_t)r, .comm_id = tx->params.comm_id};
    memcpy(h.token, lp->rtoken, sizeof h.token);
    uint8_t hello[LOOM_LINK_HELLO_LEN];
    loom_link_hello_encode(&h, hello);
    double limit = tx->params.connect_timeout > 0 ? tx->params.connect_timeout : 120;
    char d[256];
    lp->hs = malloc(sizeof *lp->hs);
    loom_result_t res = lp->hs ? loom_hs_connect(lp->hs, &l->hs, &l->key, lp->ctl_fd,
                                                 loom_link_describe(tx, r, d, sizeof d), hello,
                                                 sizeof hello, lp->t_start + limit - loom_now())
                               : LOOM_ERROR_NO_MEMORY;
    if (res < 0) {
        loom_link_fail(tx, r, res, "cannot be sent a control hello: %s",
                       lp->hs ? loom_hs_why(lp->hs) : "out of memory");
        return;
    }
    lp->ctl = LOOM_LINK_CS_HS;
}

/* Step the lower rank's handshake; once done, the link is up. */
static void step_hs(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    int rc = loom_hs_step(lp->hs);
    if (rc < 0) {
        char why[700];
        loom_link_fail(tx, r, rc, "%s", loom_hs_blame(lp->hs, why, sizeof why));
        return;
    }
    struct epoll_event ev = {.events = rc == LOOM_HS_AGAIN ? hs_epoll(lp->hs)
                                                           : EPOLLIN | EPOLLRDHUP,
                             .data.u64 = LOOM_LINK_EP_PEER(r)};
    epoll_ctl(l->epfd, EPOLL_CTL_MOD, lp->ctl_fd, &ev);
    if (rc == LOOM_HS_AGAIN)
        return;
    loom_hs_free(lp->hs);
    free(lp->hs);
    lp->hs = NULL;
    ctl_up(tx, r);
}

static void ctl_event(struct loom_tx *tx, int r, uint32_t events)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->ctl_fd < 0 || lp->failed)
        return;
    if (lp->ctl == LOOM_LINK_CS_CONNECTING)
        start_hs(tx, r, events);
    if (lp->ctl == LOOM_LINK_CS_HS && !lp->failed) {
        step_hs(tx, r);
        if (lp->ctl != LOOM_LINK_CS_UP || lp->failed)
            return;
    }
    if (lp->ctl != LOOM_LINK_CS_UP)
        return;
    /* frames: read what is there, 40 bytes at a time */
    for (;;) {
        uint8_t fb[LOOM_LINK_FRAME_LEN];
        ssize_t n = recv(lp->ctl_fd, fb, sizeof fb, MSG_DONTWAIT | MSG_PEEK);
        if (n == 0) {
            /* without a goodbye it exited or crashed; what it sent before
             * gets a moment to arrive (loom_link_timeouts) */
            if (!lp->bye && lp->eof_at == 0)
                lp->eof_at = loom_now();
            epoll_ctl(l->epfd, EPOLL_CTL_DEL, lp->ctl_fd, NULL);
            if (lp->bye)
                loom_link_close(tx, r);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            loom_link_fail(tx, r, LOOM_ERROR_REMOTE, "lost its control connection: %s",
                           strerror(errno));
            return;
        }
        if ((size_t)n < sizeof fb)
            return; /* the rest follows */
        if (recv(lp->ctl_fd, fb, sizeof fb, MSG_DONTWAIT) != (ssize_t)sizeof fb)
            return;
        struct loom_link_frame f;
        if (loom_link_frame_decode(&l->ops->proto, fb, &f) != 0) {
            loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL,
                           "sent bytes on its control connection that are not a frame");
            return;
        }
        handle_frame(tx, r, &f);
        if (lp->failed || lp->ctl_fd < 0)
            return;
    }
}

int loom_link_event(struct loom_tx *tx, uint64_t tag, uint32_t events, int *woken)
{
    struct loom_link *l = loom_link_of(tx);
    if (tag == LOOM_LINK_EP_WAKE || tag == LOOM_LINK_EP_OOB) {
        uint64_t v;
        if (read(tag == LOOM_LINK_EP_WAKE ? l->wakefd : l->oobfd, &v, sizeof v) < 0) {
            /* EAGAIN: nothing more to take */
        }
        if (woken && tag == LOOM_LINK_EP_WAKE)
            *woken = 1;
        return 1;
    }
    if ((tag >> 32) == 1) {
        pending_event(tx, (int)(uint32_t)tag);
        return 1;
    }
    if ((tag >> 32) == 2) {
        ctl_event(tx, (int)(uint32_t)tag, events);
        return 1;
    }
    return 0;
}

void loom_link_data_error(struct loom_tx *tx, int r, const char *why)
{
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    if (lp->failed || lp->held_data)
        return;
    /* a notice already here wins (it was sent before the peer closed) */
    ctl_event(tx, r, EPOLLIN);
    if (lp->failed)
        return;
    if (lp->held) {
        /* its notice came, held for earlier requests: they will not
         * complete now */
        loom_link_fail(tx, r, lp->held, "%s", lp->held_why);
        return;
    }
    if (lp->ctl_fd < 0 || lp->ctl != LOOM_LINK_CS_UP || lp->eof_at > 0 || lp->bye ||
        !(lp->held_why = strdup(why))) {
        loom_link_fail(tx, r, LOOM_ERROR_REMOTE, "%s", why);
        return;
    }
    lp->held = LOOM_ERROR_REMOTE;
    lp->held_data = 1;
    lp->held_at = loom_now();
}

int loom_link_timeouts(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    double now = loom_now();
    double limit = tx->params.connect_timeout > 0 ? tx->params.connect_timeout : 120;
    int next_ms = -1;
    for (int i = 0; i < l->npending;) {
        int n = l->npending;
        if (now >= l->pending[i].hs.deadline)
            pending_event(tx, l->pending[i].fd); /* it fails at its deadline */
        if (l->npending == n)
            i++;
    }
    for (int i = 0; i < l->nlive; i++) {
        int r = l->live[i], recvs = 0;
        struct loom_link_peer *lp = loom_link_peer(tx, r);
        if (lp->failed)
            continue;
        if (lp->held_data) {
            /* its control socket ended (a goodbye or a crash) without a
             * notice: the data path's error stands */
            if (lp->ctl_fd < 0 || lp->eof_at > 0 || lp->bye || now - lp->held_at >= LOOM_LINK_GRACE)
                loom_link_fail(tx, r, lp->held, "%s", lp->held_why);
            else
                next_ms = 10;
            continue;
        }
        if (lp->held) {
            if (!earlier_pending(tx, r, lp->held_seq) || now - lp->held_at >= LOOM_LINK_GRACE)
                loom_link_fail(tx, r, lp->held, "%s", lp->held_why);
            else
                next_ms = 10;
            continue;
        }
        if (lp->bye && any_pending(tx, r, &recvs)) {
            /* a goodbye with requests pending: what it sent before may
             * still be on its way */
            if (lp->bye_at == 0)
                lp->bye_at = now;
            if (now - lp->bye_at >= LOOM_LINK_GRACE)
                loom_link_fail(tx, r, LOOM_ERROR_REMOTE,
                               "has left (it destroyed its communicator) while this rank "
                               "still expected %s",
                               recvs ? "a message from it" : "to send it a message");
            else
                next_ms = 10;
            continue;
        }
        if (lp->eof_at > 0) {
            /* what it sent before may still complete, or name the cause
             * (an access error it refused, before failing itself) */
            int busy = l->ops->busy ? l->ops->busy(tx, r) : any_pending(tx, r, &recvs);
            if (!busy || now - lp->eof_at >= LOOM_LINK_GRACE)
                loom_link_fail(tx, r, LOOM_ERROR_REMOTE,
                               "closed its control connection without a goodbye (it "
                               "exited or crashed)");
            else
                next_ms = 10;
            continue;
        }
        if ((lp->state != LOOM_LINK_S_WAIT_BLOB && lp->state != LOOM_LINK_S_WAIT_CTL) ||
            now - lp->t_start <= limit)
            continue;
        char what[128];
        snprintf(what, sizeof what, "its %s never came through the out-of-band service",
                 l->ops->blob_name);
        loom_link_fail(tx, r, LOOM_ERROR_TIMEOUT, "did not connect within %.0f s (%s)", limit,
                       lp->state == LOOM_LINK_S_WAIT_BLOB ? what
                       : tx->params.rank < r              ? "it did not answer the control hello"
                                                          : "no control hello came from it");
    }
    return next_ms;
}

void loom_link_shutdown(struct loom_tx *tx, loom_result_t res)
{
    struct loom_link *l = loom_link_of(tx);
    if (!l->peers || l->shut)
        return;
    if (res >= 0)
        res = LOOM_ERROR_ABORTED;
    l->shut = 1;
    /* tell the live peers first, so that ranks not waiting on the cause
     * learn of it now and can name it */
    struct loom_link_notice n = loom_link_notice_of(tx, res);
    struct loom_link_frame f;
    loom_link_notice_encode(&n, &f);
    for (int r = 0; r < tx->params.nranks; r++) {
        struct loom_link_peer *lp = loom_link_peer(tx, r);
        if (r == tx->params.rank || lp->failed || lp->bye || lp->ctl != LOOM_LINK_CS_UP)
            continue;
        /* a peer still in an earlier call keeps the sends this rank has
         * received (their acknowledgement may not have reached it) */
        if (l->ops->received)
            loom_link_send(tx, r, LOOM_LINK_GOT, 0, l->ops->received(tx, r), 0, 0);
        loom_link_send(tx, r, f.type, f.flags, f.w0, f.w1, f.w2);
        /* half-close: the notice is followed by an end of stream */
        shutdown(lp->ctl_fd, SHUT_WR);
    }
    /* an orderly end of this rank's links, not a link failure */
    for (int r = 0; r < tx->params.nranks; r++) {
        struct loom_link_peer *lp = loom_link_peer(tx, r);
        if (r == tx->params.rank || lp->failed)
            continue;
        l->ops->lost(tx, r, res);
        lp->failed = res;
        lp->state = LOOM_LINK_S_FAILED;
        free(lp->failmsg);
        char d[256], msg[LOOM_TX_ERRLEN];
        snprintf(msg, sizeof msg, "%s is unreachable: the transport was shut down (%s)",
                 loom_link_describe(tx, r, d, sizeof d), loom_result_string(res));
        lp->failmsg = strdup(msg);
    }
}

void loom_link_goodbye(struct loom_tx *tx)
{
    struct loom_link *l = loom_link_of(tx);
    if (!l->peers)
        return;
    for (int r = 0; r < tx->params.nranks; r++) {
        struct loom_link_peer *lp = loom_link_peer(tx, r);
        if (r != tx->params.rank && !lp->failed && lp->ctl == LOOM_LINK_CS_UP)
            loom_link_send(tx, r, LOOM_LINK_BYE, 0, l->ops->received ? l->ops->received(tx, r) : 0,
                           0, 0);
    }
}
