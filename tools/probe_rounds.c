/* probe_rounds.c - the control protocol of `loom-ranktable probe`.
 *
 * Ranks 1..n-1 keep one connection to rank 0's listener. For each round
 * rank 0 sends GO (with its size, iters and timeout, which every pair uses);
 * each rank tests its partner and answers DONE with what it measured; rank 0
 * waits for every DONE before the next GO, so the rounds run in lock step and
 * a failed pair holds the others up by at most its timeout. END carries the
 * exit status. A rank that stops answering is reported after probe_stall(). */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "bootstrap/boot_io.h"
#include "probe.h"
#include "probe_internal.h"

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
    l->ok = loom_get_le32(d + 12) != 0;
    l->lat_us = (double)loom_get_le64(d + 16) / 1e3;
    l->bw_gbps = (double)loom_get_le64(d + 24) / 1e9;
    memcpy(l->err, d + PROBE_DONE_HDR, PROBE_ERR_MAX);
    l->err[PROBE_ERR_MAX - 1] = '\0';
    return 0;
}

void probe_root_end(struct probe *p, int status)
{
    uint8_t g[PROBE_GO_LEN];
    put_go(g, PROBE_MSG_END, 0, &p->o, status);
    for (int r = 1; r < p->n; r++)
        if (p->ctl[r] >= 0)
            (void)loom_boot_write_all(p->ctl[r], g, sizeof g, loom_now() + 1.0, -1);
}

/* Rank 0's side of steps 3 and 4. */
int probe_root_controls(struct probe *p, char *err, size_t errlen)
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
        if (who == 0 || p->ctl[who] >= 0) {
            close(fd);
            got--;
            continue;
        }
        p->ctl[who] = fd;
    }
    return 0;
}

int probe_root_rounds(struct probe *p, char *err, size_t errlen)
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
int probe_rank_run(struct probe *p, char *err, size_t errlen)
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
    probe_put_hello(h, PROBE_KIND_CONTROL, p->rank, 0, p->comm_id);
    loom_result_t res = loom_boot_write_all(p->ctl[0], h, sizeof h,
                                            loom_now() + p->o.timeout, -1);
    if (res != LOOM_SUCCESS) {
        snprintf(err, errlen, "control connection to rank 0 (%s): %s",
                 p->ep_str[0], res == LOOM_ERROR_TIMEOUT ? "timed out"
                                                         : strerror(errno));
        return -1;
    }
    for (;;) {
        int eof = 0;
        res = loom_boot_read_all(p->ctl[0], g, sizeof g,
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
        res = loom_boot_write_all(p->ctl[0], d, sizeof d,
                                  loom_now() + p->o.timeout, -1);
        if (res != LOOM_SUCCESS) {
            snprintf(err, errlen, "lost rank 0 (%s): %s", p->ep_str[0],
                     res == LOOM_ERROR_TIMEOUT ? "timed out" : strerror(errno));
            return -1;
        }
    }
}

