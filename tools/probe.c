/* probe.c - `loom-ranktable probe [FILE]` (see probe.h, docs/probe.md).
 *
 * Steps, every one bounded in time:
 *  1. Load and validate the table; open a TCP listener on this rank's table
 *     address (ephemeral port).
 *  2. Rendezvous (loom_bootstrap_exchange) at rank 0's table endpoint with the
 *     table hash: every rank learns every listener; a different table is named.
 *  3. Ranks 1..n-1 open a control connection to rank 0's listener.
 *  4. Rounds (circle method): rank 0 sends GO r on every control connection;
 *     each rank tests its partner of round r (the lower rank connects, with a
 *     timeout) and answers DONE with its measurement; rank 0 waits for all
 *     DONEs before the next GO, so a dead pair delays the others by at most
 *     the timeout.
 *  5. Rank 0 prints the report, then sends END with the exit status, which
 *     every rank exits with.
 *
 * Wire (little-endian, fixed sizes):
 *   hello (on a new connection to a listener, 24 bytes): magic "LPRB" u32 |
 *         kind u32 (1 control, 2 pair) | rank u32 | round u32 | comm_id u64
 *   GO/END (rank 0 -> rank, 32 bytes): type u32 (1 GO, 2 END) | round u32 |
 *         size u64 | iters u32 | timeout_ms u32 | exit status u32 | 0 u32
 *   DONE (rank -> rank 0, 32 + PROBE_ERR_MAX bytes): type u32 (3) | round
 *         u32 | peer u32 | ok u32 | latency ns u64 | bandwidth bytes/s u64 |
 *         error text, NUL padded
 * Every field read is checked (magic, kind, rank range, round) before use. */
#include "build_config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "util.h"
#include "config.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/boot_io.h"
#include "transport/net.h"
#include "probe.h"

#define EXIT_UNREACHABLE 1
#define EXIT_USAGE 2

#define PROBE_MAGIC 0x4252504cu  /* "LPRB" */
#define PROBE_HELLO_LEN 24
#define PROBE_GO_LEN 32
#define PROBE_DONE_HDR 32
#define PROBE_ERR_MAX 160
#define PROBE_DONE_LEN (PROBE_DONE_HDR + PROBE_ERR_MAX)
#define PROBE_KIND_CONTROL 1
#define PROBE_KIND_PAIR 2
#define PROBE_MSG_GO 1
#define PROBE_MSG_END 2
#define PROBE_MSG_DONE 3
#define PROBE_LAT_WARMUP 20
#define PROBE_LAT_ITERS 200
#define PROBE_MAX_SIZE (1ull << 30)
#define PROBE_MAX_ITERS 100000
#define PROBE_MAX_RANKS 4096
#define PROBE_EP_LEN LOOM_NET_WIRE_ADDR_LEN

struct probe_opts {
    const char *file;
    int rank;
    int json;
    double timeout;        /* seconds: connect, and each transfer's stall */
    uint64_t size;         /* bandwidth message bytes                     */
    uint32_t iters;        /* bandwidth messages per direction            */
};

/* What one rank measured towards one peer. */
struct probe_link {
    int tested;
    int ok;
    double lat_us;         /* half round trip, median                     */
    double bw_gbps;        /* this rank -> peer                           */
    char err[PROBE_ERR_MAX];
};

struct probe {
    struct probe_opts o;
    loom_ranktable_t *table;
    int n, rank, nservers;
    uint64_t hash, comm_id;
    int lfd;                              /* pair listener; -1 closed    */
    struct sockaddr_storage *ep;          /* every rank's listener       */
    socklen_t *ep_len;
    char (*ep_str)[LOOM_NET_ADDRSTR_MAX];
    int *ctl;         /* rank 0: control fd of each rank; others: ctl[0] */
    struct probe_link *links;             /* rank 0: n x n, row = measurer */
    struct probe_link mine;               /* this round's measurement    */
    char describe_buf[256];
    uint8_t *buf;                         /* bandwidth payload (size)    */
};

static void probe_test_refuse(struct probe *p);

/* ------------------------------------------------------------- schedule */

int loom_probe_nrounds(int n)
{
    return n < 2 ? 0 : n + (n & 1) - 1;
}

