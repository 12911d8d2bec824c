/* tcp_conn.c - the tcp transport's connections, made per socket on first use.
 *
 * A rank has no listener of its own: it connects to a peer's out-of-band
 * port (oob.h), and the preamble it sends there ("TTCP" and the
 * communicator's namespace) makes the peer's service hand the socket to the
 * peer's tcp instance. The higher rank of a pair always opens the sockets
 * between them; when the lower rank needs one first it asks the higher one
 * through the out-of-band service (a 4-byte message naming the socket), so
 * two ranks never open the same socket at once and nothing races.
 *
 * Each socket then runs the handshake of every Loom socket (net/handshake.h):
 * the connector's hello (tcp_frame.h) names the communicator, both ranks
 * and the socket index, signed with the job key; the acceptor (lower rank)
 * checks the key first, then the hello, and proves the key back. It drops
 * (and logs) any socket that is not for it, so strangers and stale jobs
 * cannot take a slot; a socket that says nothing is dropped at its deadline.
 * A socket not up within the connect timeout fails the peer, named. */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "auth.h"
#include "bootstrap/oob.h"
#include "transport/tcp/tcp_priv.h"

#define TCP_BACKOFF_MIN 0.01
#define TCP_BACKOFF_MAX 0.5
#define TCP_MAX_PENDING_ACCEPTS 256
#define TCP_IN_DEADLINE 10.0
#define TCP_OOB_ASK (LOOM_OOB_TAG_TCP + 1) /* "connect socket s to me" */
#define TCP_PING_EVERY 1.0                 /* seconds between liveness checks of an asked peer */

const char *loom_tcp_describe(struct loom_tx *tx, int rank, char *buf, size_t len)
{
    const char *d = NULL;
    if (tx->params.describe)
        d = tx->params.describe(tx->params.describe_ctx, rank);
    struct tcp_priv *tp = tx->priv;
    struct sockaddr_storage ss;
    socklen_t sl;
    char a[LOOM_NET_ADDRSTR_MAX];
    if (d) {
        snprintf(buf, len, "%s", d);
    } else if (tp && tp->oob && loom_oob_addr(tp->oob, rank, &ss, &sl) == LOOM_SUCCESS) {
        loom_net_format((struct sockaddr *)&ss, a, sizeof a);
        snprintf(buf, len, "rank %d (%s)", rank, a);
    } else {
        snprintf(buf, len, "rank %d", rank);
    }
    return buf;
}

static int retryable(int e)
{
    return e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH ||
           e == ECONNRESET || e == ECONNABORTED || e == EAGAIN || e == EPIPE;
}

static void pending_add(struct tcp_priv *tp, struct tcp_sock *sk)
{
    if (sk->connecting)
        return;
    if (tp->npending == tp->pending_cap) {
        int cap = tp->pending_cap ? 2 * tp->pending_cap : 16;
        struct tcp_sock **p = realloc(tp->pending, sizeof *p * (size_t)cap);
        if (!p)
            return; /* retried at the next want */
        tp->pending = p;
        tp->pending_cap = cap;
    }
    tp->pending[tp->npending++] = sk;
    sk->connecting = 1;
}

static void pending_del(struct tcp_priv *tp, struct tcp_sock *sk)
{
    for (int i = 0; i < tp->npending; i++)
        if (tp->pending[i] == sk) {
            tp->pending[i] = tp->pending[--tp->npending];
            break;
        }
    sk->connecting = 0;
}

