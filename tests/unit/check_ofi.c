/* check_ofi.c - the libfabric transport's own cases, on the providers
 * tcp;ofi_rxm, shm and udp;ofi_rxd (each skipped with the reason where it
 * is not there; the whole suite skips, 77, where ofi is not built):
 *
 * choice:   available() and a communicator's error name the providers found
 *           when LOOM_OFI_PROVIDER asks for one that is not there;
 * split:    messages split into many posts (LOOM_TEST_OFI_CHUNK) through the
 *           registration path (LOOM_TEST_OFI_REG: bounce slots for small
 *           messages, the registration cache for large), every size exact;
 * realloc:  a buffer freed and another allocated at the same address between
 *           messages: the right bytes every time (the cache's registration
 *           of the old pages is never used for the new ones);
 * length:   a message shorter or longer than the receive does not complete
 *           it (and later ones wait behind it: FIFO);
 * closed:   a mismatch notice, then the peer's endpoint closed under a
 *           send in flight: the mismatch, not the provider's error;
 * mismatch: ranks in different calls fail with LOOM_ERROR_MISMATCH naming
 *           both calls (through the core's envelope);
 * kill -9:  a rank killed in a 3-rank job: the others fail within seconds
 *           naming it;
 * strangers: another endpoint sends tagged messages with the very tags a
 *           rank expects, and (tcp;ofi_rxm) junk reaches the provider's
 *           port: nothing matches, the job's bytes are exact (junk datagrams
 *           crash libfabric 1.17's udp;ofi_rxd itself: not sent there);
 * job key:  with LOOM_JOB_KEY the links come up (hello and ACK proven) and
 *           carry the job's bytes;
 * sndbuf:   (tcp;ofi_rxm) once a peer's first message completed, the
 *           provider's socket between the two ranks has LOOM_SOCKET_SNDBUF
 *           (doubled by Linux), and with LOOM_SOCKET_SNDBUF=0 none is
 *           touched. (The contract: check_transport.) */
#include "build_config.h"

#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "loom.h"

#ifndef LOOM_HAVE_OFI_TRANSPORT
int main(void)
{
    printf("SKIP: the ofi transport is not built (no libfabric at configure time)\n");
    return 77;
}
#else

#include "config.h"
#include "bootstrap/oob.h"
#include "transport/transport.h"
#include "transport/ofi/ofi_priv.h"
#include "tx_util.h"
#include "mp_util.h"

#define ERRSLOT 1024
#define NPROV 3
static const char *const provs[NPROV] = {"tcp;ofi_rxm", "shm", "udp;ofi_rxd"};

struct job {
    int port;
    int prov;
    char err[4][ERRSLOT];
    uint64_t v[4][4]; /* per-rank numbers reported back */
};

static struct job *job_new(int prov)
{
    struct job *j = txu_shared_new(sizeof *j);
    j->port = mp_free_port();
    j->prov = prov;
    return j;
}

static void job_end(struct job *j, unsigned failed, int n)
{
    for (int r = 0; r < n; r++)
        if (j->err[r][0])
            fprintf(stderr, "[%s] rank %d: %s\n", provs[j->prov], r, j->err[r]);
    ck_assert_msg(failed == 0, "[%s] ranks failed: mask 0x%x (rank 0: %s; rank 1: %s)",
                  provs[j->prov], failed, j->err[0], j->err[1]);
    munmap(j, sizeof *j);
}

static void use_provider(int prov)
{
    setenv("LOOM_OFI_PROVIDER", provs[prov], 1);
    loom_config_reset();
}

/* Whether provider prov is there; else print why (the case is skipped). */
static int provider_or_skip(int prov)
{
    char why[512] = "";
    const char *only = getenv("CHECK_OFI_PROVIDER"); /* for debugging: one provider */
    if (only && strcmp(only, provs[prov]) != 0)
        return 0;
    use_provider(prov);
    if (loom_ofi_transport.available(why, sizeof why) == 0)
        return 1;
    fprintf(stderr, "SKIP [ofi %s]: %s\n", provs[prov], why);
    return 0;
}

static int setup(void *job, int rank, int n, struct loom_tx **tx)
{
    struct job *j = job;
    use_provider(j->prov);
    return txu_setup(&loom_ofi_transport, j->port, rank, n, tx, j->err[rank], ERRSLOT);
}

static int post(struct loom_tx *tx, struct loom_tx_req *r, int peer, int send, void *buf,
                size_t len, uint32_t tag)
{
    return txu_post(tx, r, peer, send, buf, len, tag, 0x40);
}

static uint64_t seed(int from, int to, int i)
{
    return (uint64_t)from << 40 ^ (uint64_t)to << 32 ^ (uint64_t)i;
}

