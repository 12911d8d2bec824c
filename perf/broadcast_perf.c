/* broadcast_perf - broadcast bandwidth, nccl-tests style (see docs/perf.md).
 * size = bytes broadcast; busbw = algbw.
 *
 * Loom's broadcast works in one buffer. The out-of-place column runs it on
 * the receive buffer after the root copied its send buffer there (outside the
 * timing); the in-place column runs it on the send buffer itself. Both time
 * the same call; the columns are kept so that the table reads as nccl-tests'. */
#include "build_config.h"

#include <string.h>

#include "loom.h"
#include "common.h"
#include "../tests/support/coll_check.h"

static void bc_setup(struct perf_case *c)
{
    c->count = c->size / c->esize;
    c->op_count = c->count;
    c->size = c->count * c->esize;
    c->sendbuf = c->buf_a;
    c->recvbuf = c->in_place ? c->buf_a : c->buf_b;
}

static void bc_fill(struct perf_case *c)
{
    if (c->rank == c->root) {
        cc_fill(c->sendbuf, c->dtype, LOOM_SUM, c->seed, c->root, 0, c->count);
        if (c->recvbuf != c->sendbuf)
            memcpy(c->recvbuf, c->sendbuf, c->size);
    } else {
        memset(c->recvbuf, 0, c->size);
    }
}

static loom_result_t bc_run(struct perf_case *c, loom_stream_t stream)
{
    return loom_broadcast(c->recvbuf, c->op_count, c->dtype, c->root, c->comm,
                          stream);
}

static void *bc_result(struct perf_case *c, size_t *bytes)
{
    *bytes = c->size;
    return c->recvbuf;
}

static uint64_t bc_check(struct perf_case *c)
{
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < c->count; i++)
        wrong += !cc_check_copy(c->recvbuf, i, c->dtype, c->seed, c->root, i);
    return wrong;
}

static const struct perf_coll broadcast = {
    .name = "broadcast",
    .kind = LOOM_OP_BROADCAST,
    .has_op = 0,
    .has_root = 1,
    .bus_factor = perf_factor_one,
    .setup = bc_setup,
    .fill = bc_fill,
    .run = bc_run,
    .result = bc_result,
    .check = bc_check,
};

int main(int argc, char **argv)
{
    return perf_main(&broadcast, argc, argv);
}