static void watch(struct tcp_priv *tp, int fd, void *ptr, uint32_t events, int add)
{
    struct epoll_event ev = {.events = events, .data.ptr = ptr};
    epoll_ctl(tp->epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

/* A socket is up: tune it, watch it for its queues and hang-ups. */
static void sock_up(struct loom_tx *tx, struct tcp_sock *sk, int fd, int added)
{
    struct tcp_priv *tp = tx->priv;
    sk->fd = fd;
    sk->cstate = TCP_CS_UP;
    loom_net_set_nodelay(fd);
    /* A bounded send buffer (LOOM_SOCKET_SNDBUF, 512K: 1 MiB once Linux
     * doubles it) keeps a sender from running megabytes ahead of its reader
     * into freshly allocated, cache-cold socket pages; on loopback, 1 MiB
     * messages at 2 and 4 ranks ran 6-45% faster with 512K than autotuned.
     * Receive buffers stay autotuned. */
    loom_net_set_sndbuf(fd, tp->sndbuf);
    /* a lost host is noticed within about LOOM_TIMEOUT even between calls */
    loom_net_set_keepalive(fd, tx->params.timeout);
    sk->ep_mask = EPOLLIN | EPOLLRDHUP;
    watch(tp, fd, sk, sk->ep_mask, !added);
    struct tcp_peer *peer = &tp->peers[sk->peer];
    int first = 1;
    for (int s = 0; s < tp->nsocks; s++)
        if (&peer->socks[s] != sk && peer->socks[s].cstate == TCP_CS_UP)
            first = 0;
    if (first) {
        tp->peers_used++;
        LOOM_INFO(LOOM_SUB_NET, "tcp: rank %d connected to rank %d (%d peer(s) in use)",
                  tx->params.rank, sk->peer, tp->peers_used);
    }
}

/* ---- the connector (higher rank) ---------------------------------------- */

/* The handshake's socket: the handshake's epoll events. */
static uint32_t hs_epoll(const struct loom_hs *hs)
{
    return (hs->events & POLLIN ? EPOLLIN : 0) | (hs->events & POLLOUT ? EPOLLOUT : 0);
}

void loom_tcp_hs_close(struct tcp_sock *sk)
{
    if (sk->hs_fd >= 0)
        close(sk->hs_fd); /* also leaves the epoll set */
    sk->hs_fd = -1;
    if (sk->hs) {
        loom_hs_free(sk->hs);
        free(sk->hs);
        sk->hs = NULL;
    }
}

static void out_retry(struct loom_tx *tx, struct tcp_sock *sk, int err)
{
    loom_tcp_hs_close(sk);
    sk->last_errno = err;
    sk->cstate = TCP_CS_WAIT;
    double now = loom_now();
    sk->next_try = now + sk->backoff;
    sk->backoff = sk->backoff * 2 > TCP_BACKOFF_MAX ? TCP_BACKOFF_MAX : sk->backoff * 2;
}

static void out_start(struct loom_tx *tx, struct tcp_sock *sk)
{
    struct tcp_priv *tp = tx->priv;
    char err[300];
    int fd = -1;
    loom_result_t res = loom_oob_connect_fd(tp->oob, sk->peer, &fd, err, sizeof err);
    if (res < 0) {
        /* every rank listened before the transport opened: a refusal
         * means the process is gone */
        loom_tcp_fail_peer(tx, sk->peer, res == LOOM_ERROR_REMOTE ? res : LOOM_ERROR_SYSTEM,
                           res == LOOM_ERROR_REMOTE ? "is gone: %s (the process exited or "
                                                      "crashed)"
                                                    : "cannot be connected to: %s",
                           err);
        return;
    }
    sk->hs_fd = fd;
    sk->cstate = TCP_CS_CONNECTING;
    watch(tp, fd, sk, EPOLLOUT, 1);
}

/* The connector's side after an event. */
static void out_event(struct loom_tx *tx, struct tcp_sock *sk, uint32_t events)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    char why[700], d[256];
    if (sk->cstate == TCP_CS_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(sk->hs_fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        if (err == ECONNREFUSED) {
            loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_REMOTE,
                               "is gone: its port "
                               "refused the connection (the process exited or crashed)");
            return;
        }
        if (err) {
            if (retryable(err))
                out_retry(tx, sk, err);
            else
                loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_SYSTEM, "cannot be connected to: %s",
                                   strerror(err));
            return;
        }
        uint8_t pre[LOOM_OOB_PREAMBLE_LEN];
        loom_oob_preamble(tp->oob, LOOM_OOB_KIND_TCP, pre);
        if (LOOM_SYSCALL_RETRY(send(sk->hs_fd, pre, sizeof pre, MSG_NOSIGNAL)) !=
            (ssize_t)sizeof pre) {
            out_retry(tx, sk, errno);
            return;
        }
        struct loom_tcp_hello h = {.from = (uint32_t)p->rank,
                                   .to = (uint32_t)sk->peer,
                                   .comm_id = p->comm_id,
                                   .sock = (uint32_t)sk->index};
        uint8_t hello[LOOM_TCP_HELLO_LEN];
        loom_tcp_hello_encode(&h, hello);
        sk->hs = malloc(sizeof *sk->hs);
        loom_result_t res = sk->hs
                                ? loom_hs_connect(sk->hs, &loom_tcp_hs, tp->key, sk->hs_fd,
                                                  loom_tcp_describe(tx, sk->peer, d, sizeof d),
                                                  hello, sizeof hello,
                                                  sk->first_try + p->connect_timeout - loom_now())
                                : LOOM_ERROR_NO_MEMORY;
        if (res < 0) {
            loom_tcp_fail_peer(tx, sk->peer, res, "cannot be sent a signed hello: %s",
                               sk->hs ? loom_hs_why(sk->hs) : "out of memory");
            return;
        }
        sk->cstate = TCP_CS_HS;
    }
    int rc = loom_hs_step(sk->hs);
    if (rc == LOOM_HS_AGAIN) {
        watch(tp, sk->hs_fd, sk, hs_epoll(sk->hs), 0);
        return;
    }
    if (rc == LOOM_ERROR_REMOTE) {
        /* the peer's service may have dropped it (not yet knowing this
         * communicator): try again */
        out_retry(tx, sk, ECONNRESET);
        return;
    }
    if (rc < 0) {
        loom_tcp_fail_peer(tx, sk->peer, rc, "%s", loom_hs_blame(sk->hs, why, sizeof why));
        return;
    }
    pending_del(tp, sk);
    int fd = sk->hs_fd;
    sk->hs_fd = -1;
    loom_tcp_hs_close(sk);
    sock_up(tx, sk, fd, 1);
    LOOM_TRACE(LOOM_SUB_NET, "tcp: rank %d: socket %d to %s is up", p->rank, sk->index,
               loom_tcp_describe(tx, sk->peer, d, sizeof d));
    (void)events;
}

