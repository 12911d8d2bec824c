/* check_tcp.c - the tcp transport between forked processes on 127.0.0.1:
 * bootstrap, full mesh with 1-3 sockets per peer, byte-exact messages of
 * awkward sizes both ways and around a ring, ordering of many small
 * messages, short and long messages posted at once both ways (socket 0
 * shared by the short ones), frames read ahead of their receives (with a
 * goodbye or an abort notice behind them), a peer killed before it
 * connected back, mismatched frames, and strangers (the contract's cases,
 * wake, shutdown and a killed peer among them, are check_transport's);
 * the job key: same key, wrong or missing key, strangers that speak the
 * protocol, and the pure hello check. */
#include "build_config.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "loom.h"
#include "util.h"
#include "auth.h"
#include "config.h"
#include "bootstrap/bootstrap.h"
#include "net/handshake.h"
#include "net/net.h"
#include "transport/tcp/tcp_check.h"
#include "transport/tcp/tcp_frame.h"
#include "transport/tcp/tcp_priv.h"
#include "transport/transport.h"
#include "bootstrap/oob.h"
#include "../support/mp_util.h"

#define STEP_TIMEOUT 20.0
#define ERRSLOT 1024

static const size_t sizes[] = {0, 1, 7, 65535, 65537, (1u << 20) + 3, 16u << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct job {
    int port;
    int nsocks;
    size_t sndbuf;            /* SO_SNDBUF of data sockets; 0 = autotuned */
    double connect_timeout;
    int variant;              /* which case of a looped test */
    /* Called by each rank after the bootstrap, before the transport opens
     * (may be NULL); addr is rank 0's out-of-band port, where peers (and
     * strangers) reach it. */
    int (*before_connect)(int rank, const struct sockaddr_storage *addr);
    char *errs;               /* shared: ERRSLOT bytes per rank */
};

static char *rank_err(struct job *j, int rank)
{
    return j->errs + rank * ERRSLOT;
}

/* This rank's out-of-band service; closed as the rank exits (mp_before_exit),
 * so that what it queued still goes: a rank that failed right after
 * bootstrap still tells rank 0 it got the table, as loom_comm_destroy would
 * let it. */
static struct loom_oob *g_oob;

static void close_oob(void)
{
    loom_oob_close(g_oob);
    g_oob = NULL;
}

/* Bootstrap, open tcp, and connect every peer (the transport makes each
 * socket on first use; connect() asks for socket 0 now). Returns 0 or a
 * failing exit code, leaving the reason in the rank's shared error slot. */
static int setup(struct job *j, int rank, int n, struct loom_tx **txp)
{
    char v[32];
    snprintf(v, sizeof v, "%d", j->nsocks);
    setenv("LOOM_NSOCKS", v, 1);
    snprintf(v, sizeof v, "%zu", j->sndbuf);
    setenv("LOOM_SOCKET_SNDBUF", v, 1);
    loom_config_reset();
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    loom_result_t res = loom_oob_open(rank, n, "127.0.0.1", rank == 0 ? j->port : 0,
                                      &g_oob, entry, rank_err(j, rank), ERRSLOT);
    if (res != LOOM_SUCCESS)
        return 10;
    struct loom_boot_params bp = {.struct_size = sizeof bp, .rank = rank,
                                  .nranks = n, .root_host = "127.0.0.1",
                                  .root_port = j->port, .timeout = 10.0};
    uint64_t comm_id = 0;
    res = loom_bootstrap(&bp, g_oob, entry, &comm_id, NULL, rank_err(j, rank), ERRSLOT);
    if (res != LOOM_SUCCESS)
        return 11;
    struct sockaddr_storage root;
    socklen_t rl;
    loom_oob_addr(g_oob, 0, &root, &rl);
    if (j->before_connect && j->before_connect(rank, &root) != 0)
        return 12;
    struct loom_tx_params tp = {.struct_size = sizeof tp, .rank = rank, .nranks = n,
                                .comm_id = comm_id, .local_addr = "127.0.0.1",
                                .connect_timeout = j->connect_timeout, .oob = g_oob};
    struct loom_tx *tx = NULL;
    res = loom_tx_open(&loom_tcp_transport, &tp, &tx);
    if (res != LOOM_SUCCESS) {
        snprintf(rank_err(j, rank), ERRSLOT, "open: %s", loom_thread_error());
        return 10;
    }
    for (int r = 0; r < n; r++)
        if (r != rank && (res = tx->ops->connect(tx, r)) != LOOM_SUCCESS) {
            snprintf(rank_err(j, rank), ERRSLOT, "connect: %s", tx->errmsg);
            return 13;
        }
    *txp = tx;
    return 0;
}

/* 1: wait_all only polls (progress(tx, 0)), as a spinning caller does */
static int g_poll_only;

/* Drive progress until every request is done or STEP_TIMEOUT passes. */
static loom_result_t wait_all(struct loom_tx *tx, struct loom_tx_req *reqs, int n)
{
    double until = mp_now() + STEP_TIMEOUT;
    for (;;) {
        int done = 1;
        for (int i = 0; i < n; i++)
            done &= reqs[i].done;
        if (done)
            return LOOM_SUCCESS;
        loom_result_t res = tx->ops->progress(tx, g_poll_only ? 0 : 100000);
        if (res != LOOM_SUCCESS)
            return res;
        if (mp_now() > until)
            return LOOM_ERROR_TIMEOUT;
    }
}

static uint64_t seed_of(int from, int to, size_t size, int iter)
{
    return ((uint64_t)from << 48) ^ ((uint64_t)to << 40) ^ ((uint64_t)size << 8) ^
           (uint64_t)iter;
}

static struct job *job_new(int nsocks)
{
    struct job *j = calloc(1, sizeof *j);
    ck_assert_ptr_nonnull(j);
    j->port = mp_free_port();
    j->nsocks = nsocks;
    j->connect_timeout = 10.0;
    j->errs = mmap(NULL, 32 * ERRSLOT, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(j->errs, MAP_FAILED);
    memset(j->errs, 0, 32 * ERRSLOT);
    return j;
}

static void job_check(struct job *j, unsigned failed, int n)
{
    for (int r = 0; r < n; r++)
        if (rank_err(j, r)[0])
            fprintf(stderr, "rank %d: %s\n", r, rank_err(j, r));
    ck_assert_msg(failed == 0, "ranks failed: mask 0x%x (rank 0: %s)", failed,
                  rank_err(j, 0));
    munmap(j->errs, 32 * ERRSLOT);
    free(j);
}

/* Every rank sends every size to every peer and receives the same. */
static int all_to_all_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    for (size_t si = 0; si < NSIZES; si++) {
        size_t sz = sizes[si];
        struct loom_tx_req reqs[16];
        uint8_t *sbuf[8], *rbuf[8];
        int nr = 0;
        for (int p = 0; p < n; p++) {
            if (p == rank)
                continue;
            sbuf[p] = malloc(sz + 1);
            rbuf[p] = malloc(sz + 1);
            if (!sbuf[p] || !rbuf[p])
                return 20;
            mp_fill(sbuf[p], sz, seed_of(rank, p, sz, 0));
            memset(rbuf[p], 0xee, sz + 1);
            reqs[nr] = (struct loom_tx_req){.peer = p, .buf = rbuf[p], .len = sz,
                                            .tag = (uint32_t)si};
            if (tx->ops->irecv(tx, &reqs[nr++]) != LOOM_SUCCESS)
                return 21;
            reqs[nr] = (struct loom_tx_req){.peer = p, .buf = sbuf[p], .len = sz,
                                            .tag = (uint32_t)si};
            if (tx->ops->isend(tx, &reqs[nr++]) != LOOM_SUCCESS)
                return 22;
        }
        loom_result_t res = wait_all(tx, reqs, nr);
        if (res != LOOM_SUCCESS) {
            snprintf(rank_err(j, rank), ERRSLOT, "size %zu: %s: %s", sz,
                     loom_result_string(res), tx->errmsg);
            return 23;
        }
        for (int i = 0; i < nr; i++)
            if (reqs[i].status != LOOM_SUCCESS)
                return 24;
        for (int p = 0; p < n; p++) {
            if (p == rank)
                continue;
            long bad = mp_verify(rbuf[p], sz, seed_of(p, rank, sz, 0));
            if (bad >= 0 || rbuf[p][sz] != 0xee) {
                snprintf(rank_err(j, rank), ERRSLOT,
                         "size %zu from rank %d: byte %ld differs", sz, p, bad);
                return 25;
            }
            free(sbuf[p]);
            free(rbuf[p]);
        }
    }
    loom_tx_close(tx);
    return 0;
}

/* Ring: send right, receive from the left, several rounds, each size. */
static int ring_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    size_t max = sizes[NSIZES - 1];
    uint8_t *sbuf = malloc(max), *rbuf = malloc(max);
    if (!sbuf || !rbuf)
        return 20;
    for (int iter = 0; iter < 2; iter++) {
        for (size_t si = 0; si < NSIZES; si++) {
            size_t sz = sizes[si];
            mp_fill(sbuf, sz, seed_of(rank, right, sz, iter + 1));
            struct loom_tx_req reqs[2] = {
                {.peer = left, .buf = rbuf, .len = sz, .tag = 7},
                {.peer = right, .buf = sbuf, .len = sz, .tag = 7}};
            if (tx->ops->irecv(tx, &reqs[0]) || tx->ops->isend(tx, &reqs[1]))
                return 21;
            loom_result_t res = wait_all(tx, reqs, 2);
            if (res != LOOM_SUCCESS) {
                snprintf(rank_err(j, rank), ERRSLOT, "ring size %zu: %s", sz,
                         tx->errmsg);
                return 23;
            }
            if (mp_verify(rbuf, sz, seed_of(left, rank, sz, iter + 1)) >= 0)
                return 25;
        }
    }
    free(sbuf);
    free(rbuf);
    loom_tx_close(tx);
    return 0;
}

