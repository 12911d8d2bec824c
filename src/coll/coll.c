/* coll.c - choosing an algorithm for an op and running it. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "coll.h"
#include "shm/shm.h"
#include "base/util.h"

/* Automatic choice for allreduce: per class of rank count, the algorithm
 * for each band of message sizes. Measured with `LOOM_SHM=0 test_algos
 * --bench N` (loopback TCP on 2 shared cores, so 4+ ranks are
 * oversubscribed): every algorithm interleaved per size, best of five
 * rounds, slowest rank, two runs; us per float32 sum (the two runs):
 *
 *   n  bytes        ring         rd        tree         rhd   chosen
 *   2  8          15  15      7   8     12  12      15  15   rd
 *   2  128K       34  36     28  26     54  57      34  37   rd
 *   2  512K       90  93     88  90    107 107      89  91   ring
 *   2  2M        335 332    369 421    393 407     347 321   ring
 *   4  8          56  58     34  31     63  62      51  43   rd
 *   4  128K      166 134    129 130    179 180     138 136   rd
 *   4  512K      309 312    380 370    358 355     341 347   ring
 *   8  8         106 138    105 103    162 176      95  99   rd
 *   8  32K       265 297    149 146    207 212     226 222   rd
 *   8  128K      430 459    372 359    408 412     331 326   rhd
 *   8  512K      907 943   1115 1095   883 1000    804 784   rhd
 *   8  2M       4315 4021  9211 8302  4950 4907   4762 4250  ring
 *
 * Timings here move by 10-20% from run to run (the same algorithm in two
 * columns differs that much), so an algorithm other than the ring is
 * chosen only where it beat the ring clearly in every run: the choice must
 * never be slower than the ring. 3 and 6 ranks (separate runs, us):
 * 128K rd 94 vs ring 108 and rd 211 vs ring 244; 512K within 5% of it.
 *
 * (The tree column predates the shallower tree and its alternation, see
 * tree.c.) With them, all_reduce_perf at 8 ranks, best of 4 interleaved
 * runs (perf/compare-peers --libs loom --algos ring,tree), two runs: the
 * tree beats the ring from 8 B (119 vs 124 us; 109 vs 114) through 128K
 * (313 vs 469; 330 vs 447); the crossover fell between 2M and 8M in one
 * run and between 128K and 512K in the other. In test_algos
 * --bench (three runs) recursive doubling is as fast or faster up to 32K
 * and halving-doubling within 10% at 128K and faster at 512K, here where a
 * hop costs a context switch on a shared core rather than link latency: the
 * tree is chosen by LOOM_ALGO only. Hierarchical and shared-memory
 * algorithms come ahead of this table, from the
 * communicator's topology (loom_coll_select). A row serves rank counts up
 * to max_ranks (pow2: powers of two only); bands ascend in size, and the
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

static const struct allreduce_row allreduce_table[] = {
    {3, 0, {{128 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
    {4, 1, {{128 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
    {7, 0, {{128 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
    {1 << 30, 1, {{32 << 10, LOOM_ALGO_RD}, {512 << 10, LOOM_ALGO_RHD}, {OPEN_END, LOOM_ALGO_RING}}},
    {1 << 30, 0, {{32 << 10, LOOM_ALGO_RD}, {OPEN_END, LOOM_ALGO_RING}}},
};

/* Broadcast: the chain, except for small messages on communicators where
 * the chain is more than one hop deeper than the binomial tree (n - 1 hops
 * against ceil(log2 n)), i.e. from 6 ranks on. Up to 5 ranks the chain wins
 * back-to-back calls (every rank sends once a call; the binomial root sends
 * log2 n times) and single calls tie; at 8 ranks single calls lose. Scatter +
 * allgather moves more bytes in all and lost at every size on loopback:
 * forced only. Allgather: Bruck up to this many bytes gathered in all, then
 * the ring. Measured (us; back-to-back: perf/broadcast_perf; single: p50 of
 * a blocking broadcast + barrier, per run, where a barrier alone took 33-110):
 *   broadcast 4 ranks 8 B back-to-back: chain 4.7 binomial 8.1; 1K: 6.4 8.3;
 *                     16K: 17.0 19.6; single 8 B: 45 69 44 vs 51 51 55
 *   broadcast 5 ranks 8 B back-to-back: chain 5.3 binomial 13.3;
 *                     single 8 B: 99 94 vs 103 97
 *   broadcast 8 ranks 8 B back-to-back: chain 6.8 binomial 15.1;
 *                     single 8 B: 145 149 vs 133 138
 *   broadcast 8 ranks  16K: chain 72 binomial 75 scatter_allgather 1560 us
 *                      64K: chain 154 binomial 278 scatter_allgather 1739 us
 *   allgather 8 ranks 256K: ring 2194 bruck 1809; 1M: ring 6533 bruck 8819 */
#define BCAST_BINOMIAL_MAX (16 << 10)
#define ALLGATHER_BRUCK_MAX (256 << 10)

static int ceil_log2(int n)
{
    int d = 0;
    while ((1 << d) < n)
        d++;
    return d;
}

static enum loom_algo broadcast_auto(size_t bytes, int nranks)
{
    if (bytes > BCAST_BINOMIAL_MAX || nranks - 1 <= ceil_log2(nranks) + 1)
        return LOOM_ALGO_CHAIN;
    return LOOM_ALGO_BINOMIAL;
}

enum loom_algo loom_coll_auto(enum loom_op_kind kind, size_t bytes, int nranks)
{
    switch (kind) {
    case LOOM_OP_ALLREDUCE: {
        int pow2 = (nranks & (nranks - 1)) == 0;
        const struct allreduce_row *row = allreduce_table;
        while (nranks > row->max_ranks || (row->pow2 && !pow2))
            row++;
        const struct allreduce_band *b = row->band;
        while (bytes > b->max_bytes)
            b++;
        return b->algo;
    }
    case LOOM_OP_BROADCAST:
        return broadcast_auto(bytes, nranks);
    case LOOM_OP_ALLGATHER:
        return bytes * (size_t)nranks <= ALLGATHER_BRUCK_MAX ? LOOM_ALGO_BRUCK
                                                             : LOOM_ALGO_RING;
    case LOOM_OP_REDUCE_SCATTER: return LOOM_ALGO_RING;
    case LOOM_OP_REDUCE: return LOOM_ALGO_CHAIN;
    case LOOM_OP_BARRIER: return LOOM_ALGO_DISSEMINATION;
    default: return LOOM_ALGO_AUTO;
    }
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
    return loom_coll_auto(op->kind, (size_t)op->count * loom_dtype_size(op->dtype),
                          comm->nranks);
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
        a = loom_coll_auto(op->kind, (size_t)op->count * loom_dtype_size(op->dtype),
                           comm->nranks);
    LOOM_INFO(LOOM_SUB_COLL, "%s #%llu: %llu x %s, algorithm %s, %d ranks",
              loom_op_kind_name(op->kind), (unsigned long long)op->seq,
              (unsigned long long)op->count, loom_dtype_name(op->dtype),
              loom_algo_name(a), comm->nranks);
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