int loom_probe_peer(int n, int round, int rank)
{
    if (n < 2 || round < 0 || round >= loom_probe_nrounds(n) || rank < 0 ||
        rank >= n)
        return -1;
    int m = n + (n & 1);    /* odd n: a phantom rank m-1; its partner idles */
    int peer;
    if (rank == m - 1)
        peer = round;
    else if (rank == round)
        peer = m - 1;
    else
        peer = ((2 * round - rank) % (m - 1) + (m - 1)) % (m - 1);
    return peer < n ? peer : -1;
}

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
static int probe_connect(const struct sockaddr_storage *ss, socklen_t sl,
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

static void put_hello(uint8_t *h, int kind, int rank, int round, uint64_t id)
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
static int probe_accept(struct probe *p, int kind, int from, int round,
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

/* "what: timed out after 5 s" and the like, for a failed transfer. */
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

static int cmp_double(const void *a, const void *b)
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
    qsort(rtt, PROBE_LAT_ITERS, sizeof rtt[0], cmp_double);
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
static void probe_pair(struct probe *p, int round, int peer)
{
    struct probe_link *l = &p->mine;
    memset(l, 0, sizeof *l);
    l->tested = 1;
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
        put_hello(h, PROBE_KIND_PAIR, p->rank, round, p->comm_id);
        int eof_ = 0;
        loom_result_t r = loom_boot_write_all(fd, h, sizeof h, DL, -1);
        if (r != LOOM_SUCCESS) {
            io_error(p, r, eof_, "hello", l->err, sizeof l->err);
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

/* -------------------------------------------------------------- control */

static void put_go(uint8_t *g, int type, int round, const struct probe_opts *o,
                   int status)
{
    memset(g, 0, PROBE_GO_LEN);
    loom_put_le32(g, (uint32_t)type);
    loom_put_le32(g + 4, (uint32_t)round);
    loom_put_le64(g + 8, o->size);
    loom_put_le32(g + 16, o->iters);
    loom_put_le32(g + 20, (uint32_t)(o->timeout * 1000.0));
    loom_put_le32(g + 24, (uint32_t)status);
}

static void put_done(uint8_t *d, int round, int peer, const struct probe_link *l)
{
    memset(d, 0, PROBE_DONE_LEN);
    loom_put_le32(d, PROBE_MSG_DONE);
    loom_put_le32(d + 4, (uint32_t)round);
    loom_put_le32(d + 8, (uint32_t)peer);
    loom_put_le32(d + 12, (uint32_t)l->ok);
    loom_put_le64(d + 16, (uint64_t)(l->lat_us * 1e3));
    loom_put_le64(d + 24, (uint64_t)(l->bw_gbps * 1e9));
    memcpy(d + PROBE_DONE_HDR, l->err, strnlen(l->err, PROBE_ERR_MAX - 1));
}

/* How long a rank may take to report a round (or rank 0 to start the next)
 * before it is declared lost: a pair's worst case is a connect timeout plus
 * a stalled transfer, so this is ample. */
static double probe_stall(const struct probe *p)
{
    return 4 * p->o.timeout + 60.0;
}

/* Rank 0: read one DONE for round from rank r into links[r][peer]. */
static int root_read_done(struct probe *p, int r, int round, char *err,
                          size_t errlen)
{
    uint8_t d[PROBE_DONE_LEN];
    int eof = 0;
    loom_result_t res = loom_boot_read_all(p->ctl[r], d, sizeof d,
                                           loom_now() + probe_stall(p), -1, &eof);
    if (res != LOOM_SUCCESS) {
        snprintf(err, errlen, "rank %d (%s) stopped answering rank 0 in round "
                 "%d: %s", r, p->ep_str[r], round,
                 res == LOOM_ERROR_TIMEOUT ? "timed out"
                 : eof ? "connection closed" : strerror(errno));
        return -1;
    }
    uint32_t peer = loom_get_le32(d + 8);
    if (loom_get_le32(d) != PROBE_MSG_DONE || loom_get_le32(d + 4) != (uint32_t)round ||
        peer != (uint32_t)loom_probe_peer(p->n, round, r)) {
        snprintf(err, errlen, "rank %d sent a malformed report for round %d", r,
                 round);
        return -1;
    }
    struct probe_link *l = &p->links[(size_t)r * p->n + peer];
    l->tested = 1;
    l->ok = loom_get_le32(d + 12) != 0;
    l->lat_us = (double)loom_get_le64(d + 16) / 1e3;
    l->bw_gbps = (double)loom_get_le64(d + 24) / 1e9;
    memcpy(l->err, d + PROBE_DONE_HDR, PROBE_ERR_MAX);
    l->err[PROBE_ERR_MAX - 1] = '\0';
    return 0;
}

static void root_end(struct probe *p, int status)
{
    uint8_t g[PROBE_GO_LEN];
    put_go(g, PROBE_MSG_END, 0, &p->o, status);
    for (int r = 1; r < p->n; r++)
        if (p->ctl[r] >= 0)
            (void)loom_boot_write_all(p->ctl[r], g, sizeof g, loom_now() + 1.0, -1);
}

/* Rank 0's side of steps 3 and 4. */
static int root_run(struct probe *p, char *err, size_t errlen)
{
    double deadline = loom_now() + 2 * p->o.timeout + 10.0;
    for (int got = 1; got < p->n; got++) {
        int who = -1;
        int fd = probe_accept(p, PROBE_KIND_CONTROL, -1, 0, deadline, &who);
        if (fd < 0) {
            size_t off = (size_t)snprintf(err, errlen, "no control connection "
                                          "reached rank 0 from");
            for (int r = 1; r < p->n && off < errlen; r++)
                if (p->ctl[r] < 0)
                    off += (size_t)snprintf(err + off, errlen - off, " rank %d",
                                            r);
            return -1;
        }
        if (p->ctl[who] >= 0) {
            close(fd);
            got--;
            continue;
        }
        p->ctl[who] = fd;
    }
    return 0;
}

static int root_rounds(struct probe *p, char *err, size_t errlen)
{
    uint8_t g[PROBE_GO_LEN];
    for (int k = 0; k < loom_probe_nrounds(p->n); k++) {
        put_go(g, PROBE_MSG_GO, k, &p->o, 0);
        for (int r = 1; r < p->n; r++)
            if (loom_boot_write_all(p->ctl[r], g, sizeof g,
                                    loom_now() + p->o.timeout, -1) != LOOM_SUCCESS) {
                snprintf(err, errlen, "rank 0 lost its control connection to "
                         "rank %d (%s)", r, p->ep_str[r]);
                return -1;
            }
        int peer = loom_probe_peer(p->n, k, 0);
        if (peer >= 0) {
            probe_pair(p, k, peer);
            p->links[peer] = p->mine;
        }
        for (int r = 1; r < p->n; r++)
            if (loom_probe_peer(p->n, k, r) >= 0 &&
                root_read_done(p, r, k, err, errlen) < 0)
                return -1;
    }
    return 0;
}

/* Ranks 1..n-1: steps 3 to 5. Returns the exit status rank 0 sent. */
static int rank_run(struct probe *p, char *err, size_t errlen)
{
    char e[PROBE_ERR_MAX];
    p->ctl[0] = probe_connect(&p->ep[0], p->ep_len[0], p->o.timeout, e, sizeof e);
    if (p->ctl[0] < 0) {
        snprintf(err, errlen, "control connection to rank 0 (%s): %s",
                 p->ep_str[0], e);
        return -1;
    }
    uint8_t h[PROBE_HELLO_LEN], g[PROBE_GO_LEN], d[PROBE_DONE_LEN];
    /* Before the hello: rank 0 starts round 0 once every hello is in. */
    probe_test_refuse(p);
    put_hello(h, PROBE_KIND_CONTROL, p->rank, 0, p->comm_id);
    if (loom_boot_write_all(p->ctl[0], h, sizeof h, loom_now() + p->o.timeout,
                            -1) != LOOM_SUCCESS) {
        snprintf(err, errlen, "control connection to rank 0 (%s): %s",
                 p->ep_str[0], strerror(errno));
        return -1;
    }
    for (;;) {
        int eof = 0;
        loom_result_t res = loom_boot_read_all(p->ctl[0], g, sizeof g,
                                               loom_now() + probe_stall(p), -1,
                                               &eof);
        if (res != LOOM_SUCCESS) {
            snprintf(err, errlen, "lost rank 0 (%s): %s", p->ep_str[0],
                     res == LOOM_ERROR_TIMEOUT ? "timed out"
                     : eof ? "connection closed" : strerror(errno));
            return -1;
        }
        uint32_t type = loom_get_le32(g), round = loom_get_le32(g + 4);
        if (type == PROBE_MSG_END)
            return loom_get_le32(g + 24) == 0 ? 0 : EXIT_UNREACHABLE;
        /* Rank 0's size, iters and timeout apply to every pair. */
        uint64_t size = loom_get_le64(g + 8);
        uint32_t iters = loom_get_le32(g + 16), tmo = loom_get_le32(g + 20);
        if (type != PROBE_MSG_GO || round >= (uint32_t)loom_probe_nrounds(p->n) ||
            size < 1 || size > PROBE_MAX_SIZE || iters < 1 ||
            iters > PROBE_MAX_ITERS || tmo < 1) {
            snprintf(err, errlen, "malformed message from rank 0");
            return -1;
        }
        if (size != p->o.size) {
            uint8_t *b = realloc(p->buf, size);
            if (!b) {
                snprintf(err, errlen, "out of memory (%llu bytes)",
                         (unsigned long long)size);
                return -1;
            }
            p->buf = b;
        }
        p->o.size = size;
        p->o.iters = iters;
        p->o.timeout = tmo / 1000.0;
        int peer = loom_probe_peer(p->n, (int)round, p->rank);
        if (peer < 0)
            continue;
        probe_pair(p, (int)round, peer);
        put_done(d, (int)round, peer, &p->mine);
        if (loom_boot_write_all(p->ctl[0], d, sizeof d, loom_now() + p->o.timeout,
                                -1) != LOOM_SUCCESS) {
            snprintf(err, errlen, "lost rank 0 (%s): %s", p->ep_str[0],
                     strerror(errno));
            return -1;
        }
    }
}

/* --------------------------------------------------------------- report */

static int pair_ok(const struct probe *p, int a, int b)
{
    return p->links[(size_t)a * p->n + b].ok && p->links[(size_t)b * p->n + a].ok;
}

/* Why a pair failed: the connecting (lower) rank's reason when it has one. */
static const char *pair_error(const struct probe *p, int a, int b)
{
    const struct probe_link *ab = &p->links[(size_t)a * p->n + b];
    const struct probe_link *ba = &p->links[(size_t)b * p->n + a];
    if (!ab->ok && ab->err[0])
        return ab->err;
    if (!ba->ok && ba->err[0])
        return ba->err;
    return "not tested";
}

/* A link's bandwidth is its slower direction. */
static double link_bw(const struct probe *p, int a, int b)
{
    double x = p->links[(size_t)a * p->n + b].bw_gbps;
    double y = p->links[(size_t)b * p->n + a].bw_gbps;
    return x < y ? x : y;
}

/* Median over reachable links; 0 when there are none. */
static double median_bw(const struct probe *p)
{
    size_t cnt = 0, cap = (size_t)p->n * (size_t)p->n / 2 + 1;
    double *v = malloc(cap * sizeof *v);
    if (!v)
        return 0;
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (pair_ok(p, a, b))
                v[cnt++] = link_bw(p, a, b);
    double m = 0;
    if (cnt) {
        qsort(v, cnt, sizeof *v, cmp_double);
        m = cnt % 2 ? v[cnt / 2] : (v[cnt / 2 - 1] + v[cnt / 2]) / 2;
    }
    free(v);
    return m;
}

static void print_matrix(const struct probe *p, const char *title, int bw)
{
    printf("\n%s\n%6s", title, "");
    for (int j = 0; j < p->n; j++)
        printf(" %8d", j);
    printf("\n");
    for (int r = 0; r < p->n; r++) {
        printf("%6d", r);
        for (int j = 0; j < p->n; j++) {
            const struct probe_link *l = &p->links[(size_t)r * p->n + j];
            if (r == j)
                printf(" %8s", "-");
            else if (!pair_ok(p, r, j))
                printf(" %8s", "X");
            else
                printf(bw ? " %8.2f" : " %8.1f", bw ? l->bw_gbps : l->lat_us);
        }
        printf("\n");
    }
}

static int report_text(const struct probe *p)
{
    int bad = 0, slow = 0, pairs = p->n * (p->n - 1) / 2;
    double med = median_bw(p);
    printf("probe of %s\n", p->o.file);
    printf("ranks: %d, servers: %d, table hash: 0x%016llx\n", p->n, p->nservers,
           (unsigned long long)p->hash);
    printf("pairs: %d in %d rounds; bandwidth %llu bytes x %u each way; "
           "connect timeout %g s\n", pairs, loom_probe_nrounds(p->n),
           (unsigned long long)p->o.size, p->o.iters, p->o.timeout);
    print_matrix(p, "latency (us, half round trip, median of 200; row pings "
                    "column):", 0);
    print_matrix(p, "bandwidth (GB/s, row sends to column):", 1);
    printf("\n");
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (!pair_ok(p, a, b)) {
                printf("unreachable: rank %d (%s) -> rank %d (%s): %s\n", a,
                       p->ep_str[a], b, p->ep_str[b], pair_error(p, a, b));
                bad++;
            }
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (pair_ok(p, a, b) && link_bw(p, a, b) < med / 2) {
                printf("slow link: rank %d <-> rank %d: %.2f GB/s (median "
                       "%.2f)\n", a, b, link_bw(p, a, b), med);
                slow++;
            }
    if (bad)
        printf("result: %d of %d pairs unreachable\n", bad, pairs);
    else
        printf("result: all %d pairs reachable%s\n", pairs,
               slow ? " (some links slow)" : "");
    return bad ? EXIT_UNREACHABLE : 0;
}

/* Three decimals are all a measurement here is worth. */
static double round3(double x)
{
    return round(x * 1000.0) / 1000.0;
}

static cJSON *json_matrix(const struct probe *p, int bw)
{
    cJSON *m = cJSON_CreateArray();
    for (int r = 0; m && r < p->n; r++) {
        cJSON *row = cJSON_CreateArray();
        if (!row || !cJSON_AddItemToArray(m, row))
            return m;
        for (int j = 0; j < p->n; j++) {
            const struct probe_link *l = &p->links[(size_t)r * p->n + j];
            cJSON_AddItemToArray(row, r != j && pair_ok(p, r, j)
                                          ? cJSON_CreateNumber(round3(
                                                bw ? l->bw_gbps : l->lat_us))
                                          : cJSON_CreateNull());
        }
    }
    return m;
}

static int report_json(const struct probe *p)
{
    int bad = 0;
    double med = median_bw(p);
    char hash[32];
    snprintf(hash, sizeof hash, "0x%016llx", (unsigned long long)p->hash);
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        fprintf(stderr, "loom-ranktable probe: out of memory\n");
        return EXIT_UNREACHABLE;
    }
    cJSON_AddStringToObject(root, "file", p->o.file);
    cJSON_AddNumberToObject(root, "ranks", p->n);
    cJSON_AddNumberToObject(root, "servers", p->nservers);
    cJSON_AddStringToObject(root, "table_hash", hash);
    cJSON_AddNumberToObject(root, "size", (double)p->o.size);
    cJSON_AddNumberToObject(root, "iters", p->o.iters);
    cJSON *eps = cJSON_AddArrayToObject(root, "endpoints");
    for (int r = 0; eps && r < p->n; r++)
        cJSON_AddItemToArray(eps, cJSON_CreateString(p->ep_str[r]));
    cJSON_AddItemToObject(root, "latency_us", json_matrix(p, 0));
    cJSON_AddItemToObject(root, "bandwidth_gbps", json_matrix(p, 1));
    cJSON *un = cJSON_AddArrayToObject(root, "unreachable");
    cJSON *slow = cJSON_AddArrayToObject(root, "slow");
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++) {
            cJSON *o = cJSON_CreateObject();
            if (!o)
                continue;
            cJSON_AddNumberToObject(o, "from", a);
            cJSON_AddStringToObject(o, "from_endpoint", p->ep_str[a]);
            cJSON_AddNumberToObject(o, "to", b);
            cJSON_AddStringToObject(o, "to_endpoint", p->ep_str[b]);
            if (!pair_ok(p, a, b)) {
                cJSON_AddStringToObject(o, "error", pair_error(p, a, b));
                cJSON_AddItemToArray(un, o);
                bad++;
            } else if (link_bw(p, a, b) < med / 2) {
                cJSON_AddNumberToObject(o, "gbps", round3(link_bw(p, a, b)));
                cJSON_AddNumberToObject(o, "median_gbps", round3(med));
                cJSON_AddItemToArray(slow, o);
            } else {
                cJSON_Delete(o);
            }
        }
    cJSON_AddBoolToObject(root, "ok", bad == 0);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "loom-ranktable probe: out of memory\n");
        return EXIT_UNREACHABLE;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return bad ? EXIT_UNREACHABLE : 0;
}

/* ---------------------------------------------------------------- setup */

static const char probe_usage[] =
    "usage: loom-ranktable probe [FILE] [--rank N] [--json] [--timeout S]\n"
    "                            [--size BYTES] [--iters N]\n"
    "Run one per rank. FILE defaults to LOOM_RANK_TABLE, then RANK_TABLE_FILE;\n"
    "the rank to --rank, then LOOM_RANK, RANK_ID, RANK, OMPI_COMM_WORLD_RANK,\n"
    "PMI_RANK, SLURM_PROCID. --timeout: per-pair connect timeout (default 5 s);\n"
    "--size: bandwidth message size, K/M/G suffixes (default 4M); --iters:\n"
    "bandwidth messages each way (default 10). Rank 0 prints the report.\n"
    "Exit status: 0 all pairs reachable, 1 unreachable pair or failure,\n"
    "2 bad command line.\n";

static int probe_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "loom-ranktable probe: %s%s%s%s\n\n%s", what,
            arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "", probe_usage);
    return EXIT_USAGE;
}

