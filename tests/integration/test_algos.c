/* test_algos.c - every collective algorithm, forced with LOOM_ALGO, on real
 * processes over loopback: n in {1..9, 16}, counts {0, 1, n-1, n+1} for
 * every dtype and op, in place and out of place, and 1000003 for a few
 * dtypes; allreduce results are also checked to be the same bytes on every
 * rank with inputs whose sum depends on the order of reduction.
 *
 * usage: test_algos [N...]          (default: 1 2 3 4 5 6 7 8 9 16)
 *        test_algos --bench N [MAXBYTES [KIND]]  (time per algorithm and size)
 * env:   LOOM_TEST_BIG (default 1000003): the large count
 *        LOOM_TEST_ALGOS: only the specs containing this string */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "../../perf/coll_check.h"
#include "../support/coll_one.h"
#include "../support/harness.h"
#include "loom.h"

struct spec {
    const char *algo;         /* LOOM_ALGO value                             */
    enum loom_algo want;      /* what loom_coll_select must report           */
    int kinds[3];             /* collectives it serves (K_*), -1 ends        */
};

static const struct spec specs[] = {
    {"allreduce=ring,allgather=ring,reduce_scatter=ring", LOOM_ALGO_RING,
     {K_ALLREDUCE, K_ALLGATHER, K_REDUCE_SCATTER}},
    {"allreduce=rd", LOOM_ALGO_RD, {K_ALLREDUCE, -1, -1}},
    {"allreduce=rhd", LOOM_ALGO_RHD, {K_ALLREDUCE, -1, -1}},
    {"allreduce=tree", LOOM_ALGO_TREE, {K_ALLREDUCE, -1, -1}},
    {"allgather=bruck", LOOM_ALGO_BRUCK, {K_ALLGATHER, -1, -1}},
    {"broadcast=binomial", LOOM_ALGO_BINOMIAL, {K_BROADCAST, -1, -1}},
    {"broadcast=chain,reduce=chain", LOOM_ALGO_CHAIN, {K_BROADCAST, K_REDUCE, -1}},
    {"broadcast=scatter_allgather", LOOM_ALGO_SCATTER_ALLGATHER, {K_BROADCAST, -1, -1}},
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))

/* A rank's exit status when it could not join (the port may have been
 * taken by another job between choosing and listening: retried once). */
#define INIT_FAILED 3

struct cfg {
    int port;
    uint64_t big;
    const struct spec *spec;
};

/* Allreduce of floats whose sum depends on the order of reduction: every
 * rank must still end with the same bytes (compared by allgathering a hash
 * of them). */
static void same_bytes(loom_comm_t comm, int rank, int n, loom_dtype_t t, loom_redop_t op,
                       uint64_t count)
{
    size_t es = loom_dtype_size(t);
    char *a = malloc((size_t)count * es + 1);
    uint64_t *hashes = malloc((size_t)n * sizeof *hashes);
    if (!a || !hashes) {
        FAIL("out of memory");
        free(a);
        free(hashes);
        return;
    }
    for (uint64_t i = 0; i < count; i++)
        cc_store_float(a, t, i, (double)(cc_mix((uint64_t)rank * 7777 + i) % 100000) / 997.0);
    loom_result_t res = loom_allreduce(a, a, count, t, op, comm, NULL);
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < (size_t)count * es; k++)
        h = (h ^ (unsigned char)a[k]) * 1099511628211ull;
    if (res == LOOM_SUCCESS)
        res = loom_allgather(&h, hashes, 1, LOOM_UINT64, comm, NULL);
    if (res != LOOM_SUCCESS)
        FAIL("allreduce %s count %" PRIu64 " (same bytes): %s", loom_dtype_name(t), count,
             loom_get_error_string(comm));
    else
        for (int r = 0; r < n; r++)
            if (hashes[r] != h)
                FAIL("allreduce %s %s count %" PRIu64 ": rank %d got other bytes than rank %d",
                     loom_dtype_name(t), loom_redop_name(op), count, r, rank);
    free(a);
    free(hashes);
}

