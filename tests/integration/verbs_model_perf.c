/* verbs_model_perf.c - collective time over the verbs transport on the
 * software model of libibverbs, for comparing two builds (docs/perf.md).
 * The model is shared only by processes forked after it is made, so the
 * ranks are forked here (loom-run and the perf/ tools exec theirs).
 *
 * usage: LOOM_TEST_VERBS_MODEL=1 LOOM_TRANSPORT=verbs LOOM_SHM=0 \
 *        verbs_model_perf [COLL] NRANKS BYTES ITERS WARMUP
 * COLL: allreduce (the default; in place), allgather, broadcast (root 0)
 * or reduce_scatter, float32 (sum), BYTES sized as perf/'s tools size
 * them: the gathered result, each rank's reduce-scatter input (both
 * rounded down to whole blocks per rank). Prints "NRANKS BYTES US": the
 * slowest rank's mean time of one call over ITERS calls after WARMUP.
 * Then each rank checks one call's result against its own reference, so
 * that a broken build cannot post a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/harness.h"
#include "loom.h"

enum coll { ALLREDUCE, ALLGATHER, BROADCAST, REDUCE_SCATTER };
static const char *const coll_names[] = {"allreduce", "allgather", "broadcast", "reduce_scatter"};

struct cfg {
    int port;
    enum coll coll;
    size_t bytes;
    int iters, warmup;
};

struct bufs {
    float *a, *b;
    size_t count; /* elements of a and b */
    size_t block; /* count / nranks: allgather's and reduce_scatter's share */
};

/* Rank r's input element i: small integers, so every sum is exact. */
static float input(int r, size_t i)
{
    return (float)((i * 5 + (size_t)r * 3) % 11);
}

static loom_result_t run_one(enum coll coll, struct bufs *x, loom_comm_t comm)
{
    switch (coll) {
    case ALLGATHER: return loom_allgather(x->a, x->b, x->block, LOOM_FLOAT32, comm, NULL);
    case BROADCAST: return loom_broadcast(x->a, x->count, LOOM_FLOAT32, 0, comm, NULL);
    case REDUCE_SCATTER:
        return loom_reduce_scatter(x->a, x->b, x->block, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    default: return loom_allreduce(x->a, x->a, x->count, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    }
}

static void fill(enum coll coll, struct bufs *x, int rank)
{
    for (size_t i = 0; i < x->count; i++)
        x->a[i] = coll == BROADCAST && rank != 0 ? 0.0f : input(coll == BROADCAST ? 0 : rank, i);
}

/* The number of wrong elements in this rank's result of one call. */
static size_t check(enum coll coll, const struct bufs *x, int rank, int n)
{
    size_t wrong = 0;
    if (coll == ALLGATHER) {
        for (size_t i = 0; i < x->count; i++)
            wrong += x->b[i] != input((int)(i / x->block), i % x->block);
        return wrong;
    }
    const float *got = coll == REDUCE_SCATTER ? x->b : x->a;
    size_t len = coll == REDUCE_SCATTER ? x->block : x->count;
    size_t first = coll == REDUCE_SCATTER ? (size_t)rank * x->block : 0;
    for (size_t i = 0; i < len; i++) {
        float want = 0;
        if (coll == BROADCAST)
            want = input(0, i);
        else
            for (int r = 0; r < n; r++)
                want += input(r, first + i);
        wrong += got[i] != want;
    }
    return wrong;
}

static int rank_main(int rank, int n, void *arg)
{
    struct cfg *c = arg;
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", c->port);
    loom_comm_t comm;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s\n", rank, loom_get_error_string(NULL));
        return 1;
    }
    struct bufs x = {.count = c->bytes / 4 ? c->bytes / 4 : 1};
    if (c->coll == ALLGATHER || c->coll == REDUCE_SCATTER) {
        x.block = x.count / (size_t)n ? x.count / (size_t)n : 1;
        x.count = x.block * (size_t)n;
    }
    x.a = malloc(x.count * sizeof *x.a);
    x.b = malloc(x.count * sizeof *x.b);
    if (!x.a || !x.b)
        return 2;
    fill(c->coll, &x, rank);
    loom_result_t res = LOOM_SUCCESS;
    for (int i = 0; i < c->warmup && res == LOOM_SUCCESS; i++)
        res = run_one(c->coll, &x, comm);
    if (res == LOOM_SUCCESS)
        res = loom_barrier(comm, NULL);
    double t0 = harness_now();
    for (int i = 0; i < c->iters && res == LOOM_SUCCESS; i++)
        res = run_one(c->coll, &x, comm);
    double us = (harness_now() - t0) * 1e6 / c->iters;
    if (res == LOOM_SUCCESS) /* the slowest rank's */
        res = loom_allreduce(&us, &us, 1, LOOM_FLOAT64, LOOM_MAX, comm, NULL);
    size_t wrong = 0;
    if (res == LOOM_SUCCESS) {
        fill(c->coll, &x, rank);
        res = run_one(c->coll, &x, comm);
    }
    if (res == LOOM_SUCCESS)
        wrong = check(c->coll, &x, rank, n);
    if (res != LOOM_SUCCESS)
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(comm));
    else if (wrong)
        fprintf(stderr, "rank %d: %s: %zu of its elements wrong\n", rank, coll_names[c->coll],
                wrong);
    else if (rank == 0)
        printf("%d %zu %.2f\n", n, x.count * sizeof *x.a, us);
    free(x.a);
    free(x.b);
    loom_comm_destroy(comm);
    return res != LOOM_SUCCESS ? 3 : wrong ? 4 : 0;
}

int main(int argc, char **argv)
{
    size_t ncolls = sizeof coll_names / sizeof coll_names[0], k = 0;
    if (argc == 6) {
        while (k < ncolls && strcmp(argv[1], coll_names[k]) != 0)
            k++;
        argv++;
        argc--;
    }
    if (argc != 5 || k == ncolls) {
        fprintf(stderr, "usage: verbs_model_perf [allreduce|allgather|broadcast|reduce_scatter] "
                        "NRANKS BYTES ITERS WARMUP\n");
        return 2;
    }
    struct cfg c = {harness_free_port(), (enum coll)k, strtoull(argv[2], NULL, 0), atoi(argv[3]),
                    atoi(argv[4])};
    if (c.iters < 1)
        return 2;
    return harness_run(atoi(argv[1]), rank_main, &c, 300, NULL);
}
