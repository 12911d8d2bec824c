/* test_shm.c - collectives through shared memory on real processes.
 *
 *   matrix: every collective x dtype x op x count x placement on the
 *           single-server table (4 ranks), on each path: push (reads and
 *           writes of peers), read (reads only), copy (two copies), ll
 *           (small-message lines), pipe (chunks pipelined through the
 *           segment, chosen with or without CMA, and forced), with counts
 *           around the engine's chunk and 1000003 elements; small calls
 *           take the ll path unless forced elsewhere;
 *   mismatch, abort: on each path, a different call on one rank fails
 *           every rank naming both calls; loom_comm_abort on one rank
 *           fails its call and its peers' within seconds;
 *   crowd:  8 ranks on this machine's few cores finish within the
 *           harness's time limit (waiters must sleep, not spin);
 *   hier:   the 2-server loopback tables (2 and 3 ranks per server): the
 *           hierarchical collectives, checked, on the pipe path chosen
 *           inside each server (CMA or not) and on push, read and copy
 *           forced, and every other collective; mismatch and abort there;
 *   same bits: float averages are bitwise identical on every rank;
 *   off:    LOOM_SHM=0 sets up no segment;
 *   kill:   one rank SIGKILLs itself mid-allreduce: the others fail within
 *           seconds naming it, and nothing is left in /dev/shm;
 *   set-up death: a rank (a leader, another) that dies during the set-up
 *           fails the others' init within seconds, naming it;
 *   dead peer: of ranks gone after failing, after destroying their
 *           communicator and killed, only the killed one counts as dead;
 *   late failure: a rank that failed in a later call than the one its
 *           peers are still in (it finished its part of theirs) does not
 *           fail that call; one that failed in the same call does;
 *   ahead:  small calls let a rank that reads nothing (a broadcast's root)
 *           run ahead of its peers: back-to-back broadcasts from rotating
 *           roots and mixed kinds and sizes (so the line sets wrap and the
 *           paths alternate) with ranks held back now and then, checked; a
 *           mismatch, a dead peer, an abort and a rank on another path
 *           (LOOM_ALGO) while the root is ahead. */
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../perf/coll_check.h"
#include "../support/coll_one.h"
#include "comm/comm.h"
#include "../support/harness.h"
#include "loom.h"
#include "coll/coll.h"
#include "shm/shm.h"
#include "shm/shm_priv.h"
#include "util.h"

struct cfg {
    const char *table;
    int no_cma;          /* loom_shm_test_no_cma: 1 two copies, 2 reads only */
    const char *expect;  /* algorithm loom_shm_algo_name must give for a
                            large allreduce ("shm", "hier") or NULL      */
    const char *path;    /* the engine's path for it ("push", "read", "copy") */
    int kill_rank;       /* kill test: this rank dies                   */
    atomic_int *passed;  /* kill test (harness_counter_new): how many
                            have returned from call 4, the last one
                            before the kill                             */
    int later;           /* late failure test: the flag names a later call;
                            mismatch test: another kind, not count    */
    int abort_kind;      /* abort test: K_ALLREDUCE, K_BROADCAST, K_REDUCE */
    const char *algo;    /* LOOM_ALGO for this rank (NULL: unset)       */
    const char *small;   /* the engine's path for a 1 KiB allreduce     */
    int algo_rank;       /* with algo_other: the rank that sets it instead */
    const char *algo_other;
    int hier;  /* a 2-server table: the ranks of the other server
                            (rank >= n / 2) than rank 0's may only hear of
                            a failure from the step between servers      */
    int ahead; /* ahead test: AHEAD_* */
};

static loom_result_t join(const struct cfg *c, int rank, loom_comm_t *comm)
{
    loom_shm_test_no_cma = c->no_cma;
    const char *algo = c->algo_other && rank == c->algo_rank ? c->algo_other : c->algo;
    if (algo)
        setenv("LOOM_ALGO", algo, 1);
    loom_result_t res = loom_comm_init_ranktable(c->table, rank, comm);
    if (res != LOOM_SUCCESS)
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, loom_result_string(res),
                loom_get_error_string(NULL));
    return res;
}

/* Float averages with inexact results must be the same bits everywhere. */
static int same_bits(loom_comm_t comm, int rank, int n)
{
    const uint64_t count = 300007;
    float *x = malloc(count * sizeof *x);
    uint64_t *h = calloc((size_t)n, sizeof *h);
    if (!x || !h)
        return 1;
    for (uint64_t i = 0; i < count; i++)
        x[i] = (float)(cc_mix(i * 31 + (uint64_t)rank) % 100000) / 7.0f;
    int bad = 0;
    if (loom_allreduce(x, x, count, LOOM_FLOAT32, LOOM_AVG, comm, NULL) != LOOM_SUCCESS)
        bad = 1;
    uint64_t mine = loom_fnv1a(LOOM_FNV_INIT, x, count * sizeof *x);
    if (!bad && loom_allgather(&mine, h, 1, LOOM_UINT64, comm, NULL) != LOOM_SUCCESS)
        bad = 1;
    for (int r = 0; !bad && r < n; r++)
        if (h[r] != h[0])
            bad = 1;
    if (bad)
        FAIL("float32 avg: results differ between ranks (or the call failed: %s)",
             loom_get_error_string(comm));
    free(x);
    free(h);
    return bad;
}

