/* coll.c - choosing an algorithm for an op and running it. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "coll.h"
#include "shm/shm.h"
#include "util.h"

static const char *const algo_names[] = {
    [LOOM_ALGO_AUTO] = "auto",         [LOOM_ALGO_RING] = "ring",
    [LOOM_ALGO_RD] = "rd",             [LOOM_ALGO_CHAIN] = "chain",
    [LOOM_ALGO_BINOMIAL] = "binomial", [LOOM_ALGO_DISSEMINATION] = "dissemination",
    [LOOM_ALGO_TREE] = "tree",         [LOOM_ALGO_RHD] = "rhd",
    [LOOM_ALGO_BRUCK] = "bruck",       [LOOM_ALGO_SCATTER_ALLGATHER] = "scatter_allgather",
    [LOOM_ALGO_SHM] = "shm",           [LOOM_ALGO_HIER] = "hier",
};

const char *loom_algo_name(enum loom_algo algo)
{
    if ((unsigned)algo >= sizeof algo_names / sizeof algo_names[0])
        return "unknown";
    return algo_names[algo];
}

static const char *const kind_names[LOOM_OP_KIND_COUNT] = {
    [LOOM_OP_ALLREDUCE] = "allreduce",
    [LOOM_OP_ALLGATHER] = "allgather",
    [LOOM_OP_BROADCAST] = "broadcast",
    [LOOM_OP_REDUCE_SCATTER] = "reduce_scatter",
    [LOOM_OP_REDUCE] = "reduce",
    [LOOM_OP_BARRIER] = "barrier",
};

const char *loom_op_kind_name(enum loom_op_kind kind)
{
    if ((unsigned)kind >= LOOM_OP_KIND_COUNT)
        return "unknown";
    return kind_names[kind];
}

/* Which algorithms serve which collective. */
int loom_algo_serves(enum loom_algo a, enum loom_op_kind k)
{
    if (a == LOOM_ALGO_SHM)
        return (unsigned)k < LOOM_OP_KIND_COUNT;
    if (a == LOOM_ALGO_HIER)
        return k == LOOM_OP_ALLREDUCE;
    switch (k) {
    case LOOM_OP_ALLREDUCE:
        return a == LOOM_ALGO_RING || a == LOOM_ALGO_RD || a == LOOM_ALGO_RHD ||
               a == LOOM_ALGO_TREE;
    case LOOM_OP_ALLGATHER: return a == LOOM_ALGO_RING || a == LOOM_ALGO_BRUCK;
    case LOOM_OP_REDUCE_SCATTER: return a == LOOM_ALGO_RING;
    case LOOM_OP_BROADCAST:
        return a == LOOM_ALGO_CHAIN || a == LOOM_ALGO_BINOMIAL ||
               a == LOOM_ALGO_SCATTER_ALLGATHER;
    case LOOM_OP_REDUCE: return a == LOOM_ALGO_CHAIN;
    case LOOM_OP_BARRIER: return a == LOOM_ALGO_DISSEMINATION;
    default: return 0;
    }
}

static enum loom_algo algo_by_name(const char *s, size_t len)
{
    for (unsigned i = 1; i < sizeof algo_names / sizeof algo_names[0]; i++)
        if (strlen(algo_names[i]) == len && strncasecmp(s, algo_names[i], len) == 0)
            return (enum loom_algo)i;
    return LOOM_ALGO_AUTO;
}