/* ---- provider choice ---- */

START_TEST(test_provider_choice)
{
    char why[512] = "";
    setenv("LOOM_OFI_PROVIDER", "nonesuch", 1);
    loom_config_reset();
    ck_assert_int_ne(loom_ofi_transport.available(why, sizeof why), 0);
    ck_assert_msg(strstr(why, "LOOM_OFI_PROVIDER=nonesuch") && strstr(why, "found: "),
                  "available() said: %s", why);
    /* a communicator asked for it fails at once, saying the same */
    setenv("LOOM_TRANSPORT", "ofi", 1);
    loom_config_reset();
    loom_comm_t c = NULL;
    ck_assert_int_eq(loom_comm_init_url("tcp://127.0.0.1:1", 2, 0, &c),
                     LOOM_ERROR_NOT_SUPPORTED);
    const char *msg = loom_get_error_string(NULL);
    ck_assert_msg(strstr(msg, "LOOM_TRANSPORT=ofi") && strstr(msg, "found: "), "said: %s", msg);
    unsetenv("LOOM_TRANSPORT");
    /* the default order finds one here (tcp;ofi_rxm at least) */
    unsetenv("LOOM_OFI_PROVIDER");
    loom_config_reset();
    ck_assert_int_eq(loom_ofi_transport.available(why, sizeof why), 0);
}
END_TEST

/* ---- split messages through the registration path ---- */

static const size_t split_sizes[] = {0, 1, 999, 1000, 1001, 16384, 16385, 100000, 300001};
#define NSPLIT (sizeof split_sizes / sizeof split_sizes[0])

static int split_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    setenv("LOOM_TEST_OFI_CHUNK", "1000", 1);
    setenv("LOOM_TEST_OFI_REG", "1", 1);
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    struct ox_priv *vp = tx->priv;
    struct loom_tx_req r[2 * NSPLIT];
    uint8_t *sb[NSPLIT], *rb[NSPLIT];
    for (size_t i = 0; i < NSPLIT; i++) {
        size_t len = split_sizes[i];
        sb[i] = malloc(len + 1);
        rb[i] = malloc(len + 1);
        mp_fill(sb[i], len, seed(rank, 1 - rank, (int)i));
        memset(rb[i], 0x5a, len + 1);
        if (post(tx, &r[2 * i], 1 - rank, 0, rb[i], len, (uint32_t)i) ||
            post(tx, &r[2 * i + 1], 1 - rank, 1, sb[i], len, (uint32_t)i)) {
            snprintf(j->err[rank], ERRSLOT, "post %zu: %s", i, tx->errmsg);
            return 20;
        }
    }
    if (txu_wait(tx, r, 2 * NSPLIT, 30.0) != LOOM_SUCCESS) {
        snprintf(j->err[rank], ERRSLOT, "%s", tx->errmsg);
        return 21;
    }
    for (size_t i = 0; i < NSPLIT; i++) {
        long bad = mp_verify(rb[i], split_sizes[i], seed(1 - rank, rank, (int)i));
        if (bad >= 0 || rb[i][split_sizes[i]] != 0x5a) {
            snprintf(j->err[rank], ERRSLOT, "%zu bytes: wrong at %ld", split_sizes[i], bad);
            return 22;
        }
        free(sb[i]);
        free(rb[i]);
    }
    j->v[rank][0] = vp->counts.chunks;
    j->v[rank][1] = vp->counts.regs;
    j->v[rank][2] = vp->counts.bounced;
    txu_teardown(tx);
    return 0;
}

START_TEST(test_split_registered)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    unsigned failed = mp_run(2, split_main, j, 40.0, 0);
    uint64_t want = 0;
    for (size_t i = 0; i < NSPLIT; i++)
        want += split_sizes[i] ? (split_sizes[i] + 999) / 1000 : 1;
    for (int r = 0; r < 2 && !failed; r++) {
        ck_assert_msg(j->v[r][0] == 2 * want, "[%s] rank %d posted %llu chunks, expected %llu",
                      provs[_i], r, (unsigned long long)j->v[r][0],
                      (unsigned long long)(2 * want));
        ck_assert_msg(j->v[r][1] >= 2, "[%s] rank %d registered %llu regions", provs[_i], r,
                      (unsigned long long)j->v[r][1]);
        ck_assert_msg(j->v[r][2] > 0, "[%s] rank %d bounced nothing", provs[_i], r);
    }
    job_end(j, failed, 2);
}
END_TEST

/* ---- free and reallocate at the same address ---- */

#define REALLOC_LEN (512u * 1024)
#define REALLOC_ITERS 24

