/* all_gather_perf - allgather bandwidth, nccl-tests style (see docs/perf.md).
 * size = bytes of the gathered result (nranks blocks); count = its elements;
 * each rank sends count/nranks; busbw = algbw * (n-1)/n. */
#include "build_config.h"

#include "loom.h"
#include "common.h"
#include "../tests/support/coll_check.h"

static void ag_setup(struct perf_case *c)
{
    uint64_t per_rank = c->size / c->esize / (uint64_t)c->nranks;
    c->op_count = per_rank;
    c->count = per_rank * (uint64_t)c->nranks;
    c->size = c->count * c->esize;
    c->recvbuf = c->buf_b;
    c->sendbuf = c->in_place
                     ? (char *)c->buf_b + (size_t)c->rank * per_rank * c->esize
                     : c->buf_a;
}

static void ag_fill(struct perf_case *c)
{
    cc_fill(c->sendbuf, c->dtype, LOOM_SUM, c->seed, c->rank, 0, c->op_count);
}

static loom_result_t ag_run(struct perf_case *c, loom_stream_t stream)
{
    return loom_allgather(c->sendbuf, c->recvbuf, c->op_count, c->dtype,
                          c->comm, stream);
}

static void *ag_result(struct perf_case *c, size_t *bytes)
{
    *bytes = c->size;
    return c->recvbuf;
}

static uint64_t ag_check(struct perf_case *c)
{
    uint64_t wrong = 0;
    for (int r = 0; r < c->nranks; r++)
        for (uint64_t k = 0; k < c->op_count; k++)
            wrong += !cc_check_copy(c->recvbuf, (uint64_t)r * c->op_count + k,
                                    c->dtype, c->seed, r, k);
    return wrong;
}

static const struct perf_coll all_gather = {
    .name = "all_gather",
    .kind = LOOM_OP_ALLGATHER,
    .has_op = 0,
    .has_root = 0,
    .bus_factor = perf_factor_gather,
    .setup = ag_setup,
    .fill = ag_fill,
    .run = ag_run,
    .result = ag_result,
    .check = ag_check,
};

int main(int argc, char **argv)
{
    return perf_main(&all_gather, argc, argv);
}