struct mesh_case {
    int n, nsocks;
};
static const struct mesh_case mesh_cases[] = {
    {2, 1}, {2, 2}, {2, 3}, {3, 1}, {3, 2}, {3, 3}, {4, 1}, {4, 2}, {4, 3}};

START_TEST(test_all_to_all)
{
    const struct mesh_case *c = &mesh_cases[_i];
    struct job *j = job_new(c->nsocks);
    job_check(j, mp_run(c->n, all_to_all_main, j, 40.0, 0), c->n);
}
END_TEST

START_TEST(test_ring)
{
    const struct mesh_case *c = &mesh_cases[_i];
    struct job *j = job_new(c->nsocks);
    j->sndbuf = _i % 2 ? 32 << 10 : 0; /* small buffers: many partial sends */
    job_check(j, mp_run(c->n, ring_main, j, 40.0, 0), c->n);
}
END_TEST

/* A caller that only polls (progress(tx, 0), never a timeout) still gets
 * its connections accepted and finished: the ring's sockets are made while
 * every rank spins (before, the accepting side never looked at its
 * listener and the connect timed out). */
START_TEST(test_poll_only)
{
    static const struct mesh_case c[] = {{2, 2}, {3, 1}};
    struct job *j = job_new(c[_i].nsocks);
    g_poll_only = 1; /* the forked ranks inherit it */
    job_check(j, mp_run(c[_i].n, ring_main, j, 40.0, 0), c[_i].n);
    g_poll_only = 0;
}
END_TEST

/* Every data socket gets the send buffer asked for (Linux reports it
 * doubled), and data still flows through it. */
static int sndbuf_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx = NULL;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    struct tcp_priv *tp = tx->priv;
    /* sockets come on first use: a long message each way makes the lanes */
    size_t big = 4u << 20;
    uint8_t *sb = calloc(1, big), *rb = calloc(1, big);
    for (int r = 0; r < n && sb && rb; r++) {
        if (r == rank)
            continue;
        struct loom_tx_req q[2] = {{.peer = r, .buf = rb, .len = big},
                                   {.peer = r, .buf = sb, .len = big}};
        if (tx->ops->irecv(tx, &q[0]) || tx->ops->isend(tx, &q[1]) || wait_all(tx, q, 2)) {
            snprintf(rank_err(j, rank), ERRSLOT, "exchange with rank %d: %s", r,
                     tx->errmsg);
            return 21;
        }
    }
    free(sb);
    free(rb);
    for (int r = 0; r < n; r++) {
        if (r == rank)
            continue;
        for (int k = 0; k < tp->nsocks; k++) {
            if (tp->peers[r].socks[k].cstate != TCP_CS_UP) {
                snprintf(rank_err(j, rank), ERRSLOT, "socket %d to rank %d is not up", k, r);
                return 22;
            }
            int v = 0;
            socklen_t len = sizeof v;
            if (getsockopt(tp->peers[r].socks[k].fd, SOL_SOCKET, SO_SNDBUF, &v, &len) != 0 ||
                v < (int)j->sndbuf || v > 2 * (int)j->sndbuf) {
                snprintf(rank_err(j, rank), ERRSLOT,
                         "socket %d to rank %d: SO_SNDBUF %d, asked %zu", k, r, v,
                         j->sndbuf);
                loom_tx_close(tx);
                return 20;
            }
        }
    }
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_sndbuf)
{
    struct job *j = job_new(2);
    j->sndbuf = 96 << 10;
    job_check(j, mp_run(3, sndbuf_main, j, 30.0, 0), 3);
}
END_TEST

