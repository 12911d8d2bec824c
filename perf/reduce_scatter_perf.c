/* reduce_scatter_perf - reduce-scatter bandwidth, nccl-tests style (see
 * docs/perf.md). size = bytes of each rank's send buffer (nranks blocks);
 * count = its elements; each rank receives count/nranks;
 * busbw = algbw * (n-1)/n. */
#include "build_config.h"

#include "loom.h"
#include "common.h"
#include "../tests/support/coll_check.h"

static void rs_setup(struct perf_case *c)
{
    uint64_t per_rank = c->size / c->esize / (uint64_t)c->nranks;
    c->op_count = per_rank;
    c->count = per_rank * (uint64_t)c->nranks;
    c->size = c->count * c->esize;
    c->sendbuf = c->buf_a;
    c->recvbuf = c->in_place
                     ? (char *)c->buf_a + (size_t)c->rank * per_rank * c->esize
                     : c->buf_b;
}

static void rs_fill(struct perf_case *c)
{
    cc_fill(c->sendbuf, c->dtype, c->op, c->seed, c->rank, 0, c->count);
}

static loom_result_t rs_run(struct perf_case *c, loom_stream_t stream)
{
    return loom_reduce_scatter(c->sendbuf, c->recvbuf, c->op_count, c->dtype,
                               c->op, c->comm, stream);
}

static void *rs_result(struct perf_case *c, size_t *bytes)
{
    *bytes = c->op_count * c->esize;
    return c->recvbuf;
}

static uint64_t rs_check(struct perf_case *c)
{
    uint64_t wrong = 0;
    uint64_t first = (uint64_t)c->rank * c->op_count;
    for (uint64_t k = 0; k < c->op_count; k++)
        wrong += !cc_check_reduced(c->recvbuf, k, c->dtype, c->op, c->seed,
                                   c->nranks, first + k);
    return wrong;
}

static const struct perf_coll reduce_scatter = {
    .name = "reduce_scatter",
    .kind = LOOM_OP_REDUCE_SCATTER,
    .has_op = 1,
    .has_root = 0,
    .bus_factor = perf_factor_gather,
    .setup = rs_setup,
    .fill = rs_fill,
    .run = rs_run,
    .result = rs_result,
    .check = rs_check,
};

int main(int argc, char **argv)
{
    return perf_main(&reduce_scatter, argc, argv);
}