/* "4M", "65536", "1G": bytes in 1..PROBE_MAX_SIZE, or 0. */
static uint64_t parse_size(const char *s)
{
    size_t v = 0;
    if (loom_parse_size(s, &v) < 0 || v < 1 || v > PROBE_MAX_SIZE)
        return 0;
    return v;
}

/* A decimal in lo..hi, else -1. */
static int parse_count(const char *s, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return s[0] && !*end && !errno && v >= lo && v <= hi ? (int)v : -1;
}

static int probe_parse(int argc, char **argv, struct probe_opts *o)
{
    static const struct option opts[] = {
        {"rank", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct probe_opts){.rank = -1, .timeout = 5.0, .size = 4u << 20,
                             .iters = 10};
    const char *rank_arg = NULL;
    int c;
    char *end;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            rank_arg = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 't':
            o->timeout = strtod(optarg, &end);
            if (end == optarg || *end || !(o->timeout >= 0.01) ||
                o->timeout > 3600)
                return probe_usage_error("--timeout needs seconds in 0.01..3600, "
                                         "not", optarg);
            break;
        case 's':
            o->size = parse_size(optarg);
            if (!o->size)
                return probe_usage_error("--size needs bytes in 1..1G (K/M/G "
                                         "suffixes), not", optarg);
            break;
        case 'i': {
            int v = parse_count(optarg, 1, PROBE_MAX_ITERS);
            if (v < 0)
                return probe_usage_error("--iters needs a count in 1..100000, not",
                                         optarg);
            o->iters = (uint32_t)v;
            break;
        }
        case 'h':
            fputs(probe_usage, stdout);
            return -1;
        default:
            return probe_usage_error("unknown option or missing value",
                                     argv[optind - 1]);
        }
    }
    if (optind < argc - 1)
        return probe_usage_error("give at most one FILE; extra argument",
                                 argv[optind + 1]);
    o->file = optind < argc ? argv[optind] : getenv("LOOM_RANK_TABLE");
    if (!o->file || !o->file[0])
        o->file = getenv("RANK_TABLE_FILE");
    if (!o->file || !o->file[0])
        return probe_usage_error("no rank table: give FILE or set "
                                 "LOOM_RANK_TABLE or RANK_TABLE_FILE", NULL);
    static const char *const rank_vars[] = {"LOOM_RANK", "RANK_ID", "RANK",
                                            "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "SLURM_PROCID"};
    for (size_t i = 0; !rank_arg && i < sizeof rank_vars / sizeof *rank_vars; i++)
        rank_arg = getenv(rank_vars[i]);
    if (!rank_arg)
        return probe_usage_error("no rank: give --rank N or run under a launcher "
                                 "(LOOM_RANK, RANK_ID, RANK, OMPI_COMM_WORLD_RANK, "
                                 "PMI_RANK, SLURM_PROCID)", NULL);
    o->rank = parse_count(rank_arg, 0, PROBE_MAX_RANKS - 1);
    if (o->rank < 0)
        return probe_usage_error("the rank must be a number in 0..4095, not", rank_arg);
    return 0;
}

