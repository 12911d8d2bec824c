/* probe_pair.c - sockets, the reachability sweep and one pair's test for
 * `loom-ranktable probe`.
 *
 * The sweep: every rank connects to every other rank's endpoint at once
 * (a window of them at a time), so each direction of each pair is tried on
 * the job's ports; a connection proves reachability and is closed.
 *
 * A pair: the lower rank connects (bounded by the timeout) and says hello;
 * then each side in turn is active (pings for latency, sends for bandwidth)
 * while the other is passive (echoes, receives and acknowledges). Every
 * transfer fails after `timeout` seconds without progress. */
#include "build_config.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "base/util.h"
#include "bootstrap/boot_io.h"
#include "probe_internal.h"

/* -------------------------------------------------------------- sockets */

/* strerror, first letter lower case ("connection refused"), to read well
 * after a colon. */
static void errno_text(int e, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", strerror(e));
    out[0] = (char)tolower((unsigned char)out[0]);
}

int probe_reach_of_errno(int e)
{
    switch (e) {
    case 0: return PROBE_R_OK;
    case ECONNREFUSED: return PROBE_R_REFUSED;
    case ETIMEDOUT: return PROBE_R_TIMEOUT;
    case EHOSTUNREACH:
    case ENETUNREACH: return PROBE_R_NOROUTE;
    default: return PROBE_R_OTHER;
    }
}

/* A non-blocking connect to ss started: the fd (connect in progress or
 * done), or -1 with errno set. */
static int connect_start(const struct sockaddr_storage *ss, socklen_t sl)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc;
    do
        rc = connect(fd, (const struct sockaddr *)ss, sl);
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The outcome of a connect that poll says is done: 0 or the errno. */
static int connect_result(int fd)
{
    int e = 0;
    socklen_t elen = sizeof e;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0)
        e = errno;
    return e;
}

/* Connect to ss within timeout seconds. Returns the non-blocking fd, or -1
 * with the reason in err. */
int probe_connect(const struct sockaddr_storage *ss, socklen_t sl, double timeout,
                  char *err, size_t errlen, int *reach)
{
    int fd = connect_start(ss, sl);
    int e = fd < 0 ? errno : 0;
    if (fd >= 0) {
        int w = loom_boot_wait(fd, POLLOUT, loom_now() + timeout, -1);
        e = w == 0 ? ETIMEDOUT : w < 0 ? errno : connect_result(fd);
    }
    if (reach)
        *reach = probe_reach_of_errno(e);
    if (e == ETIMEDOUT)
        snprintf(err, errlen, "no answer within %g s (connect timed out)", timeout);
    else if (e)
        errno_text(e, err, errlen);
    if (e) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    loom_net_set_nodelay(fd);
    return fd;
}

void probe_put_hello(uint8_t *h, int kind, int rank, int round, uint64_t id)
{
    loom_put_le32(h, PROBE_MAGIC);
    loom_put_le32(h + 4, (uint32_t)kind);
    loom_put_le32(h + 8, (uint32_t)rank);
    loom_put_le32(h + 12, (uint32_t)round);
    loom_put_le64(h + 16, id);
}

/* Accept on the listener until a connection says hello as (kind, from,
 * round, id) of this job; anything else (a sweep connection, a stale pair
 * from an earlier round, a stranger) is closed. from < 0: any rank,
 * returned in *who. Returns the fd, or -1 at the deadline. */
int probe_accept(struct probe *p, int kind, int from, int round, uint64_t id,
                 double deadline, int *who)
{
    while (p->lfd >= 0) {
        int w = loom_boot_wait(p->lfd, POLLIN, deadline, -1);
        if (w <= 0)
            return -1;
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        uint8_t h[PROBE_HELLO_LEN];
        int eof;
        double hd = loom_now() + p->o.timeout;
        if (loom_boot_read_all(fd, h, sizeof h, hd < deadline ? hd : deadline,
                               -1, &eof) == LOOM_SUCCESS &&
            loom_get_le32(h) == PROBE_MAGIC &&
            loom_get_le32(h + 4) == (uint32_t)kind &&
            loom_get_le32(h + 8) < (uint32_t)p->n &&
            (from < 0 || loom_get_le32(h + 8) == (uint32_t)from) &&
            loom_get_le32(h + 12) == (uint32_t)round &&
            loom_get_le64(h + 16) == id) {
            if (who)
                *who = (int)loom_get_le32(h + 8);
            loom_net_set_nodelay(fd);
            return fd;
        }
        close(fd);
    }
    return -1;
}

