/* tcp_conn.c - the tcp transport's listener and full-mesh connection setup.
 *
 * Rank i connects nsocks sockets to every rank j < i and accepts nsocks from
 * every j > i. The acceptor opens each connection with a challenge; the
 * connector answers with a hello (tcp_frame.h) naming the communicator, both
 * ranks, the socket index and the acceptor's endpoint nonce, signed with the
 * job key (auth.h); the acceptor checks the key first, then the hello, and
 * proves the key back. It drops (and logs) any connection that is not for
 * it, so strangers and stale jobs cannot take a slot; a connection that says
 * nothing is dropped at the deadline with the rest. */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "transport/tcp_priv.h"
#include "auth.h"

#define TCP_BACKOFF_MIN 0.01
#define TCP_BACKOFF_MAX 0.5
#define TCP_MAX_PENDING_ACCEPTS 256

const char *loom_tcp_describe(struct loom_tx *tx, int rank, char *buf,
                              size_t len)
{
    struct tcp_priv *tp = tx->priv;
    const char *d = NULL;
    if (tx->params.describe)
        d = tx->params.describe(tx->params.describe_ctx, rank);
    if (d) {
        snprintf(buf, len, "%s", d);
    } else if (tp && tp->peers && rank >= 0 && rank < tx->params.nranks &&
               tp->peers[rank].addrlen) {
        char a[LOOM_NET_ADDRSTR_MAX];
        loom_net_format((const struct sockaddr *)&tp->peers[rank].addr, a,
                        sizeof a);
        snprintf(buf, len, "rank %d (%s)", rank, a);
    } else {
        snprintf(buf, len, "rank %d", rank);
    }
    return buf;
}

loom_result_t loom_tcp_init(struct loom_tx *tx, void *ep, size_t *ep_len)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    tp->listen_fd = -1;
    tp->epfd = -1;
    if (p->nranks < 1 || p->rank < 0 || p->rank >= p->nranks) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: rank %d is not in 0..%d", p->rank, p->nranks - 1);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (p->nsocks < 1 || p->nsocks > LOOM_TCP_MAX_SOCKS / 2) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: %d sockets per peer and direction is not in 1..%d",
                 p->nsocks, LOOM_TCP_MAX_SOCKS / 2);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    tp->nsocks = 2 * p->nsocks; /* params.nsocks lanes each way */
    if (loom_net_parse(p->local_addr, 0, &tp->self, &tp->selflen) != 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: local address \"%s\" is not a numeric IPv4/IPv6 address",
                 p->local_addr ? p->local_addr : "(null)");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (getrandom(&tp->nonce, sizeof tp->nonce, 0) != sizeof tp->nonce)
        tp->nonce = loom_now_ns() ^ ((uint64_t)getpid() << 32);

    loom_result_t res = LOOM_ERROR_SYSTEM;
    tp->peers = calloc((size_t)p->nranks, sizeof *tp->peers);
    if (!tp->peers) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: out of memory for %d peers",
                 p->nranks);
        return LOOM_ERROR_NO_MEMORY;
    }
    for (int r = 0; r < p->nranks; r++) {
        struct tcp_peer *peer = &tp->peers[r];
        if (r == p->rank)
            continue;
        peer->socks = calloc((size_t)tp->nsocks, sizeof *peer->socks);
        if (!peer->socks) {
            snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: out of memory");
            res = LOOM_ERROR_NO_MEMORY;
            goto fail_peers;
        }
        for (int s = 0; s < tp->nsocks; s++) {
            peer->socks[s].fd = -1;
            peer->socks[s].peer = r;
            peer->socks[s].index = s;
        }
    }

    char a[LOOM_NET_ADDRSTR_MAX];
    loom_net_format((struct sockaddr *)&tp->self, a, sizeof a);
    tp->listen_fd = socket(tp->self.ss_family,
                           SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (tp->listen_fd < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: socket() for %s: %s", a,
                 strerror(errno));
        goto fail_peers;
    }
    if (bind(tp->listen_fd, (struct sockaddr *)&tp->self, tp->selflen) < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: cannot bind to %s: %s", a,
                 strerror(errno));
        goto fail_listen;
    }
    int backlog = p->nranks * tp->nsocks + 64;
    if (listen(tp->listen_fd, backlog > 4096 ? 4096 : backlog) < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: listen on %s: %s", a,
                 strerror(errno));
        goto fail_listen;
    }
    tp->selflen = sizeof tp->self;
    if (getsockname(tp->listen_fd, (struct sockaddr *)&tp->self, &tp->selflen) <
        0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: getsockname: %s",
                 strerror(errno));
        goto fail_listen;
    }
    tp->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (tp->epfd < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: epoll_create1: %s",
                 strerror(errno));
        goto fail_listen;
    }
    if (p->wake_fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, p->wake_fd, &ev) < 0) {
            snprintf(tx->errmsg, sizeof tx->errmsg,
                     "tcp: cannot watch wake fd %d: %s", p->wake_fd,
                     strerror(errno));
            goto fail_epoll;
        }
    }

    uint8_t *e = ep;
    loom_net_to_wire((struct sockaddr *)&tp->self, e);
    loom_put_le64(e + LOOM_NET_WIRE_ADDR_LEN, tp->nonce);
    *ep_len = LOOM_TCP_EP_LEN;
    tp->peers[p->rank].addr = tp->self;
    tp->peers[p->rank].addrlen = tp->selflen;
    loom_net_format((struct sockaddr *)&tp->self, a, sizeof a);
    LOOM_INFO(LOOM_SUB_NET, "tcp: rank %d listening on %s, %d socket(s) per peer",
              p->rank, a, tp->nsocks);
    return LOOM_SUCCESS;

