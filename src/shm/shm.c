/* shm.c - which ops go through shared memory, and running them. */
#include "build_config.h"

#include <string.h>

#include "coll/coll.h"
#include "shm.h"
#include "shm_priv.h"
#include "util.h"

int loom_shm_usable(const struct loom_comm *comm, const struct loom_op *op)
{
    const struct loom_shm *s = comm->shm;
    if (!s || op->kind > LOOM_OP_BARRIER)
        return 0; /* no engine here for the kinds after it */
    int forced = comm->algo_forced[op->kind];
    if (s->force[op->kind] < 0 ||
        (forced != LOOM_ALGO_AUTO && forced != LOOM_ALGO_SHM && forced != LOOM_ALGO_HIER))
        return 0;
    if (op->kind != LOOM_OP_BARRIER && op->count == 0)
        return 0;
    if (s->ngroups == 1)
        return 1;
    return op->kind == LOOM_OP_ALLREDUCE && s->sub != NULL;
}

const char *loom_shm_algo_name(const struct loom_comm *comm, const struct loom_op *op)
{
    if (!loom_shm_usable(comm, op))
        return NULL;
    return ((const struct loom_shm *)comm->shm)->ngroups == 1 ? "shm" : "hier";
}

loom_result_t loom_shm_inter(struct loom_shm_ctx *x, struct loom_comm *sub, void *buf,
                             uint64_t len)
{
    /* a blocking call on the sub-communicator: it runs inline on this
     * thread when its queue is idle, which it always is here */
    loom_result_t res = loom_allreduce(buf, buf, len, x->op->dtype,
                                       x->op->op == LOOM_AVG ? LOOM_SUM : x->op->op, sub,
                                       NULL);
    if (res < 0) {
        char what[160];
        loom_op_format(loom_op_desc(x->op), x->op->count, x->op->seq, what, sizeof what);
        loom_comm_set_error(x->comm, res, "%s: between servers: %s", what,
                            loom_get_error_string(sub));
        /* sub's messages name its ranks by their rank in the parent */
        loom_shm_mark_failed(x, -1);
    }
    return res;
}

void loom_shm_note_call(struct loom_comm *comm, const struct loom_op *op)
{
    if (comm->shm)
        loom_shm_publish_call(comm->shm, op);
}

loom_result_t loom_shm_coll_run(struct loom_comm *comm, struct loom_op *op, int *handled)
{
    *handled = 0;
    struct loom_shm *s = comm->shm;
    if (!s)
        return LOOM_SUCCESS;
    /* every call, also those run over the network, so that a peer that
     * waits here in shared memory can name a different call */
    loom_shm_publish_call(s, op);
    if (!loom_shm_usable(comm, op))
        return LOOM_SUCCESS;
    *handled = 1;
    struct loom_shm_ctx x = {.comm = comm, .s = s, .op = op, .start = s->epoch};
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    int cma = s->cma;
    LOOM_INFO(LOOM_SUB_COLL, "%s #%llu: %llu x %s, algorithm %s (%s), %d ranks",
              loom_op_kind_name(op->kind), (unsigned long long)op->seq,
              (unsigned long long)op->count, loom_dtype_name(op->dtype),
              loom_shm_algo_name(comm, op),
              cma && bytes > LOOM_SHM_SMALL ? "single copy" : "two copies",
              comm->nranks);
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE:
        /* a slice per rank needs enough elements to be worth a phase */
        if (cma && bytes > LOOM_SHM_SMALL && op->count >= (uint64_t)s->n)
            return loom_shm_cma_allreduce(&x, s->sub);
        return loom_shm_copy_allreduce(&x, s->sub);
    case LOOM_OP_ALLGATHER:
        return cma && bytes > LOOM_SHM_SMALL ? loom_shm_cma_allgather(&x)
                                             : loom_shm_copy_allgather(&x);
    case LOOM_OP_BROADCAST:
        return cma && bytes > LOOM_SHM_SMALL ? loom_shm_cma_broadcast(&x)
                                             : loom_shm_copy_broadcast(&x);
    case LOOM_OP_REDUCE_SCATTER:
        return cma && bytes > LOOM_SHM_SMALL ? loom_shm_cma_reduce_scatter(&x)
                                             : loom_shm_copy_reduce_scatter(&x);
    case LOOM_OP_REDUCE:
        return cma && bytes > LOOM_SHM_SMALL ? loom_shm_cma_reduce(&x)
                                             : loom_shm_copy_reduce(&x);
    case LOOM_OP_BARRIER: return loom_shm_barrier(&x);
    default: break;
    }
    *handled = 0;
    return LOOM_SUCCESS;
}
