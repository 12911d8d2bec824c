/* verbs_model_perf.c - allreduce time over the verbs transport on the
 * software model of libibverbs, for comparing two builds (docs/perf.md).
 * The model is shared only by processes forked after it is made, so the
 * ranks are forked here (loom-run and the perf/ tools exec theirs).
 *
 * usage: LOOM_TEST_VERBS_MODEL=1 LOOM_TRANSPORT=verbs LOOM_SHM=0 \
 *        verbs_model_perf NRANKS BYTES ITERS WARMUP
 * prints "NRANKS BYTES US": the slowest rank's mean time of one in-place
 * float32 sum allreduce of BYTES, over ITERS calls after WARMUP. */
#include <stdio.h>
#include <stdlib.h>

#include "../support/harness.h"
#include "loom.h"

struct cfg {
    int port;
    size_t bytes;
    int iters, warmup;
};

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
    size_t count = c->bytes / 4 ? c->bytes / 4 : 1;
    float *buf = malloc(count * sizeof *buf);
    if (!buf)
        return 2;
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)(i % 7);
    loom_result_t res = LOOM_SUCCESS;
    for (int i = 0; i < c->warmup && res == LOOM_SUCCESS; i++)
        res = loom_allreduce(buf, buf, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    if (res == LOOM_SUCCESS)
        res = loom_barrier(comm, NULL);
    double t0 = harness_now();
    for (int i = 0; i < c->iters && res == LOOM_SUCCESS; i++)
        res = loom_allreduce(buf, buf, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    double us = (harness_now() - t0) * 1e6 / c->iters;
    if (res == LOOM_SUCCESS) /* the slowest rank's */
        res = loom_allreduce(&us, &us, 1, LOOM_FLOAT64, LOOM_MAX, comm, NULL);
    if (res != LOOM_SUCCESS)
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(comm));
    else if (rank == 0)
        printf("%d %zu %.2f\n", n, c->bytes, us);
    free(buf);
    loom_comm_destroy(comm);
    return res == LOOM_SUCCESS ? 0 : 3;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: verbs_model_perf NRANKS BYTES ITERS WARMUP\n");
        return 2;
    }
    struct cfg c = {harness_free_port(), strtoull(argv[2], NULL, 0), atoi(argv[3]), atoi(argv[4])};
    if (c.iters < 1)
        return 2;
    return harness_run(atoi(argv[1]), rank_main, &c, 300, NULL);
}