int loom_algo_parse(const char *spec, enum loom_algo out[LOOM_OP_KIND_COUNT],
                    char *err, size_t errlen)
{
    for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
        out[k] = LOOM_ALGO_AUTO;
    if (!spec || !*spec)
        return 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq) {
            size_t klen = (size_t)(eq - p);
            int kind = -1;
            for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
                if (strlen(kind_names[k]) == klen && strncasecmp(p, kind_names[k], klen) == 0)
                    kind = k;
            enum loom_algo a = algo_by_name(eq + 1, len - klen - 1);
            /* "broadcast=ring": the pipelined chain along the ring */
            if (kind == LOOM_OP_BROADCAST && a == LOOM_ALGO_RING)
                a = LOOM_ALGO_CHAIN;
            if (kind < 0) {
                snprintf(err, errlen, "LOOM_ALGO: unknown collective '%.*s' in '%s'",
                         (int)klen, p, spec);
                return -1;
            }
            if (a == LOOM_ALGO_AUTO || !loom_algo_serves(a, (enum loom_op_kind)kind)) {
                snprintf(err, errlen, "LOOM_ALGO: '%.*s' is not an algorithm for %s",
                         (int)(len - klen - 1), eq + 1, kind_names[kind]);
                return -1;
            }
            out[kind] = a;
        } else {
            enum loom_algo a = algo_by_name(p, len);
            if (a == LOOM_ALGO_AUTO) {
                snprintf(err, errlen, "LOOM_ALGO: unknown algorithm '%.*s' in '%s'",
                         (int)len, p, spec);
                return -1;
            }
            int used = 0;
            for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
                if (loom_algo_serves(a, (enum loom_op_kind)k)) {
                    out[k] = a;
                    used = 1;
                }
            if (!used) {
                snprintf(err, errlen, "LOOM_ALGO: '%.*s' serves no collective", (int)len, p);
                return -1;
            }
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Automatic choice, from a table measured with `test_algos --bench N`
 * (loopback TCP, 2 shared cores, so 4+ ranks are oversubscribed; every
 * algorithm interleaved per size, best of three rounds, slowest rank).
 * Allreduce, microseconds per float32 sum:
 *
 *   n  bytes    ring     rd    tree     rhd   chosen
 *   2  16        136     65     139     130   rd
 *   2  256K      266    169     219     259   rd
 *   2  1M        487    441     579     522   ring
 *   3  384K      288    255     233     276   rd
 *   3  1.5M      767    777     858     791   ring
 *   4  32         94     32     102      62   rd
 *   4  32K       141     79     150     110   rd
 *   4  128K      259    272     306     244   rhd
 *   4  512K      682    825     762     749   ring
 *   6  48K       182    101     167     128   rd
 *   6  192K      302    340     308     303   ring
 *   8  64        244    109     268     192   rd
 *   8  16K       332    172     311     265   rd
 *   8  256K     1229   1387    1161     927   rhd
 *   8  1M       3464   5441    3438    3188   rhd
 *   8  4M      14553  25217   17475   14963   ring
 *  16  32K      6818   2055    3951    2539   rd   (before the yield
 *  16  512K     9720  14611    8445    7478   rhd   policy of p2p.c)
 *
 * The tree beats the ring from 64K to 1M at 8 ranks but never beats
 * recursive doubling or halving-doubling here, where a message costs tens
 * of microseconds of scheduling: its tree_max is 0 in every row (a table
 * for real links, where its pipelining pays, sets it). Rows: the first
 * whose max_ranks >= n and that fits n (pow2: powers of two only). Server-
 * aware (hierarchical) algorithms will be chosen ahead of this table, from
 * the communicator's topology, when they exist. */
struct allreduce_row {
    int max_ranks;
    int pow2;         /* the row is for powers of two only       */
    size_t rd_max;    /* recursive doubling up to here (bytes)   */
    size_t tree_max;  /* then the double binary tree             */
    size_t rhd_max;   /* then halving-doubling; then the ring    */
};

static const struct allreduce_row allreduce_table[] = {
    {2, 1, 512 << 10, 0, 0},
    {3, 0, 512 << 10, 0, 0},
    {4, 1, 32 << 10, 0, 256 << 10},
    {8, 1, 32 << 10, 0, 1 << 20},
    {8, 0, 64 << 10, 0, 0},
    {1 << 30, 1, 32 << 10, 0, 1 << 20},
    {1 << 30, 0, 32 << 10, 0, 0},
};

/* Broadcast: binomial below, then the chain (scatter + allgather moves more
 * bytes in all and lost at every size on loopback: forced only). Allgather:
 * Bruck up to this many bytes gathered in all, then the ring. Measured:
 *   broadcast 8 ranks  16K: chain 72 binomial 75 scatter_allgather 1560 us
 *                      64K: chain 154 binomial 278 scatter_allgather 1739 us
 *   allgather 8 ranks 256K: ring 2194 bruck 1809; 1M: ring 6533 bruck 8819 */
#define BCAST_BINOMIAL_MAX (16 << 10)
#define ALLGATHER_BRUCK_MAX (256 << 10)

enum loom_algo loom_coll_auto(enum loom_op_kind kind, size_t bytes, int nranks)
{
    switch (kind) {
    case LOOM_OP_ALLREDUCE: {
        int pow2 = (nranks & (nranks - 1)) == 0;
        const struct allreduce_row *row = allreduce_table;
        while (nranks > row->max_ranks || (row->pow2 && !pow2))
            row++;
        if (bytes <= row->rd_max)
            return LOOM_ALGO_RD;
        if (bytes <= row->tree_max)
            return LOOM_ALGO_TREE;
        if (bytes <= row->rhd_max)
            return LOOM_ALGO_RHD;
        return LOOM_ALGO_RING;
    }
    case LOOM_OP_BROADCAST:
        return bytes <= BCAST_BINOMIAL_MAX ? LOOM_ALGO_BINOMIAL : LOOM_ALGO_CHAIN;
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
     * allreduce across servers) wherever it was set up and not overridden */
    const char *shm = loom_shm_algo_name(comm, op);
    if (shm)
        return shm[0] == 'h' ? LOOM_ALGO_HIER : LOOM_ALGO_SHM;
    int forced = comm->algo_forced[op->kind];
    if (forced != LOOM_ALGO_AUTO && forced != LOOM_ALGO_SHM && forced != LOOM_ALGO_HIER)
        return (enum loom_algo)forced;
    return loom_coll_auto(op->kind, (size_t)op->count * loom_dtype_size(op->dtype),
                          comm->nranks);
}

loom_result_t loom_coll_run(struct loom_comm *comm, struct loom_op *op)
{
    enum loom_algo a = loom_coll_select(comm, op);
    if (a == LOOM_ALGO_SHM || a == LOOM_ALGO_HIER) {
        int handled = 0;
        loom_result_t sres = loom_shm_coll_run(comm, op, &handled);
        if (handled)
            return sres;
        a = loom_coll_auto(op->kind, (size_t)op->count * loom_dtype_size(op->dtype),
                           comm->nranks);
    }
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