static int rank_main(int rank, int n, void *arg)
{
    struct cfg *c = arg;
    setenv("LOOM_ALGO", c->spec->algo, 1);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", c->port);
    loom_comm_t comm;
    loom_result_t res = loom_comm_init_url(url, n, rank, &comm);
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, loom_result_string(res),
                loom_get_error_string(NULL));
        return INIT_FAILED;
    }
    /* the forced algorithm is the one selected */
    for (int i = 0; i < 3; i++) {
        int kind = c->spec->kinds[i];
        if (kind < 0)
            break;
        struct loom_op probe = {.kind = (enum loom_op_kind)kind, .count = 1,
                                .dtype = LOOM_FLOAT32};
        enum loom_algo got = loom_coll_select(comm, &probe);
        if (got != c->spec->want)
            FAIL("%s with LOOM_ALGO=%s: selected %s", kname[kind], c->spec->algo,
                 loom_algo_name(got));
        /* and the public query names it */
        const char *pub = NULL;
        res = loom_comm_algo(comm, kname[kind], 1, LOOM_FLOAT32, LOOM_SUM, &pub);
        if (res != LOOM_SUCCESS || strcmp(pub, loom_algo_name(c->spec->want)) != 0)
            FAIL("%s with LOOM_ALGO=%s: loom_comm_algo gave %s, %s", kname[kind], c->spec->algo,
                 loom_result_string(res), pub ? pub : "nothing");
    }
    uint64_t small[4] = {0, 1, (uint64_t)(n > 1 ? n - 1 : 2), (uint64_t)n + 1};
    uint64_t seed = 1;
    for (int i = 0; i < 3 && fails <= 20; i++) {
        int kind = c->spec->kinds[i];
        if (kind < 0)
            break;
        int reduces = kind == K_ALLREDUCE || kind == K_REDUCE_SCATTER || kind == K_REDUCE;
        for (int t = 0; t < LOOM_DTYPE_COUNT; t++)
            for (int oi = 0; oi < (reduces ? 5 : 1); oi++)
                for (int ci = 0; ci < 4; ci++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        if (kind == K_BROADCAST && inplace)
                            continue; /* broadcast is always in place */
                        one(comm, rank, n, kind, (loom_dtype_t)t, ops[oi], small[ci],
                            inplace, seed++);
                    }
        /* the large count: float32 sum both ways, int8 max out of place,
         * bfloat16 avg in place; n up to 9 */
        if (n <= 9) {
            static const loom_dtype_t bt[] = {LOOM_FLOAT32, LOOM_FLOAT32, LOOM_INT8,
                                              LOOM_BFLOAT16};
            static const loom_redop_t bo[] = {LOOM_SUM, LOOM_SUM, LOOM_MAX, LOOM_AVG};
            for (int bi = 0; bi < 4; bi++) {
                int inplace = bi == 1 || bi == 3;
                if (kind == K_BROADCAST && bi == 1)
                    continue; /* broadcast is always in place */
                one(comm, rank, n, kind, bt[bi], bo[bi], c->big, inplace && kind != K_BROADCAST,
                    seed++);
            }
        }
        if (kind == K_ALLREDUCE) {
            same_bytes(comm, rank, n, LOOM_FLOAT32, LOOM_SUM, 1000);
            same_bytes(comm, rank, n, LOOM_FLOAT64, LOOM_AVG, (uint64_t)n + 1);
            if (n == 3 || n == 8)
                same_bytes(comm, rank, n, LOOM_FLOAT32, LOOM_SUM, c->big);
        }
    }
    res = loom_barrier(comm, NULL);
    if (res != LOOM_SUCCESS)
        FAIL("barrier: %s", loom_get_error_string(comm));
    loom_comm_destroy(comm);
    if (fails)
        fprintf(stderr, "rank %d: %d failures with LOOM_ALGO=%s\n", rank, fails,
                c->spec->algo);
    return fails ? 1 : 0;
}

/* --bench N [MAXBYTES [KIND]]: time per call of each algorithm for KIND
 * (allreduce: float32 sum; broadcast; allgather: MAXBYTES is the total)
 * and of the automatic choice, interleaved per size so that load on the
 * machine hits them alike; the best of BENCH_ROUNDS rounds, slowest rank.
 * Sizes from 8 B (allgather: 8 B a rank) by factors of 4, as
 * `all_reduce_perf -b 8 -f 4`. Rank 0 prints one line per size, in
 * microseconds. */
#define BENCH_ROUNDS 5
struct bench {
    int port;
    size_t maxb;
    enum loom_op_kind kind;
};