/* Load and validate; print every error as `check` does. */
static int probe_load(struct probe *p)
{
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_ranktable_load(p->o.file, &p->table, &diag);
    if (res != LOOM_SUCCESS) {
        size_t n = 0;
        loom_diag_count(diag, &n);
        fprintf(stderr, "loom-ranktable probe: %s: %s\n", p->o.file,
                res == LOOM_ERROR_INVALID_RANKTABLE ? "INVALID rank table"
                                                    : loom_result_string(res));
        for (size_t i = 0; i < n; i++) {
            loom_diag_severity_t sev;
            const char *path, *msg;
            loom_diag_get(diag, i, &sev, &path, &msg);
            if (sev == LOOM_DIAG_ERROR)
                fprintf(stderr, "error: %s%s%s\n", path, path[0] ? ": " : "", msg);
        }
        loom_diag_free(diag);
        return EXIT_UNREACHABLE;
    }
    loom_diag_free(diag);
    loom_ranktable_nranks(p->table, &p->n);
    loom_ranktable_nservers(p->table, &p->nservers);
    loom_ranktable_hash(p->table, &p->hash);
    if (p->o.rank >= p->n) {
        fprintf(stderr, "loom-ranktable probe: rank %d does not exist: %s has "
                "%d rank%s (0..%d)\n", p->o.rank, p->o.file, p->n,
                p->n == 1 ? "" : "s", p->n - 1);
        return EXIT_USAGE;
    }
    return 0;
}