/* 2000 small messages of varying size posted at once, then checked in order;
 * a few large ones in the middle share the link. */
static int ordering_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    enum { NMSG = 2000 };
    int peer = 1 - rank;
    struct loom_tx_req *reqs = calloc(2 * NMSG, sizeof *reqs);
    uint8_t *sb = malloc((size_t)NMSG * 300), *rb = malloc((size_t)NMSG * 300);
    uint8_t *big_s = malloc(200000), *big_r = malloc(200000);
    if (!reqs || !sb || !rb || !big_s || !big_r)
        return 20;
    for (int i = 0; i < NMSG; i++) {
        int big = i % 500 == 250;
        size_t len = big ? 200000 : (size_t)(i * 37 % 300);
        uint8_t *s = big ? big_s : sb + (size_t)i * 300;
        uint8_t *r = big ? big_r : rb + (size_t)i * 300;
        mp_fill(s, len, seed_of(rank, peer, len, i));
        reqs[2 * i] = (struct loom_tx_req){.peer = peer, .buf = r, .len = len,
                                           .tag = (uint32_t)i};
        reqs[2 * i + 1] = (struct loom_tx_req){.peer = peer, .buf = s, .len = len,
                                               .tag = (uint32_t)i};
        if (tx->ops->irecv(tx, &reqs[2 * i]) || tx->ops->isend(tx, &reqs[2 * i + 1]))
            return 21;
        if (big) {
            /* The big buffers are reused: finish this one first. */
            if (wait_all(tx, &reqs[2 * i], 2) != LOOM_SUCCESS)
                return 22;
            if (mp_verify(r, len, seed_of(peer, rank, len, i)) >= 0)
                return 26;
        }
    }
    if (wait_all(tx, reqs, 2 * NMSG) != LOOM_SUCCESS) {
        snprintf(rank_err(j, rank), ERRSLOT, "ordering: %s", tx->errmsg);
        return 23;
    }
    for (int i = 0; i < NMSG; i++) {
        size_t len = reqs[2 * i].len;
        if (i % 500 != 250 &&
            mp_verify(rb + (size_t)i * 300, len, seed_of(peer, rank, len, i)) >= 0) {
            snprintf(rank_err(j, rank), ERRSLOT, "message %d corrupted", i);
            return 25;
        }
    }
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_many_small_in_order)
{
    struct job *j = job_new(2);
    job_check(j, mp_run(2, ordering_main, j, 30.0, 0), 2);
}
END_TEST

/* Rank 0 sends many small messages with a large one among them, then
 * leaves: with a goodbye (_i = 0), or with an abort notice after five
 * messages (_i = 1: rank 1 then posts a sixth receive; _i = 2: it posts
 * nothing more and only progresses). Rank 1 posts its receives one at a
 * time, after everything has arrived: the first recvmsg reads the later
 * frames into the socket's cache (checked), and each later receive is
 * served from there, byte-exact; the goodbye behind them is no failure,
 * and the abort notice behind them fails the link with its cause, whether
 * a receive meets it or nothing is posted. */
enum { RA_MSGS = 300, RA_BIG = 150, RA_BIGLEN = 100000, RA_ABORT_AFTER = 5 };

static size_t ra_len(int i)
{
    return i == RA_BIG ? RA_BIGLEN : (size_t)(i * 13 % 200);
}

static int read_ahead_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    int mode = j->variant;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    int nmsg = mode ? RA_ABORT_AFTER : RA_MSGS;
    uint8_t *buf = malloc(RA_BIGLEN);
    if (!buf)
        return 20;
    if (rank == 0) {
        for (int i = 0; i < nmsg; i++) {
            mp_fill(buf, ra_len(i), seed_of(0, 1, ra_len(i), i));
            struct loom_tx_req s = {.peer = 1, .buf = buf, .len = ra_len(i),
                                    .tag = (uint32_t)i};
            if (tx->ops->isend(tx, &s) || wait_all(tx, &s, 1) != LOOM_SUCCESS)
                return 21;
        }
        if (mode)
            tx->ops->shutdown(tx, LOOM_ERROR_ABORTED);
        free(buf);
        loom_tx_close(tx);
        return 0;
    }
    /* sockets come on first use (this rank opens them): make socket 0, then
     * let everything arrive (and rank 0 perhaps leave) */
    struct tcp_sock *sk = &((struct tcp_priv *)tx->priv)->peers[0].socks[0];
    for (double t0 = mp_now(); sk->cstate != TCP_CS_UP && mp_now() - t0 < 10;)
        tx->ops->progress(tx, 10000);
    usleep(300000);
    for (int i = 0; i < nmsg; i++) {
        struct loom_tx_req r = {.peer = 0, .buf = buf, .len = ra_len(i),
                                .tag = (uint32_t)i};
        if (tx->ops->irecv(tx, &r) || wait_all(tx, &r, 1) != LOOM_SUCCESS) {
            snprintf(rank_err(j, rank), ERRSLOT, "message %d: %s", i, tx->errmsg);
            return 30;
        }
        if (mp_verify(buf, ra_len(i), seed_of(0, 1, ra_len(i), i)) >= 0) {
            snprintf(rank_err(j, rank), ERRSLOT, "message %d corrupted", i);
            return 31;
        }
        if (i == 0 && sk->cache_len == 0) {
            snprintf(rank_err(j, rank), ERRSLOT, "nothing was read ahead");
            return 32;
        }
    }
    loom_result_t res = LOOM_SUCCESS;
    if (mode == 1) {
        struct loom_tx_req r = {.peer = 0, .buf = buf, .len = 8, .tag = 99};
        if (tx->ops->irecv(tx, &r) == LOOM_SUCCESS)
            res = wait_all(tx, &r, 1);
        if (!r.done || r.status != LOOM_ERROR_REMOTE)
            res = LOOM_SUCCESS;
    } else {
        double t0 = mp_now();
        while (res == LOOM_SUCCESS && mp_now() - t0 < (mode ? 3.0 : 0.5))
            res = tx->ops->progress(tx, 100000);
    }
    snprintf(rank_err(j, rank), ERRSLOT, "after the messages: %s (%s)",
             loom_result_string(res), tx->errmsg);
    if (mode == 0 && (res != LOOM_SUCCESS || !((struct tcp_priv *)tx->priv)->peers[0].bye))
        return 33;
    if (mode && (res != LOOM_ERROR_REMOTE || !strstr(tx->errmsg, "rank 0 (127.0.0.1:") ||
                 !strstr(tx->errmsg, "failed in call")))
        return 34;
    rank_err(j, rank)[0] = '\0';
    free(buf);
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_read_ahead)
{
    struct job *j = job_new(1);
    j->variant = _i;
    job_check(j, mp_run(2, read_ahead_main, j, 20.0, 0), 2);
}
END_TEST