static int matrix_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    struct loom_op big = {.kind = LOOM_OP_ALLREDUCE, .count = 100003,
                          .dtype = LOOM_FLOAT32};
    enum loom_algo a = loom_coll_select(comm, &big);
    const char *algo =
        a == LOOM_ALGO_SHM || a == LOOM_ALGO_HIER ? loom_algo_name(a) : NULL;
    if (!c->expect ? algo != NULL : !algo || strcmp(algo, c->expect) != 0)
        FAIL("allreduce would run %s, expected %s", algo ? algo : "on the network",
             c->expect ? c->expect : "the network");
    const char *path = loom_shm_path_name(comm, &big);
    if (c->path && (!path || strcmp(path, c->path) != 0))
        FAIL("the engine would move it by %s, expected %s", path ? path : "nothing", c->path);
    struct loom_op small = {.kind = LOOM_OP_ALLREDUCE, .count = 256, .dtype = LOOM_FLOAT32};
    path = loom_shm_path_name(comm, &small);
    if (c->small && (!path || strcmp(path, c->small) != 0))
        FAIL("a 1 KiB allreduce would go by %s, expected %s", path ? path : "nothing", c->small);
    /* on one server, unforced: a line per rank takes the lines; a 1 KiB
     * broadcast too, but only where ranks outnumber CPUs (its root then
     * runs ahead) */
    int chosen = !c->algo && c->expect && strcmp(c->expect, "shm") == 0;
    small.count = 8;
    path = loom_shm_path_name(comm, &small);
    if (chosen && (!path || strcmp(path, "ll") != 0))
        FAIL("a 32-byte allreduce would go by %s, expected ll", path ? path : "nothing");
    struct loom_op bc = {.kind = LOOM_OP_BROADCAST, .count = 256, .dtype = LOOM_FLOAT32};
    const char *bc_want = comm->oversubscribed ? "ll" : "copy";
    path = loom_shm_path_name(comm, &bc);
    if (chosen && (!path || strcmp(path, bc_want) != 0))
        FAIL("a 1 KiB broadcast would go by %s, expected %s (%s)", path ? path : "nothing", bc_want,
             comm->oversubscribed ? "more ranks than CPUs" : "a CPU each");
    /* the last two: an engine chunk per rank and one more element (set per
     * dtype below), and a large count */
    uint64_t counts[] = {0, 1, 7, (uint64_t)n - 1, 5000, 100003, 0, 1000003};
    /* the pipe path's chunk is one buffer of its ring */
    int pipe = c->path && !strcmp(c->path, "pipe");
    size_t pipe_chunk = 2 * LOOM_SHM_SLOT / LOOM_SHM_PIPE_BUFS;
    uint64_t seed = 1;
    for (int kind = 0; kind < 5 && fails < 10; kind++)
        for (int t = 0; t < LOOM_DTYPE_COUNT; t++)
            for (int oi = 0; oi < 5; oi++) {
                if ((kind == 1 || kind == 2) && oi > 0)
                    continue;
                counts[6] = pipe ? pipe_chunk / loom_dtype_size((loom_dtype_t)t) + 1
                                 : (uint64_t)n *
                                           (LOOM_SHM_CHUNK / loom_dtype_size((loom_dtype_t)t)) +
                                       1;
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        if (kind == 2 && inplace)
                            continue;
                        /* the large counts in both placements for sum only */
                        if (ci >= 5 && oi > 0 && inplace)
                            continue;
                        /* the chunk boundary for sum; the largest for a
                         * float32 sum out of place */
                        if (ci == 6 && oi != 0)
                            continue;
                        if (ci == 7 && (oi != 0 || t != LOOM_FLOAT32 || inplace))
                            continue;
                        one(comm, rank, n, kind, (loom_dtype_t)t, ops[oi], counts[ci],
                            inplace, seed++);
                    }
            }
    same_bits(comm, rank, n);
    if (loom_barrier(comm, NULL) != LOOM_SUCCESS)
        FAIL("barrier: %s", loom_get_error_string(comm));
    loom_comm_destroy(comm);
    return fails ? 1 : 0;
}

static int off_rank(int rank, int n, void *arg)
{
    (void)n;
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    if (comm->shm != NULL)
        FAIL("LOOM_SHM=0 but a segment was set up");
    one(comm, rank, n, 0, LOOM_FLOAT32, LOOM_SUM, 1000, 0, 3);
    loom_comm_destroy(comm);
    return fails ? 1 : 0;
}