void probe_drain(struct probe *p)
{
    for (int i = 0; p->lfd >= 0 && i < 4 * p->n + 64; i++) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        close(fd);
    }
}

/* Connections the sweep keeps in flight at once: as many as the fd limit
 * allows (raised to its hard limit), at most 1024. */
static int sweep_window(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 64;
    if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    long w = (long)rl.rlim_cur - 64;
    return w < 8 ? 8 : w > 1024 ? 1024 : (int)w;
}

int probe_sweep(struct probe *p, char *err, size_t errlen)
{
    int window = sweep_window();
    struct pollfd *pf = calloc((size_t)window + 1, sizeof *pf);
    int *peer = calloc((size_t)window + 1, sizeof *peer);
    double *started = calloc((size_t)window + 1, sizeof *started);
    if (!pf || !peer || !started) {
        free(pf);
        free(peer);
        free(started);
        snprintf(err, errlen, "out of memory for the sweep");
        return -1;
    }
    memset(p->myreach, PROBE_R_UNKNOWN, (size_t)p->n);
    p->myreach[p->rank] = PROBE_R_OK;
    int next = 0, inflight = 0;
    for (;;) {
        /* fill the window; a connect that fails at once is resolved */
        while (inflight < window && next < p->n) {
            int r = next++;
            if (r == p->rank)
                continue;
            int fd = connect_start(&p->ep[r], p->ep_len[r]);
            if (fd < 0) {
                p->myreach[r] = (uint8_t)probe_reach_of_errno(errno);
                continue;
            }
            pf[inflight] = (struct pollfd){.fd = fd, .events = POLLOUT};
            peer[inflight] = r;
            started[inflight] = loom_now();
            inflight++;
        }
        if (inflight == 0 && next >= p->n)
            break;
        /* the listener too, so the others' connections do not pile up */
        pf[inflight] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        double now = loom_now(), first = now;
        for (int i = 0; i < inflight; i++)
            if (started[i] < first)
                first = started[i];
        double wait = first + p->o.timeout - now;
        int ms = wait <= 0 ? 0 : (int)(wait * 1000) + 1;
        if (poll(pf, (nfds_t)inflight + (p->lfd >= 0), ms) < 0 && errno != EINTR)
            break;
        if (p->lfd >= 0 && pf[inflight].revents)
            probe_drain(p);
        now = loom_now();
        for (int i = 0; i < inflight; i++) {
            int e = -1;
            if (pf[i].revents)
                e = connect_result(pf[i].fd);
            else if (now - started[i] >= p->o.timeout)
                e = ETIMEDOUT;
            if (e < 0)
                continue;
            p->myreach[peer[i]] = (uint8_t)probe_reach_of_errno(e);
            close(pf[i].fd);
            inflight--;
            pf[i] = pf[inflight];
            peer[i] = peer[inflight];
            started[i] = started[inflight];
            i--;
        }
    }
    for (int i = 0; i < inflight; i++)
        close(pf[i].fd);
    free(pf);
    free(peer);
    free(started);
    return 0;
}

/* "what: no progress for 5 s" and the like, for a failed transfer. */
static void io_error(const struct probe *p, loom_result_t res, int eof,
                     const char *what, char *err, size_t errlen)
{
    if (res == LOOM_ERROR_TIMEOUT)
        snprintf(err, errlen, "%s: no progress for %g s", what, p->o.timeout);
    else if (eof)
        snprintf(err, errlen, "%s: the peer closed the connection", what);
    else {
        char e[96];
        errno_text(errno, e, sizeof e);
        snprintf(err, errlen, "%s: %s", what, e);
    }
}

/* ---------------------------------------------------------- measurement */


#define IO(call, what)                                                   \
    do {                                                                 \
        int eof_ = 0;                                                    \
        loom_result_t r_ = (call);                                       \
        (void)eof_;                                                      \
        if (r_ != LOOM_SUCCESS) {                                        \
            io_error(p, r_, eof_, (what), l->err, sizeof l->err);        \
            return -1;                                                   \
        }                                                                \
    } while (0)