/* Both ranks post, all at once, messages whose sizes straddle
 * LOOM_TCP_SHARED_MAX and LOOM_TCP_STRIPE_MIN, the same sequence each way,
 * and check every byte: short ones from both directions queue on socket 0
 * (checked on the posted queues before anything moves), longer ones on
 * their direction's lanes, and each socket's frames still match their
 * receives when short and long ones overtake each other. */
enum { SH_MSGS = 60 };

static size_t sh_len(int i)
{
    static const size_t cycle[] = {0, 8, LOOM_TCP_SHARED_MAX, LOOM_TCP_SHARED_MAX + 1,
                                   1000, LOOM_TCP_STRIPE_MIN + 4096, 3,
                                   LOOM_TCP_STRIPE_MIN, 300000};
    return cycle[i % (int)(sizeof cycle / sizeof cycle[0])];
}

static int shared_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    int peer = 1 - rank;
    struct tcp_peer *tp_peer = &((struct tcp_priv *)tx->priv)->peers[peer];
    struct loom_tx_req *reqs = calloc(2 * SH_MSGS, sizeof *reqs);
    uint8_t *sb[SH_MSGS], *rb[SH_MSGS];
    if (!reqs)
        return 20;
    for (int i = 0; i < SH_MSGS; i++) {
        size_t len = sh_len(i);
        sb[i] = malloc(len + 1);
        rb[i] = malloc(len + 1);
        if (!sb[i] || !rb[i])
            return 20;
        mp_fill(sb[i], len, seed_of(rank, peer, len, i));
        reqs[2 * i] = (struct loom_tx_req){.peer = peer, .buf = rb[i], .len = len,
                                           .tag = (uint32_t)i};
        reqs[2 * i + 1] = (struct loom_tx_req){.peer = peer, .buf = sb[i], .len = len,
                                               .tag = (uint32_t)i};
        /* the first receive, a short one, is posted before anything is
         * sent: it must wait on socket 0 whichever rank this is */
        if (tx->ops->irecv(tx, &reqs[2 * i]))
            return 21;
        if (i == 1 && (!tp_peer->socks[0].recvq.head ||
                       tp_peer->socks[0].recvq.head->req != &reqs[0] ||
                       tp_peer->socks[0].recvq.head->next != tp_peer->socks[0].recvq.tail ||
                       tp_peer->socks[1].recvq.head)) {
            snprintf(rank_err(j, rank), ERRSLOT,
                     "short receives from rank %d are not queued on socket 0", peer);
            return 22;
        }
        if (tx->ops->isend(tx, &reqs[2 * i + 1]))
            return 21;
    }
    if (wait_all(tx, reqs, 2 * SH_MSGS) != LOOM_SUCCESS) {
        snprintf(rank_err(j, rank), ERRSLOT, "exchange: %s", tx->errmsg);
        return 23;
    }
    for (int i = 0; i < SH_MSGS; i++) {
        size_t len = sh_len(i);
        long bad = mp_verify(rb[i], len, seed_of(peer, rank, len, i));
        if (bad >= 0) {
            snprintf(rank_err(j, rank), ERRSLOT, "message %d (%zu bytes): byte %ld differs",
                     i, len, bad);
            return 25;
        }
        free(sb[i]);
        free(rb[i]);
    }
    free(reqs);
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_shared_socket)
{
    struct job *j = job_new(_i + 1); /* one lane each way, then two */
    job_check(j, mp_run(2, shared_main, j, 30.0, 0), 2);
}
END_TEST

/* Rank 1 dies by SIGKILL before any socket is made (rank 0 asked it to
 * connect back; it never will): rank 0's pending receive and progress must
 * fail with LOOM_ERROR_REMOTE naming rank 1, quickly. (A peer killed with
 * its link up is the contract's case, check_transport.) */
static int killed_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    if (rank == 1) {
        usleep(100000);
        raise(SIGKILL);
    }
    uint8_t buf[64];
    struct loom_tx_req req = {.peer = 1, .buf = buf, .len = sizeof buf};
    if (tx->ops->irecv(tx, &req))
        return 21;
    double t0 = mp_now();
    loom_result_t res = LOOM_SUCCESS;
    while (res == LOOM_SUCCESS && mp_now() - t0 < 5.0)
        res = tx->ops->progress(tx, -1);
    snprintf(rank_err(j, rank), ERRSLOT, "%s", tx->errmsg);
    if (res != LOOM_ERROR_REMOTE || mp_now() - t0 > 3.0)
        return 30;
    if (!req.done || req.status != LOOM_ERROR_REMOTE)
        return 31;
    if (!strstr(tx->errmsg, "rank 1 (127.0.0.1:") || !strstr(tx->errmsg, "is gone"))
        return 32;
    /* Later posts fail at once with the same error. */
    struct loom_tx_req s = {.peer = 1, .buf = buf, .len = 8};
    if (tx->ops->isend(tx, &s) != LOOM_ERROR_REMOTE || !s.done ||
        s.status != LOOM_ERROR_REMOTE)
        return 33;
    rank_err(j, rank)[0] = '\0';
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_killed_peer)
{
    struct job *j = job_new(2);
    job_check(j, mp_run(2, killed_main, j, 15.0, 2u), 2);
}
END_TEST

/* Rank 0 sends (100 bytes, tag 5) then (50 bytes, tag 6); rank 1 posts
 * (50 bytes, tag 5) for the first: a protocol error naming rank 0. With
 * mode 1, lengths agree and the tags do not: a mismatch of calls. */
