/* shm.c - which ops go through shared memory, and running them. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "shm.h"
#include "shm_priv.h"
#include "util.h"

/* What LOOM_ALGO says of op's kind: 1 shared memory (shm, hier), -1 the
 * network (another algorithm), 0 nothing. */
static int forced(const struct loom_comm *comm, const struct loom_op *op)
{
    int a = comm->algo_forced[op->kind];
    return a == LOOM_ALGO_AUTO ? 0 : loom_algo_is_shm(a) || a == LOOM_ALGO_HIER ? 1 : -1;
}

static enum loom_shm_path path_of(const struct loom_comm *comm, const struct loom_shm *s,
                                  const struct loom_op *op)
{
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    /* the kinds where ranks share the work only by writing into peers */
    int pushes = op->kind == LOOM_OP_ALLREDUCE || op->kind == LOOM_OP_BROADCAST ||
                 op->kind == LOOM_OP_REDUCE;
    enum loom_shm_path cma = s->push && pushes ? LOOM_SHM_PATH_PUSH
                             : s->cma          ? LOOM_SHM_PATH_READ
                                               : LOOM_SHM_PATH_COPY;
    /* Through the segment in pipelined chunks, which measured faster than
     * cross-memory attach (no page pinning per call, no system call for the
     * scheduler to preempt) and than the copy path, on one server and
     * inside each server of a hierarchical call (docs/shm.md, "Measured",
     * "Hierarchical"). */
    enum loom_shm_path best = LOOM_SHM_PATH_PIPE;
    size_t ll_bytes = loom_shm_ll_bytes(s, op);
    int ahead = s->crowded && (op->kind == LOOM_OP_BROADCAST || op->kind == LOOM_OP_REDUCE);
    int small = ll_bytes <= (ahead ? LOOM_SHM_LL_MAX : LOOM_SHM_LL_ALL);
    switch (comm->algo_forced[op->kind]) {
    case LOOM_ALGO_SHM_LL: return LOOM_SHM_PATH_LL;
    case LOOM_ALGO_SHM_COPY: return LOOM_SHM_PATH_COPY;
    default: break;
    }
    /* an allreduce slice per rank needs an element per rank */
    if (op->kind == LOOM_OP_BARRIER ||
        (op->kind == LOOM_OP_ALLREDUCE && op->count < (uint64_t)s->n))
        return small ? LOOM_SHM_PATH_LL : LOOM_SHM_PATH_COPY;
    switch (comm->algo_forced[op->kind]) {
    case LOOM_ALGO_SHM_READ: return s->cma ? LOOM_SHM_PATH_READ : LOOM_SHM_PATH_COPY;
    case LOOM_ALGO_SHM_PUSH: return cma;
    case LOOM_ALGO_SHM_PIPE: return LOOM_SHM_PATH_PIPE;
    default: break;
    }
    if (small)
        return LOOM_SHM_PATH_LL;
    /* one step through the slots, no system call */
    return bytes <= LOOM_SHM_SMALL ? LOOM_SHM_PATH_COPY : best;
}

enum loom_shm_path loom_shm_path_of(const struct loom_comm *comm, const struct loom_shm *s,
                                    const struct loom_op *op)
{
    enum loom_shm_path path = path_of(comm, s, op);
    /* the hierarchical allreduce hands slices to the network, which the
     * small-message lines never hold: its small calls go through the slots */
    if (path == LOOM_SHM_PATH_LL && s->ngroups > 1 && op->kind == LOOM_OP_ALLREDUCE)
        return LOOM_SHM_PATH_COPY;
    return path;
}

const char *loom_shm_path_name(const struct loom_comm *comm, const struct loom_op *op)
{
    static const char *const names[] = {"copy", "read", "push", "ll", "pipe"};
    const struct loom_shm *s = comm->shm;
    return s ? names[loom_shm_path_of(comm, s, op)] : NULL;
}

int loom_shm_usable(const struct loom_comm *comm, const struct loom_op *op)
{
    const struct loom_shm *s = comm->shm;
    if (!s || (unsigned)op->kind > LOOM_OP_BARRIER || s->ngroups != 1)
        return 0;
    if (forced(comm, op) < 0)
        return 0;
    return op->kind == LOOM_OP_BARRIER || op->count > 0;
}

int loom_shm_servers(const struct loom_comm *comm, int *server, int *local_index,
                     int *local_size)
{
    const struct loom_shm *s = comm->shm;
    if (!s)
        return 0;
    *server = s->group;
    *local_index = s->me;
    *local_size = s->n;
    return s->ngroups;
}

int loom_shm_rank_of(const struct loom_comm *comm, int g, int j)
{
    const struct loom_shm *s = comm->shm;
    if (!s || g < 0 || g >= s->ngroups || j < 0 || j >= s->n)
        return -1;
    return s->grank[g * s->n + j];
}

int loom_shm_server_of(const struct loom_comm *comm, int r, int *local_index)
{
    const struct loom_shm *s = comm->shm;
    for (int g = 0; s && g < s->ngroups; g++)
        for (int j = 0; j < s->n; j++)
            if (s->grank[g * s->n + j] == r) {
                *local_index = j;
                return g;
            }
    *local_index = -1;
    return -1;
}