/* A listener on this rank's table address, any port; its wire address goes
 * into ep (PROBE_EP_LEN bytes). */
static int probe_listen(struct probe *p, uint8_t *ep, char *err, size_t errlen)
{
    loom_rank_info_t ri;
    struct sockaddr_storage ss;
    socklen_t sl;
    char e[256];
    loom_ranktable_rank_info(p->table, p->rank, &ri);
    if (loom_net_resolve(ri.address, 0, &ss, &sl, e, sizeof e) < 0) {
        snprintf(err, errlen, "cannot use this rank's address: %s", e);
        return -1;
    }
    p->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&ss, sl) < 0 ||
        listen(p->lfd, p->n + 16) < 0 ||
        getsockname(p->lfd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errlen, "cannot listen on %s (this rank's table address): "
                 "%s", ri.address, strerror(errno));
        return -1;
    }
    loom_net_to_wire((struct sockaddr *)&ss, ep);
    return 0;
}

static const char *probe_describe(void *ctx, int rank)
{
    struct probe *p = ctx;
    loom_rank_info_t ri;
    if (loom_ranktable_rank_info(p->table, rank, &ri) != LOOM_SUCCESS)
        return NULL;
    snprintf(p->describe_buf, sizeof p->describe_buf, "rank %d (server %s, "
             "%s:%d)", rank, ri.server_id, ri.address, ri.port);
    return p->describe_buf;
}

