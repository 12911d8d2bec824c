/* oob_out.c - sockets this rank opens to its peers' OOB ports: connect with
 * backoff, the handshake, messages out in order, idle close, and giving up
 * on a peer with an error naming it (oob_priv.h). */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "bootstrap/oob_priv.h"

static struct oob_conn *out_conn(struct oob_job *j, int peer)
{
    if (!j->outs[peer]) {
        struct oob_conn *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->fd = -1;
        c->peer = peer;
        c->state = OUT_IDLE;
        j->outs[peer] = c;
    }
    return j->outs[peer];
}

loom_result_t loom_oob_enqueue(struct oob_job *j, int peer, struct oob_msg *m)
{
    struct oob_conn *c = out_conn(j, peer);
    if (!c) {
        free(m);
        return LOOM_ERROR_NO_MEMORY;
    }
    if (c->qtail)
        c->qtail->next = m;
    else
        c->q = m;
    c->qtail = m;
    if (c->state == OUT_IDLE) {
        c->state = OUT_WAIT;
        c->next_try = loom_now();
        c->first_try = c->next_try;
        c->backoff = OOB_BACKOFF_MIN;
    }
    loom_oob_kick(j);
    return LOOM_SUCCESS;
}
static void out_reset(struct oob_conn *c, int err, double now)
{
    if (c->state == OUT_READY)
        c->first_try = now; /* a working link broke: a fresh allowance */
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    loom_hs_free(&c->hs);
    c->last_errno = err;
    c->state = c->q ? OUT_WAIT : OUT_IDLE;
    c->next_try = now + c->backoff;
    c->backoff = c->backoff * 2 > OOB_BACKOFF_MAX ? OOB_BACKOFF_MAX : c->backoff * 2;
}

/* Record that job rank peer cannot be reached (lock held). */
static void set_peer_error(struct oob_job *j, int peer, loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_peer_error(struct oob_job *j, int peer, loom_result_t res, const char *fmt, ...)
{
    if (j->peer_err[peer] < 0)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    j->peer_err[peer] = res;
    free(j->peer_msg[peer]);
    j->peer_msg[peer] = strdup(msg);
    LOOM_INFO(LOOM_SUB_BOOT, "oob: rank %d: %s", j->rank, msg);
    loom_oob_notify_all(j);
}

static void out_drop_queue(struct oob_conn *c)
{
    while (c->q) {
        struct oob_msg *m = c->q;
        c->q = m->next;
        free(m);
    }
    c->qtail = NULL;
}

static void out_give_up(struct oob_job *j, struct oob_conn *c, int refused)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char a[LOOM_NET_ADDRSTR_MAX] = "?";
    loom_oob_entry_addr(j, c->peer, &ss, &sl);
    if (sl)
        loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    if (refused)
        set_peer_error(j, c->peer, LOOM_ERROR_REMOTE,
                       "rank %d is gone: its port %s refused a connection (the process "
                       "exited or crashed)",
                       c->peer, a);
    else
        set_peer_error(j, c->peer, LOOM_ERROR_TIMEOUT,
                       "rank %d could not be reached at %s within %g s: %s", c->peer, a,
                       j->connect_timeout, c->last_errno ? strerror(c->last_errno) : "no answer");
    out_drop_queue(c);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    loom_hs_free(&c->hs);
    c->state = OUT_IDLE;
}

