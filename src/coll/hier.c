/* hier.c - several servers, each in shared memory: the engine inside a
 * server, the network between servers, through comm->hier_sub (the ranks
 * with this rank's local index on every server, ordered by server; core
 * makes it when shared memory spans several servers).
 *
 *   allreduce: the engine's reduce-scatter, an allreduce of each rank's
 *              slice over hier_sub, the engine's allgather (one call of the
 *              engine with the network step in the middle);
 *   broadcast: the engine on the root's server, then over hier_sub among
 *              the ranks of the root's local index, then the engine on every
 *              other server from that rank;
 *   allgather: the engine fills this server's blocks; over hier_sub each
 *              rank gathers its own block from every server; the engine then
 *              hands each other server's blocks around inside the server;
 *   reduce:    the engine on every server into its rank of the root's local
 *              index, then a reduce over hier_sub among those ranks into
 *              the root (not for averages);
 *   reduce_scatter: the engine reduces, per local index j, the blocks of
 *              rank j of every server; a reduce_scatter over hier_sub
 *              leaves each rank its block (not for averages).
 * Network steps run hier_sub's algorithms directly on this thread (its
 * queue has nothing else to run), with the parent's call number, so that
 * both ends of a step agree on the call. */
#include "build_config.h"

#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "shm/shm.h"
#include "base/util.h"

int loom_hier_usable(const struct loom_comm *comm, const struct loom_op *op)
{
    if (!comm->shm || !comm->hier_sub || op->count == 0)
        return 0;
    /* reduce, reduce_scatter: a local average would divide by the
     * server's ranks */
    int reduces = op->kind == LOOM_OP_REDUCE || op->kind == LOOM_OP_REDUCE_SCATTER;
    if (op->kind != LOOM_OP_ALLREDUCE && op->kind != LOOM_OP_BROADCAST &&
        op->kind != LOOM_OP_ALLGATHER && (!reduces || op->op == LOOM_AVG))
        return 0;
    int a = comm->algo_forced[op->kind];
    return a == LOOM_ALGO_AUTO || loom_algo_is_shm(a) || a == LOOM_ALGO_HIER;
}

/* A network step over hier_sub; a failure is named on comm too. */
static loom_result_t between(struct loom_comm *comm, const struct loom_op *parent,
                             struct loom_op *op)
{
    struct loom_comm *sub = comm->hier_sub;
    op->seq = parent->seq;
    op->internal = parent->internal;
    op->mem = parent->mem;
    loom_result_t res = loom_coll_run(sub, op);
    if (res < 0) {
        char what[160], dead[300];
        loom_op_describe(parent, what, sizeof what);
        /* A rank of this server that died is the nearer cause: the network
         * may have told this rank only that a rank of another server failed,
         * having heard of it from the dead rank's other peers. */
        int d = loom_shm_dead_peer(comm, dead, sizeof dead);
        if (d >= 0) {
            loom_comm_set_error(comm, res, "%s: %s; between servers: %s", what, dead, sub->errmsg);
            comm->blame = d;
        } else {
            loom_comm_set_error(comm, res, "%s: between servers: %s", what, sub->errmsg);
            /* sub's rank k is this rank's local index on server k */
            int server, index, size;
            loom_shm_servers(comm, &server, &index, &size);
            comm->blame = sub->blame >= 0 ? loom_shm_rank_of(comm, sub->blame, index) : -1;
        }
        /* the ranks of this server may wait on this one outside the step */
        loom_shm_fail(comm, parent, comm->blame);
    }
    return res;
}

struct mid_ctx {
    struct loom_comm *comm;
    const struct loom_op *op;
};

static loom_result_t allreduce_between(void *arg, void *buf, uint64_t count)
{
    struct mid_ctx *c = arg;
    struct loom_op op = {.kind = LOOM_OP_ALLREDUCE, .sendbuf = buf, .recvbuf = buf,
                         .count = count, .dtype = c->op->dtype,
                         .op = c->op->op == LOOM_AVG ? LOOM_SUM : c->op->op};
    if (count == 0)
        return LOOM_SUCCESS;
    return between(c->comm, c->op, &op);
}