/* Exit codes: 0 pass; 3 the error came late or did not name the dead rank. */
static int kill_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    const uint64_t count = 1 << 20;
    float *x = calloc(count, sizeof *x);
    if (!x)
        return 1;
    for (int it = 0; it < 6; it++) {
        if (rank == c->kill_rank && it == 5) {
            /* Not before every other rank is out of call 4: a rank still
             * in it would rightly fail it, and the test is about call 5. */
            if (!harness_counter_wait(c->passed, n, 20)) {
                FAIL("the others did not return from call 4 in 20 s");
                break;
            }
            struct timespec ts = {0, 50000000}; /* let the others start waiting */
            nanosleep(&ts, NULL);
            raise(SIGKILL);
        }
        double t0 = harness_now();
        loom_result_t res = loom_allreduce(x, x, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
        double dt = harness_now() - t0;
        if (it < 5 && res != LOOM_SUCCESS) {
            FAIL("allreduce %d failed before the kill: %s", it, loom_get_error_string(comm));
            break;
        }
        if (it == 4)
            atomic_fetch_add(c->passed, 1);
        if (it == 5) {
            char want[32];
            snprintf(want, sizeof want, "rank %d ", c->kill_rank);
            const char *msg = loom_get_error_string(comm);
            if (res == LOOM_SUCCESS)
                FAIL("allreduce succeeded with rank %d dead", c->kill_rank);
            else if (!strstr(msg, want))
                FAIL("the error does not name rank %d: %s", c->kill_rank, msg);
            else if (dt > 5.0)
                FAIL("the error took %.1f s", dt);
            else
                fprintf(stderr, "rank %d: as expected after %.2f s: %s\n", rank, dt, msg);
        }
    }
    free(x);
    loom_comm_destroy(comm);
    return fails ? 3 : 0;
}

/* Rank c->kill_rank exits (status 9) where it would send its hello to its
 * server's leader: the others' init fails within seconds, well before
 * LOOM_BOOTSTRAP_TIMEOUT, naming a rank gone: it (the leader finds it
 * gone, the others hear so from the leader), or the leader that left. */
static int setup_death_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    (void)n;
    if (rank == c->kill_rank)
        loom_shm_test_exit = 9;
    double t0 = harness_now();
    loom_comm_t comm;
    loom_result_t res = loom_comm_init_ranktable(c->table, rank, &comm);
    double dt = harness_now() - t0;
    const char *msg = loom_get_error_string(NULL);
    char want[32];
    snprintf(want, sizeof want, "rank %d is gone", c->kill_rank);
    if (res == LOOM_SUCCESS) {
        FAIL("init succeeded with rank %d gone", c->kill_rank);
        loom_comm_destroy(comm);
    } else if (!strstr(msg, want) && !strstr(msg, "rank 0 is gone")) {
        /* (rank 0 may fail first, in the bootstrap: the dead rank's last
         * message to it went down with it, and the others find rank 0 gone) */
        FAIL("init failed (%s) without naming rank %d gone: %s", loom_result_string(res),
             c->kill_rank, msg);
    } else if (dt > 15) {
        FAIL("init took %.1f s to fail: %s", dt, msg);
    } else {
        fprintf(stderr, "rank %d: as expected after %.2f s: %s\n", rank, dt, msg);
    }
    return fails ? 3 : 0;
}

/* Of three ranks whose processes are gone, only the one killed died: rank 1
 * raised its failed flag first, rank 2 destroyed its communicator, rank 3
 * was killed. Rank 0, which outlives them, must name rank 3 alone (coll/
 * hier.c asks so when a network step fails). */
static int dead_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    char buf[300];
    /* none can be gone before rank 0's part of the allreduce */
    if (rank == 0 && loom_shm_dead_peer(comm, buf, sizeof buf) >= 0)
        FAIL("a peer died while all were alive: %s", buf);
    float x = 1;
    if (loom_allreduce(&x, &x, 1, LOOM_FLOAT32, LOOM_SUM, comm, NULL) != LOOM_SUCCESS) {
        FAIL("allreduce: %s", loom_get_error_string(comm));
        return 3;
    }
    if (rank == 1) {
        loom_shm_fail(comm, NULL, -1);
        return 0; /* gone without destroying its communicator */
    }
    if (rank == 2) {
        loom_comm_destroy(comm);
        return 0;
    }
    if (rank == 3)
        raise(SIGKILL);
    struct loom_shm *s = comm->shm;
    double t0 = harness_now();
    while (!(loom_shm_pid_gone(s->pids[1]) && loom_shm_pid_gone(s->pids[2]) &&
             loom_shm_pid_gone(s->pids[3])) &&
           harness_now() - t0 < 20) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    int d = loom_shm_dead_peer(comm, buf, sizeof buf);
    if (d != 3 || !strstr(buf, "rank 3 ") || !strstr(buf, "died"))
        FAIL("the dead peer is %d (%s), not rank 3", d, d >= 0 ? buf : "none");
    (void)n;
    loom_comm_destroy(comm);
    return fails ? 3 : 0;
}

/* Rank 0 raises its failed flag for the call after the next (later: it
 * has done its part of the next call) or for the next call itself (not
 * later), then runs the next call with the others. Rank 1 comes 100 ms
 * late, so that ranks 2 and 3 wait in the call with the flag up. */