static void out_start(struct oob_job *j, struct oob_conn *c, double now)
{
    if (!j->have[c->peer] || j->job_id == 0) {
        c->next_try = now + 0.01; /* not yet known where it listens, or who we are */
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    loom_oob_entry_addr(j, c->peer, &ss, &sl);
    c->fd = sl ? socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
    if (c->fd < 0) {
        out_reset(c, sl ? errno : EINVAL, now);
        return;
    }
    loom_net_set_nodelay(c->fd);
    c->sent = c->got = 0;
    if (connect(c->fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS || errno == EINTR)
        c->state = OUT_CONNECTING;
    else
        out_reset(c, errno, now);
}

/* Bytes of the current outgoing message: header then data. */
static int out_write_msg(struct oob_job *j, struct oob_conn *c)
{
    while (c->q) {
        struct oob_msg *m = c->q;
        if (c->sent == 0) {
            struct loom_oob_hdr h = {
                .kind = m->kind, .tag = m->tag, .len = (uint32_t)m->len, .ns = m->ns};
            loom_oob_hdr_encode(&h, c->hdr);
        }
        struct iovec iov[2];
        int n = 0;
        if (c->sent < LOOM_OOB_HDR_LEN)
            iov[n++] = (struct iovec){c->hdr + c->sent, LOOM_OOB_HDR_LEN - c->sent};
        size_t doff = c->sent > LOOM_OOB_HDR_LEN ? c->sent - LOOM_OOB_HDR_LEN : 0;
        if (m->len > doff)
            iov[n++] = (struct iovec){m->data + doff, m->len - doff};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = n ? sendmsg(c->fd, &mh, MSG_NOSIGNAL) : 0;
        if (n && w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->sent += (size_t)w;
        j->sent += (uint64_t)w;
        if (c->sent < LOOM_OOB_HDR_LEN + m->len)
            return 0;
        c->q = m->next;
        if (!c->q)
            c->qtail = NULL;
        free(m);
        c->sent = 0;
        c->last_active = loom_now();
    }
    return 0;
}

/* The connection is up: the preamble, then the handshake with this rank's
 * hello. 0 on the way, -1 reset. */
static int out_begin(struct oob_job *j, struct oob_conn *c, double now)
{
    uint8_t pre[LOOM_OOB_PREAMBLE_LEN];
    struct loom_oob_pre p = {.kind = LOOM_OOB_MAGIC, .version = LOOM_OOB_VERSION};
    loom_oob_pre_encode(&p, pre);
    ssize_t n = LOOM_SYSCALL_RETRY(send(c->fd, pre, sizeof pre, MSG_NOSIGNAL));
    if (n != (ssize_t)sizeof pre) {
        out_reset(c, n < 0 ? errno : EIO, now);
        return -1;
    }
    j->sent += sizeof pre;
    struct loom_oob_hello h = {.job_id = j->job_id,
                               .from = (uint32_t)j->rank,
                               .to = (uint32_t)c->peer,
                               .nranks = (uint32_t)j->nranks};
    uint8_t hello[LOOM_OOB_HELLO_LEN];
    loom_oob_hello_encode(&h, hello);
    struct sockaddr_storage ss;
    socklen_t sl;
    char a[LOOM_NET_ADDRSTR_MAX] = "?", peer[LOOM_NET_ADDRSTR_MAX + 32];
    loom_oob_entry_addr(j, c->peer, &ss, &sl);
    if (sl)
        loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    snprintf(peer, sizeof peer, "rank %d (%s)", c->peer, a);
    double left = c->first_try + j->connect_timeout - now;
    if (loom_hs_connect(&c->hs, &loom_oob_hs, &j->key, c->fd, peer, hello, sizeof hello,
                        left > 0.1 ? left : 0.1) < 0) {
        out_reset(c, EIO, now);
        return -1;
    }
    c->state = OUT_HS;
    return 0;
}

void loom_oob_out_io(struct oob_job *j, struct oob_conn *c, short revents, double now)
{
    if (c->state == OUT_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        if (err) {
            out_reset(c, err, now);
            return;
        }
        if (out_begin(j, c, now) < 0)
            return;
    }
    if (c->state == OUT_HS) {
        int rc = loom_hs_step(&c->hs);
        if (rc == LOOM_HS_AGAIN)
            return;
        j->recvd += c->hs.received;
        j->sent += c->hs.sent;
        if (rc == LOOM_ERROR_REMOTE || rc == LOOM_ERROR_TIMEOUT || rc == LOOM_ERROR_SYSTEM) {
            /* its service may have dropped it (not knowing this job yet),
             * or the link broke: try again until the connect timeout */
            out_reset(c, rc == LOOM_ERROR_TIMEOUT ? ETIMEDOUT : ECONNRESET, now);
            return;
        }
        if (rc < 0) {
            set_peer_error(j, c->peer, rc, "%s", c->hs.err);
            out_give_up(j, c, 0);
            return;
        }
        loom_hs_free(&c->hs);
        c->state = OUT_READY;
        c->sent = 0;
        c->backoff = OOB_BACKOFF_MIN;
        c->last_active = now;
        revents = POLLOUT;
    }
    if (c->state == OUT_READY) {
        if (revents & (POLLHUP | POLLERR)) {
            out_reset(c, ECONNRESET, now);
            return;
        }
        if (out_write_msg(j, c) < 0)
            out_reset(c, errno, now);
    }
}

short loom_oob_out_events(const struct oob_conn *c, double *wake_at)
{
    switch (c->state) {
    case OUT_IDLE: return 0;
    case OUT_WAIT:
        if (c->next_try < *wake_at)
            *wake_at = c->next_try;
        return 0;
    case OUT_CONNECTING: return POLLOUT;
    case OUT_HS:
        if (c->hs.deadline < *wake_at)
            *wake_at = c->hs.deadline;
        return c->hs.events;
    default:
        if (!c->q && c->last_active + OOB_IDLE_CLOSE < *wake_at)
            *wake_at = c->last_active + OOB_IDLE_CLOSE;
        return c->q ? POLLOUT : POLLIN;
    }
}

void loom_oob_out_tick(struct oob_job *j, struct oob_conn *c, double now)
{
    if (c->state >= OUT_WAIT && c->state < OUT_READY) {
        if (j->job_id && now > c->first_try + j->connect_timeout) {
            out_give_up(j, c, 0);
            return;
        }
        /* once every rank listens, a refusal means the process is gone: no
         * point in retrying */
        if (c->state == OUT_WAIT && c->last_errno == ECONNREFUSED && j->complete) {
            out_give_up(j, c, 1);
            return;
        }
    }
    if (c->state == OUT_HS && now >= c->hs.deadline)
        loom_oob_out_io(j, c, 0, now); /* the handshake's timeout */
    else if (c->state == OUT_WAIT && now >= c->next_try)
        out_start(j, c, now);
    else if (c->state == OUT_READY && !c->q && now > c->last_active + OOB_IDLE_CLOSE) {
        close(c->fd);
        c->fd = -1;
        c->state = OUT_IDLE;
    }
}

void loom_oob_out_free(struct oob_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    loom_hs_free(&c->hs);
    out_drop_queue(c);
    free(c);
}