fail_epoll:
    close(tp->epfd);
    tp->epfd = -1;
fail_listen:
    close(tp->listen_fd);
    tp->listen_fd = -1;
fail_peers:
    for (int r = 0; r < p->nranks; r++)
        free(tp->peers[r].socks);
    free(tp->peers);
    tp->peers = NULL;
    return res;
}

/* States of an outgoing connection. */
enum {
    OUT_WAIT,       /* waiting to retry                     */
    OUT_CONNECTING, /* connect() in progress                */
    OUT_CHALLENGE,  /* reading the acceptor's challenge     */
    OUT_HELLO,      /* sending the signed hello             */
    OUT_PROOF,      /* reading the acceptor's key proof     */
    OUT_DONE
};

/* An outgoing connection being set up. */
struct tcp_out {
    int fd;
    int peer, sock;
    int state;
    double next_try;
    double backoff;
    int last_errno;
    size_t sent, got;
    uint8_t ca[LOOM_AUTH_CHAL_LEN], cc[LOOM_AUTH_CHAL_LEN];
    uint8_t in[LOOM_AUTH_MSG_LEN];              /* challenge, then proof */
    uint8_t hello[LOOM_TCP_SIGNED_HELLO_LEN];
};

/* An accepted connection whose hello has not fully arrived. */
struct tcp_in {
    int fd;
    size_t got;
    char from[LOOM_NET_ADDRSTR_MAX];
    uint8_t ca[LOOM_AUTH_CHAL_LEN];
    uint8_t hello[LOOM_TCP_SIGNED_HELLO_LEN];
};

static int retryable_connect_errno(int e)
{
    return e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH ||
           e == ENETUNREACH || e == ECONNRESET || e == ECONNABORTED ||
           e == EAGAIN;
}

static void out_fail_retry(struct tcp_out *o, int err, double now)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    o->state = OUT_WAIT;
    o->last_errno = err;
    o->next_try = now + o->backoff;
    o->backoff = o->backoff * 2 > TCP_BACKOFF_MAX ? TCP_BACKOFF_MAX
                                                  : o->backoff * 2;
}