static int realloc_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    setenv("LOOM_TEST_OFI_REG", "1", 1);
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    struct ox_priv *vp = tx->priv;
    uintptr_t seen[2 * REALLOC_ITERS];
    int nseen = 0, same = 0;
    for (int it = 0; it < REALLOC_ITERS; it++) {
        /* mapped and unmapped each round (as free does above malloc's mmap
         * threshold): the kernel usually hands the same addresses back,
         * with other pages */
        uint8_t *sb = mmap(NULL, REALLOC_LEN, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        uint8_t *rb = mmap(NULL, REALLOC_LEN, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (sb == MAP_FAILED || rb == MAP_FAILED)
            return 20;
        int again = 0;
        for (int k = 0; k < nseen; k++)
            again |= seen[k] == (uintptr_t)rb || seen[k] == (uintptr_t)sb;
        same += again;
        seen[nseen++] = (uintptr_t)sb;
        seen[nseen++] = (uintptr_t)rb;
        mp_fill(sb, REALLOC_LEN, seed(rank, 1 - rank, it));
        memset(rb, 0, REALLOC_LEN);
        if (txu_exchange(tx, 1 - rank, sb, rb, REALLOC_LEN, (uint32_t)it, 0x40, 20.0)) {
            snprintf(j->err[rank], ERRSLOT, "round %d: %s", it, tx->errmsg);
            return 21;
        }
        long bad = mp_verify(rb, REALLOC_LEN, seed(1 - rank, rank, it));
        if (bad >= 0) {
            snprintf(j->err[rank], ERRSLOT, "round %d: wrong bytes at %ld", it, bad);
            return 22;
        }
        munmap(sb, REALLOC_LEN);
        munmap(rb, REALLOC_LEN);
    }
    struct loom_regcache_stats st;
    loom_regcache_stats(vp->rc, &st);
    j->v[rank][0] = (uint64_t)same;
    j->v[rank][1] = st.invalidated;
    j->v[rank][2] = (uint64_t)loom_regcache_cached(vp->rc, NULL, 0);
    j->v[rank][3] = vp->counts.regs;
    txu_teardown(tx);
    return 0;
}

START_TEST(test_free_and_reallocate)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    unsigned failed = mp_run(2, realloc_main, j, 60.0, 0);
    for (int r = 0; r < 2 && !failed; r++) {
        fprintf(stderr, "[%s] rank %d: same address %llu times, cache %s, %llu invalidated, "
                "%llu registrations\n", provs[_i], r, (unsigned long long)j->v[r][0],
                j->v[r][2] ? "on" : "per use", (unsigned long long)j->v[r][1],
                (unsigned long long)j->v[r][3]);
        if (j->v[r][2] && j->v[r][0] > 0)
            ck_assert_msg(j->v[r][1] > 0, "[%s] rank %d: buffers came back at the same "
                          "address but no registration was invalidated", provs[_i], r);
    }
    job_end(j, failed, 2);
}
END_TEST

/* ---- lengths ---- */

static int length_main(struct loom_tx *tx, int rank, void *arg)
{
    struct job *j = arg;
    uint8_t buf[256] = {0};
    struct loom_tx_req r[3];
    /* rank 1 expects 64 bytes, twice; rank 0 sends 50, then 100 bytes: no
     * receive completes with them (the core's envelope names the mismatch:
     * test_comm_counts_differ); a message of the right length then goes
     * through (it is message 2 on the link, its receive the third) */
    if (rank == 0) {
        if (post(tx, &r[0], 1, 1, buf, 50, 1) || post(tx, &r[1], 1, 1, buf, 100, 2) ||
            post(tx, &r[2], 1, 1, buf, 64, 3))
            return 20;
        txu_wait(tx, &r[2], 1, 5.0);
        usleep(1200000); /* rank 1 looks for a second */
        txu_teardown(tx);
        return 0;
    }
    uint8_t a[64], b[64], c[64];
    if (post(tx, &r[0], 0, 0, a, 64, 1) || post(tx, &r[1], 0, 0, b, 64, 2) ||
        post(tx, &r[2], 0, 0, c, 64, 3))
        return 21;
    double until = mp_now() + 1.0;
    while (mp_now() < until && !r[0].done && !r[1].done)
        if (tx->ops->progress(tx, 10000) < 0)
            break;
    if (r[0].done || r[1].done) {
        snprintf(j->err[rank], ERRSLOT, "a receive of 64 bytes completed with a message of "
                 "%s bytes: %s, %s", r[0].done ? "50" : "100",
                 loom_result_string(r[0].done ? r[0].status : r[1].status), tx->errmsg);
        return 22;
    }
    if (r[2].done) {
        snprintf(j->err[rank], ERRSLOT, "the third receive completed before the first two");
        return 23;
    }
    tx->ops->shutdown(tx, LOOM_ERROR_ABORTED);
    txu_teardown(tx);
    return 0;
}

