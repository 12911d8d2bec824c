/* probe_rounds.c - the control protocol of `loom-ranktable probe`.
 *
 * Join: ranks 1..n-1 connect to rank 0's table endpoint (retrying until
 * the join timeout: ranks start at different times) and say hello with
 * their table's hash. Rank 0 accepts until every rank has joined or the
 * join timeout ends, saying every few seconds who it still waits for; a
 * rank with a different table is refused by name and stops the probe.
 * Then rank 0 answers WELCOME (the run id, its size, iters and timeout) and
 * goes on with the ranks that joined: those that did not are reported.
 *
 * Sweep: rank 0 sends SWEEP; every rank connects to every other rank's
 * endpoint (probe_sweep) and answers REACH with what it reached.
 *
 * Rounds: for each round rank 0 sends GO (SKIP when the sweep found the
 * pair unreachable or a partner did not join); each rank tests its partner
 * and answers DONE; rank 0 waits for every DONE before the next GO, so the
 * rounds run in lock step and a failed pair holds the others up by at most
 * its timeout. END carries the exit status. A rank that stops answering is
 * reported after probe_stall(). */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "loom.h"
#include "base/util.h"
#include "bootstrap/boot_io.h"
#include "probe.h"
#include "probe_internal.h"

static void put_ctl(uint8_t *g, int type, int round, uint64_t size, const struct probe *p,
                    int status, uint32_t flags)
{
    memset(g, 0, PROBE_CTL_LEN);
    loom_put_le32(g, (uint32_t)type);
    loom_put_le32(g + 4, (uint32_t)round);
    loom_put_le64(g + 8, size);
    loom_put_le32(g + 16, p->o.iters);
    loom_put_le32(g + 20, (uint32_t)(p->o.timeout * 1000.0));
    loom_put_le32(g + 24, (uint32_t)status);
    loom_put_le32(g + 28, flags);
}

static void put_done(uint8_t *d, int round, int peer, const struct probe_result *l)
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

static const char *describe(struct probe *p, int r)
{
    snprintf(p->describe_buf, sizeof p->describe_buf, "rank %d (server %s, %s)", r,
             p->server_name[p->server_of[r]], p->ep_str[r]);
    return p->describe_buf;
}

/* ------------------------------------------------------------------ join */

/* Rank 0: one connection's hello on the listener, within deadline: the fd
 * and the hello, or -1. Connections that say nothing in time are closed. */
static int accept_hello(struct probe *p, double deadline, uint8_t *h)
{
    while (p->lfd >= 0) {
        int w = loom_boot_wait(p->lfd, POLLIN, deadline, -1);
        if (w <= 0)
            return -1;
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        int eof;
        double hd = loom_now() + p->o.timeout;
        if (loom_boot_read_all(fd, h, PROBE_HELLO_LEN, hd < deadline ? hd : deadline, -1,
                               &eof) == LOOM_SUCCESS &&
            loom_get_le32(h) == PROBE_MAGIC && loom_get_le32(h + 4) == PROBE_KIND_CONTROL)
            return fd;
        close(fd);
    }
    return -1;
}

static void refuse(const struct probe *p, int fd, const char *why)
{
    uint8_t m[PROBE_CTL_LEN + PROBE_WHY_MAX];
    memset(m, 0, sizeof m);
    put_ctl(m, PROBE_MSG_REFUSE, 0, 0, p, EXIT_UNREACHABLE, 0);
    memcpy(m + PROBE_CTL_LEN, why, strnlen(why, PROBE_WHY_MAX - 1));
    (void)loom_boot_write_all(fd, m, sizeof m, loom_now() + 1.0, -1);
}

/* "ranks 2-3 (server 10.0.0.2), 7 (server 10.0.0.4)": the ranks not
 * joined, by server. */