static int late_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    int later = c->later;
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(rank + i);
    if (loom_barrier(comm, NULL) != LOOM_SUCCESS)
        FAIL("barrier: %s", loom_get_error_string(comm));
    uint64_t next = comm->next_seq + 1;
    if (rank == 0) {
        struct loom_op at = {.kind = LOOM_OP_BARRIER, .seq = next + (later ? 1 : 0)};
        loom_shm_fail(comm, &at, -1);
    }
    if (rank == 1) {
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    loom_result_t res = loom_allreduce(x, x, 64, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    const char *msg = loom_get_error_string(comm);
    if (later) {
        if (res != LOOM_SUCCESS)
            FAIL("call #%llu failed for a failure in a later call: %s",
                 (unsigned long long)next, msg);
        for (int i = 0; res == LOOM_SUCCESS && i < 64; i++)
            if (x[i] != (float)(n * (n - 1) / 2 + n * i))
                FAIL("x[%d] = %g", i, (double)x[i]);
        if (rank != 0) {
            res = loom_barrier(comm, NULL);
            msg = loom_get_error_string(comm);
            if (res != LOOM_ERROR_REMOTE || !strstr(msg, "rank 0 "))
                FAIL("the call after: %s: %s (want rank 0 named)",
                     loom_result_string(res), msg);
        }
    } else if (rank != 0 && (res != LOOM_ERROR_REMOTE || !strstr(msg, "rank 0 "))) {
        FAIL("call #%llu: %s: %s (want rank 0 named)", (unsigned long long)next,
             loom_result_string(res), msg);
    }
    loom_comm_destroy(comm);
    return fails ? 1 : 0;
}

/* One large allreduce (push or read path) or small one (copy path) where
 * rank 0 asks for more elements than the others (or, with c->later, rank
 * 1 calls broadcast): every rank fails naming both calls. */
static int mismatch_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    loom_result_t joined = join(c, rank, &comm);
    /* On the other server a rank may still be setting up the communicator
     * between servers when its peer there, done with it, fails the
     * mismatched call: its init then fails with that failure. */
    if (joined != LOOM_SUCCESS)
        return c->hier && rank >= n / 2 && joined == LOOM_ERROR_REMOTE ? 0 : 1;
    uint64_t count = c->path && (!strcmp(c->path, "ll") || !strcmp(c->path, "copy")) ? 100 : 100003;
    uint64_t mine = rank == 0 ? count + 8 : count;
    float *x = calloc(count + 8, sizeof *x);
    if (!x)
        return 1;
    loom_result_t res;
    const char *msg;
    int named;
    if (!c->later) {
        res = loom_allreduce(x, x, mine, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
        msg = loom_get_error_string(comm);
        char a[32], b[32];
        snprintf(a, sizeof a, "(float32, %llu,", (unsigned long long)count);
        snprintf(b, sizeof b, "(float32, %llu,", (unsigned long long)count + 8);
        /* rank 0 differs from every peer; a peer may hear of it from
         * another peer first, which names rank 0 */
        named = res == LOOM_ERROR_MISMATCH && strstr(msg, "collective calls differ") &&
                strstr(msg, a) && strstr(msg, b);
        /* the other server fails in the step between servers, which its
         * peers never join */
        if (c->hier && rank >= n / 2 && res != LOOM_SUCCESS)
            named = 1;
        if (!named &&
            (rank == 0 || res != LOOM_ERROR_REMOTE || !strstr(msg, "blaming rank 0 ")))
            FAIL("allreduce of %llu against %llu: %s: %s", (unsigned long long)mine,
                 (unsigned long long)(rank == 0 ? count : count + 8),
                 loom_result_string(res), msg);
    } else {
        res = rank == 1 ? loom_broadcast(x, count, LOOM_FLOAT32, 0, comm, NULL)
                        : loom_allreduce(x, x, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
        msg = loom_get_error_string(comm);
        named = res == LOOM_ERROR_MISMATCH && strstr(msg, "allreduce(") &&
                strstr(msg, "broadcast(");
        if (c->hier && rank >= n / 2 && res != LOOM_SUCCESS)
            named = 1;
        if (!named &&
            (rank == 1 || res != LOOM_ERROR_REMOTE || !strstr(msg, "blaming rank 1 ")))
            FAIL("broadcast against allreduce: %s: %s", loom_result_string(res), msg);
    }
    free(x);
    loom_comm_destroy(comm);
    return fails ? 1 : 0;
}

struct aborter {
    loom_comm_t comm;
};

static void *abort_later(void *arg)
{
    struct aborter *ab = arg;
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    loom_comm_abort(ab->comm);
    return NULL;
}

/* Rank 0 aborts its communicator from another thread while it waits in a
 * collective (c->abort_kind: allreduce, broadcast or reduce) that rank 1
 * joins late: rank 0 fails with ABORTED, the others fail naming rank 0,
 * all within seconds. */
static int abort_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    int kind = c->abort_kind;
    const uint64_t count = 1 << 18;
    float *x = calloc(count, sizeof *x), *y = calloc(count, sizeof *y);
    if (!x || !y)
        return 1;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    pthread_t th;
    struct aborter ab = {comm};
    if (rank == 0 && pthread_create(&th, NULL, abort_later, &ab) != 0)
        return 1;
    if (rank == 1) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    double t0 = harness_now();
    loom_result_t res =
        kind == K_ALLREDUCE   ? loom_allreduce(x, y, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL)
        : kind == K_BROADCAST ? loom_broadcast(x, count, LOOM_FLOAT32, 2 % n, comm, NULL)
                              : loom_reduce(x, y, count, LOOM_FLOAT32, LOOM_SUM, 2 % n, comm,
                                            NULL);
    double dt = harness_now() - t0;
    const char *msg = loom_get_error_string(comm);
    if (rank == 0 && res != LOOM_ERROR_ABORTED)
        FAIL("%s: aborted, but %s: %s", kname[kind], loom_result_string(res), msg);
    /* a hierarchical broadcast from the other server needs nothing from
     * rank 0's: that server's ranks finish it */
    else if (c->hier && rank >= n / 2 && kind == K_BROADCAST && res == LOOM_SUCCESS)
        ;
    else if (rank != 0 && (res == LOOM_SUCCESS || !strstr(msg, "rank 0 ")))
        FAIL("%s: rank 0 aborted, but %s: %s", kname[kind], loom_result_string(res), msg);
    else if (dt > 10.0)
        FAIL("%s: the error took %.1f s", kname[kind], dt);
    if (rank == 0)
        pthread_join(th, NULL);
    loom_comm_destroy(comm);
    free(x);
    free(y);
    return fails ? 1 : 0;
}

enum { AHEAD_MIX, AHEAD_MISMATCH, AHEAD_KILL, AHEAD_ABORT, AHEAD_PATH };

/* Now and then one rank (a different one each time) stays back 0.2 ms,
 * so that the others run ahead of it. */
static void hold_back(int rank, int n, uint64_t i)
{
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
    if ((h >> 59) < 5 && (int)((h >> 32) % (uint64_t)n) == rank) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* Back to back, checked: runs of broadcasts from one root (which runs
 * ahead) and from each root in turn; every kind at counts on the small
 * path, past it and, where c->algo forces the small path, of two pieces;
 * small broadcasts between reduce_scatters on the two-copy path. */
static void ahead_mix(loom_comm_t comm, int rank, int n, const struct cfg *c)
{
    enum { RUN = 2 * LOOM_SHM_LL_SETS + 10 }; /* broadcasts from one root */
    uint64_t seed = 0;
    for (uint64_t i = 0; i < 4 * RUN + 100 && !fails; i++) {
        hold_back(rank, n, i);
        /* one() takes seed % n for the root */
        uint64_t root = i < 4 * RUN ? i / RUN % (uint64_t)n : i % (uint64_t)n;
        if (i < 4 * RUN && i % RUN == 0 && rank == (int)(root + 1) % n) {
            struct timespec ts = {0, 2000000}; /* the root fills its lines */
            nanosleep(&ts, NULL);
        }
        seed += (root + (uint64_t)n - seed % (uint64_t)n) % (uint64_t)n;
        one(comm, rank, n, K_BROADCAST, LOOM_FLOAT32, LOOM_SUM, 1 + i % 3 * 50, 0, seed++);
    }
    uint64_t counts[] = {1, 7, 300, 2000, c->algo ? 20000 : 100003};
    for (uint64_t i = 0; i < 150 && !fails; i++) {
        hold_back(rank, n, i);
        int kind = (int)(i % K_NKINDS);
        uint64_t count = counts[(i / K_NKINDS + i) % 5];
        one(comm, rank, n, kind, LOOM_FLOAT32, ops[i % 5], count, (int)(i / 7 % 2), seed++);
    }
    for (uint64_t i = 0; i < 200 && !fails; i++) {
        hold_back(rank, n, i);
        if (i % 2)
            one(comm, rank, n, K_BROADCAST, LOOM_FLOAT32, LOOM_SUM, 7, 0, seed++);
        else
            one(comm, rank, n, K_REDUCE_SCATTER, LOOM_FLOAT32, LOOM_SUM, 2000, 0, seed++);
    }
}

/* Broadcasts from rank 0 (count 8, checked) while rank 1 holds back at
 * first, so rank 0 runs as far ahead as the lines let it. AHEAD_MISMATCH:
 * rank 1's call #5 has another count: rank 1 names both calls at once, the
 * others within the calls that rank 0 can run ahead. AHEAD_KILL: rank 2
 * dies after call 10; AHEAD_ABORT: rank 0 aborts while it waits for rank
 * 1; AHEAD_PATH: rank 1 broadcasts through the slots (c->algo_other): every
 * other rank fails naming the culprit, within seconds. */
static int ahead_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    if (c->ahead == AHEAD_MIX) {
        ahead_mix(comm, rank, n, c);
        if (loom_barrier(comm, NULL) != LOOM_SUCCESS)
            FAIL("barrier: %s", loom_get_error_string(comm));
        loom_comm_destroy(comm);
        return fails ? 1 : 0;
    }
    pthread_t th;
    struct aborter ab = {comm};
    if (c->ahead == AHEAD_ABORT && rank == 0 && pthread_create(&th, NULL, abort_later, &ab))
        return 1;
    if (rank == 1) {
        struct timespec ts = {0, c->ahead == AHEAD_ABORT ? 900000000 : 50000000};
        nanosleep(&ts, NULL);
    }
    const int culprit = c->ahead == AHEAD_KILL ? 2 : c->ahead == AHEAD_ABORT ? 0 : 1;
    const int calls = 4 * LOOM_SHM_LL_SETS;
    double t0 = 0;
    loom_result_t res = LOOM_SUCCESS;
    int it;
    for (it = 1; it <= calls && res == LOOM_SUCCESS; it++) {
        if (c->ahead == AHEAD_KILL && rank == 2 && it == 11) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
            raise(SIGKILL);
        }
        if (c->ahead == AHEAD_KILL && it == 11)
            t0 = harness_now();
        float x[9];
        for (int i = 0; i < 9; i++)
            x[i] = rank == 0 ? (float)(it * 100 + i) : -1.0f;
        uint64_t count = c->ahead == AHEAD_MISMATCH && rank == 1 && it == 5 ? 9 : 8;
        res = loom_broadcast(x, count, LOOM_FLOAT32, 0, comm, NULL);
        /* on another path, rank 1 reads slots that nobody wrote */
        for (int i = 0; res == LOOM_SUCCESS && i < 8 && (c->ahead != AHEAD_PATH || rank != 1); i++)
            if (x[i] != (float)(it * 100 + i)) {
                FAIL("broadcast %d: x[%d] = %g", it, i, (double)x[i]);
                break;
            }
    }
    const char *msg = loom_get_error_string(comm);
    char who[32];
    snprintf(who, sizeof who, "rank %d ", culprit);
    if (res == LOOM_SUCCESS) {
        FAIL("%d broadcasts succeeded", calls);
    } else if (c->ahead == AHEAD_MISMATCH) {
        int named = res == LOOM_ERROR_MISMATCH && strstr(msg, "collective calls differ") &&
                    strstr(msg, "(float32, 8,") && strstr(msg, "(float32, 9,");
        /* rank 1 reads rank 0's line, rank 0 finds rank 1's within the
         * pieces it may run ahead */
        if (rank == 1 && it - 1 != 5)
            FAIL("the mismatch failed call %d, not 5", it - 1);
        if (it - 1 > 5 + (int)LOOM_SHM_LL_SETS)
            FAIL("the mismatch failed only call %d", it - 1);
        if (!named && (rank <= 1 || res != LOOM_ERROR_REMOTE || !strstr(msg, who)))
            FAIL("call %d: %s: %s (want both calls named)", it - 1, loom_result_string(res), msg);
    } else if (c->ahead == AHEAD_ABORT && rank == 0) {
        if (res != LOOM_ERROR_ABORTED)
            FAIL("aborted, but %s: %s", loom_result_string(res), msg);
    } else if (!strstr(msg, who)) {
        FAIL("call %d: %s: %s (want %s named)", it - 1, loom_result_string(res), msg, who);
    } else if (c->ahead == AHEAD_PATH && rank != 1 && it - 1 > (int)LOOM_SHM_LL_SETS) {
        FAIL("another path was found only in call %d", it - 1);
    } else if (c->ahead == AHEAD_KILL && harness_now() - t0 > 5.0) {
        FAIL("the error took %.1f s", harness_now() - t0);
    }
    if (c->ahead == AHEAD_ABORT && rank == 0)
        pthread_join(th, NULL);
    loom_comm_destroy(comm);
    return fails ? 1 : 0;
}

