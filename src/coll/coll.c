/* coll.c - choosing an algorithm for an op and running it. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "coll.h"
#include "shm/shm.h"
#include "base/util.h"

/* Automatic choice for allreduce: per class of rank count, the algorithm
 * for each band of message sizes. An algorithm other than the ring is
 * chosen only where it beat the ring clearly in every measured run, so the
 * choice is never slower than the ring; the tree is chosen by LOOM_ALGO
 * only (the measurements: docs/perf.md, "Algorithm selection").
 * Hierarchical and shared-memory algorithms come ahead of this table, from
 * the communicator's topology (loom_coll_select). A row serves rank counts
 * up to max_ranks (pow2: powers of two only); bands ascend in size, and the
 * last one, the ring, is open-ended. */
struct allreduce_band {
    size_t max_bytes;
    enum loom_algo algo;
};

struct allreduce_row {
    int max_ranks;
    int pow2;
    struct allreduce_band band[4];
};

#define OPEN_END ((size_t)-1)

static const struct allreduce_row tcp_allreduce[] = {
    {3, 0, {{128 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
    {4, 1, {{128 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
    {7, 0, {{128 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
    {1 << 30, 1, {{32 << 10, LOOM_ALGO_RD}, {512 << 10, LOOM_ALGO_RHD}, {OPEN_END, LOOM_ALGO_RING}}},
    {1 << 30, 0, {{32 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
};

/* Broadcast: the chain, except for small messages on communicators where
 * the chain is more than one hop deeper than the binomial tree (n - 1 hops
 * against ceil(log2 n)), i.e. from 6 ranks on; scatter + allgather is
 * forced only. Allgather: Bruck up to a number of bytes gathered in all,
 * then the ring. Measured: docs/perf.md, "Algorithm selection". */
struct coll_tuning {
    const char *transport;
    const struct allreduce_row *allreduce;
    size_t bcast_binomial_max;  /* bytes */
    size_t allgather_bruck_max; /* bytes gathered in all */
};

/* Keyed by transport; the first row, measured over loopback TCP, serves
 * every transport without a row of its own (ofi and verbs until measured
 * on their fabrics). */
static const struct coll_tuning tunings[] = {
    {"tcp", tcp_allreduce, 16 << 10, 256 << 10},
};

static const struct coll_tuning *coll_tuning(const char *transport)
{
    for (size_t i = 0; transport && i < sizeof tunings / sizeof tunings[0]; i++)
        if (strcmp(tunings[i].transport, transport) == 0)
            return &tunings[i];
    return &tunings[0];
}

const char *loom_coll_tuned_on(const char *transport)
{
    return coll_tuning(transport)->transport;
}

static int ceil_log2(int n)
{
    int d = 0;
    while ((1 << d) < n)
        d++;
    return d;
}

static enum loom_algo broadcast_auto(const struct coll_tuning *t, size_t bytes, int nranks)
{
    if (bytes > t->bcast_binomial_max || nranks - 1 <= ceil_log2(nranks) + 1)
        return LOOM_ALGO_CHAIN;
    return LOOM_ALGO_BINOMIAL;
}

enum loom_algo loom_coll_auto(const char *transport, enum loom_op_kind kind, size_t bytes,
                              int nranks)
{
    const struct coll_tuning *t = coll_tuning(transport);
    switch (kind) {
    case LOOM_OP_ALLREDUCE: {
        int pow2 = (nranks & (nranks - 1)) == 0;
        const struct allreduce_row *row = t->allreduce;
        while (nranks > row->max_ranks || (row->pow2 && !pow2))
            row++;
        const struct allreduce_band *b = row->band;
        while (bytes > b->max_bytes)
            b++;
        return b->algo;
    }
    case LOOM_OP_BROADCAST: return broadcast_auto(t, bytes, nranks);
    case LOOM_OP_ALLGATHER:
        return bytes * (size_t)nranks <= t->allgather_bruck_max ? LOOM_ALGO_BRUCK : LOOM_ALGO_RING;
    case LOOM_OP_REDUCE_SCATTER: return LOOM_ALGO_RING;
    case LOOM_OP_REDUCE: return LOOM_ALGO_CHAIN;
    case LOOM_OP_BARRIER: return LOOM_ALGO_DISSEMINATION;
    default: return LOOM_ALGO_AUTO;
    }
}

/* The transport whose table chooses (none with one rank). */
static const char *coll_transport(const struct loom_comm *comm)
{
    return comm->tx ? comm->tx->ops->name : NULL;
}

enum loom_algo loom_coll_select(const struct loom_comm *comm,
                                const struct loom_op *op)
{
    /* server-aware first: shared memory inside a server (and hierarchical
     * algorithms across servers) wherever it was set up and not overridden */
    if (loom_shm_usable(comm, op))
        return LOOM_ALGO_SHM;
    if (loom_hier_usable(comm, op))
        return LOOM_ALGO_HIER;
    int forced = comm->algo_forced[op->kind];
    if (forced != LOOM_ALGO_AUTO && !loom_algo_is_shm(forced) && forced != LOOM_ALGO_HIER)
        return (enum loom_algo)forced;
    return loom_coll_auto(coll_transport(comm), op->kind,
                          (size_t)op->count * loom_dtype_size(op->dtype), comm->nranks);
}

loom_result_t loom_allreduce_begin(struct loom_comm *comm, struct loom_op *op,
                                   const char *algo, size_t scratch, size_t nreq,
                                   char **tmp, struct loom_tx_req **req)
{
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    if (op->sendbuf != op->recvbuf && bytes)
        memcpy(op->recvbuf, op->sendbuf, bytes);
    *tmp = loom_comm_scratch(comm, scratch);
    *req = loom_comm_reqs(comm, nreq);
    if (!*tmp || !*req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "allreduce (%s): cannot allocate %zu bytes", algo, scratch);
        return LOOM_ERROR_NO_MEMORY;
    }
    return LOOM_SUCCESS;
}

static loom_result_t coll_run_algo(struct loom_comm *comm, struct loom_op *op);

loom_result_t loom_coll_run(struct loom_comm *comm, struct loom_op *op)
{
    loom_result_t res = loom_coll_is_ext(op) ? loom_coll_run_ext(comm, op) /* group_run.c */
                                             : coll_run_algo(comm, op);
    if (res == LOOM_SUCCESS && comm->env_busy)
        res = loom_p2p_env_drain(comm, op);
    return res;
}

static loom_result_t coll_run_algo(struct loom_comm *comm, struct loom_op *op)
{
    enum loom_algo a = loom_coll_select(comm, op);
    if (a == LOOM_ALGO_HIER)
        return loom_hier_run(comm, op);
    if (comm->shm) {
        /* the engine runs it, or at least hears which call this is, so that
         * a peer waiting in shared memory can name a different call */
        int handled = 0;
        loom_result_t sres = loom_shm_coll_run(comm, op, &handled);
        if (handled)
            return sres;
    }
    if (loom_algo_is_shm(a) || a == LOOM_ALGO_HIER) /* forced where it cannot run */
        a = loom_coll_auto(coll_transport(comm), op->kind,
                           (size_t)op->count * loom_dtype_size(op->dtype), comm->nranks);
    LOOM_INFO(LOOM_SUB_COLL, "%s #%llu: %llu x %s, algorithm %s, %d ranks, %s's table",
              loom_op_kind_name(op->kind), (unsigned long long)op->seq,
              (unsigned long long)op->count, loom_dtype_name(op->dtype), loom_algo_name(a),
              comm->nranks, loom_coll_tuned_on(coll_transport(comm)));
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE:
        if (comm->nranks == 1 || op->count == 0) {
            size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
            if (op->sendbuf != op->recvbuf && bytes)
                memcpy(op->recvbuf, op->sendbuf, bytes);
            return LOOM_SUCCESS;
        }
        switch (a) {
        case LOOM_ALGO_RD: return loom_rd_allreduce(comm, op);
        case LOOM_ALGO_RHD: return loom_rhd_allreduce(comm, op);
        case LOOM_ALGO_TREE: return loom_tree_allreduce(comm, op);
        default: return loom_ring_allreduce(comm, op);
        }
    case LOOM_OP_ALLGATHER:
        return a == LOOM_ALGO_BRUCK ? loom_bruck_allgather(comm, op)
                                    : loom_ring_allgather(comm, op);
    case LOOM_OP_REDUCE_SCATTER: return loom_ring_reduce_scatter(comm, op);
    case LOOM_OP_BROADCAST:
        switch (a) {
        case LOOM_ALGO_BINOMIAL: return loom_binomial_broadcast(comm, op);
        case LOOM_ALGO_SCATTER_ALLGATHER:
            return loom_scatter_allgather_broadcast(comm, op);
        default: return loom_chain_broadcast(comm, op);
        }
    case LOOM_OP_REDUCE: return loom_chain_reduce(comm, op);
    case LOOM_OP_BARRIER: return loom_dissemination_barrier(comm, op);
    default: break;
    }
    loom_comm_set_error(comm, LOOM_ERROR_INTERNAL, "unknown op kind %d", op->kind);
    return LOOM_ERROR_INTERNAL;
}

void loom_coll_warm(struct loom_comm *comm)
{
    if (!comm->tx || comm->nranks < 2)
        return;
    int peers[32];
    int k = loom_rd_partners(comm->rank, comm->nranks, peers, 32);
    for (int i = 0; i < k; i++)
        if (!comm->peer_used[peers[i]] &&
            comm->tx->ops->connect(comm->tx, peers[i]) == LOOM_SUCCESS)
            comm->peer_used[peers[i]] = 1;
}