/* Step 2: learn every rank's listener through rank 0's table endpoint. */
static int probe_bootstrap(struct probe *p, const uint8_t *my_ep, char *err,
                           size_t errlen)
{
    uint8_t *all = calloc((size_t)p->n, PROBE_EP_LEN);
    if (!all) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    loom_rank_info_t r0;
    loom_ranktable_rank_info(p->table, 0, &r0);
    struct loom_boot_params bp = {
        .struct_size = sizeof bp,
        .rank = p->rank,
        .nranks = p->n,
        .root_host = r0.address,
        .root_port = r0.port,
        .table_hash = p->hash,
        .timeout = loom_config()->bootstrap_timeout,
        .wake_fd = -1,
        .describe = probe_describe,
        .describe_ctx = p,
    };
    char e[1024] = "";
    int rc = 0;
    if (p->n == 1)
        memcpy(all, my_ep, PROBE_EP_LEN);
    else if (loom_bootstrap_exchange(&bp, my_ep, PROBE_EP_LEN, all, PROBE_EP_LEN,
                                     &p->comm_id, e, sizeof e) != LOOM_SUCCESS) {
        /* e names rank 0's endpoint, or the rank whose table differs. */
        snprintf(err, errlen, "%s%s", strncmp(e, "bootstrap", 9) ? "bootstrap: "
                                                                 : "", e);
        rc = -1;
    }
    for (int r = 0; rc == 0 && r < p->n; r++) {
        if (loom_net_from_wire(all + (size_t)r * PROBE_EP_LEN, &p->ep[r],
                               &p->ep_len[r]) < 0) {
            snprintf(err, errlen, "rank %d sent a malformed endpoint", r);
            rc = -1;
            break;
        }
        loom_net_format((struct sockaddr *)&p->ep[r], p->ep_str[r],
                        sizeof p->ep_str[r]);
    }
    free(all);
    return rc;
}