static void missing_list(const struct probe *p, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    int *ranks = malloc((size_t)p->n * sizeof *ranks);
    if (!ranks)
        return;
    for (int s = 0; s < p->nservers && off < len; s++) {
        int cnt = 0;
        for (int r = 1; r < p->n; r++)
            if (!p->joined[r] && p->server_of[r] == s)
                ranks[cnt++] = r;
        if (!cnt)
            continue;
        char list[256];
        off += (size_t)snprintf(buf + off, len - off, "%s%s %s (server %s)",
                                off ? ", " : "", cnt > 1 ? "ranks" : "rank",
                                probe_rank_list(ranks, cnt, list, sizeof list),
                                p->server_name[s]);
    }
    free(ranks);
}

int probe_root_join(struct probe *p, char *err, size_t errlen)
{
    double start = loom_now(), deadline = start + p->join_timeout;
    double next_note = start + 5.0;
    char mismatch[PROBE_WHY_MAX] = "";
    int got = 1;
    p->joined[0] = 1;
    if (getrandom(&p->run_id, sizeof p->run_id, 0) != sizeof p->run_id)
        p->run_id = loom_now_ns() ^ ((uint64_t)getpid() << 32);
    while (got < p->n) {
        double now = loom_now();
        if (now >= deadline)
            break;
        uint8_t h[PROBE_HELLO_LEN];
        int fd = accept_hello(p, next_note < deadline ? next_note : deadline, h);
        if (fd < 0) {
            if (loom_now() >= next_note && loom_now() < deadline) {
                char list[1024];
                missing_list(p, list, sizeof list);
                fprintf(stderr, "loom-ranktable probe: rank 0: waiting for %s to join "
                        "(%.0f s of %.0f s)\n", list, loom_now() - start, p->join_timeout);
                next_note = loom_now() + 10.0;
            }
            continue;
        }
        uint32_t who = loom_get_le32(h + 8);
        uint64_t hash = loom_get_le64(h + 16);
        char why[PROBE_WHY_MAX];
        if (who == 0 || who >= (uint32_t)p->n) {
            close(fd);
            continue;
        }
        if (hash != p->hash) {
            snprintf(why, sizeof why, "%s loaded a different rank table (hash "
                     "0x%016llx, rank 0 has 0x%016llx)", describe(p, (int)who),
                     (unsigned long long)hash, (unsigned long long)p->hash);
            if (!mismatch[0])
                memcpy(mismatch, why, sizeof why);
            refuse(p, fd, why);
            close(fd);
            continue;
        }
        if (p->joined[who]) {
            snprintf(why, sizeof why, "rank %u joined twice", who);
            refuse(p, fd, why);
            close(fd);
            continue;
        }
        p->ctl[who] = fd;
        p->joined[who] = 1;
        got++;
    }
    if (mismatch[0]) {
        char why[PROBE_WHY_MAX + 64];
        snprintf(why, sizeof why, "rank 0 stopped the probe: %s", mismatch);
        for (int r = 1; r < p->n; r++)
            if (p->ctl[r] >= 0)
                refuse(p, p->ctl[r], why);
        snprintf(err, errlen, "%s", mismatch);
        return -1;
    }
    uint8_t g[PROBE_CTL_LEN];
    put_ctl(g, PROBE_MSG_WELCOME, 0, p->run_id, p, 0, 0);
    for (int r = 1; r < p->n; r++) {
        if (p->ctl[r] < 0)
            continue;
        /* WELCOME carries the run id in size's place; the size follows in
         * SWEEP and GO */
        if (loom_boot_write_all(p->ctl[r], g, sizeof g, loom_now() + p->o.timeout, -1) !=
            LOOM_SUCCESS) {
            close(p->ctl[r]);
            p->ctl[r] = -1;
            p->joined[r] = 0;
        }
    }
    return 0;
}

/* -------------------------------------------------------------- rank 0 */