START_TEST(test_length_checked)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, txu_run(2, setup, length_main, j, 30.0, 0), 2);
}
END_TEST

/* setup(), then one message each way (call 1): the link is up */
static int setup_linked(void *job, int rank, int n, struct loom_tx **tx)
{
    struct job *j = job;
    int rc = setup(j, rank, n, tx);
    if (rc)
        return rc;
    uint8_t one = 1, got = 0;
    if (txu_exchange(*tx, 1 - rank, &one, &got, 1, 1, 0x40, 10.0)) {
        snprintf(j->err[rank], ERRSLOT, "warm-up: %s", (*tx)->errmsg);
        return 20;
    }
    return 0;
}

/* ---- a failure notice with data of an earlier call on its way ---- */

/* Rank 0 sends a message of call 5, then fails in call 6. Rank 1 receives
 * that message late, and also waits for one of call 5 that rank 0 never
 * sends: the message arrives whatever the order of the notice and the data
 * (they take different paths), and the receive it never sends fails with
 * the notice's reason once the grace after the notice (0.5 s) is over. */
static int notice_main(struct loom_tx *tx, int rank, void *arg)
{
    struct job *j = arg;
    uint8_t d[256], x[64], one = 1, got = 0;
    struct loom_tx_req r[3];
    if (rank == 0) {
        mp_fill(d, sizeof d, seed(0, 1, 5));
        if (post(tx, &r[0], 1, 1, d, sizeof d, 5) || txu_wait(tx, r, 1, 10.0) ||
            post(tx, &r[1], 1, 0, &got, 1, 5) || txu_wait(tx, &r[1], 1, 10.0)) {
            snprintf(j->err[rank], ERRSLOT, "before the notice: %s", tx->errmsg);
            return 21;
        }
        tx->notice_seq = 6;
        tx->notice_desc = 0x40;
        tx->notice_count = 1;
        tx->notice_culprit = -1;
        tx->ops->shutdown(tx, LOOM_ERROR_TIMEOUT);
        usleep(1500000);
        txu_teardown(tx);
        return 0;
    }
    usleep(300000); /* the message waits at this rank, unreceived */
    double t0 = mp_now();
    if (post(tx, &r[0], 0, 0, d, sizeof d, 5) || post(tx, &r[1], 0, 0, x, sizeof x, 5) ||
        post(tx, &r[2], 0, 1, &one, 1, 5) || txu_wait(tx, &r[2], 1, 10.0)) {
        snprintf(j->err[rank], ERRSLOT, "posting: %s", tx->errmsg);
        return 22;
    }
    loom_result_t res = txu_wait(tx, &r[0], 1, 10.0);
    if (res != LOOM_SUCCESS || mp_verify(d, sizeof d, seed(0, 1, 5)) >= 0) {
        snprintf(j->err[rank], ERRSLOT, "the message sent before the notice: %s: %s",
                 loom_result_string(res), res ? tx->errmsg : "wrong bytes");
        return 23;
    }
    res = txu_wait(tx, &r[1], 1, 10.0);
    double dt = mp_now() - t0;
    if (res != LOOM_ERROR_REMOTE || !strstr(tx->errmsg, "failed in call #6") || dt < 0.45) {
        snprintf(j->err[rank], ERRSLOT, "the message never sent: %s after %.2f s: %s",
                 loom_result_string(res), dt, tx->errmsg);
        return 24;
    }
    txu_teardown(tx);
    return 0;
}

START_TEST(test_notice_after_data)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, txu_run(2, setup_linked, notice_main, j, 30.0, 0), 2);
}
END_TEST

/* ---- a mismatch notice, then the peer's endpoint closed ---- */

/* Rank 1 finds rank 0 in another call: it sends its notice, then closes
 * its endpoint while rank 0's send (1 MiB, never received) is in flight.
 * Only then does rank 0 look: whichever it reads first, the provider's
 * error on the send (libfabric 2.x's tcp;ofi_rxm fails it) or the notice
 * already on the control socket, it fails with the mismatch, rank 1's call
 * kept for the message naming both. */