loom_result_t loom_shm_inter(struct loom_shm_ctx *x, const struct loom_shm_mid *mid,
                             void *buf, uint64_t len)
{
    loom_result_t res = mid->fn(mid->ctx, buf, len);
    if (res < 0) /* the step named the cause on x->comm, and whom it blames */
        loom_shm_mark_failed(x, x->comm->blame);
    return res;
}

void loom_shm_fail(struct loom_comm *comm, const struct loom_op *op, int blame)
{
    if (!comm->shm)
        return;
    struct loom_shm_ctx x = {.comm = comm, .s = comm->shm, .op = op};
    loom_shm_mark_failed(&x, blame);
}

int loom_shm_dead_peer(struct loom_comm *comm, char *buf, size_t len)
{
    struct loom_shm *s = comm->shm;
    if (!s)
        return -1;
    for (int k = 0; k < s->n; k++) {
        const struct loom_shm_ctrl *c = &s->ctrl[k];
        if (k == s->me || __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) ||
            __atomic_load_n(&c->left, __ATOMIC_ACQUIRE) || !loom_shm_pid_gone(s->pids[k]))
            continue;
        snprintf(buf, len, "%s died (process %d is gone)", loom_comm_describe(comm, s->ranks[k]),
                 (int)s->pids[k]);
        return s->ranks[k];
    }
    return -1;
}

void loom_shm_note_call(struct loom_comm *comm, const struct loom_op *op)
{
    if (comm->shm)
        loom_shm_publish_call(comm->shm, op);
}

loom_result_t loom_shm_allreduce_mid(struct loom_comm *comm, struct loom_op *op,
                                     const struct loom_shm_mid *mid)
{
    struct loom_shm *s = comm->shm;
    loom_shm_publish_call(s, op);
    struct loom_shm_ctx x = {.comm = comm, .s = s, .op = op, .start = s->epoch};
    switch (loom_shm_path_of(comm, s, op)) {
    case LOOM_SHM_PATH_PUSH: return loom_shm_push_allreduce(&x, mid);
    case LOOM_SHM_PATH_READ: return loom_shm_cma_allreduce(&x, mid);
    case LOOM_SHM_PATH_PIPE: return loom_shm_pipe_allreduce_mid(&x, mid);
    default: return loom_shm_copy_allreduce(&x, mid);
    }
}

static loom_result_t run_pipe(struct loom_shm_ctx *x)
{
    switch (x->op->kind) {
    case LOOM_OP_ALLREDUCE: return loom_shm_pipe_allreduce(x);
    case LOOM_OP_ALLGATHER: return loom_shm_pipe_allgather(x);
    case LOOM_OP_BROADCAST: return loom_shm_pipe_broadcast(x);
    case LOOM_OP_REDUCE_SCATTER: return loom_shm_pipe_reduce_scatter(x);
    case LOOM_OP_REDUCE: return loom_shm_pipe_reduce(x);
    default: return loom_shm_barrier(x);
    }
}

/* The engine for op among this server's ranks. */
static loom_result_t run_engine(struct loom_comm *comm, struct loom_shm *s,
                                struct loom_op *op)
{
    struct loom_shm_ctx x = {.comm = comm, .s = s, .op = op, .start = s->epoch};
    enum loom_shm_path path = loom_shm_path_of(comm, s, op);
    if (path == LOOM_SHM_PATH_LL)
        return loom_shm_ll_run(&x);
    if (path == LOOM_SHM_PATH_PIPE)
        return run_pipe(&x);
    int push = path == LOOM_SHM_PATH_PUSH, read = path == LOOM_SHM_PATH_READ;
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE:
        return push   ? loom_shm_push_allreduce(&x, NULL)
               : read ? loom_shm_cma_allreduce(&x, NULL)
                      : loom_shm_copy_allreduce(&x, NULL);
    case LOOM_OP_ALLGATHER:
        return read ? loom_shm_cma_allgather(&x) : loom_shm_copy_allgather(&x);
    case LOOM_OP_BROADCAST:
        return push   ? loom_shm_push_broadcast(&x)
               : read ? loom_shm_cma_broadcast(&x)
                      : loom_shm_copy_broadcast(&x);
    case LOOM_OP_REDUCE_SCATTER:
        return read ? loom_shm_cma_reduce_scatter(&x) : loom_shm_copy_reduce_scatter(&x);
    case LOOM_OP_REDUCE:
        return push   ? loom_shm_push_reduce(&x)
               : read ? loom_shm_cma_reduce(&x)
                      : loom_shm_copy_reduce(&x);
    case LOOM_OP_BARRIER: return loom_shm_barrier(&x);
    default: break;
    }
    loom_comm_set_error(comm, LOOM_ERROR_INTERNAL, "shm: no engine for op kind %d", op->kind);
    return LOOM_ERROR_INTERNAL;
}

loom_result_t loom_shm_run_local(struct loom_comm *comm, struct loom_op *op)
{
    struct loom_shm *s = comm->shm;
    loom_shm_publish_call(s, op);
    return run_engine(comm, s, op);
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
    LOOM_INFO(LOOM_SUB_COLL, "%s #%llu: %llu x %s, algorithm shm_%s, %d ranks",
              loom_op_kind_name(op->kind), (unsigned long long)op->seq,
              (unsigned long long)op->count, loom_dtype_name(op->dtype),
              loom_shm_path_name(comm, op), comm->nranks);
    return run_engine(comm, s, op);
}