static loom_result_t hier_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    struct mid_ctx c = {.comm = comm, .op = op};
    struct loom_shm_mid mid = {.fn = allreduce_between, .ctx = &c};
    return loom_shm_allreduce_mid(comm, op, &mid);
}

/* The root's server and local index (*rserver < 0: an error on comm). */
static loom_result_t root_of(struct loom_comm *comm, const struct loom_op *op, int *rserver,
                             int *rindex)
{
    *rserver = loom_shm_server_of(comm, op->root, rindex);
    if (*rserver >= 0)
        return LOOM_SUCCESS;
    loom_comm_set_error(comm, LOOM_ERROR_INTERNAL, "%s: root %d is on no server",
                        loom_op_kind_name(op->kind), op->root);
    return LOOM_ERROR_INTERNAL;
}

static loom_result_t hier_broadcast(struct loom_comm *comm, struct loom_op *op)
{
    int server, index, size, rserver, rindex;
    loom_shm_servers(comm, &server, &index, &size);
    LOOM_CHECK(root_of(comm, op, &rserver, &rindex));
    struct loom_op local = *op;
    if (server == rserver)
        LOOM_CHECK(loom_shm_run_local(comm, &local));
    if (index == rindex) {
        struct loom_op net = {.kind = LOOM_OP_BROADCAST, .sendbuf = op->recvbuf,
                              .recvbuf = op->recvbuf, .count = op->count,
                              .dtype = op->dtype, .root = rserver};
        LOOM_CHECK(between(comm, op, &net));
    }
    if (server != rserver) {
        local.root = loom_shm_rank_of(comm, server, rindex);
        LOOM_CHECK(loom_shm_run_local(comm, &local));
    }
    return LOOM_SUCCESS;
}

static loom_result_t hier_reduce(struct loom_comm *comm, struct loom_op *op)
{
    int server, index, size, rserver, rindex;
    loom_shm_servers(comm, &server, &index, &size);
    LOOM_CHECK(root_of(comm, op, &rserver, &rindex));
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    struct loom_op local = *op;
    local.root = loom_shm_rank_of(comm, server, rindex);
    if (server != rserver && index == rindex) {
        local.recvbuf = loom_comm_scratch(comm, bytes);
        if (!local.recvbuf) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                                "reduce (hier): cannot "
                                "allocate %zu bytes",
                                bytes);
            return LOOM_ERROR_NO_MEMORY;
        }
    }
    LOOM_CHECK(loom_shm_run_local(comm, &local));
    if (index != rindex)
        return LOOM_SUCCESS;
    struct loom_op net = {.kind = LOOM_OP_REDUCE,
                          .sendbuf = local.recvbuf,
                          .recvbuf = local.recvbuf,
                          .count = op->count,
                          .dtype = op->dtype,
                          .op = op->op,
                          .root = rserver};
    return between(comm, op, &net);
}

/* The comm ranks of this server span first .. first + *span - 1; the
 * engine places local rank j's block at its comm rank. */
static int local_span(const struct loom_comm *comm, int server, int size, size_t *span)
{
    int first = loom_shm_rank_of(comm, server, 0), last = first;
    for (int j = 0; j < size; j++) {
        int r = loom_shm_rank_of(comm, server, j);
        first = r < first ? r : first;
        last = r > last ? r : last;
    }
    *span = (size_t)(last - first + 1);
    return first;
}

/* reduce_scatter: the engine reduces, for each local index j, the blocks
 * of rank j of every server (gathered into one block per local rank
 * first), then those ranks reduce-scatter them over hier_sub. */