static int closed_main(struct loom_tx *tx, int rank, void *arg)
{
    struct job *j = arg;
    uint8_t got = 0;
    struct loom_tx_req r[2];
    uint8_t big[1024] = {0};
    size_t len = sizeof big;
    double until = mp_now() + 10.0;
    if (rank == 1) {
        while (!__atomic_load_n(&j->v[0][0], __ATOMIC_ACQUIRE) && mp_now() < until)
            usleep(1000);
        tx->notice_seq = 2;
        tx->notice_desc = 0x41;
        tx->notice_count = 7;
        tx->notice_culprit = 0;
        tx->ops->shutdown(tx, LOOM_ERROR_MISMATCH);
        txu_teardown(tx);
        __atomic_store_n(&j->v[1][0], 1, __ATOMIC_RELEASE);
        return 0;
    }
    __atomic_store_n(&j->v[0][0], 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&j->v[1][0], __ATOMIC_ACQUIRE) && mp_now() < until)
        usleep(1000);
    /* two messages (the first, taken by this rank's kernel, draws a reset
     * from the closed socket, the second the provider's error) and a
     * receive that nothing answers, as in a call */
    struct loom_tx_req rr;
    if (post(tx, &r[0], 1, 1, big, len, 2) || post(tx, &r[1], 1, 1, big, len, 2) ||
        post(tx, &rr, 1, 0, &got, 1, 2)) {
        snprintf(j->err[rank], ERRSLOT, "posting: %s", tx->errmsg);
        return 21;
    }
    /* as the core waits: spinning on progress(0), which reads the
     * completion queue every time and the control sockets now and then */
    loom_result_t res = LOOM_SUCCESS;
    until = mp_now() + 10.0;
    while (res == LOOM_SUCCESS && !rr.done && mp_now() < until)
        res = tx->ops->progress(tx, 0);
    if (res == LOOM_SUCCESS)
        res = rr.done ? rr.status : LOOM_ERROR_TIMEOUT;
    if (res != LOOM_ERROR_MISMATCH || !tx->mismatch.valid || tx->mismatch.peer != 1 ||
        tx->mismatch.tag != 2 || tx->mismatch.desc != 0x41 || tx->mismatch.count != 7) {
        snprintf(j->err[rank], ERRSLOT, "%s (mismatch %s): %s", loom_result_string(res),
                 tx->mismatch.valid ? "kept" : "lost", tx->errmsg);
        return 22;
    }
    txu_teardown(tx);
    return 0;
}

START_TEST(test_notice_then_closed)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, txu_run(2, setup_linked, closed_main, j, 30.0, 0), 2);
}
END_TEST

/* ---- communicators: mismatch, kill -9, job key ---- */

static loom_comm_t join(struct job *j, int rank, int n)
{
    use_provider(j->prov);
    setenv("LOOM_TRANSPORT", "ofi", 1);
    setenv("LOOM_SHM", "0", 1);
    loom_config_reset();
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", j->port);
    loom_comm_t c = NULL;
    if (loom_comm_init_url(url, n, rank, &c) != LOOM_SUCCESS) {
        snprintf(j->err[rank], ERRSLOT, "init: %s", loom_get_error_string(NULL));
        return NULL;
    }
    return c;
}

static int mismatch_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    loom_comm_t comm = join(j, rank, n);
    if (!comm)
        return 10;
    float buf[2048] = {0};
    /* the same bytes, another call; then the same call, other counts */
    loom_result_t res = rank == 0 ? loom_allreduce(buf, buf, 256, LOOM_FLOAT32, LOOM_SUM, comm, NULL)
                                  : loom_broadcast(buf, 256, LOOM_FLOAT32, 0, comm, NULL);
    const char *msg = loom_get_error_string(comm);
    if (res != LOOM_ERROR_MISMATCH || !strstr(msg, "allreduce(float32, 256, sum) #1") ||
        !strstr(msg, "broadcast(float32, 256, root 0) #1")) {
        snprintf(j->err[rank], ERRSLOT, "%s: %s", loom_result_string(res), msg);
        return 11;
    }
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(test_comm_mismatch)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, mismatch_main, j, 30.0, 0), 2);
}
END_TEST

static int counts_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    loom_comm_t comm = join(j, rank, n);
    if (!comm)
        return 10;
    /* rank 1 sends more than rank 0 expects (an allgather of other counts):
     * never silent, even where the provider truncates silently */
    float in[4096], out[8192];
    memset(in, 0, sizeof in);
    uint64_t cnt = rank == 0 ? 1000 : 1500;
    loom_result_t res = loom_allgather(in, out, cnt, LOOM_FLOAT32, comm, NULL);
    const char *msg = loom_get_error_string(comm);
    if (res != LOOM_ERROR_MISMATCH || !strstr(msg, "allgather(float32, 1000) #1") ||
        !strstr(msg, "allgather(float32, 1500) #1")) {
        snprintf(j->err[rank], ERRSLOT, "%s: %s", loom_result_string(res), msg);
        return 11;
    }
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(test_comm_counts_differ)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, mp_run(2, counts_main, j, 30.0, 0), 2);
}
END_TEST