static int probe_alloc(struct probe *p)
{
    size_t n = (size_t)p->n;
    p->ep = calloc(n, sizeof *p->ep);
    p->ep_len = calloc(n, sizeof *p->ep_len);
    p->ep_str = calloc(n, sizeof *p->ep_str);
    p->ctl = malloc(n * sizeof *p->ctl);
    p->links = calloc(p->rank == 0 ? n * n : 1, sizeof *p->links);
    p->buf = calloc(1, p->o.size);
    if (!p->ep || !p->ep_len || !p->ep_str || !p->ctl || !p->links || !p->buf)
        return -1;
    for (size_t r = 0; r < n; r++)
        p->ctl[r] = -1;
    return 0;
}

static void probe_free(struct probe *p)
{
    for (int r = 0; p->ctl && r < p->n; r++)
        if (p->ctl[r] >= 0)
            close(p->ctl[r]);
    if (p->lfd >= 0)
        close(p->lfd);
    free(p->ep);
    free(p->ep_len);
    free(p->ep_str);
    free(p->ctl);
    free(p->links);
    free(p->buf);
    loom_ranktable_free(p->table);
}

/* For tests: LOOM_TEST_PROBE_REFUSE=R makes rank R close its listener once
 * the bootstrap is done (rank 0: once the control connections are in), so
 * every pair with R is refused. */
