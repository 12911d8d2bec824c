/* all_reduce_perf - allreduce bandwidth, nccl-tests style (see docs/perf.md).
 * size = bytes of each rank's send buffer; busbw = algbw * 2(n-1)/n. */
#include "build_config.h"

#include "loom.h"
#include "common.h"
#include "../tests/support/coll_check.h"

static double ar_factor(int n)
{
    return 2.0 * (n - 1) / n;
}

static void ar_setup(struct perf_case *c)
{
    c->count = c->size / c->esize;
    c->op_count = c->count;
    c->size = c->count * c->esize;
    c->recvbuf = c->buf_b;
    c->sendbuf = c->in_place ? c->buf_b : c->buf_a;
}

static void ar_fill(struct perf_case *c)
{
    cc_fill(c->sendbuf, c->dtype, c->op, c->seed, c->rank, 0, c->count);
}

static loom_result_t ar_run(struct perf_case *c, loom_stream_t stream)
{
    return loom_allreduce(c->sendbuf, c->recvbuf, c->op_count, c->dtype, c->op,
                          c->comm, stream);
}

static void *ar_result(struct perf_case *c, size_t *bytes)
{
    *bytes = c->size;
    return c->recvbuf;
}

static uint64_t ar_check(struct perf_case *c)
{
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < c->count; i++)
        wrong += !cc_check_reduced(c->recvbuf, i, c->dtype, c->op, c->seed,
                                   c->nranks, i);
    return wrong;
}

static const struct perf_coll all_reduce = {
    .name = "all_reduce",
    .kind = LOOM_OP_ALLREDUCE,
    .has_op = 1,
    .has_root = 0,
    .bus_factor = ar_factor,
    .setup = ar_setup,
    .fill = ar_fill,
    .run = ar_run,
    .result = ar_result,
    .check = ar_check,
};

int main(int argc, char **argv)
{
    return perf_main(&all_reduce, argc, argv);
}