/* Start (or finish) a connection; returns <0 on a hard error. */
static loom_result_t out_start(struct loom_tx *tx, struct tcp_out *o, double now)
{
    struct tcp_priv *tp = tx->priv;
    struct tcp_peer *peer = &tp->peers[o->peer];
    o->fd = socket(peer->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   0);
    if (o->fd < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: socket(): %s",
                 strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    o->sent = 0;
    o->got = 0;
    if (connect(o->fd, (struct sockaddr *)&peer->addr, peer->addrlen) == 0) {
        o->state = OUT_CHALLENGE;
    } else if (errno == EINPROGRESS || errno == EINTR) {
        o->state = OUT_CONNECTING;
    } else if (retryable_connect_errno(errno)) {
        out_fail_retry(o, errno, now);
    } else {
        char d[256];
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: cannot connect to %s: %s",
                 loom_tcp_describe(tx, o->peer, d, sizeof d), strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    return LOOM_SUCCESS;
}

static void out_send_hello(struct tcp_out *o, double now)
{
    ssize_t n = send(o->fd, o->hello + o->sent, sizeof o->hello - o->sent,
                     MSG_NOSIGNAL);
    if (n > 0) {
        o->sent += (size_t)n;
        if (o->sent == sizeof o->hello) {
            o->state = OUT_PROOF;
            o->got = 0;
        }
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        out_fail_retry(o, errno, now);
    }
}

/* Read the acceptor's challenge or proof. A link that closes is retried (the
 * acceptor may not be ready); a refused key or a bad proof is final. */
static loom_result_t out_recv(struct loom_tx *tx, struct tcp_out *o,
                              const struct loom_auth_key *key, double now)
{
    ssize_t n = recv(o->fd, o->in + o->got, sizeof o->in - o->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return LOOM_SUCCESS;
    if (n <= 0) {
        out_fail_retry(o, n == 0 ? ECONNRESET : errno, now);
        return LOOM_SUCCESS;
    }
    o->got += (size_t)n;
    if (o->got < sizeof o->in)
        return LOOM_SUCCESS;
    char why[300], d[256];
    if (o->state == OUT_CHALLENGE) {
        if (loom_tcp_chal_check(o->in, o->ca, why, sizeof why) != LOOM_TCP_HELLO_OK) {
            snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: %s %s",
                     loom_tcp_describe(tx, o->peer, d, sizeof d), why);
            return LOOM_ERROR_PROTOCOL;
        }
        if (loom_auth_challenge(o->cc) < 0 ||
            loom_tcp_hello_sign(key, o->ca, o->cc, o->hello,
                                o->hello + LOOM_TCP_HELLO_LEN) < 0) {
            snprintf(tx->errmsg, sizeof tx->errmsg,
                     "tcp: cannot sign the hello to %s",
                     loom_tcp_describe(tx, o->peer, d, sizeof d));
            return LOOM_ERROR_INTERNAL;
        }
        o->state = OUT_HELLO;
        o->sent = 0;
        out_send_hello(o, now);
        return LOOM_SUCCESS;
    }
    int rc = loom_tcp_proof_check(key, o->in, o->ca, o->cc, o->hello, why,
                                  sizeof why);
    if (rc != LOOM_TCP_HELLO_OK) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: %s %s",
                 loom_tcp_describe(tx, o->peer, d, sizeof d), why);
        return rc == LOOM_TCP_HELLO_BAD_KEY ? LOOM_ERROR_MISMATCH
                                            : LOOM_ERROR_PROTOCOL;
    }
    o->state = OUT_DONE;
    return LOOM_SUCCESS;
}

/* Best effort: a fresh socket takes 40 bytes at once, or the peer is gone. */
static int send_small(int fd, const uint8_t *buf, size_t len)
{
    ssize_t n = LOOM_SYSCALL_RETRY(send(fd, buf, len, MSG_NOSIGNAL));
    return n == (ssize_t)len ? 0 : -1;
}