static int mismatch_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int mode = j->nsocks == 3; /* second variant runs with 3 sockets */
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    uint8_t buf[100] = {0};
    if (rank == 0) {
        struct loom_tx_req s = {.peer = 1, .buf = buf, .len = mode ? 50 : 100,
                                .tag = 5};
        if (tx->ops->isend(tx, &s) || wait_all(tx, &s, 1))
            return 21;
        /* Wait for rank 1 to hang up. With mode 1 it says first that this
         * rank is in another call than its own (tag 6). */
        struct loom_tx_req r = {.peer = 1, .buf = buf, .len = 1};
        tx->ops->irecv(tx, &r);
        wait_all(tx, &r, 1);
        loom_result_t want = mode ? LOOM_ERROR_MISMATCH : LOOM_ERROR_REMOTE;
        int named = !mode || (tx->mismatch.valid && tx->mismatch.peer == 1 &&
                              tx->mismatch.tag == 6);
        loom_tx_close(tx);
        return r.status == want && named ? 0 : 22;
    }
    struct loom_tx_req r = {.peer = 0, .buf = buf, .len = 50, .tag = mode ? 6 : 5};
    if (tx->ops->irecv(tx, &r))
        return 21;
    loom_result_t res = wait_all(tx, &r, 1);
    snprintf(rank_err(j, rank), ERRSLOT, "%s", tx->errmsg);
    /* a different tag is another collective call: a mismatch, with what
     * the peer's frame said kept for the caller to name */
    loom_result_t want_res = mode ? LOOM_ERROR_MISMATCH : LOOM_ERROR_PROTOCOL;
    if (res != want_res || r.status != want_res)
        return 30;
    if (mode && (!tx->mismatch.valid || tx->mismatch.peer != 0 || tx->mismatch.tag != 5))
        return 32;
    const char *want = mode ? "is in another collective call (call 5, 0x00000000, "
                              "count 0; this rank is in call 6, 0x00000000, count 0)"
                            : "sent 100 bytes with tag 5 (message 0, stripe 0) "
                              "where the posted receive expects 50 bytes with "
                              "tag 5";
    if (strncmp(tx->errmsg, "rank 0 (127.0.0.1:", 18) != 0 ||
        !strstr(tx->errmsg, want))
        return 31;
    rank_err(j, rank)[0] = '\0';
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_frame_mismatch)
{
    struct job *j = job_new(_i ? 3 : 1);
    job_check(j, mp_run(2, mismatch_main, j, 15.0, 0), 2);
}
END_TEST

/* Before its transport opens, rank 0 gets strangers on its port: junk, a
 * tcp hello (behind the right preamble) of another communicator, and a
 * silent connection. */
static int strangers(int rank, const struct sockaddr_storage *addr)
{
    if (rank != 0) {
        usleep(100000);
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (const struct sockaddr *)addr, sizeof(struct sockaddr_in)) != 0)
            return 1;
        uint8_t msg[48];
        memset(msg, 'x', sizeof msg);
        if (i == 1) {
            /* the tcp preamble of this job's namespace, then a well-formed
             * hello for another communicator, to rank 0 */
            loom_oob_preamble(g_oob, LOOM_OOB_KIND_TCP, msg);
            static const uint8_t hello_magic[4] = {0x48, 0x45, 0x4c, 0x4f};
            memcpy(msg + 16, hello_magic, 4);
            msg[20] = 1;
            msg[21] = 0;
            msg[22] = msg[23] = 0;
            memset(msg + 24, 0, 8);
            msg[24] = 1;
        }
        if (i < 2 && write(fd, msg, sizeof msg) != sizeof msg)
            return 2;
        /* Leaked on purpose until the process ends: a silent peer. */
    }
    return 0;
}

START_TEST(test_strangers_during_connect)
{
    struct job *j = job_new(2);
    j->before_connect = strangers;
    job_check(j, mp_run(3, all_to_all_main, j, 40.0, 0), 3);
}
END_TEST

START_TEST(test_connect_refused_names_peer)
{
    /* Rank 1 of 2, whose table says rank 0 listens on a port nobody has:
     * once every rank listened, a refusal means the process is gone. */
    struct loom_oob *oob = NULL;
    uint8_t entry[LOOM_OOB_ENTRY_LEN], table[2 * LOOM_OOB_ENTRY_LEN];
    char err[512];
    ck_assert_int_eq(loom_oob_open(1, 2, "127.0.0.1", 0, &oob, entry, err, sizeof err),
                     LOOM_SUCCESS);
    int port = mp_free_port();
    memcpy(table, entry, LOOM_OOB_ENTRY_LEN);
    table[2] = (uint8_t)(port >> 8);
    table[3] = (uint8_t)port;
    memcpy(table + LOOM_OOB_ENTRY_LEN, entry, LOOM_OOB_ENTRY_LEN);
    loom_oob_set_table(oob, table);
    loom_oob_start(oob, 77);
    struct loom_tx_params tp = {.struct_size = sizeof tp, .rank = 1, .nranks = 2,
                                .local_addr = "127.0.0.1", .connect_timeout = 5,
                                .comm_id = 77, .oob = oob};
    struct loom_tx *tx = NULL;
    ck_assert_int_eq(loom_tx_open(&loom_tcp_transport, &tp, &tx), LOOM_SUCCESS);
    ck_assert_int_eq(tx->ops->connect(tx, 0), LOOM_SUCCESS);
    double t0 = mp_now();
    loom_result_t res = LOOM_SUCCESS;
    while (res == LOOM_SUCCESS && mp_now() - t0 < 5)
        res = tx->ops->progress(tx, 100000);
    ck_assert_int_eq(res, LOOM_ERROR_REMOTE);
    ck_assert_double_lt(mp_now() - t0, 1.0);
    char want[160];
    snprintf(want, sizeof want, "rank 0 (127.0.0.1:%d) is gone: its port refused the "
             "connection (the process exited or crashed)", port);
    ck_assert_str_eq(tx->errmsg, want);
    loom_tx_close(tx);
    loom_oob_close(oob);
}
END_TEST

/* Rank 1 lives but never drives its transport: rank 0, which asked it to
 * connect, gives up at the connect timeout and names it. */
static int asked_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    if (rank == 1) {
        usleep(2000000);
        return 0;
    }
    uint8_t b;
    struct loom_tx_req r = {.peer = 1, .buf = &b, .len = 1};
    if (tx->ops->irecv(tx, &r))
        return 21;
    double t0 = mp_now();
    loom_result_t res = wait_all(tx, &r, 1);
    snprintf(rank_err(j, rank), ERRSLOT, "%s: %s", loom_result_string(res), tx->errmsg);
    if (res != LOOM_ERROR_TIMEOUT || mp_now() - t0 > 1.5 ||
        !strstr(tx->errmsg, "rank 1 (127.0.0.1:") ||
        !strstr(tx->errmsg, "could not be connected within 0.5 s (socket 0: it never "
                            "connected back)"))
        return 30;
    rank_err(j, rank)[0] = '\0';
    loom_tx_close(tx);
    return 0;
}