/* Rank 0: read rank r's REACH row into links[r][*]. */
static int root_read_reach(struct probe *p, int r, uint8_t *row, char *err, size_t errlen)
{
    uint8_t hdr[PROBE_REACH_HDR];
    int eof = 0;
    double dl = loom_now() + probe_stall(p);
    loom_result_t res = loom_boot_read_all(p->ctl[r], hdr, sizeof hdr, dl, -1, &eof);
    if (res == LOOM_SUCCESS && loom_get_le32(hdr) == PROBE_MSG_REACH)
        res = loom_boot_read_all(p->ctl[r], row, (size_t)p->n, dl, -1, &eof);
    else if (res == LOOM_SUCCESS)
        res = LOOM_ERROR_PROTOCOL;
    if (res != LOOM_SUCCESS) {
        snprintf(err, errlen, "%s stopped answering rank 0 in the sweep: %s",
                 describe(p, r), res == LOOM_ERROR_TIMEOUT ? "timed out"
                 : res == LOOM_ERROR_PROTOCOL ? "malformed message"
                 : eof ? "connection closed" : strerror(errno));
        return -1;
    }
    for (int j = 0; j < p->n; j++) {
        struct probe_link *l = PROBE_LINK(p, r, j);
        l->reach = row[j] < PROBE_R_COUNT ? row[j] : PROBE_R_OTHER;
        l->state = j == r ? PROBE_UNKNOWN
                   : l->reach == PROBE_R_OK ? PROBE_CONNECTED
                   : l->reach == PROBE_R_UNKNOWN ? PROBE_UNKNOWN : PROBE_FAILED;
    }
    return 0;
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
        snprintf(err, errlen, "%s stopped answering rank 0 in round %d: %s",
                 describe(p, r), round,
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
    struct probe_result m = {.ok = loom_get_le32(d + 12) != 0,
                             .lat_us = (double)loom_get_le64(d + 16) / 1e3,
                             .bw_gbps = (double)loom_get_le64(d + 24) / 1e9};
    memcpy(m.err, d + PROBE_DONE_HDR, PROBE_ERR_MAX);
    m.err[PROBE_ERR_MAX - 1] = '\0';
    struct probe_link *l = PROBE_LINK(p, r, (int)peer);
    l->lat_us = (float)m.lat_us;
    l->bw_gbps = (float)m.bw_gbps;
    l->state = m.ok ? PROBE_MEASURED : PROBE_FAILED;
    if (!m.ok)
        probe_add_err(p, r, (int)peer, m.err[0] ? m.err : "failed");
    return 0;
}

void probe_root_end(struct probe *p, int status)
{
    uint8_t g[PROBE_CTL_LEN];
    put_ctl(g, PROBE_MSG_END, 0, p->o.size, p, status, 0);
    for (int r = 1; r < p->n; r++)
        if (p->ctl[r] >= 0)
            (void)loom_boot_write_all(p->ctl[r], g, sizeof g, loom_now() + 1.0, -1);
}

static int send_ctl(struct probe *p, int r, const uint8_t *g, char *err, size_t errlen)
{
    if (loom_boot_write_all(p->ctl[r], g, PROBE_CTL_LEN, loom_now() + p->o.timeout, -1) ==
        LOOM_SUCCESS)
        return 0;
    snprintf(err, errlen, "rank 0 lost its control connection to %s", describe(p, r));
    return -1;
}

/* Whether the rounds test the pair (a, b): both joined, and the sweep
 * found each reaching the other (the reach codes; the rounds only change
 * states). */
static int round_tests(const struct probe *p, int a, int b)
{
    return p->joined[a] && p->joined[b] && PROBE_LINK(p, a, b)->reach == PROBE_R_OK &&
           PROBE_LINK(p, b, a)->reach == PROBE_R_OK;
}

int probe_root_rounds(struct probe *p, char *err, size_t errlen)
{
    uint8_t g[PROBE_CTL_LEN];
    uint8_t *row = malloc((size_t)p->n);
    if (!row) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* the sweep: everyone at once, then every row */
    put_ctl(g, PROBE_MSG_SWEEP, 0, p->o.size, p, 0, 0);
    for (int r = 1; r < p->n; r++)
        if (p->joined[r] && send_ctl(p, r, g, err, errlen) < 0)
            goto fail;
    if (probe_sweep(p, err, errlen) < 0)
        goto fail;
    for (int j = 0; j < p->n; j++) {
        struct probe_link *l = PROBE_LINK(p, 0, j);
        l->reach = p->myreach[j];
        l->state = j == 0 ? PROBE_UNKNOWN
                   : l->reach == PROBE_R_OK ? PROBE_CONNECTED : PROBE_FAILED;
    }
    for (int r = 1; r < p->n; r++)
        if (p->joined[r] && root_read_reach(p, r, row, err, errlen) < 0)
            goto fail;
    free(row);
    row = NULL;

    /* which pairs a round tests is decided from the sweep alone: a pair
     * that fails in a round does not change which DONEs rank 0 reads */
    for (int k = 0; k < loom_probe_nrounds(p->n); k++) {
        for (int r = 1; r < p->n; r++) {
            if (!p->joined[r])
                continue;
            int peer = loom_probe_peer(p->n, k, r);
            uint32_t skip = peer >= 0 && !round_tests(p, r, peer) ? PROBE_GO_SKIP : 0;
            put_ctl(g, PROBE_MSG_GO, k, p->o.size, p, 0, skip);
            if (send_ctl(p, r, g, err, errlen) < 0)
                return -1;
        }
        int peer = loom_probe_peer(p->n, k, 0);
        if (peer >= 0 && round_tests(p, 0, peer)) {
            probe_pair(p, k, peer);
            struct probe_link *l = PROBE_LINK(p, 0, peer);
            l->lat_us = (float)p->mine.lat_us;
            l->bw_gbps = (float)p->mine.bw_gbps;
            l->state = p->mine.ok ? PROBE_MEASURED : PROBE_FAILED;
            if (!p->mine.ok)
                probe_add_err(p, 0, peer, p->mine.err[0] ? p->mine.err : "failed");
        }
        for (int r = 1; r < p->n; r++) {
            int q = loom_probe_peer(p->n, k, r);
            if (p->joined[r] && q >= 0 && round_tests(p, r, q) &&
                root_read_done(p, r, k, err, errlen) < 0)
                return -1;
        }
    }
    return 0;
fail:
    free(row);
    return -1;
}

/* ------------------------------------------------------------ ranks 1.. */

/* Join rank 0: connect (retrying until the join timeout), hello, WELCOME.
 * 0 joined; -1 refused or lost (err); -2 rank 0 never answered (err). */
static int rank_join(struct probe *p, char *err, size_t errlen)
{
    double start = loom_now(), deadline = start + p->join_timeout;
    int noted = 0;
    char e[PROBE_ERR_MAX] = "";
    while (p->ctl[0] < 0) {
        double left = deadline - loom_now();
        if (left <= 0) {
            snprintf(err, errlen, "%s", e);
            return -2;
        }
        double t0 = loom_now();
        /* a whole timeout each try (the last may end past the deadline),
         * so that the reason given says the timeout the user chose */
        p->ctl[0] = probe_connect(&p->ep[0], p->ep_len[0], p->o.timeout, e, sizeof e, NULL);
        if (p->ctl[0] >= 0)
            break;
        if (!noted && loom_now() - start >= 5.0) {
            fprintf(stderr, "loom-ranktable probe: rank %d: cannot reach rank 0 at %s yet "
                    "(%s); trying for %.0f s more\n", p->rank, p->ep_str[0], e,
                    deadline - loom_now());
            noted = 1;
        }
        /* refused comes back at once: rank 0 may not listen yet */
        double pause = 0.2 - (loom_now() - t0);
        if (pause > 0)
            usleep((useconds_t)(pause * 1e6));
    }
    uint8_t h[PROBE_HELLO_LEN], g[PROBE_CTL_LEN];
    /* before the hello: the sweep starts once every rank has joined */
    probe_test_refuse(p);
    probe_put_hello(h, PROBE_KIND_CONTROL, p->rank, 0, p->hash);
    int eof = 0;
    loom_result_t res = loom_boot_write_all(p->ctl[0], h, sizeof h,
                                            loom_now() + p->o.timeout, -1);
    /* rank 0 answers once all have joined or its join timeout ended */
    if (res == LOOM_SUCCESS)
        res = loom_boot_read_all(p->ctl[0], g, sizeof g,
                                 loom_now() + p->join_timeout + probe_stall(p), -1, &eof);
    if (res != LOOM_SUCCESS) {
        snprintf(err, errlen, "joining rank 0 (%s): %s", p->ep_str[0],
                 res == LOOM_ERROR_TIMEOUT ? "no answer" : eof ? "connection closed"
                                                           : strerror(errno));
        return -1;
    }
    uint32_t type = loom_get_le32(g);
    if (type == PROBE_MSG_REFUSE) {
        char why[PROBE_WHY_MAX] = "";
        if (loom_boot_read_all(p->ctl[0], why, sizeof why, loom_now() + 1.0, -1, &eof) ==
            LOOM_SUCCESS)
            why[sizeof why - 1] = 0;
        snprintf(err, errlen, "rank 0 refused: %s", why[0] ? why : "(no reason given)");
        return -1;
    }
    if (type != PROBE_MSG_WELCOME) {
        snprintf(err, errlen, "malformed message from rank 0");
        return -1;
    }
    p->run_id = loom_get_le64(g + 8);
    return 0;
}

int probe_rank_run(struct probe *p, char *err, size_t errlen)
{
    int rc = rank_join(p, err, errlen);
    if (rc < 0)
        return rc;
    uint8_t g[PROBE_CTL_LEN], d[PROBE_DONE_LEN];
    for (;;) {
        /* the others' sweep connections that arrive meanwhile wait in the
         * listener's backlog (room for every rank); probe_accept closes
         * them. Not draining here: a pair's connection may come first. */
        int eof = 0;
        loom_result_t res = loom_boot_read_all(p->ctl[0], g, sizeof g,
                                               loom_now() + probe_stall(p), -1, &eof);
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
        if ((type != PROBE_MSG_GO && type != PROBE_MSG_SWEEP) ||
            round >= (uint32_t)(loom_probe_nrounds(p->n) + 1) || size < 1 ||
            size > PROBE_MAX_SIZE || iters < 1 || iters > PROBE_MAX_ITERS || tmo < 1) {
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
        if (type == PROBE_MSG_SWEEP) {
            if (probe_sweep(p, err, errlen) < 0)
                return -1;
            uint8_t hdr[PROBE_REACH_HDR] = {0};
            loom_put_le32(hdr, PROBE_MSG_REACH);
            if (loom_boot_write_all(p->ctl[0], hdr, sizeof hdr, loom_now() + p->o.timeout,
                                    -1) != LOOM_SUCCESS ||
                loom_boot_write_all(p->ctl[0], p->myreach, (size_t)p->n,
                                    loom_now() + p->o.timeout, -1) != LOOM_SUCCESS) {
                snprintf(err, errlen, "lost rank 0 (%s) in the sweep", p->ep_str[0]);
                return -1;
            }
            continue;
        }
        int peer = loom_probe_peer(p->n, (int)round, p->rank);
        if (peer < 0 || (loom_get_le32(g + 28) & PROBE_GO_SKIP))
            continue;
        probe_pair(p, (int)round, peer);
        put_done(d, (int)round, peer, &p->mine);
        res = loom_boot_write_all(p->ctl[0], d, sizeof d,
                                  loom_now() + p->o.timeout, -1);
        if (res != LOOM_SUCCESS) {
            snprintf(err, errlen, "lost rank 0 (%s): %s", p->ep_str[0],
                     res == LOOM_ERROR_TIMEOUT ? "timed out" : strerror(errno));
            return -1;
        }
    }
}