/* More ranks than cores: a few rounds of every collective at sizes on
 * each path, checked; the harness's limit bounds the time. */
static int crowd_rank(int rank, int n, void *arg)
{
    const struct cfg *c = arg;
    loom_comm_t comm;
    if (join(c, rank, &comm) != LOOM_SUCCESS)
        return 1;
    struct loom_op big = {.kind = LOOM_OP_ALLREDUCE, .count = 1 << 20, .dtype = LOOM_FLOAT32};
    const char *path = loom_shm_path_name(comm, &big), *want = c->path ? c->path : "pipe";
    if (!path || strcmp(path, want) != 0)
        FAIL("a 4 MiB allreduce would go by %s, expected %s", path ? path : "the network", want);
    big.count = 8;
    path = loom_shm_path_name(comm, &big);
    if (!c->algo && (!path || strcmp(path, "ll") != 0))
        FAIL("a 32-byte allreduce would go by %s, expected ll", path ? path : "the network");
    uint64_t counts[] = {2, 64, 16384, 300001};
    uint64_t seed = 7;
    for (int round = 0; round < 3; round++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (int kind = 0; kind < K_NKINDS; kind++)
                one(comm, rank, n, kind, LOOM_FLOAT32, LOOM_SUM, counts[ci], 0, seed++);
    loom_comm_destroy(comm);
    return fails ? 1 : 0;
}

static int shm_leftovers(void)
{
    DIR *d = opendir("/dev/shm");
    int found = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "loom-", 5) == 0) {
            fprintf(stderr, "left behind: /dev/shm/%s\n", e->d_name);
            found++;
        }
    closedir(d);
    return found;
}