START_TEST(test_connect_timeout_names_peer)
{
    struct job *j = job_new(1);
    j->connect_timeout = 0.5;
    job_check(j, mp_run(2, asked_main, j, 15.0, 0), 2);
}
END_TEST

/* The two directions of a pair never share a lane, both ends name the
 * same socket for a lane, and short messages share socket 0 both ways. */
START_TEST(test_lanes)
{
    for (int lane = 0; lane < LOOM_TCP_MAX_SOCKS / 2; lane++) {
        ck_assert_int_eq(loom_tcp_lane_sock(0, 3, lane), 2 * lane);
        ck_assert_int_eq(loom_tcp_lane_sock(3, 0, lane), 2 * lane + 1);
        ck_assert_int_eq(loom_tcp_lane_sock(5, 7, lane), loom_tcp_lane_sock(2, 4, lane));
        ck_assert_int_lt(loom_tcp_lane_sock(9, 1, lane), LOOM_TCP_MAX_SOCKS);
        size_t big = LOOM_TCP_SHARED_MAX + 1;
        ck_assert_int_eq(loom_tcp_msg_sock(0, 3, big, lane), loom_tcp_lane_sock(0, 3, lane));
        ck_assert_int_eq(loom_tcp_msg_sock(3, 0, big, lane), loom_tcp_lane_sock(3, 0, lane));
    }
    ck_assert_int_eq(loom_tcp_msg_sock(0, 3, 0, 0), 0);
    ck_assert_int_eq(loom_tcp_msg_sock(3, 0, 8, 0), 0);
    ck_assert_int_eq(loom_tcp_msg_sock(3, 0, LOOM_TCP_SHARED_MAX, 0), 0);
    ck_assert_int_eq(loom_tcp_msg_sock(3, 0, LOOM_TCP_SHARED_MAX + 1, 0), 1);
}
END_TEST

