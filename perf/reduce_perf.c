/* reduce_perf - reduce-to-root bandwidth, nccl-tests style (see
 * docs/perf.md). size = bytes of each rank's send buffer; busbw = algbw. */
#include "build_config.h"

#include "loom.h"
#include "common.h"
#include "../tests/support/coll_check.h"

static void red_setup(struct perf_case *c)
{
    c->count = c->size / c->esize;
    c->op_count = c->count;
    c->size = c->count * c->esize;
    c->recvbuf = c->buf_b;
    c->sendbuf = c->in_place ? c->buf_b : c->buf_a;
}

static void red_fill(struct perf_case *c)
{
    cc_fill(c->sendbuf, c->dtype, c->op, c->seed, c->rank, 0, c->count);
}

static loom_result_t red_run(struct perf_case *c, loom_stream_t stream)
{
    return loom_reduce(c->sendbuf, c->recvbuf, c->op_count, c->dtype, c->op,
                       c->root, c->comm, stream);
}

/* Only the root has a result. */
static void *red_result(struct perf_case *c, size_t *bytes)
{
    *bytes = c->rank == c->root ? c->size : 0;
    return c->rank == c->root ? c->recvbuf : NULL;
}

static uint64_t red_check(struct perf_case *c)
{
    uint64_t wrong = 0;
    if (c->rank != c->root)
        return 0;
    for (uint64_t i = 0; i < c->count; i++)
        wrong += !cc_check_reduced(c->recvbuf, i, c->dtype, c->op, c->seed,
                                   c->nranks, i);
    return wrong;
}

static const struct perf_coll reduce = {
    .name = "reduce",
    .kind = LOOM_OP_REDUCE,
    .has_op = 1,
    .has_root = 1,
    .bus_factor = perf_factor_one,
    .setup = red_setup,
    .fill = red_fill,
    .run = red_run,
    .result = red_result,
    .check = red_check,
};

int main(int argc, char **argv)
{
    return perf_main(&reduce, argc, argv);
}