static void probe_test_refuse(struct probe *p)
{
    const char *s = getenv("LOOM_TEST_PROBE_REFUSE");
    if (s && parse_count(s, 0, PROBE_MAX_RANKS - 1) == p->rank && p->lfd >= 0) {
        close(p->lfd);
        p->lfd = -1;
    }
}

int loom_probe_main(int argc, char **argv)
{
    struct probe p = {.lfd = -1};
    int status = probe_parse(argc, argv, &p.o);
    if (status)
        return status < 0 ? 0 : status;
    p.rank = p.o.rank;
    status = probe_load(&p);
    if (status)
        goto out;
    status = EXIT_UNREACHABLE;
    char err[1200] = "";
    uint8_t my_ep[PROBE_EP_LEN];
    if (probe_alloc(&p) < 0) {
        snprintf(err, sizeof err, "out of memory for %d ranks", p.n);
        goto fail;
    }
    if (probe_listen(&p, my_ep, err, sizeof err) < 0 ||
        probe_bootstrap(&p, my_ep, err, sizeof err) < 0)
        goto fail;
    if (p.rank != 0) {
        int rc = rank_run(&p, err, sizeof err);
        if (rc < 0)
            goto fail;
        status = rc;
        goto out;
    }
    if (root_run(&p, err, sizeof err) < 0)
        goto fail;
    probe_test_refuse(&p);
    if (root_rounds(&p, err, sizeof err) < 0) {
        root_end(&p, EXIT_UNREACHABLE);
        goto fail;
    }
    status = p.o.json ? report_json(&p) : report_text(&p);
    fflush(stdout);
    root_end(&p, status);
    goto out;
fail:
    fprintf(stderr, "loom-ranktable probe: rank %d: %s\n", p.rank, err);
out:
    probe_free(&p);
    return status;
}
