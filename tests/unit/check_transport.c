/* check_transport.c - the transport contract, run over every transport in
 * the registry (and every configuration of one: a provider, a model), with
 * forked ranks on 127.0.0.1 meeting through the out-of-band service:
 *   FIFO matching of many messages of mixed sizes, both directions at once;
 *   lengths 0, 1, odd, past 64 KiB and several MiB; many requests
 *   outstanding; a ring of 4 ranks (connections on first use to several
 *   peers); wake() from another thread; shutdown fails what is pending and,
 *   at once, what comes later, with its result, and the peer's receive with
 *   LOOM_ERROR_REMOTE naming it; a peer killed with SIGKILL is named, its
 *   receive and later posts failing with LOOM_ERROR_REMOTE; a receive of
 *   another call is LOOM_ERROR_MISMATCH with both fingerprints (for
 *   transports that check fingerprints themselves; the core's envelope
 *   covers the others, test_comm); strangers' bytes on the rank's port
 *   change nothing.
 * A transport that is not built is not in the registry; one that is built
 * but cannot run here (no device, no provider) is reported as skipped with
 * available()'s reason. */
#include "build_config.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "loom.h"
#include "util.h"
#include "config.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "transport/transport.h"
#include "../support/mp_util.h"
#include "../support/tx_util.h"

#define ERRSLOT 1024
#define STEP 20.0

/* A configuration a transport is run in: its name and environment, and
 * where a transport words its errors in its own way, what they say (NULL:
 * not checked). Other transports' files add rows for their variants
 * (providers, models). */
struct tx_config {
    const char *transport;
    const char *label;
    const char *env[4]; /* "NAME=value", NULL-terminated */
    int peer_addr;      /* errors name a peer with its address: "rank 1 (127.0.0.1:" */
    const char *gone;   /* what it says of a peer killed with its link up */
    const char *shut;   /* what a post after shutdown says */
};

#define TCP_WORDS                                                                                  \
    .peer_addr = 1, .gone = "closed the connection without a goodbye",                             \
    .shut = "the transport was shut down"
static const struct tx_config configs[] = {
    {.transport = "tcp", .label = "tcp", .env = {NULL}, TCP_WORDS},
    {.transport = "tcp", .label = "tcp, 2 lanes", .env = {"LOOM_NSOCKS=2", NULL}, TCP_WORDS},
    {.transport = "ofi",
     .label = "ofi tcp;ofi_rxm",
     .env = {"LOOM_OFI_PROVIDER=tcp;ofi_rxm", NULL}},
    {.transport = "ofi", .label = "ofi shm", .env = {"LOOM_OFI_PROVIDER=shm", NULL}},
    {.transport = "ofi",
     .label = "ofi udp;ofi_rxd",
     .env = {"LOOM_OFI_PROVIDER=udp;ofi_rxd", NULL}},
    {.transport = "verbs",
     .label = "verbs (software model)",
     .env = {"LOOM_TEST_VERBS_MODEL=1", NULL}},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))

struct job {
    int port;
    const struct tx_config *cfg;
    char *errs; /* shared: ERRSLOT per rank */
};

static char *rank_err(struct job *j, int rank)
{
    return j->errs + rank * ERRSLOT;
}

static void apply_env(const struct tx_config *c)
{
    for (int i = 0; c->env[i]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", c->env[i]);
        char *eq = strchr(buf, '=');
        *eq = 0;
        setenv(buf, eq + 1, 1);
    }
    loom_config_reset();
}

/* The transport of configuration c, or NULL with why (not built, or not
 * runnable here). */
static const struct loom_transport *usable(const struct tx_config *c, char *why,
                                           size_t len)
{
    apply_env(c);
    const struct loom_transport *ops = loom_transport_find(c->transport);
    if (!ops) {
        snprintf(why, len, "the %s transport is not built", c->transport);
        return NULL;
    }
    if (ops->available && ops->available(why, len) != 0)
        return NULL;
    return ops;
}

/* Does msg name rank r the way configuration c words it (or at least as
 * "rank r")? */