static void set_port(void)
{
    char pb[16];
    snprintf(pb, sizeof pb, "%d", harness_free_port());
    setenv("LOOM_PORT_BASE", pb, 1);
}

/* A loopback table of servers with per ranks on each. */
static const char *server_table(int servers, int per, char *path, size_t len)
{
    snprintf(path, len, "/tmp/loom-test-shm-%d-%dx%d.json", (int)getpid(), servers, per);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fprintf(f, "{\"version\": \"1.0\", \"server_count\": \"%d\", \"server_list\": [", servers);
    for (int s = 0; s < servers; s++) {
        fprintf(f, "%s{\"server_id\": \"127.0.0.%d\", \"host_ip\": \"127.0.0.%d\", "
                "\"device\": [", s ? ", " : "", s + 2, s + 2);
        for (int d = 0; d < per; d++)
            fprintf(f, "%s{\"device_id\": \"%d\", \"device_ip\": \"127.0.%d.%d\", "
                    "\"rank_id\": \"%d\"}", d ? ", " : "", d, s + 2, d + 1, s * per + d);
        fprintf(f, "]}");
    }
    fprintf(f, "], \"status\": \"completed\"}\n");
    fclose(f);
    return path;
}

/* TEST_SHM_ONLY=text runs only the cases whose name contains text. */
static int skipped(const char *name)
{
    const char *only = getenv("TEST_SHM_ONLY");
    return only && *only && !strstr(name, only);
}