/* Read the hello of an accepted connection. Returns 1 when it was taken
 * (its fd now belongs to a peer socket), -1 when dropped, 0 when waiting. */
static int in_read_hello(struct loom_tx *tx, struct tcp_in *in,
                         const struct loom_auth_key *key)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    ssize_t n = recv(in->fd, in->hello + in->got, sizeof in->hello - in->got, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        LOOM_WARN(LOOM_SUB_NET,
                  "tcp: rank %d: connection from %s closed before its hello: %s",
                  p->rank, in->from, n == 0 ? "end of stream" : strerror(errno));
        return -1;
    }
    if (n < 0)
        return 0;
    in->got += (size_t)n;
    if (in->got < sizeof in->hello)
        return 0;
    struct loom_tcp_hello_expect e = {
        .rank = p->rank, .nranks = p->nranks, .nsocks = tp->nsocks,
        .comm_id = p->comm_id, .nonce = tp->nonce, .key = key, .ca = in->ca};
    struct loom_tcp_hello h;
    char why[300];
    int rc = loom_tcp_hello_check(&e, in->hello, &h, why, sizeof why);
    if (rc == LOOM_TCP_HELLO_OK && tp->peers[h.from].socks[h.sock].fd >= 0) {
        snprintf(why, sizeof why, "rank %u socket %u is already connected",
                 h.from, h.sock);
        rc = LOOM_TCP_HELLO_DROP;
    }
    uint8_t proof[LOOM_AUTH_MSG_LEN];
    if (rc == LOOM_TCP_HELLO_BAD_KEY) {
        /* Say so, so a misconfigured rank fails at once with the reason. */
        if (loom_tcp_proof_make(key, 1, in->hello, in->ca, proof) == 0)
            send_small(in->fd, proof, sizeof proof);
        LOOM_WARN(LOOM_SUB_NET, "tcp: rank %d: connection from %s: %s (dropped)",
                  p->rank, in->from, why);
        return -1;
    }
    if (rc != LOOM_TCP_HELLO_OK) {
        LOOM_WARN(LOOM_SUB_NET, "tcp: rank %d dropped a connection from %s: %s",
                  p->rank, in->from, why);
        return -1;
    }
    if (loom_tcp_proof_make(key, 0, in->hello, in->ca, proof) < 0 ||
        send_small(in->fd, proof, sizeof proof) < 0) {
        LOOM_WARN(LOOM_SUB_NET, "tcp: rank %d dropped a connection from %s: could "
                  "not send the key proof", p->rank, in->from);
        return -1;
    }
    tp->peers[h.from].socks[h.sock].fd = in->fd;
    return 1;
}

static void accept_new(struct loom_tx *tx, struct tcp_in *ins, int *nin,
                       const struct loom_auth_key *key)
{
    struct tcp_priv *tp = tx->priv;
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(tp->listen_fd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (*nin >= TCP_MAX_PENDING_ACCEPTS) {
            /* Too many silent connections: drop the oldest. */
            LOOM_WARN(LOOM_SUB_NET, "tcp: dropping silent connection from %s",
                      ins[0].from);
            close(ins[0].fd);
            memmove(ins, ins + 1, sizeof *ins * (size_t)(*nin - 1));
            (*nin)--;
        }
        struct tcp_in *in = &ins[*nin];
        memset(in, 0, sizeof *in);
        in->fd = fd;
        loom_net_format((struct sockaddr *)&ss, in->from, sizeof in->from);
        uint8_t chal[LOOM_AUTH_MSG_LEN];
        if (loom_auth_challenge(in->ca) < 0) {
            close(fd);
            continue;
        }
        loom_auth_msg_encode(chal, LOOM_TCP_CHAL_MAGIC, LOOM_TCP_AUTH_VERSION,
                             key->set ? LOOM_AUTH_FLAG_KEYED : 0, in->ca);
        if (send_small(fd, chal, sizeof chal) < 0) {
            LOOM_WARN(LOOM_SUB_NET, "tcp: dropped a connection from %s: could not "
                      "send the challenge", in->from);
            close(fd);
            continue;
        }
        (*nin)++;
    }
}