static int killed_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    setenv("LOOM_TIMEOUT", "30", 1);
    loom_comm_t comm = join(j, rank, n);
    if (!comm)
        return 10;
    size_t cnt = 1 << 16;
    float *buf = calloc(cnt, sizeof(float));
    if (loom_allreduce(buf, buf, cnt, LOOM_FLOAT32, LOOM_SUM, comm, NULL) != LOOM_SUCCESS) {
        snprintf(j->err[rank], ERRSLOT, "first: %s", loom_get_error_string(comm));
        return 11;
    }
    if (rank == 2) {
        /* what it sent may still be on its way (udp;ofi_rxd completes a
         * send before the peer has it): the others finish the call first */
        usleep(500000);
        raise(SIGKILL);
    }
    loom_result_t res = LOOM_SUCCESS;
    double t0 = mp_now();
    for (int i = 0; i < 100000 && res == LOOM_SUCCESS; i++)
        res = loom_allreduce(buf, buf, cnt, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    double dt = mp_now() - t0;
    const char *msg = loom_get_error_string(comm);
    snprintf(j->err[rank], ERRSLOT, "%s after %.2f s: %s", loom_result_string(res), dt, msg);
    if (res == LOOM_SUCCESS || res == LOOM_ERROR_TIMEOUT || dt > 10 || !strstr(msg, "rank 2"))
        return 12;
    j->err[rank][0] = 0;
    loom_comm_destroy(comm);
    free(buf);
    return 0;
}

START_TEST(test_killed_rank_named)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, mp_run(3, killed_main, j, 40.0, 4u), 3);
}
END_TEST

static int key_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    setenv("LOOM_JOB_KEY", "check-ofi-secret", 1);
    loom_comm_t comm = join(j, rank, n);
    if (!comm)
        return 10;
    int32_t x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = rank + i;
    loom_result_t res = loom_allreduce(x, x, 1000, LOOM_INT32, LOOM_SUM, comm, NULL);
    for (int i = 0; i < 1000 && res == LOOM_SUCCESS; i++)
        if (x[i] != 3 + 3 * i) {
            snprintf(j->err[rank], ERRSLOT, "element %d: %d", i, x[i]);
            return 12;
        }
    if (res != LOOM_SUCCESS) {
        snprintf(j->err[rank], ERRSLOT, "%s", loom_get_error_string(comm));
        return 11;
    }
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(test_job_key)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, mp_run(3, key_main, j, 30.0, 0), 3);
}
END_TEST

/* ---- strangers ---- */

#define STRANGER_TAG (LOOM_OOB_TAG_OFI + 0xf0)
#define NSTRANGE 40

/* Another endpoint of the same provider (not in the job) sends rank 0
 * messages with the tags rank 0 will expect from rank 1; junk goes to the
 * provider's port. */
static void stranger_send(int prov, const void *addr, size_t addrlen)
{
    char why[256];
    ck_assert_msg(loom_fi_load(why, sizeof why) == 0, "%s", why);
    struct fi_info *h = loom_fi.dupinfo(NULL), *info = NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_TAGGED | FI_SEND | FI_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    h->fabric_attr->prov_name = strdup(provs[prov]);
    char name[64];
    snprintf(name, sizeof name, "stranger_%d", (int)getpid());
    const char *node = prov == 1 ? name : "127.0.0.1";
    if (loom_fi.getinfo(FI_VERSION(1, 9), node, NULL, FI_SOURCE, h, &info))
        return;
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED};
    struct fi_av_attr aa = {.type = FI_AV_TABLE};
    if (loom_fi.fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL) ||
        fi_cq_open(dom, &ca, &cq, NULL) || fi_av_open(dom, &aa, &av, NULL) ||
        fi_endpoint(dom, info, &ep, NULL) || fi_ep_bind(ep, &av->fid, 0) ||
        fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_enable(ep))
        return;
    fi_addr_t to;
    if (fi_av_insert(av, addr, 1, &to, 0, NULL) != 1)
        return;
    static uint8_t junk[NSTRANGE][3000];
    static struct fi_context2 ctx[NSTRANGE];
    const char *what = getenv("CHECK_OFI_STRANGER"); /* "ep" or "junk": one only */
    double until = mp_now() + 1.0;
    for (int i = 0; i < NSTRANGE && !(what && strcmp(what, "junk") == 0); i++) {
        memset(junk[i], 0xee, sizeof junk[i]);
        /* tags of rank 1's messages 0..NSTRANGE to rank 0 (rank 0 is not
         * progressing now: a send the provider cannot take is given up) */
        while (fi_tsend(ep, junk[i], sizeof junk[i], NULL, to, OX_TAG(0, 3000, i), &ctx[i]) ==
                   -FI_EAGAIN &&
               mp_now() < until) {
            struct fi_cq_tagged_entry e[8];
            fi_cq_read(cq, e, 8);
        }
    }
    until = mp_now() + 1.0;
    while (mp_now() < until) {
        struct fi_cq_tagged_entry e[8];
        fi_cq_read(cq, e, 8);
        usleep(1000);
    }
    /* and junk on the provider's own port, where it has one: tcp's. Not
     * udp;ofi_rxd's: libfabric 1.17's rxd dereferences what a datagram
     * says without checking it and crashes (SIGSEGV in its receive path) on
     * junk; nothing above it can stop that (use it on trusted networks) */
    if (prov == 0 && info->addr_format == FI_SOCKADDR_IN && addrlen >= sizeof(struct sockaddr_in) &&
        !(what && strcmp(what, "ep") == 0)) {
        int type = prov == 0 ? SOCK_STREAM : SOCK_DGRAM;
        int fd = socket(AF_INET, type, 0);
        uint8_t b[512];
        for (size_t k = 0; k < sizeof b; k++)
            b[k] = (uint8_t)(k * 31 + 7);
        if (fd >= 0 && connect(fd, addr, sizeof(struct sockaddr_in)) == 0)
            for (int k = 0; k < 20; k++)
                if (send(fd, b, sizeof b, MSG_NOSIGNAL) < 0)
                    break;
        usleep(200000);
        if (fd >= 0)
            close(fd);
    }
    /* left open: the process ends soon */
}