static int names_rank(const struct tx_config *c, const char *msg, int r)
{
    char want[64];
    if (c->peer_addr)
        snprintf(want, sizeof want, "rank %d (127.0.0.1:", r);
    else
        snprintf(want, sizeof want, "rank %d", r);
    return strstr(msg, want) != NULL;
}

static int setup(struct job *j, int rank, int n, struct loom_tx **tx)
{
    apply_env(j->cfg);
    const struct loom_transport *ops = loom_transport_find(j->cfg->transport);
    return txu_setup(ops, j->port, rank, n, tx, rank_err(j, rank), ERRSLOT);
}

static int post(struct loom_tx *tx, struct loom_tx_req *r, int peer, int send, void *buf,
                size_t len, uint32_t tag)
{
    return txu_post(tx, r, peer, send, buf, len, tag, 0x10 + tag % 7);
}

static uint64_t seed(int from, int to, int i)
{
    return (uint64_t)from << 40 ^ (uint64_t)to << 32 ^ (uint64_t)i;
}

static struct job *job_new(int cfg)
{
    struct job *j = calloc(1, sizeof *j);
    ck_assert_ptr_nonnull(j);
    j->port = mp_free_port();
    j->cfg = &configs[cfg];
    j->errs = mmap(NULL, 8 * ERRSLOT, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    ck_assert_ptr_ne(j->errs, MAP_FAILED);
    memset(j->errs, 0, 8 * ERRSLOT);
    return j;
}

static void job_end(struct job *j, unsigned failed, int n)
{
    for (int r = 0; r < n; r++)
        if (rank_err(j, r)[0])
            fprintf(stderr, "[%s] rank %d: %s\n", j->cfg->label, r, rank_err(j, r));
    ck_assert_msg(failed == 0, "[%s] ranks failed: mask 0x%x (rank 0: %s; rank 1: %s)",
                  j->cfg->label, failed, rank_err(j, 0), rank_err(j, 1));
    munmap(j->errs, 8 * ERRSLOT);
    free(j);
}

/* Skip (with the reason) a configuration that cannot run here, or one that
 * LOOM_TEST_CONFIG (a label, to run one configuration alone) leaves out. */
#define CONFIG_OR_SKIP(i)                                                      \
    char why_[512] = "";                                                       \
    const char *only_ = getenv("LOOM_TEST_CONFIG");                            \
    if (only_ && strcmp(only_, configs[i].label) != 0)                         \
        return;                                                                \
    if (!usable(&configs[i], why_, sizeof why_)) {                             \
        fprintf(stderr, "SKIP [%s]: %s\n", configs[i].label, why_);            \
        return;                                                                \
    }

/* ---- FIFO, sizes, both directions, many outstanding ------------------------ */

static const size_t fifo_sizes[] = {0, 1, 7, 4095, 65537, (4u << 20) + 3};
#define NFIFO 120

static int fifo_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    int peer = 1 - rank;
    struct loom_tx_req *reqs = calloc(2 * NFIFO, sizeof *reqs);
    uint8_t **sb = calloc(NFIFO, sizeof *sb), **rb = calloc(NFIFO, sizeof *rb);
    if (!reqs || !sb || !rb)
        return 20;
    /* all posted at once, both ways: FIFO order decides the matching */
    for (int i = 0; i < NFIFO; i++) {
        size_t len = fifo_sizes[i % (sizeof fifo_sizes / sizeof fifo_sizes[0])];
        if (i % 17 == 5)
            len = fifo_sizes[5]; /* a few large ones among the small */
        sb[i] = malloc(len + 1);
        rb[i] = malloc(len + 1);
        mp_fill(sb[i], len, seed(rank, peer, i));
        memset(rb[i], 0xa5, len + 1);
        if (post(tx, &reqs[2 * i], peer, 0, rb[i], len, (uint32_t)i) ||
            post(tx, &reqs[2 * i + 1], peer, 1, sb[i], len, (uint32_t)i)) {
            snprintf(rank_err(j, rank), ERRSLOT, "post %d: %s", i, tx->errmsg);
            return 21;
        }
    }
    loom_result_t res = txu_wait(tx, reqs, 2 * NFIFO, STEP);
    if (res != LOOM_SUCCESS) {
        snprintf(rank_err(j, rank), ERRSLOT, "%s: %s", loom_result_string(res), tx->errmsg);
        return 22;
    }
    for (int i = 0; i < NFIFO; i++) {
        long bad = mp_verify(rb[i], reqs[2 * i].len, seed(peer, rank, i));
        if (bad >= 0 || rb[i][reqs[2 * i].len] != 0xa5) {
            snprintf(rank_err(j, rank), ERRSLOT, "message %d (%zu bytes) wrong at %ld", i,
                     reqs[2 * i].len, bad);
            return 23;
        }
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(reqs);
    txu_teardown(tx);
    return 0;
}

START_TEST(test_fifo_sizes_both_ways)
{
    CONFIG_OR_SKIP(_i);
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, fifo_main, j, 60.0, 0), 2);
}
END_TEST