loom_result_t loom_tcp_want_sock(struct loom_tx *tx, int r, int s)
{
    struct tcp_priv *tp = tx->priv;
    struct tcp_sock *sk = &tp->peers[r].socks[s];
    if (sk->cstate != TCP_CS_NONE || tp->peers[r].failed)
        return LOOM_SUCCESS;
    sk->first_try = loom_now();
    sk->backoff = TCP_BACKOFF_MIN;
    if (tx->params.rank < r) {
        /* the higher rank opens it: ask */
        uint32_t idx = (uint32_t)s;
        uint8_t msg[4];
        msg[0] = (uint8_t)idx;
        msg[1] = (uint8_t)(idx >> 8);
        msg[2] = msg[3] = 0;
        loom_result_t res = loom_oob_send(tp->oob, r, TCP_OOB_ASK, msg, sizeof msg);
        if (res < 0) {
            snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: cannot ask rank %d to connect: %s", r,
                     loom_oob_error(tp->oob));
            return res;
        }
        sk->cstate = TCP_CS_ASKED;
        sk->next_try = sk->first_try + TCP_PING_EVERY;
        pending_add(tp, sk);
        return LOOM_SUCCESS;
    }
    sk->cstate = TCP_CS_WAIT;
    sk->next_try = sk->first_try;
    pending_add(tp, sk);
    out_start(tx, sk);
    return LOOM_SUCCESS;
}

/* ---- the acceptor (lower rank) ------------------------------------------- */

static void in_drop(struct tcp_priv *tp, struct tcp_in *in, int close_fd)
{
    struct tcp_in **pp = &tp->ins;
    while (*pp && *pp != in)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = in->next;
        tp->nins--;
    }
    if (close_fd && in->fd >= 0)
        close(in->fd);
    loom_hs_free(&in->hs);
    free(in);
}

static void in_event(struct loom_tx *tx, struct tcp_in *in);

/* The handshake's payload check: a hello for a free socket of this
 * communicator, from a higher rank. */