static loom_result_t bench_call(loom_comm_t comm, enum loom_op_kind kind, float *buf,
                                const float *in, uint64_t count, int n)
{
    switch (kind) {
    case LOOM_OP_BROADCAST: return loom_broadcast(buf, count, LOOM_FLOAT32, 0, comm, NULL);
    case LOOM_OP_ALLGATHER:
        return loom_allgather(in, buf, count / (uint64_t)n, LOOM_FLOAT32, comm, NULL);
    default: return loom_allreduce(buf, buf, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    }
}

static int bench_main(int rank, int n, void *arg)
{
    struct bench *bc = arg;
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", bc->port);
    loom_comm_t comm;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS)
        return INIT_FAILED;
    enum loom_algo algos[LOOM_ALGO_COUNT];
    int na = 0;
    for (int a = 1; a < LOOM_ALGO_COUNT; a++)
        if (loom_algo_serves((enum loom_algo)a, bc->kind))
            algos[na++] = (enum loom_algo)a;
    algos[na++] = LOOM_ALGO_AUTO;
    float *buf = calloc(bc->maxb / 4 + 1, 4);
    float *in = calloc(bc->maxb / 4 / (size_t)n + 1, 4);
    if (!buf || !in)
        return 1;
    if (rank == 0) {
        printf("%-3s %10s", "n", "bytes");
        for (int a = 0; a < na; a++)
            printf(" %10.10s", loom_algo_name(algos[a]));
        printf("\n");
    }
    size_t first = bc->kind == LOOM_OP_ALLGATHER ? 8 * (size_t)n : 8;
    for (size_t bytes = first; bytes <= bc->maxb; bytes *= 4) {
        uint64_t count = bytes / 4;
        int iters = bytes <= 65536 ? 100 : bytes <= (1 << 20) ? 20 : 4;
        double best[LOOM_ALGO_COUNT];
        for (int a = 0; a < na; a++)
            best[a] = 1e30;
        for (int round = 0; round < BENCH_ROUNDS; round++)
            for (int a = 0; a < na; a++) {
                comm->algo_forced[bc->kind] = algos[a];
                bench_call(comm, bc->kind, buf, in, count, n);
                loom_barrier(comm, NULL);
                double t0 = harness_now();
                for (int i = 0; i < iters; i++)
                    if (bench_call(comm, bc->kind, buf, in, count, n))
                        return 1;
                double us = (harness_now() - t0) / iters * 1e6, worst = 0;
                comm->algo_forced[bc->kind] = LOOM_ALGO_AUTO;
                loom_allreduce(&us, &worst, 1, LOOM_FLOAT64, LOOM_MAX, comm, NULL);
                if (worst < best[a])
                    best[a] = worst;
            }
        comm->algo_forced[bc->kind] = LOOM_ALGO_AUTO;
        struct loom_op probe = {.kind = bc->kind, .count = count, .dtype = LOOM_FLOAT32};
        if (bc->kind == LOOM_OP_ALLGATHER)
            probe.count = count / (uint64_t)n;
        if (rank == 0) {
            printf("%-3d %10zu", n, bytes);
            for (int a = 0; a < na; a++)
                printf(" %10.1f", best[a]);
            printf(" %s\n", loom_algo_name(loom_coll_select(comm, &probe)));
        }
        fflush(stdout);
    }
    free(buf);
    free(in);
    loom_comm_destroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "30", 0);
    setenv("LOOM_TIMEOUT", "60", 0);
    if (argc >= 3 && argc <= 5 && strcmp(argv[1], "--bench") == 0) {
        struct bench bc = {harness_free_port(),
                           argc >= 4 ? strtoull(argv[3], NULL, 10) : (size_t)32 << 20,
                           LOOM_OP_ALLREDUCE};
        if (bc.maxb < 8 || bc.maxb > ((size_t)1 << 30)) {
            fprintf(stderr, "test_algos: --bench: max bytes '%s' not in 8..1G\n", argv[3]);
            return 2;
        }
        if (argc == 5) {
            if (strcmp(argv[4], "broadcast") == 0)
                bc.kind = LOOM_OP_BROADCAST;
            else if (strcmp(argv[4], "allgather") == 0)
                bc.kind = LOOM_OP_ALLGATHER;
            else if (strcmp(argv[4], "allreduce") != 0) {
                fprintf(stderr, "test_algos: --bench: '%s' is not allreduce, broadcast or "
                        "allgather\n", argv[4]);
                return 2;
            }
        }
        return harness_run(atoi(argv[2]), bench_main, &bc, 600, NULL);
    }
    int ns[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}, nn = 10;
    if (argc > 1) {
        nn = 0;
        for (int i = 1; i < argc && nn < 16; i++) {
            ns[nn] = atoi(argv[i]);
            if (ns[nn] < 1 || ns[nn] > 16) {
                fprintf(stderr, "test_algos: rank count '%s' is not in 1..16\n", argv[i]);
                return 2;
            }
            nn++;
        }
    }
    struct cfg c = {.big = 1000003};
    const char *big = getenv("LOOM_TEST_BIG");
    if (big)
        c.big = strtoull(big, NULL, 10);
    const char *only = getenv("LOOM_TEST_ALGOS");
    setenv("LOOM_CHUNK_SIZE", getenv("LOOM_CHUNK_SIZE") ? getenv("LOOM_CHUNK_SIZE") : "16K", 1);
    int failed = 0;
    for (int si = 0; si < NSPECS; si++) {
        if (only && !strstr(specs[si].algo, only))
            continue;
        c.spec = &specs[si];
        for (int k = 0; k < nn; k++) {
            c.port = harness_free_port();
            double t0 = harness_now();
            int st[16];
            int rc = harness_run(ns[k], rank_main, &c, 300, st);
            if (rc && st[0] == INIT_FAILED) {
                printf("retry n=%d LOOM_ALGO=%s: rank 0 could not join on port %d\n", ns[k],
                       specs[si].algo, c.port);
                c.port = harness_free_port();
                rc = harness_run(ns[k], rank_main, &c, 300, st);
            }
            printf("%s n=%d LOOM_ALGO=%s (%.1f s)\n", rc ? "FAIL" : "PASS", ns[k],
                   specs[si].algo, harness_now() - t0);
            fflush(stdout);
            failed |= rc;
        }
    }
    return failed;
}