/* ---- a ring of 4: connections on first use to several peers ---------------- */

static int ring_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    size_t len = 300000;
    uint8_t *sb = malloc(len), *rb = malloc(len);
    for (int it = 0; it < 20; it++) {
        struct loom_tx_req r[2];
        mp_fill(sb, len, seed(rank, next, it));
        if (post(tx, &r[0], prev, 0, rb, len, (uint32_t)it) ||
            post(tx, &r[1], next, 1, sb, len, (uint32_t)it) || txu_wait(tx, r, 2, STEP)) {
            snprintf(rank_err(j, rank), ERRSLOT, "step %d: %s", it, tx->errmsg);
            return 21;
        }
        if (mp_verify(rb, len, seed(prev, rank, it)) >= 0) {
            snprintf(rank_err(j, rank), ERRSLOT, "step %d: wrong bytes", it);
            return 22;
        }
    }
    free(sb);
    free(rb);
    txu_teardown(tx);
    return 0;
}

START_TEST(test_ring_of_four)
{
    CONFIG_OR_SKIP(_i);
    struct job *j = job_new(_i);
    job_end(j, mp_run(4, ring_main, j, 60.0, 0), 4);
}
END_TEST

/* ---- wake, shutdown --------------------------------------------------------- */

/* Calls wake() 300 ms after it starts, then every 100 ms until told to stop:
 * a wake-up that comes before the wait cannot be lost that way. */
struct waker {
    struct loom_tx *tx;
    atomic_int stop;
};

static void *wake_soon(void *arg)
{
    struct waker *w = arg;
    usleep(300000);
    while (!atomic_load(&w->stop)) {
        w->tx->ops->wake(w->tx);
        usleep(100000);
    }
    return NULL;
}

static int wake_shutdown_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    uint8_t b = 1, got = 0;
    struct loom_tx_req r[2];
    /* one message both ways first, so that the link is up */
    if (post(tx, &r[0], 1 - rank, 0, &got, 1, 1) || post(tx, &r[1], 1 - rank, 1, &b, 1, 1) ||
        txu_wait(tx, r, 2, STEP)) {
        snprintf(rank_err(j, rank), ERRSLOT, "warm-up: %s", tx->errmsg);
        return 20;
    }
    if (rank == 1) {
        /* rank 0 shuts down: this rank's pending receive fails, named */
        if (post(tx, &r[0], 0, 0, &got, 1, 2))
            return 21;
        loom_result_t res = txu_wait(tx, r, 1, STEP);
        snprintf(rank_err(j, rank), ERRSLOT, "%s: %s", loom_result_string(res), tx->errmsg);
        if (res != LOOM_ERROR_REMOTE || r[0].status != LOOM_ERROR_REMOTE ||
            !names_rank(j->cfg, tx->errmsg, 0))
            return 22;
        rank_err(j, rank)[0] = 0;
        txu_teardown(tx);
        return 0;
    }
    if (post(tx, &r[0], 1, 0, &got, 1, 2))
        return 23;
    pthread_t th;
    struct waker wk = {.tx = tx};
    pthread_create(&th, NULL, wake_soon, &wk);
    double t0 = mp_now();
    loom_result_t res = tx->ops->progress(tx, -1); /* only wake() ends this */
    double dt = mp_now() - t0;
    atomic_store(&wk.stop, 1);
    pthread_join(th, NULL);
    if (res != LOOM_SUCCESS || r[0].done || dt < 0.25 || dt > 2.0) {
        snprintf(rank_err(j, rank), ERRSLOT, "progress(-1) after wake: %s in %.3f s, done %d",
                 loom_result_string(res), dt, r[0].done);
        return 24;
    }
    tx->ops->shutdown(tx, LOOM_ERROR_ABORTED);
    if (!r[0].done || r[0].status != LOOM_ERROR_ABORTED) {
        snprintf(rank_err(j, rank), ERRSLOT, "pending receive after shutdown: done %d, %s",
                 r[0].done, loom_result_string(r[0].status));
        return 25;
    }
    struct loom_tx_req later = {.peer = 1, .buf = &b, .len = 1};
    if (tx->ops->isend(tx, &later) != LOOM_ERROR_ABORTED || !later.done ||
        (j->cfg->shut && !strstr(tx->errmsg, j->cfg->shut))) {
        snprintf(rank_err(j, rank), ERRSLOT,
                 "a post after shutdown did not fail at once "
                 "with the shutdown's result: %s",
                 tx->errmsg);
        return 26;
    }
    if (tx->ops->progress(tx, 0) != LOOM_SUCCESS) {
        snprintf(rank_err(j, rank), ERRSLOT, "progress after shutdown: %s", tx->errmsg);
        return 27;
    }
    usleep(300000); /* rank 1 reads the notice before the process goes */
    txu_teardown(tx);
    return 0;
}