static int in_check(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen)
{
    struct tcp_in *in = arg;
    struct loom_tx *tx = in->tx;
    struct tcp_priv *tp = tx->priv;
    struct loom_tcp_hello_expect e = {.rank = tx->params.rank,
                                      .nranks = tx->params.nranks,
                                      .nsocks = tp->nsocks,
                                      .comm_id = tx->params.comm_id};
    int rc = loom_tcp_hello_check(&e, payload, len, &in->hello, why, whylen);
    if (rc == LOOM_HS_ACCEPT &&
        (tp->peers[in->hello.from].failed ||
         tp->peers[in->hello.from].socks[in->hello.sock].cstate == TCP_CS_UP)) {
        snprintf(why, whylen, "rank %u socket %u is already connected (or failed)", in->hello.from,
                 in->hello.sock);
        rc = LOOM_HS_DROP;
    }
    return rc;
}

const struct loom_hs_proto loom_tcp_hs = LOOM_HS_PROTO(
    "tcp", LOOM_TCP_HS_CTX, LOOM_TCP_CHAL_MAGIC, LOOM_TCP_HELLO_MAGIC, LOOM_TCP_PROOF_MAGIC,
    LOOM_TCP_HS_VERSION, LOOM_TCP_HELLO_LEN, in_check);

static void in_adopt(struct loom_tx *tx, int fd, const char *from)
{
    struct tcp_priv *tp = tx->priv;
    if (tp->nins >= TCP_MAX_PENDING_ACCEPTS) {
        struct tcp_in *old = tp->ins;
        while (old->next)
            old = old->next;
        LOOM_WARN(LOOM_SUB_NET,
                  "tcp: rank %d: too many silent connections; dropped "
                  "one from %s",
                  tx->params.rank, old->from);
        in_drop(tp, old, 1);
    }
    struct tcp_in *in = calloc(1, sizeof *in);
    if (!in) {
        close(fd);
        return;
    }
    in->evkind = TCP_EV_IN;
    in->fd = fd;
    in->tx = tx;
    snprintf(in->from, sizeof in->from, "%s", from);
    loom_net_set_nonblock(fd);
    if (loom_hs_accept(&in->hs, &loom_tcp_hs, tp->key, fd, from, in, TCP_IN_DEADLINE) < 0) {
        LOOM_WARN(LOOM_SUB_NET, "tcp: rank %d dropped a connection: %s", tx->params.rank,
                  in->hs.err);
        loom_hs_free(&in->hs);
        close(fd);
        free(in);
        return;
    }
    in->next = tp->ins;
    tp->ins = in;
    tp->nins++;
    watch(tp, fd, in, hs_epoll(&in->hs), 1);
    in_event(tx, in);
}

static void in_event(struct loom_tx *tx, struct tcp_in *in)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    int rc = loom_hs_step(&in->hs);
    if (rc == LOOM_HS_AGAIN) {
        watch(tp, in->fd, in, hs_epoll(&in->hs), 0);
        return;
    }
    if (rc < 0) {
        /* Closed before a byte: a peer that finished while its connection
         * (one opened ahead of use) was still being made, or a port probe;
         * harmless. Anything else is worth a warning. */
        if (rc == LOOM_ERROR_REMOTE && in->hs.received == 0)
            LOOM_INFO(LOOM_SUB_NET, "tcp: rank %d: %s", p->rank, in->hs.err);
        else
            LOOM_WARN(LOOM_SUB_NET, "tcp: rank %d dropped a connection: %s", p->rank, in->hs.err);
        in_drop(tp, in, 1);
        return;
    }
    struct tcp_sock *sk = &tp->peers[in->hello.from].socks[in->hello.sock];
    if (sk->connecting)
        pending_del(tp, sk);
    int fd = in->fd;
    in_drop(tp, in, 0);
    sock_up(tx, sk, fd, 1);
}

void loom_tcp_conn_event(struct loom_tx *tx, void *evptr, uint32_t events)
{
    int kind = *(int *)evptr;
    if (kind == TCP_EV_IN) {
        in_event(tx, evptr);
        return;
    }
    struct tcp_sock *sk = evptr;
    if (sk->cstate >= TCP_CS_CONNECTING && sk->cstate < TCP_CS_UP &&
        !((struct tcp_priv *)tx->priv)->peers[sk->peer].failed)
        out_event(tx, sk, events);
}