START_TEST(test_registry_and_arguments)
{
    ck_assert_ptr_eq(loom_transport_find("tcp"), &loom_tcp_transport);
    ck_assert_ptr_null(loom_transport_find("carrier-pigeon"));
    ck_assert_ptr_null(loom_transport_find(NULL));
    ck_assert_ptr_eq(loom_transports[0], &loom_tcp_transport);
    ck_assert_uint_ne(loom_tcp_transport.caps & LOOM_TX_CAP_FINGERPRINT, 0);
    /* Several ranks need the out-of-band service to meet. */
    struct loom_tx_params tp = {.struct_size = sizeof tp, .rank = 0, .nranks = 2,
                                .local_addr = "127.0.0.1", .connect_timeout = 1};
    struct loom_tx *tx = NULL;
    ck_assert_int_eq(loom_tx_open(&loom_tcp_transport, &tp, &tx),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(tx);
    ck_assert_str_eq(loom_thread_error(), "tcp: rank 0 of 2 ranks (out-of-band service "
                                          "missing) cannot be set up");
    tp.nranks = 1;
    ck_assert_int_eq(loom_tx_open(&loom_tcp_transport, &tp, &tx), LOOM_SUCCESS);
    ck_assert_str_eq(tx->info, "tcp (2 sockets per peer)");
    uint8_t b = 0;
    struct loom_tx_req self = {.peer = 0, .buf = &b, .len = 1};
    ck_assert_int_eq(tx->ops->isend(tx, &self), LOOM_ERROR_INVALID_ARGUMENT);
    struct loom_tx_req far = {.peer = 5, .buf = &b, .len = 1};
    ck_assert_int_eq(tx->ops->irecv(tx, &far), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(tx->ops->connect(tx, 0), LOOM_ERROR_INVALID_ARGUMENT);
    /* Nothing pending: progress returns at once with timeout 0. */
    ck_assert_int_eq(tx->ops->progress(tx, 0), LOOM_SUCCESS);
    loom_tx_close(tx);
}
END_TEST

/* LOOM_NSOCKS is a row of tcp's own section (tcp.c): linked here with the
 * transport, it is known, printed, and reaches tcp's instance; out of range
 * it is a warning naming it, and the default (one lane each way) stays. */
static const char *nsocks_open_info(char *err, size_t errlen)
{
    static char info[sizeof((struct loom_tx *)0)->info];
    struct loom_tx_params tp = {.struct_size = sizeof tp,
                                .rank = 0,
                                .nranks = 1,
                                .local_addr = "127.0.0.1",
                                .connect_timeout = 1};
    struct loom_tx *tx = NULL;
    char path[] = "/tmp/check_tcp_err.XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    ck_assert(fd >= 0 && saved >= 0);
    dup2(fd, STDERR_FILENO);
    loom_result_t res = loom_tx_open(&loom_tcp_transport, &tp, &tx);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t n = pread(fd, err, errlen - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    ck_assert_int_eq(res, LOOM_SUCCESS);
    snprintf(info, sizeof info, "%s", tx->info);
    loom_tx_close(tx);
    return info;
}

START_TEST(test_nsocks_row)
{
    char err[4096], line[1024] = "";
    setenv("LOOM_CONF_FILE", "/dev/null", 1);
    setenv("LOOM_NSOCKS", "3", 1);
    loom_config_reset();
    ck_assert_str_eq(nsocks_open_info(err, sizeof err), "tcp (6 sockets per peer)");
    ck_assert_msg(!strstr(err, "LOOM_NSOCKS"), "%s", err);
    ck_assert(loom_config_is_set("LOOM_NSOCKS"));
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    loom_config_print(f);
    rewind(f);
    while (fgets(line, sizeof line, f) && strncmp(line, "LOOM_NSOCKS ", 12) != 0)
        ;
    fclose(f);
    ck_assert_msg(strncmp(line, "LOOM_NSOCKS ", 12) == 0 && strstr(line, "\"3\"") &&
                      strstr(line, " env ") && strstr(line, "striped"),
                  "%s", line);

    setenv("LOOM_NSOCKS", "17", 1);
    loom_config_reset();
    ck_assert_str_eq(nsocks_open_info(err, sizeof err), "tcp (2 sockets per peer)");
    ck_assert_msg(strstr(err, "LOOM_NSOCKS=\"17\" (environment): out of range 1..16"), "%s", err);
    ck_assert(!loom_config_is_set("LOOM_NSOCKS"));
    unsetenv("LOOM_NSOCKS");
    loom_config_reset();
}
END_TEST

/* ---------------------------------------------------------- job key tests */

/* Keys come from LOOM_JOB_KEY (read by the bootstrap and the transport):
 * set in the test before the ranks fork. */
static void set_job_key(const char *key)
{
    if (key)
        setenv("LOOM_JOB_KEY", key, 1);
    else
        unsetenv("LOOM_JOB_KEY");
    unsetenv("LOOM_JOB_KEY_FILE");
    loom_config_reset();
}

START_TEST(test_key_same)
{
    set_job_key("the-tcp-job-key");
    struct job *j = job_new(2);
    job_check(j, mp_run(3, all_to_all_main, j, 40.0, 0), 3);
}
END_TEST

/* Slot where the stranger thread of rank 0 leaves what it saw. */
#define STRANGER_SLOT 31

struct stranger_arg {
    struct sockaddr_in sin;
    uint8_t pre[LOOM_OOB_PREAMBLE_LEN]; /* what hands a socket to tcp */
    char *out;
};

static uint8_t g_pre[LOOM_OOB_PREAMBLE_LEN];

/* A socket to rank 0's port, handed to its tcp instance (the preamble). */
static int stranger_open(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof *sin) != 0 ||
        send(fd, g_pre, sizeof g_pre, MSG_NOSIGNAL) != (ssize_t)sizeof g_pre) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* As stranger_open, with the challenge read. */
static int stranger_connect(const struct sockaddr_in *sin, uint8_t *chal)
{
    int fd = stranger_open(sin);
    if (fd >= 0 && recv(fd, chal, LOOM_AUTH_MSG_LEN, MSG_WAITALL) != LOOM_AUTH_MSG_LEN) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The tcp handshake as "rank 1" to rank 0 with the given key and comm id:
 * its result. */
static loom_result_t stranger_hello(const struct sockaddr_in *sin, const char *keytext,
                                    uint64_t comm_id)
{
    int fd = stranger_open(sin);
    if (fd < 0)
        return LOOM_ERROR_SYSTEM;
    struct loom_auth_key key;
    loom_auth_key_set(&key, keytext, strlen(keytext));
    struct loom_tcp_hello h = {.from = 1, .to = 0, .comm_id = comm_id, .sock = 0};
    uint8_t hello[LOOM_TCP_HELLO_LEN];
    loom_tcp_hello_encode(&h, hello);
    struct loom_hs hs;
    loom_net_set_nonblock(fd);
    loom_result_t res = loom_hs_connect(&hs, &loom_tcp_hs, &key, fd, "rank 0", hello, sizeof hello,
                                        5.0);
    if (res == LOOM_SUCCESS)
        res = loom_hs_run(&hs, -1);
    loom_hs_free(&hs);
    close(fd);
    return res;
}

/* Rank 0's stranger thread, while rank 0 connects: random bytes, a
 * truncated hello, a hello with the right key for another communicator, a
 * hello signed with a wrong key (which must be answered with a refusal),
 * and a silent connection. It writes "refused" when the refusal came. */
static void *stranger_thread(void *argp)
{
    struct stranger_arg *a = argp;
    memcpy(g_pre, a->pre, sizeof g_pre);
    uint8_t chal[LOOM_AUTH_MSG_LEN], msg[100];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 131 + 7);
    int fd = stranger_connect(&a->sin, chal);
    if (fd >= 0) {
        send(fd, msg, sizeof msg, MSG_NOSIGNAL);
        close(fd);
    }
    fd = stranger_connect(&a->sin, chal);
    if (fd >= 0) {
        loom_put_le32(msg, LOOM_TCP_HELLO_MAGIC);
        send(fd, msg, 10, MSG_NOSIGNAL);
        close(fd);
    }
    /* Dropped: closed without a proof. */
    if (stranger_hello(&a->sin, "the-tcp-job-key", 0xdeadbeefull) == LOOM_ERROR_REMOTE)
        strcat(a->out, "other-comm-dropped ");
    if (stranger_hello(&a->sin, "a-wrong-key", 1) == LOOM_ERROR_MISMATCH)
        strcat(a->out, "refused");
    fd = stranger_connect(&a->sin, chal); /* silent until the process ends */
    (void)fd;
    return NULL;
}

static struct job *stranger_job;

static int key_strangers(int rank, const struct sockaddr_storage *addr)
{
    if (rank != 0) {
        usleep(300000); /* let the strangers come first */
        return 0;
    }
    static struct stranger_arg a;
    memcpy(&a.sin, addr, sizeof a.sin);
    loom_oob_preamble(g_oob, LOOM_OOB_KIND_TCP, a.pre);
    a.out = rank_err(stranger_job, STRANGER_SLOT);
    pthread_t t;
    if (pthread_create(&t, NULL, stranger_thread, &a) != 0)
        return 1;
    pthread_detach(t);
    return 0;
}

START_TEST(test_key_strangers_dropped)
{
    set_job_key("the-tcp-job-key");
    struct job *j = job_new(2);
    j->before_connect = key_strangers;
    stranger_job = j;
    unsigned failed = mp_run(3, all_to_all_main, j, 40.0, 0);
    ck_assert_str_eq(rank_err(j, STRANGER_SLOT), "other-comm-dropped refused");
    rank_err(j, STRANGER_SLOT)[0] = '\0';
    job_check(j, failed, 3);
}
END_TEST

/* Rank 2 switches key after the bootstrap: _i = 0 another key, 1 none. */
static const char *key_switch_to;

static int switch_key(int rank, const struct sockaddr_storage *addr)
{
    (void)addr;
    if (rank == 2)
        set_job_key(key_switch_to);
    return 0;
}

START_TEST(test_key_refused)
{
    set_job_key("the-tcp-job-key");
    key_switch_to = _i == 0 ? "another-key" : NULL;
    struct job *j = job_new(1);
    j->connect_timeout = 1.5;
    j->before_connect = switch_key;
    double t0 = mp_now();
    unsigned failed = mp_run(3, all_to_all_main, j, 20.0, 0);
    ck_assert_uint_eq(failed, 7);
    /* well before the 20 s the ranks would otherwise wait (a loaded machine
     * has taken 10 s) */
    ck_assert_double_lt(mp_now() - t0, 15.0);
    /* Rank 2 hears from whichever of ranks 0 and 1 answers first. */
    ck_assert_msg(strstr(rank_err(j, 2), "rank ") &&
                      strstr(rank_err(j, 2), " (127.0.0.1:") &&
                      strstr(rank_err(j, 2), "rejected this rank's job key"),
                  "rank 2: %s", rank_err(j, 2));
    /* The others fail at once too: one names rank 2, which never connected
     * back and is gone; the other may instead see that one leave. */
    int named = 0;
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(strstr(rank_err(j, r), "(127.0.0.1:"), "rank %d: %s", r, rank_err(j, r));
        named |= strstr(rank_err(j, r), "rank 2 (127.0.0.1:") &&
                 (strstr(rank_err(j, r), "is gone") ||
                  strstr(rank_err(j, r), "never connected back"));
    }
    ck_assert_msg(named, "neither rank named rank 2: %s / %s", rank_err(j, 0), rank_err(j, 1));
    munmap(j->errs, 32 * ERRSLOT);
    free(j);
}
END_TEST

/* The pure hello check on tampered hellos (no sockets; the key is the
 * handshake's, check_handshake's). */
START_TEST(test_hello_check)
{
    struct loom_tcp_hello_expect e = {.rank = 0, .nranks = 4, .nsocks = 2, .comm_id = 99};
    uint8_t msg[LOOM_TCP_HELLO_LEN];
    struct loom_tcp_hello h = {.sock = 1, .from = 3, .to = 0, .comm_id = 99}, got;
    char why[300];
    loom_tcp_hello_encode(&h, msg);
    ck_assert_int_eq(loom_tcp_hello_check(&e, msg, sizeof msg, &got, why, sizeof why),
                     LOOM_HS_ACCEPT);
    ck_assert_uint_eq(got.from, 3);
    ck_assert_uint_eq(got.sock, 1);
    /* Wrong job or addressee: dropped with the reason. */
    struct {
        uint64_t comm_id;
        uint32_t to, from, sock;
        const char *why;
    } bad[] = {
        {98, 0, 3, 1,
         "communicator id 0x0000000000000062, expected "
         "0x0000000000000063 (another job?)"},
        {99, 2, 3, 1, "addressed to rank 2 of another instance"},
        {99, 0, 4, 1,
         "claims to be rank 4, which connects the other way or "
         "does not exist"},
        {99, 0, 3, 0xffff, "socket index 65535, only 2 per peer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct loom_tcp_hello b = h;
        b.comm_id = bad[i].comm_id;
        b.to = bad[i].to;
        b.from = bad[i].from;
        b.sock = bad[i].sock;
        loom_tcp_hello_encode(&b, msg);
        ck_assert_int_eq(loom_tcp_hello_check(&e, msg, sizeof msg, &got, why, sizeof why),
                         LOOM_HS_DROP);
        ck_assert_str_eq(why, bad[i].why);
    }
    ck_assert_int_eq(loom_tcp_hello_check(&e, msg, sizeof msg - 1, &got, why, sizeof why),
                     LOOM_HS_DROP);
    ck_assert_str_eq(why, "a tcp hello of 19 bytes, expected 20");
}
END_TEST

/* The receive path's header check (tcp_check.h), each rule in turn. */
START_TEST(test_frame_check)
{
    struct loom_tcp_expect e = {.comm_id = 7, .seq = 3, .stripe = 1, .len = 100,
                                .tag = 9, .sock_index = 1};
    struct loom_tcp_frame f = {.magic = LOOM_TCP_FRAME_MAGIC,
                               .version = LOOM_TCP_VERSION, .stripe = 1, .tag = 9,
                               .comm_id = 7, .seq = 3, .len = 100};
    char why[300] = "";
    ck_assert_int_eq(loom_tcp_frame_check(&f, &e, why, sizeof why), 0);
    struct loom_tcp_frame b = f;
    b.magic = 1;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why), -1);
    ck_assert_str_eq(why, "sent a frame with bad magic 0x00000001");
    b = f;
    b.version = 9;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why), -1);
    ck_assert_str_eq(why, "sent protocol version 9, expected 2");
    b = f;
    b.comm_id = 8;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why), -1);
    ck_assert_str_eq(why, "sent a frame of communicator 0x0000000000000008, "
                          "expected 0x0000000000000007");
    b = f;
    b.stripe = 2;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why), -1);
    ck_assert_str_eq(why, "sent message 3 stripe 2 on socket 1 where message 3 "
                          "stripe 1 was expected");
    b = f;
    b.len = (uint64_t)1 << 62;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why), -1);
    ck_assert_str_eq(why, "sent 4611686018427387904 bytes with tag 9 (message 3, "
                          "stripe 1) where the posted receive expects 100 bytes "
                          "with tag 9");
    /* another call (different tag, desc or count) */
    b = f;
    b.desc = 0x81;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why),
                     LOOM_TCP_FRAME_OTHER_CALL);
    ck_assert_str_eq(why, "is in another collective call (call 9, 0x00000081, count 0; "
                          "this rank is in call 9, 0x00000000, count 0)");
    b = f;
    b.count = 5;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why),
                     LOOM_TCP_FRAME_OTHER_CALL);
    /* a control frame is for the caller to act on */
    b = f;
    b.stripe = LOOM_TCP_CONTROL_STRIPE;
    b.tag = LOOM_TCP_CTL_ABORT;
    ck_assert_int_eq(loom_tcp_frame_check(&b, &e, why, sizeof why),
                     LOOM_TCP_FRAME_CONTROL);
}
END_TEST