START_TEST(test_wake_and_shutdown)
{
    CONFIG_OR_SKIP(_i);
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, wake_shutdown_main, j, 30.0, 0), 2);
}
END_TEST

/* ---- a peer killed with SIGKILL ---------------------------------------------- */

static int killed_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    uint8_t b = 1, got = 0;
    struct loom_tx_req r[2];
    if (post(tx, &r[0], 1 - rank, 0, &got, 1, 1) || post(tx, &r[1], 1 - rank, 1, &b, 1, 1) ||
        txu_wait(tx, r, 2, STEP))
        return 20;
    if (rank == 1) {
        usleep(100000);
        raise(SIGKILL);
    }
    uint8_t buf[64];
    if (post(tx, &r[0], 1, 0, buf, sizeof buf, 2))
        return 21;
    double t0 = mp_now();
    loom_result_t res = txu_wait(tx, r, 1, STEP);
    snprintf(rank_err(j, rank), ERRSLOT, "%s after %.2f s: %s", loom_result_string(res),
             mp_now() - t0, tx->errmsg);
    if (res != LOOM_ERROR_REMOTE || mp_now() - t0 > 10.0 || !r[0].done ||
        r[0].status != LOOM_ERROR_REMOTE || !names_rank(j->cfg, tx->errmsg, 1) ||
        (j->cfg->gone && !strstr(tx->errmsg, j->cfg->gone)))
        return 22;
    /* later posts fail at once with the same error */
    struct loom_tx_req s = {.peer = 1, .buf = buf, .len = 8};
    if (tx->ops->isend(tx, &s) != LOOM_ERROR_REMOTE || !s.done || s.status != LOOM_ERROR_REMOTE) {
        snprintf(rank_err(j, rank), ERRSLOT, "a post after the loss: %s", tx->errmsg);
        return 23;
    }
    rank_err(j, rank)[0] = 0;
    txu_teardown(tx);
    return 0;
}

START_TEST(test_killed_peer_named)
{
    CONFIG_OR_SKIP(_i);
    const struct loom_transport *ops = loom_transport_find(configs[_i].transport);
    if (!(ops->caps & LOOM_TX_CAP_LIVENESS)) {
        fprintf(stderr, "SKIP [%s]: no LOOM_TX_CAP_LIVENESS: the core's timeout "
                "names a dead peer\n", configs[_i].label);
        return;
    }
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, killed_main, j, 30.0, 2u), 2);
}
END_TEST

/* ---- a receive of another call ----------------------------------------------- */

