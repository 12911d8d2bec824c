/* group_run.c - running what the original table of algorithms does not:
 * alltoall, gather, scatter, send/recv, groups, and reductions with
 * attributes (loom_redop_create). */
#include "build_config.h"

#include "coll.h"
#include "comm/redop.h"
#include "shm/shm.h"
#include "base/util.h"

int loom_coll_is_ext(const struct loom_op *op)
{
    return op->kind >= LOOM_OP_ALLTOALL || loom_op_has_attr(op);
}

loom_result_t loom_group_run(struct loom_comm *comm, struct loom_op *op)
{
    struct loom_op *subs = op->subs;
    int n = op->nsubs, np = 0;
    while (np < n && loom_op_kind_is_p2p(subs[np].kind))
        np++;
    LOOM_INFO(LOOM_SUB_COLL, "group #%llu: %d point-to-point calls, %d collectives in "
              "%u runs", (unsigned long long)op->seq, np, n - np, op->nseqs);
    if (np) {
        loom_result_t res = loom_p2p_batch(comm, op, subs, np);
        if (res < 0)
            return res;
    }
    uint64_t seq = op->seq;
    for (int i = np; i < n;) {
        int k = loom_coalesce_len(subs + i, n - i);
        loom_result_t res;
        if (subs[i].kind == LOOM_OP_ALLREDUCE) {
            res = loom_coalesce_run(comm, subs + i, k, seq);
            seq += loom_coalesce_seqs(subs + i, k);
        } else {
            subs[i].seq = seq++;
            res = loom_coll_run(comm, &subs[i]);
        }
        if (res < 0)
            return res;
        i += k;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_coll_run_ext(struct loom_comm *comm, struct loom_op *op)
{
    switch (op->kind) {
    case LOOM_OP_ALLTOALL:
    case LOOM_OP_GATHER:
    case LOOM_OP_SCATTER:
        LOOM_INFO(LOOM_SUB_COLL, "%s #%llu: %llu x %s, algorithm %s, %d ranks",
                  loom_op_kind_name(op->kind), (unsigned long long)op->seq,
                  (unsigned long long)op->count, loom_dtype_name(op->dtype),
                  op->kind == LOOM_OP_ALLTOALL ? "pairwise" : "linear", comm->nranks);
        /* ranks waiting in shared memory in another call can name this one */
        loom_shm_note_call(comm, op);
        if (op->kind == LOOM_OP_ALLTOALL)
            return loom_pairwise_alltoall(comm, op);
        return op->kind == LOOM_OP_GATHER ? loom_linear_gather(comm, op)
                                          : loom_linear_scatter(comm, op);
    case LOOM_OP_ALLTOALLV:
        LOOM_INFO(LOOM_SUB_COLL, "alltoallv #%llu: %s, algorithm pairwise, %d ranks",
                  (unsigned long long)op->seq, loom_dtype_name(op->dtype), comm->nranks);
        loom_shm_note_call(comm, op);
        return loom_pairwise_alltoallv(comm, op);
    case LOOM_OP_SEND:
    case LOOM_OP_RECV:
        return loom_p2p_batch(comm, op, op, 1);
    case LOOM_OP_GROUP:
        return loom_group_run(comm, op);
    case LOOM_OP_ALLREDUCE:
        return loom_coalesce_run(comm, op, 1, op->seq);
    case LOOM_OP_REDUCE:
    case LOOM_OP_REDUCE_SCATTER:
        return loom_xform_run(comm, op);
    default:
        break;
    }
    loom_comm_set_error(comm, LOOM_ERROR_INTERNAL, "%s: no algorithm for its attributes",
                        loom_op_kind_name(op->kind));
    return LOOM_ERROR_INTERNAL;
}
