/* probe_pair.c - sockets and one pair's test for `loom-ranktable probe`.
 *
 * In a pair the lower rank connects (bounded by the timeout) and says hello;
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
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
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

/* Connect to ss within timeout seconds. Returns the non-blocking fd, or -1
 * with the reason in err. */
int probe_connect(const struct sockaddr_storage *ss, socklen_t sl,
                  double timeout, char *err, size_t errlen)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket(): %s", strerror(errno));
        return -1;
    }
    int rc;
    do
        rc = connect(fd, (const struct sockaddr *)ss, sl);
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS) {
        errno_text(errno, err, errlen);
        goto fail;
    }
    if (rc < 0) {
        int w = loom_boot_wait(fd, POLLOUT, loom_now() + timeout, -1);
        if (w == 0) {
            snprintf(err, errlen, "no answer within %g s (connect timed out)",
                     timeout);
            goto fail;
        }
        int e = 0;
        socklen_t elen = sizeof e;
        if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0)
            e = errno;
        if (e) {
            errno_text(e, err, errlen);
            goto fail;
        }
    }
    loom_net_set_nodelay(fd);
    return fd;
fail:
    close(fd);
    return -1;
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
 * round) of this job; anything else (a stale pair from an earlier round, a
 * stranger) is closed. from < 0: any rank, returned in *who. Returns the fd,
 * or -1 at the deadline. */
int probe_accept(struct probe *p, int kind, int from, int round,
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
            loom_get_le64(h + 16) == p->comm_id) {
            if (who)
                *who = (int)loom_get_le32(h + 8);
            loom_net_set_nodelay(fd);
            return fd;
        }
        close(fd);
    }
    return -1;
}

/* "what: no progress for 5 s" and the like, for a failed transfer. */
static void io_error(struct probe *p, loom_result_t res, int eof,
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

int probe_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

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
static int probe_active(struct probe *p, int fd, struct probe_link *l)
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
static int probe_passive(struct probe *p, int fd, struct probe_link *l)
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
    struct probe_link *l = &p->mine;
    memset(l, 0, sizeof *l);
    int fd;
    if (p->rank < peer) {
        char e[PROBE_ERR_MAX - 32];
        fd = probe_connect(&p->ep[peer], p->ep_len[peer], p->o.timeout, e,
                           sizeof e);
        if (fd < 0) {
            snprintf(l->err, sizeof l->err, "connect: %s", e);
            return;
        }
        uint8_t h[PROBE_HELLO_LEN];
        probe_put_hello(h, PROBE_KIND_PAIR, p->rank, round, p->comm_id);
        loom_result_t r = loom_boot_write_all(fd, h, sizeof h,
                                              loom_now() + p->o.timeout, -1);
        if (r != LOOM_SUCCESS) {
            io_error(p, r, 0, "hello", l->err, sizeof l->err);
            close(fd);
            return;
        }
    } else {
        /* The connector may take the whole timeout; give it a second more. */
        fd = probe_accept(p, PROBE_KIND_PAIR, peer, round,
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