static int run(const char *name, int n, harness_fn fn, struct cfg *c)
{
    if (skipped(name))
        return 0;
    set_port();
    double t0 = harness_now();
    /* generous: the machine may be busy with other work */
    int rc = harness_run(n, fn, c, 300, NULL);
    printf("%s %s n=%d (%.1f s)\n", rc ? "FAIL" : "PASS", name, n, harness_now() - t0);
    fflush(stdout);
    return rc;
}

int main(void)
{
    const char *src = getenv("LOOM_SRCDIR") ? getenv("LOOM_SRCDIR") : ".";
    char single[1024], eight[1024], two2[256], two3[256], pair[256];
    snprintf(single, sizeof single, "%s/etc/ranktables/single-4.json", src);
    snprintf(eight, sizeof eight, "%s/etc/ranktables/single-8.json", src);
    setenv("LOOM_CHUNK_SIZE", "16K", 1);
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "30", 0);
    setenv("LOOM_TIMEOUT", "60", 0);
    unsetenv("LOOM_ALGO");
    unsetenv("LOOM_SHM");
    if (!server_table(2, 2, two2, sizeof two2) || !server_table(2, 3, two3, sizeof two3) ||
        !server_table(1, 2, pair, sizeof pair)) {
        perror("writing a rank table in /tmp");
        return 2;
    }
    int failed = 0;
    enum { NPATHS = 6 };
    static const char *const paths[NPATHS] = {"push", "copy", "read", "ll", "pipe", "pipe"};
    static const char *const pnames[NPATHS] = {
        "push (read and write)", "two-copy",           "read-only",
        "small-message lines",   "pipelined two-copy", "pipelined, forced for every size"};
    /* every path but the chosen one (pipe, CMA refused or not) forced for
     * every size */
    static const char *const algos[NPATHS] = {"shm_push", "shm_copy", "shm_read",
                                              "shm_ll",   NULL,       "shm_pipe"};
    static const char *const smalls[NPATHS] = {"push", "copy", "read", "ll", "copy", "pipe"};
    static const int no_cma[NPATHS] = {0, 1, 2, 0, 1, 0};
    struct cfg c;
    for (int p = 0; p < NPATHS; p++) {
        char name[96];
        c = (struct cfg){.table = single,
                         .expect = "shm",
                         .no_cma = no_cma[p],
                         .path = paths[p],
                         .algo = algos[p],
                         .small = smalls[p]};
        snprintf(name, sizeof name, "matrix %s", pnames[p]);
        failed |= run(name, 4, matrix_rank, &c);
        snprintf(name, sizeof name, "mismatch %s: count", pnames[p]);
        failed |= run(name, 4, mismatch_rank, &c);
        c.later = 1;
        snprintf(name, sizeof name, "mismatch %s: kind", pnames[p]);
        failed |= run(name, 4, mismatch_rank, &c);
        c.later = 0;
        for (int k = 0; k < 3; k++) {
            c.abort_kind = (int[]){K_ALLREDUCE, K_BROADCAST, K_REDUCE}[k];
            snprintf(name, sizeof name, "abort %s: %s", pnames[p], kname[c.abort_kind]);
            failed |= run(name, 4, abort_rank, &c);
        }
    }
    c = (struct cfg){.table = pair, .expect = "shm", .path = "pipe", .small = "copy"};
    failed |= run("matrix 2 ranks", 2, matrix_rank, &c);
    c.no_cma = 1;
    failed |= run("matrix 2 ranks two-copy", 2, matrix_rank, &c);
    c = (struct cfg){.table = eight};
    failed |= run("crowd: 8 ranks", 8, crowd_rank, &c);
    c = (struct cfg){.table = eight, .algo = "shm_push", .path = "push"};
    failed |= run("crowd: 8 ranks push", 8, crowd_rank, &c);
    /* hierarchical: pipe inside each server (CMA or not, its small
     * allreduces through the slots), and every other path forced */
    c = (struct cfg){.table = two2, .expect = "hier", .path = "pipe", .small = "copy"};
    failed |= run("hier 2x2", 4, matrix_rank, &c);
    c = (struct cfg){.table = two3, .expect = "hier", .path = "pipe", .small = "copy"};
    failed |= run("hier 2x3", 6, matrix_rank, &c);
    c.no_cma = 1;
    failed |= run("hier 2x3 two-copy", 6, matrix_rank, &c);
    /* mismatch and abort through the hierarchical pipe path: the failure
     * crosses servers through the step between them */
    c = (struct cfg){.table = two2, .expect = "hier", .path = "pipe", .hier = 1};
    failed |= run("hier 2x2 mismatch: count", 4, mismatch_rank, &c);
    c.later = 1;
    failed |= run("hier 2x2 mismatch: kind", 4, mismatch_rank, &c);
    c.later = 0;
    for (int k = 0; k < 2; k++) {
        c.abort_kind = k ? K_BROADCAST : K_ALLREDUCE;
        char name[64];
        snprintf(name, sizeof name, "hier 2x2 abort: %s", kname[c.abort_kind]);
        failed |= run(name, 4, abort_rank, &c);
    }
    c = (struct cfg){.table = two2, .expect = "hier", .path = "push", .algo = "shm_push"};
    failed |= run("hier 2x2 push", 4, matrix_rank, &c);
    c = (struct cfg){.table = two3, .expect = "hier", .path = "read", .algo = "shm_read"};
    failed |= run("hier 2x3 read", 6, matrix_rank, &c);
    c = (struct cfg){.table = two2, .expect = "hier", .path = "copy", .algo = "shm_copy"};
    failed |= run("hier 2x2 copy", 4, matrix_rank, &c);
    setenv("LOOM_ALGO", "allreduce=ring", 1);
    c = (struct cfg){.table = two2, .expect = NULL};
    failed |= run("LOOM_ALGO=allreduce=ring", 4, matrix_rank, &c);
    unsetenv("LOOM_ALGO");
    setenv("LOOM_SHM", "0", 1);
    c = (struct cfg){.table = single};
    failed |= run("LOOM_SHM=0", 4, off_rank, &c);
    unsetenv("LOOM_SHM");
    static const char *const anames[] = {"mixed kinds", "mismatch", "a peer dies", "abort",
                                         "another path"};
    for (int a = 0; a < 5; a++) {
        char name[96];
        c = (struct cfg){.table = single, .ahead = a};
        if (a == AHEAD_PATH) {
            c.algo_rank = 1;
            c.algo_other = "broadcast=shm_copy";
        }
        snprintf(name, sizeof name, "ahead: %s", anames[a]);
        if (a != AHEAD_KILL) {
            failed |= run(name, 4, ahead_rank, &c);
        } else if (!skipped(name)) {
            int st[4];
            set_port();
            harness_run(4, ahead_rank, &c, 60, st);
            int ok = st[2] == 128 + SIGKILL && !st[0] && !st[1] && !st[3];
            int left = shm_leftovers();
            printf("%s %s: ranks exited %d %d %d %d, %d segment(s) left in /dev/shm\n",
                   ok && !left ? "PASS" : "FAIL", name, st[0], st[1], st[2], st[3], left);
            failed |= !ok || left;
        }
    }
    c = (struct cfg){.table = single, .ahead = AHEAD_MIX, .algo = "shm_ll"};
    failed |= run("ahead: mixed kinds, all small-message lines", 4, ahead_rank, &c);
    c = (struct cfg){.table = eight, .ahead = AHEAD_MIX};
    failed |= run("ahead: mixed kinds, 8 ranks", 8, ahead_rank, &c);
    /* the dead rank exits by SIGKILL (128 + 9); the others must pass */
    atomic_int *passed = harness_counter_new();
    if (!passed) {
        perror("mmap");
        return 1;
    }
    /* the phase-counter paths: there a flag raised for a call the flagging
     * rank still runs must fail its peers' call (on the ll path a rank that
     * fails stops writing its lines, so its peers sleep, then see the flag) */
    c = (struct cfg){.table = single, .later = 1, .algo = "shm_copy"};
    failed |= run("late failure: a later call", 4, late_rank, &c);
    c.later = 0;
    failed |= run("late failure: this call", 4, late_rank, &c);
    for (int p = 0; p < NPATHS && !skipped("kill"); p++) {
        c = (struct cfg){.table = single,
                         .kill_rank = 2,
                         .passed = passed,
                         .no_cma = no_cma[p],
                         .algo = algos[p]};
        atomic_store(passed, 0);
        int st[4];
        set_port();
        harness_run(4, kill_rank, &c, 60, st);
        int kill_ok = st[2] == 128 + SIGKILL;
        for (int r = 0; r < 4; r++)
            if (r != 2 && st[r] != 0)
                kill_ok = 0;
        int left = shm_leftovers();
        printf("%s kill %s: ranks exited %d %d %d %d, %d segment(s) left in /dev/shm\n",
               kill_ok && !left ? "PASS" : "FAIL", pnames[p], st[0], st[1], st[2], st[3],
               left);
        failed |= !kill_ok || left;
    }
    for (int k = 0; k < 2 && !skipped("set-up death"); k++) {
        c = (struct cfg){.table = single, .kill_rank = k ? 0 : 2};
        int st[4];
        char name[64];
        snprintf(name, sizeof name, "set-up death: rank %d", c.kill_rank);
        set_port();
        double t0 = harness_now();
        harness_run(4, setup_death_rank, &c, 60, st);
        int ok = 1;
        for (int r = 0; r < 4; r++)
            ok &= st[r] == (r == c.kill_rank ? 9 : 0);
        printf("%s %s: ranks exited %d %d %d %d (%.1f s)\n", ok ? "PASS" : "FAIL", name, st[0],
               st[1], st[2], st[3], harness_now() - t0);
        failed |= !ok;
    }
    if (!skipped("dead peer")) {
        c = (struct cfg){.table = single};
        int st[4];
        set_port();
        harness_run(4, dead_rank, &c, 60, st);
        int ok = st[0] == 0 && st[1] == 0 && st[2] == 0 && st[3] == 128 + SIGKILL;
        printf("%s dead peer: ranks exited %d %d %d %d\n", ok ? "PASS" : "FAIL", st[0], st[1],
               st[2], st[3]);
        failed |= !ok;
    }
    harness_counter_free(passed);
    unlink(two2);
    unlink(two3);
    unlink(pair);
    return failed;
}