void loom_tcp_conn_poll(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    if (!tp->oob)
        return;
    int fd;
    char from[LOOM_NET_ADDRSTR_MAX];
    while (loom_oob_take_fd(tp->oob, LOOM_OOB_KIND_TCP, &fd, from, sizeof from))
        in_adopt(tx, fd, from);
    /* lower ranks asking this one to open a socket */
    for (;;) {
        int r = -1;
        void *buf = NULL;
        size_t len = 0;
        int got = loom_oob_poll(tp->oob, TCP_OOB_ASK, -1, &r, &buf, &len);
        if (got <= 0)
            break;
        int s = len >= 2 ? ((uint8_t *)buf)[0] | ((uint8_t *)buf)[1] << 8 : -1;
        free(buf);
        if (r < 0 || r >= p->rank || s < 0 || s >= tp->nsocks) {
            LOOM_WARN(LOOM_SUB_NET,
                      "tcp: rank %d ignored a request from rank %d for "
                      "socket %d",
                      p->rank, r, s);
            continue;
        }
        loom_tcp_want_sock(tx, r, s);
    }
    double now = loom_now();
    for (int i = 0; i < tp->npending;) {
        struct tcp_sock *sk = tp->pending[i];
        struct tcp_peer *peer = &tp->peers[sk->peer];
        if (peer->failed || sk->cstate == TCP_CS_UP) {
            pending_del(tp, sk);
            continue;
        }
        if (now > sk->first_try + p->connect_timeout) {
            char d[256];
            const char *state = sk->cstate == TCP_CS_ASKED ? "it never connected back"
                                : sk->last_errno           ? strerror(sk->last_errno)
                                                           : "no answer";
            pending_del(tp, sk);
            loom_tcp_fail_peer(tx, sk->peer, LOOM_ERROR_TIMEOUT,
                               "could not be connected within %g s (socket %d: %s)",
                               p->connect_timeout, sk->index, state);
            (void)d;
            continue;
        }
        if (sk->cstate == TCP_CS_WAIT && now >= sk->next_try)
            out_start(tx, sk);
        if (sk->cstate == TCP_CS_ASKED) {
            /* while the peer has not connected back, make sure it lives */
            char why[512];
            void *junk = NULL;
            while (loom_oob_poll(tp->oob, LOOM_OOB_TAG_PING, sk->peer, NULL, &junk, NULL) > 0)
                free(junk);
            loom_result_t pe = loom_oob_peer_error(tp->oob, sk->peer, why, sizeof why);
            if (pe < 0) {
                pending_del(tp, sk);
                loom_tcp_fail_peer(tx, sk->peer, pe, "was asked to connect, but %s", why);
                continue;
            }
            if (now >= sk->next_try) {
                loom_oob_lookup(tp->oob, sk->peer, LOOM_OOB_TAG_PING);
                sk->next_try = now + TCP_PING_EVERY;
            }
        }
        i++;
    }
    for (struct tcp_in *in = tp->ins, *next; in; in = next) {
        next = in->next;
        if (now > in->hs.deadline)
            in_event(tx, in); /* the handshake fails at its deadline */
    }
}

double loom_tcp_conn_next(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    double next = 0;
    for (int i = 0; i < tp->npending; i++) {
        struct tcp_sock *sk = tp->pending[i];
        double t = sk->cstate == TCP_CS_WAIT || sk->cstate == TCP_CS_ASKED
                       ? sk->next_try
                       : sk->first_try + tx->params.connect_timeout;
        if (next == 0 || t < next)
            next = t;
    }
    for (struct tcp_in *in = tp->ins; in; in = in->next)
        if (next == 0 || in->hs.deadline < next)
            next = in->hs.deadline;
    return next;
}

void loom_tcp_close_sockets(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    while (tp->ins)
        in_drop(tp, tp->ins, 1);
    tp->npending = 0;
    if (!tp->peers)
        return;
    for (int r = 0; r < tx->params.nranks; r++) {
        struct tcp_peer *peer = &tp->peers[r];
        if (!peer->socks)
            continue;
        for (int s = 0; s < tp->nsocks; s++) {
            if (peer->socks[s].fd >= 0)
                close(peer->socks[s].fd);
            loom_tcp_hs_close(&peer->socks[s]);
            peer->socks[s].fd = -1;
            peer->socks[s].connecting = 0;
            if (peer->socks[s].cstate != TCP_CS_NONE)
                peer->socks[s].cstate = TCP_CS_NONE;
        }
    }
}