#define DL (loom_now() + p->o.timeout)
#define RD(buf, len, what) IO(loom_boot_read_all(fd, (buf), (len), DL, -1, &eof_), what)
#define WR(buf, len, what) IO(loom_boot_write_all(fd, (buf), (len), DL, -1), what)

/* The active side: ping for latency, then send for bandwidth. Fills l. */
static int probe_active(struct probe *p, int fd, struct probe_result *l)
{
    uint8_t ping[8] = {0}, ack[8];
    double rtt[PROBE_LAT_ITERS];
    for (int i = 0; i < PROBE_LAT_WARMUP + PROBE_LAT_ITERS; i++) {
        double t0 = loom_now();
        WR(ping, sizeof ping, "latency test");
        RD(ping, sizeof ping, "latency test");
        if (i >= PROBE_LAT_WARMUP)
            rtt[i - PROBE_LAT_WARMUP] = loom_now() - t0;
    }
    qsort(rtt, PROBE_LAT_ITERS, sizeof rtt[0], probe_cmp_double);
    l->lat_us = rtt[PROBE_LAT_ITERS / 2] / 2 * 1e6;

    /* One untimed message warms the path; then iters timed ones, ended by
     * the receiver's ack so the time covers delivery, not only buffering. */
    WR(p->buf, p->o.size, "bandwidth test");
    RD(ack, sizeof ack, "bandwidth test");
    double t0 = loom_now();
    for (uint32_t i = 0; i < p->o.iters; i++)
        WR(p->buf, p->o.size, "bandwidth test");
    RD(ack, sizeof ack, "bandwidth test");
    double secs = loom_now() - t0;
    l->bw_gbps = (double)p->o.size * p->o.iters / (secs > 0 ? secs : 1e-9) / 1e9;
    return 0;
}

/* The passive side: echo pings, receive and acknowledge. */
static int probe_passive(struct probe *p, int fd, struct probe_result *l)
{
    uint8_t ping[8], ack[8] = {0};
    for (int i = 0; i < PROBE_LAT_WARMUP + PROBE_LAT_ITERS; i++) {
        RD(ping, sizeof ping, "latency test");
        WR(ping, sizeof ping, "latency test");
    }
    for (uint32_t m = 0; m < 1 + p->o.iters; m++) {
        RD(p->buf, p->o.size, "bandwidth test");
        if (m == 0 || m == p->o.iters)
            WR(ack, sizeof ack, "bandwidth test");
    }
    return 0;
}

/* Test the pair (p->rank, peer) of this round; the result goes to p->mine. */
void probe_pair(struct probe *p, int round, int peer)
{
    struct probe_result *l = &p->mine;
    memset(l, 0, sizeof *l);
    int fd;
    if (p->rank < peer) {
        char e[PROBE_ERR_MAX - 32];
        fd = probe_connect(&p->ep[peer], p->ep_len[peer], p->o.timeout, e,
                           sizeof e, NULL);
        if (fd < 0) {
            snprintf(l->err, sizeof l->err, "connect: %s", e);
            return;
        }
        uint8_t h[PROBE_HELLO_LEN];
        probe_put_hello(h, PROBE_KIND_PAIR, p->rank, round, p->run_id);
        loom_result_t r = loom_boot_write_all(fd, h, sizeof h,
                                              loom_now() + p->o.timeout, -1);
        if (r != LOOM_SUCCESS) {
            io_error(p, r, 0, "hello", l->err, sizeof l->err);
            close(fd);
            return;
        }
    } else {
        /* The connector may take the whole timeout; give it a second more. */
        fd = probe_accept(p, PROBE_KIND_PAIR, peer, round, p->run_id,
                          loom_now() + p->o.timeout + 1.0, NULL);
        if (fd < 0) {
            snprintf(l->err, sizeof l->err, "%s",
                     p->lfd < 0 ? "not listening (LOOM_TEST_PROBE_REFUSE)"
                                : "no connection arrived from the peer");
            return;
        }
    }
    int rc = p->rank < peer
                 ? (probe_active(p, fd, l) < 0 ? -1 : probe_passive(p, fd, l))
                 : (probe_passive(p, fd, l) < 0 ? -1 : probe_active(p, fd, l));
    l->ok = rc == 0;
    close(fd);
}