static loom_result_t hier_reduce_scatter(struct loom_comm *comm, struct loom_op *op)
{
    int server, index, size;
    int nservers = loom_shm_servers(comm, &server, &index, &size);
    size_t span, block = (size_t)op->count * loom_dtype_size(op->dtype);
    size_t group = block * (size_t)nservers;
    int first = local_span(comm, server, size, &span);
    size_t need = group * (span + 1);
    char *in = loom_comm_scratch(comm, need);
    if (!in) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "reduce_scatter (hier): cannot "
                            "allocate %zu bytes",
                            need);
        return LOOM_ERROR_NO_MEMORY;
    }
    char *part = in + group * span;
    const char *send = op->sendbuf;
    for (int j = 0; j < size; j++) {
        char *to = in + (size_t)(loom_shm_rank_of(comm, server, j) - first) * group;
        for (int g = 0; g < nservers; g++)
            memcpy(to + (size_t)g * block, send + (size_t)loom_shm_rank_of(comm, g, j) * block,
                   block);
    }
    struct loom_op local = *op;
    local.sendbuf = in - (size_t)first * group; /* never read below in */
    local.recvbuf = part;
    local.count = op->count * (uint64_t)nservers;
    LOOM_CHECK(loom_shm_run_local(comm, &local));
    struct loom_op net = {.kind = LOOM_OP_REDUCE_SCATTER,
                          .sendbuf = part,
                          .recvbuf = op->recvbuf,
                          .count = op->count,
                          .dtype = op->dtype,
                          .op = op->op};
    return between(comm, op, &net);
}

static loom_result_t hier_allgather(struct loom_comm *comm, struct loom_op *op)
{
    int server, index, size;
    int nservers = loom_shm_servers(comm, &server, &index, &size);
    size_t block = (size_t)op->count * loom_dtype_size(op->dtype);
    char *recv = op->recvbuf;
    /* 1. this server's blocks, in place by comm rank */
    struct loom_op local = *op;
    LOOM_CHECK(loom_shm_run_local(comm, &local));
    /* 2. this rank's block from every server, over the network; then,
     *    inside the server, each other server's blocks (local rank j holds
     *    block (g, j)): one engine allgather per server g, into `spread`,
     *    where the engine puts local rank j's block at its comm rank */
    size_t span;
    int first = local_span(comm, server, size, &span);
    size_t need = block * ((size_t)nservers + span);
    char *mine = loom_comm_scratch(comm, need);
    if (!mine) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "allgather (hier): cannot "
                            "allocate %zu bytes", need);
        return LOOM_ERROR_NO_MEMORY;
    }
    char *spread = mine + block * (size_t)nservers;
    struct loom_op net = {.kind = LOOM_OP_ALLGATHER,
                          .sendbuf = recv + (size_t)comm->rank * block, .recvbuf = mine,
                          .count = op->count, .dtype = op->dtype};
    LOOM_CHECK(between(comm, op, &net));
    for (int g = 0; g < nservers; g++) {
        if (g == server)
            continue;
        memcpy(recv + (size_t)loom_shm_rank_of(comm, g, index) * block,
               mine + (size_t)g * block, block);
        struct loom_op hand = *op;
        hand.sendbuf = mine + (size_t)g * block;
        hand.recvbuf = spread - (size_t)first * block; /* never read below spread */
        LOOM_CHECK(loom_shm_run_local(comm, &hand));
        for (int j = 0; j < size; j++) {
            size_t at = (size_t)(loom_shm_rank_of(comm, server, j) - first);
            memcpy(recv + (size_t)loom_shm_rank_of(comm, g, j) * block,
                   spread + at * block, block);
        }
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_hier_run(struct loom_comm *comm, struct loom_op *op)
{
    int server, index, size;
    int nservers = loom_shm_servers(comm, &server, &index, &size);
    LOOM_INFO(LOOM_SUB_COLL,
              "%s #%llu: %llu x %s, algorithm hier (%d servers of %d "
              "ranks, shm_%s inside), %d ranks",
              loom_op_kind_name(op->kind), (unsigned long long)op->seq,
              (unsigned long long)op->count, loom_dtype_name(op->dtype), nservers, size,
              loom_shm_path_name(comm, op), comm->nranks);
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE: return hier_allreduce(comm, op);
    case LOOM_OP_BROADCAST: return hier_broadcast(comm, op);
    case LOOM_OP_ALLGATHER: return hier_allgather(comm, op);
    case LOOM_OP_REDUCE: return hier_reduce(comm, op);
    case LOOM_OP_REDUCE_SCATTER: return hier_reduce_scatter(comm, op);
    default: break;
    }
    loom_comm_set_error(comm, LOOM_ERROR_INTERNAL, "hier: no algorithm for %s",
                        loom_op_kind_name(op->kind));
    return LOOM_ERROR_INTERNAL;
}