/* The error sentence listing every socket not connected at the deadline. */
static void report_missing(struct loom_tx *tx, const struct tcp_out *outs,
                           int nout, double timeout)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    size_t off = (size_t)snprintf(tx->errmsg, sizeof tx->errmsg,
                                  "tcp: rank %d could not connect within %g s to ",
                                  p->rank, timeout);
    int listed = 0;
    for (int r = 0; r < p->nranks && off < sizeof tx->errmsg; r++) {
        if (r == p->rank)
            continue;
        int missing = 0, err = 0;
        for (int s = 0; s < tp->nsocks; s++) {
            if (tp->peers[r].socks[s].fd < 0)
                missing = 1;
        }
        for (int i = 0; i < nout; i++)
            if (outs[i].peer == r && outs[i].state != OUT_DONE) {
                missing = 1;
                if (outs[i].last_errno)
                    err = outs[i].last_errno;
            }
        if (!missing)
            continue;
        char d[256];
        loom_tcp_describe(tx, r, d, sizeof d);
        off += (size_t)snprintf(tx->errmsg + off, sizeof tx->errmsg - off,
                                "%s%s (%s)", listed ? ", " : "", d,
                                r < p->rank ? (err ? strerror(err) : "connecting")
                                            : "it never connected");
        listed++;
    }
}