static int mismatch_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    uint8_t buf[256] = {0};
    struct loom_tx_req r;
    /* rank 0 is in call 7 (desc 0x21), rank 1 expects call 7 with desc 0x22 */
    r = (struct loom_tx_req){.peer = 1 - rank, .buf = buf, .len = 64, .tag = 7,
                             .desc = rank == 0 ? 0x21 : 0x22, .count = 16};
    tx->ops->connect(tx, 1 - rank);
    if ((rank == 0 ? tx->ops->isend(tx, &r) : tx->ops->irecv(tx, &r)) < 0)
        return 20;
    loom_result_t res = txu_wait(tx, &r, 1, STEP);
    if (rank == 0) {
        /* the sender may or may not see it fail: the receiver names it */
        usleep(500000);
        txu_teardown(tx);
        return 0;
    }
    snprintf(rank_err(j, rank), ERRSLOT, "%s: %s (mismatch %d: tag %u desc 0x%x)",
             loom_result_string(res), tx->errmsg, tx->mismatch.valid, tx->mismatch.tag,
             tx->mismatch.desc);
    if (res != LOOM_ERROR_MISMATCH || !tx->mismatch.valid || tx->mismatch.peer != 0 ||
        tx->mismatch.tag != 7 || tx->mismatch.desc != 0x21 || tx->mismatch.count != 16)
        return 21;
    rank_err(j, rank)[0] = 0;
    txu_teardown(tx);
    return 0;
}

START_TEST(test_other_call_is_mismatch)
{
    CONFIG_OR_SKIP(_i);
    const struct loom_transport *ops = loom_transport_find(configs[_i].transport);
    if (!(ops->caps & LOOM_TX_CAP_FINGERPRINT)) {
        fprintf(stderr, "SKIP [%s]: no LOOM_TX_CAP_FINGERPRINT: the core's envelope "
                "checks calls (test_comm)\n", configs[_i].label);
        return;
    }
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, mismatch_main, j, 30.0, 0), 2);
}
END_TEST

/* ---- strangers on the port --------------------------------------------------- */

static int strangers_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    if (rank == 0) {
        /* junk, a valid preamble of each kind followed by junk, silence */
        struct sockaddr_storage ss;
        socklen_t sl;
        loom_oob_addr(txu_oob, 0, &ss, &sl);
        static const uint32_t kinds[] = {0, LOOM_OOB_KIND_TCP, LOOM_OOB_KIND_BOOT,
                                         LOOM_OOB_KIND_VERBS, LOOM_OOB_KIND_OFI};
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&ss, sl) != 0)
                return 20;
            uint8_t msg[200];
            for (size_t i = 0; i < sizeof msg; i++)
                msg[i] = (uint8_t)(i * 29 + k);
            if (kinds[k])
                loom_oob_preamble(txu_oob, kinds[k], msg);
            if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) < 0)
                return 21;
        }
    }
    /* the job's own traffic is untouched */
    uint8_t sb[5000], rb[5000];
    for (int i = 0; i < 30; i++) {
        struct loom_tx_req r[2];
        mp_fill(sb, sizeof sb, seed(rank, 1 - rank, i));
        if (post(tx, &r[0], 1 - rank, 0, rb, sizeof rb, (uint32_t)i) ||
            post(tx, &r[1], 1 - rank, 1, sb, sizeof sb, (uint32_t)i) || txu_wait(tx, r, 2, STEP) ||
            mp_verify(rb, sizeof rb, seed(1 - rank, rank, i)) >= 0) {
            snprintf(rank_err(j, rank), ERRSLOT, "message %d: %s", i, tx->errmsg);
            return 22;
        }
    }
    txu_teardown(tx);
    return 0;
}

START_TEST(test_strangers_change_nothing)
{
    CONFIG_OR_SKIP(_i);
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, strangers_main, j, 30.0, 0), 2);
}
END_TEST

static Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = tcase_create("contract");
    tcase_set_timeout(tc, 90);
    tcase_add_loop_test(tc, test_fifo_sizes_both_ways, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_ring_of_four, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_wake_and_shutdown, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_killed_peer_named, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_other_call_is_mismatch, 0, NCONFIGS);
    tcase_add_loop_test(tc, test_strangers_change_nothing, 0, NCONFIGS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    mp_before_exit = txu_close_oob;
    SRunner *sr = srunner_create(transport_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