static int strangers_main(struct loom_tx *tx, int rank, void *arg)
{
    struct job *j = arg;
    struct ox_priv *vp = tx->priv;
    if (rank == 0) {
        if (loom_oob_send(txu_oob, 1, STRANGER_TAG, vp->addr, vp->addrlen) != LOOM_SUCCESS)
            return 20;
        void *b = NULL;
        /* rank 1 says when the stranger is done; then rank 0 posts */
        if (loom_oob_recv(txu_oob, STRANGER_TAG, 1, 20.0, NULL, &b, NULL) != LOOM_SUCCESS)
            return 21;
        free(b);
    } else {
        void *b = NULL;
        size_t len = 0;
        if (loom_oob_recv(txu_oob, STRANGER_TAG, 0, 20.0, NULL, &b, &len) != LOOM_SUCCESS)
            return 22;
        /* in this process (libfabric is not fork-safe once used): another
         * fabric, domain and endpoint */
        stranger_send(j->prov, b, len);
        free(b);
        if (loom_oob_send(txu_oob, 0, STRANGER_TAG, "done", 4) != LOOM_SUCCESS)
            return 23;
    }
    uint8_t sb[3000], rb[3000];
    for (int i = 0; i < NSTRANGE; i++) {
        mp_fill(sb, sizeof sb, seed(rank, 1 - rank, i));
        if (txu_exchange(tx, 1 - rank, sb, rb, sizeof rb, (uint32_t)i, 0x40, 20.0)) {
            snprintf(j->err[rank], ERRSLOT, "message %d: %s", i, tx->errmsg);
            return 24;
        }
        long bad = mp_verify(rb, sizeof rb, seed(1 - rank, rank, i));
        if (bad >= 0) {
            snprintf(j->err[rank], ERRSLOT, "message %d: wrong bytes at %ld (a stranger's?)",
                     i, bad);
            return 25;
        }
    }
    txu_teardown(tx);
    return 0;
}

START_TEST(test_strangers_match_nothing)
{
    if (!provider_or_skip(_i))
        return;
    struct job *j = job_new(_i);
    job_end(j, txu_run(2, setup, strangers_main, j, 40.0, 0), 2);
}
END_TEST

/* ---- the tcp provider's send buffers ---- */

#define SNDBUF_ASKED 100000 /* Linux reports twice this */
#define SNDBUF_LEN (1u << 20)

static int sock_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
    return -1;
}

/* This process's TCP sockets from port mine or to port theirs, and how
 * many of them have SO_SNDBUF want. */
static void count_socks(int mine, int theirs, int want, uint64_t *found, uint64_t *with)
{
    *found = *with = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        int fd = atoi(e->d_name);
        struct sockaddr_storage a, b;
        socklen_t al = sizeof a, bl = sizeof b;
        int v = 0;
        socklen_t vl = sizeof v;
        if (fd <= 2 || fd == dirfd(d) || getsockname(fd, (struct sockaddr *)&a, &al) ||
            getpeername(fd, (struct sockaddr *)&b, &bl) ||
            (sock_port(&a) != mine && sock_port(&b) != theirs) ||
            getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &vl))
            continue;
        (*found)++;
        *with += v == want;
    }
    closedir(d);
}