loom_result_t loom_tcp_connect_all(struct loom_tx *tx, const void *eps,
                                   size_t ep_stride)
{
    struct tcp_priv *tp = tx->priv;
    const struct loom_tx_params *p = &tx->params;
    const int me = p->rank, ns = tp->nsocks;
    if (tp->connected || tp->listen_fd < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: connect_all called twice");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (!eps || ep_stride < LOOM_TCP_EP_LEN) {
        snprintf(tx->errmsg, sizeof tx->errmsg,
                 "tcp: endpoint stride %zu is below the %d bytes of a tcp endpoint",
                 ep_stride, LOOM_TCP_EP_LEN);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    for (int r = 0; r < p->nranks; r++) {
        if (r == me)
            continue;
        const uint8_t *e = (const uint8_t *)eps + (size_t)r * ep_stride;
        struct tcp_peer *peer = &tp->peers[r];
        if (loom_net_from_wire(e, &peer->addr, &peer->addrlen) != 0) {
            snprintf(tx->errmsg, sizeof tx->errmsg,
                     "tcp: rank %d's endpoint is not a tcp endpoint (family byte %u)",
                     r, e[0]);
            return LOOM_ERROR_PROTOCOL;
        }
        peer->nonce = loom_get_le64(e + LOOM_NET_WIRE_ADDR_LEN);
    }

    struct loom_auth_key key;
    char kerr[400] = "";
    loom_result_t kres = loom_auth_key_from_config(&key, kerr, sizeof kerr);
    if (kres < 0) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: rank %d: %s", me, kerr);
        return kres;
    }
    int nout = me * ns;
    int nin_expected = (p->nranks - 1 - me) * ns;
    struct tcp_out *outs = calloc((size_t)(nout ? nout : 1), sizeof *outs);
    struct tcp_in *ins = calloc(TCP_MAX_PENDING_ACCEPTS, sizeof *ins);
    struct pollfd *pfds = calloc((size_t)(nout + TCP_MAX_PENDING_ACCEPTS + 2),
                                 sizeof *pfds);
    loom_result_t res = LOOM_SUCCESS;
    int nin = 0, accepted = 0;
    for (int i = 0; outs && i < nout; i++)
        outs[i].fd = -1; /* nothing to close yet, whatever fails below */
    if (!outs || !ins || !pfds) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: out of memory connecting");
        res = LOOM_ERROR_NO_MEMORY;
        goto out;
    }
    double start = loom_now();
    double deadline = start + p->connect_timeout;
    for (int j = 0, k = 0; j < me; j++) {
        for (int s = 0; s < ns; s++, k++) {
            struct tcp_out *o = &outs[k];
            o->fd = -1;
            o->peer = j;
            o->sock = s;
            o->backoff = TCP_BACKOFF_MIN;
            o->next_try = start;
            struct loom_tcp_hello h = {
                .magic = LOOM_TCP_HELLO_MAGIC, .version = LOOM_TCP_VERSION,
                .sock = (uint16_t)s, .from = (uint32_t)me, .to = (uint32_t)j,
                .comm_id = p->comm_id, .nonce = tp->peers[j].nonce};
            loom_tcp_hello_encode(&h, o->hello);
        }
    }
    for (;;) {
        double now = loom_now();
        int outs_done = 0;
        for (int i = 0; i < nout; i++) {
            struct tcp_out *o = &outs[i];
            if (o->state == OUT_WAIT && now >= o->next_try)
                LOOM_CHECK_GOTO(out_start(tx, o, now), res, out);
            if (o->state == OUT_HELLO)
                out_send_hello(o, now);
            outs_done += o->state == OUT_DONE;
        }
        if (outs_done == nout && accepted == nin_expected)
            break;
        if (now >= deadline) {
            report_missing(tx, outs, nout, p->connect_timeout);
            res = LOOM_ERROR_TIMEOUT;
            goto out;
        }
        /* Wait for any socket event, a retry time, or the deadline. */
        double wake_at = deadline;
        int n = 0;
        pfds[n++] = (struct pollfd){.fd = tp->listen_fd, .events = POLLIN};
        pfds[n++] = (struct pollfd){.fd = p->wake_fd, .events = POLLIN};
        for (int i = 0; i < nout; i++) {
            struct tcp_out *o = &outs[i];
            if (o->state == OUT_WAIT && o->next_try < wake_at)
                wake_at = o->next_try;
            int reading = o->state == OUT_CHALLENGE || o->state == OUT_PROOF;
            int writing = o->state == OUT_CONNECTING || o->state == OUT_HELLO;
            pfds[n++] = (struct pollfd){.fd = reading || writing ? o->fd : -1,
                                        .events = reading ? POLLIN : POLLOUT};
        }
        for (int i = 0; i < nin; i++)
            pfds[n++] = (struct pollfd){.fd = ins[i].fd, .events = POLLIN};
        int ms = (int)((wake_at - now) * 1000.0) + 1;
        int rc = poll(pfds, (nfds_t)n, ms < 0 ? 0 : ms);
        if (rc < 0 && errno != EINTR) {
            snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: poll: %s",
                     strerror(errno));
            res = LOOM_ERROR_SYSTEM;
            goto out;
        }
        if (rc <= 0)
            continue;
        if (pfds[1].revents & POLLIN) {
            snprintf(tx->errmsg, sizeof tx->errmsg,
                     "tcp: rank %d: connection setup aborted", me);
            res = LOOM_ERROR_ABORTED;
            goto out;
        }
        now = loom_now();
        for (int i = 0; i < nout; i++) {
            struct tcp_out *o = &outs[i];
            if (!pfds[2 + i].revents)
                continue;
            if (o->state == OUT_CHALLENGE || o->state == OUT_PROOF) {
                LOOM_CHECK_GOTO(out_recv(tx, o, &key, now), res, out);
                continue;
            }
            if (o->state == OUT_HELLO) {
                out_send_hello(o, now);
                continue;
            }
            if (o->state != OUT_CONNECTING)
                continue;
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
                err = errno;
            if (err == 0) {
                o->state = OUT_CHALLENGE;
                o->got = 0;
            } else if (retryable_connect_errno(err)) {
                out_fail_retry(o, err, now);
            } else {
                char d[256];
                snprintf(tx->errmsg, sizeof tx->errmsg,
                         "tcp: cannot connect to %s: %s",
                         loom_tcp_describe(tx, o->peer, d, sizeof d),
                         strerror(err));
                res = LOOM_ERROR_SYSTEM;
                goto out;
            }
        }
        for (int i = 0; i < nin;) {
            int base = 2 + nout;
            int r = pfds[base + i].revents ? in_read_hello(tx, &ins[i], &key) : 0;
            if (r == 0) {
                i++;
                continue;
            }
            if (r < 0)
                close(ins[i].fd);
            else
                accepted++;
            /* Keep pfds aligned with ins while removing entry i. */
            memmove(&ins[i], &ins[i + 1], sizeof *ins * (size_t)(nin - i - 1));
            memmove(&pfds[base + i], &pfds[base + i + 1],
                    sizeof *pfds * (size_t)(nin - i - 1));
            nin--;
        }
        if (pfds[0].revents & POLLIN)
            accept_new(tx, ins, &nin, &key);
    }

    /* Everything connected: hand the outgoing fds to their peers, tune and
     * register every socket, and stop listening. */
    for (int i = 0; i < nout; i++) {
        tp->peers[outs[i].peer].socks[outs[i].sock].fd = outs[i].fd;
        outs[i].fd = -1;
    }
    for (int r = 0; r < p->nranks; r++) {
        if (r == me)
            continue;
        for (int s = 0; s < ns; s++) {
            struct tcp_sock *sk = &tp->peers[r].socks[s];
            loom_net_set_nodelay(sk->fd);
            /* A bounded send buffer (LOOM_SOCKET_SNDBUF, 512K: 1 MiB once
             * Linux doubles it) keeps a sender from running megabytes ahead
             * of its reader into freshly allocated, cache-cold socket pages.
             * Autotuned buffers grow to tcp_wmem's 4 MiB; on loopback, 1 MiB
             * messages at 2 and 4 ranks ran 6-45% faster with 512K than
             * autotuned, and 768K or more lost most of the gain. Receive
             * buffers stay autotuned. */
            loom_net_set_sndbuf(sk->fd, p->sndbuf);
            struct epoll_event ev = {.events = 0, .data.ptr = sk};
            if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, sk->fd, &ev) < 0) {
                snprintf(tx->errmsg, sizeof tx->errmsg, "tcp: epoll_ctl: %s",
                         strerror(errno));
                res = LOOM_ERROR_SYSTEM;
                goto out;
            }
        }
    }
    close(tp->listen_fd);
    tp->listen_fd = -1;
    tp->connected = 1;
    LOOM_INFO(LOOM_SUB_NET, "tcp: rank %d connected to %d peers in %.3f s",
              me, p->nranks - 1, loom_now() - start);

out:
    loom_auth_key_clear(&key);
    if (outs)
        for (int i = 0; i < nout; i++)
            if (outs[i].fd >= 0)
                close(outs[i].fd);
    if (ins)
        for (int i = 0; i < nin; i++)
            close(ins[i].fd);
    free(outs);
    free(ins);
    free(pfds);
    return res;
}

void loom_tcp_close_sockets(struct loom_tx *tx)
{
    struct tcp_priv *tp = tx->priv;
    if (tp->listen_fd >= 0)
        close(tp->listen_fd);
    tp->listen_fd = -1;
    if (!tp->peers)
        return;
    for (int r = 0; r < tx->params.nranks; r++) {
        struct tcp_peer *peer = &tp->peers[r];
        if (!peer->socks)
            continue;
        for (int s = 0; s < tp->nsocks; s++) {
            if (peer->socks[s].fd >= 0)
                close(peer->socks[s].fd);
            peer->socks[s].fd = -1;
        }
    }
}