static Suite *tcp_suite(void)
{
    Suite *s = suite_create("tcp");
    TCase *tc = tcase_create("mesh");
    tcase_set_timeout(tc, 60);
    int ncases = (int)(sizeof mesh_cases / sizeof mesh_cases[0]);
    tcase_add_loop_test(tc, test_all_to_all, 0, ncases);
    tcase_add_loop_test(tc, test_ring, 0, ncases);
    tcase_add_test(tc, test_many_small_in_order);
    tcase_add_loop_test(tc, test_poll_only, 0, 2);
    tcase_add_loop_test(tc, test_read_ahead, 0, 3);
    tcase_add_loop_test(tc, test_shared_socket, 0, 2);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("failures");
    tcase_set_timeout(tf, 30);
    tcase_add_test(tf, test_killed_peer);
    tcase_add_loop_test(tf, test_frame_mismatch, 0, 2);
    tcase_add_test(tf, test_strangers_during_connect);
    tcase_add_test(tf, test_connect_timeout_names_peer);
    tcase_add_test(tf, test_connect_refused_names_peer);
    tcase_add_test(tf, test_registry_and_arguments);
    tcase_add_test(tf, test_nsocks_row);
    tcase_add_test(tf, test_lanes);
    tcase_add_test(tf, test_sndbuf);
    tcase_add_test(tf, test_key_same);
    tcase_add_test(tf, test_key_strangers_dropped);
    tcase_add_loop_test(tf, test_key_refused, 0, 2);
    tcase_add_test(tf, test_hello_check);
    tcase_add_test(tf, test_frame_check);
    suite_add_tcase(s, tf);
    return s;
}

int main(void)
{
    mp_before_exit = close_oob;
    SRunner *sr = srunner_create(tcp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