static int sndbuf_main(int rank, int n, void *arg)
{
    struct job *j = arg;
    int asked = j->v[2][0] ? SNDBUF_ASKED : 0;
    char val[32];
    snprintf(val, sizeof val, "%d", asked);
    setenv("LOOM_SOCKET_SNDBUF", val, 1);
    struct loom_tx *tx;
    int rc = setup(j, rank, n, &tx);
    if (rc)
        return rc;
    struct ox_priv *vp = tx->priv;
    struct sockaddr_storage own;
    memcpy(&own, vp->addr, vp->addrlen < sizeof own ? vp->addrlen : sizeof own);
    j->v[rank][0] = (uint64_t)sock_port(&own); /* read by the peer once its message came */
    uint8_t *sb = malloc(SNDBUF_LEN), *rb = malloc(SNDBUF_LEN);
    mp_fill(sb, SNDBUF_LEN, seed(rank, 1 - rank, 0));
    if (txu_exchange(tx, 1 - rank, sb, rb, SNDBUF_LEN, 0, 0x40, 20.0)) {
        snprintf(j->err[rank], ERRSLOT, "%s", tx->errmsg);
        return 20;
    }
    if (mp_verify(rb, SNDBUF_LEN, seed(1 - rank, rank, 0)) >= 0) {
        snprintf(j->err[rank], ERRSLOT, "wrong bytes");
        return 21;
    }
    count_socks((int)j->v[rank][0], (int)j->v[1 - rank][0], 2 * SNDBUF_ASKED, &j->v[rank][1],
                &j->v[rank][2]);
    j->v[rank][3] = vp->counts.socks_tuned;
    /* neither side closes its endpoint (and the socket with it) before the
     * other has counted */
    if (txu_exchange(tx, 1 - rank, sb, rb, 8, 0, 0x41, 20.0)) {
        snprintf(j->err[rank], ERRSLOT, "%s", tx->errmsg);
        return 22;
    }
    free(sb);
    free(rb);
    txu_teardown(tx);
    return 0;
}

START_TEST(test_tcp_sndbuf)
{
    if (!provider_or_skip(0))
        return;
    struct job *j = job_new(0);
    j->v[2][0] = _i == 0; /* 1: LOOM_SOCKET_SNDBUF set; 0: LOOM_SOCKET_SNDBUF=0 */
    int set = _i == 0;
    unsigned failed = mp_run(2, sndbuf_main, j, 40.0, 0);
    for (int r = 0; r < 2 && !failed; r++) {
        fprintf(stderr, "[%s] LOOM_SOCKET_SNDBUF=%d: rank %d: %llu provider sockets, %llu with "
                "SO_SNDBUF %d, %llu tuned\n", provs[0], set ? SNDBUF_ASKED : 0, r,
                (unsigned long long)j->v[r][1], (unsigned long long)j->v[r][2],
                2 * SNDBUF_ASKED, (unsigned long long)j->v[r][3]);
        ck_assert_msg(j->v[r][1] >= 1, "rank %d: no socket of the provider's to the peer", r);
        if (set) {
            ck_assert_msg(j->v[r][2] >= 1 && j->v[r][3] >= 1,
                          "rank %d: the provider's socket kept the kernel's send buffer", r);
        } else {
            ck_assert_msg(j->v[r][2] == 0 && j->v[r][3] == 0,
                          "rank %d: a socket was tuned with LOOM_SOCKET_SNDBUF=0", r);
        }
    }
    unsetenv("LOOM_SOCKET_SNDBUF");
    loom_config_reset();
    job_end(j, failed, 2);
}
END_TEST

static Suite *ofi_suite(void)
{
    Suite *s = suite_create("ofi");
    const struct {
        const char *name;
        const TTest *test;
        int n;
    } cases[] = {
        {"choice", test_provider_choice, 1},
        {"split", test_split_registered, NPROV},
        {"realloc", test_free_and_reallocate, NPROV},
        {"length", test_length_checked, NPROV},
        {"notice", test_notice_after_data, NPROV},
        {"closed", test_notice_then_closed, NPROV},
        {"mismatch", test_comm_mismatch, NPROV},
        {"counts", test_comm_counts_differ, NPROV},
        {"kill", test_killed_rank_named, NPROV},
        {"key", test_job_key, 1},
        {"strangers", test_strangers_match_nothing, NPROV},
        {"sndbuf", test_tcp_sndbuf, 2},
    };
    /* one case each: CK_RUN_CASE=strangers runs one */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 90);
        tcase_add_loop_test(tc, cases[i].test, 0, cases[i].n);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return txu_run_suite(ofi_suite());
}
#endif
