/* coll.c - choosing an algorithm for an op and running it. */
#include "build_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "coll.h"
#include "shm/shm.h"
#include "util.h"

/* Messages up to this many bytes use the latency-optimised algorithms. */
#define LOOM_SMALL_ALLREDUCE 32768
#define LOOM_SMALL_BROADCAST 65536

static const char *const algo_names[] = {
    [LOOM_ALGO_AUTO] = "auto",         [LOOM_ALGO_RING] = "ring",
    [LOOM_ALGO_RD] = "rd",             [LOOM_ALGO_CHAIN] = "chain",
    [LOOM_ALGO_BINOMIAL] = "binomial", [LOOM_ALGO_DISSEMINATION] = "dissemination",
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
static int algo_serves(enum loom_algo a, enum loom_op_kind k)
{
    switch (k) {
    case LOOM_OP_ALLREDUCE: return a == LOOM_ALGO_RING || a == LOOM_ALGO_RD;
    case LOOM_OP_ALLGATHER:
    case LOOM_OP_REDUCE_SCATTER: return a == LOOM_ALGO_RING;
    case LOOM_OP_BROADCAST: return a == LOOM_ALGO_CHAIN || a == LOOM_ALGO_BINOMIAL;
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
        /* TEMP (wip-shm): src/shm reads "shm" and "hier" itself */
        const char *an = eq ? eq + 1 : p;
        size_t al = eq ? len - (size_t)(eq + 1 - p) : len;
        if ((al == 3 && strncasecmp(an, "shm", 3) == 0) ||
            (al == 4 && strncasecmp(an, "hier", 4) == 0)) {
            p += len;
            if (*p == ',')
                p++;
            continue;
        }
        if (eq) {
            size_t klen = (size_t)(eq - p);
            int kind = -1;
            for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
                if (strlen(kind_names[k]) == klen && strncasecmp(p, kind_names[k], klen) == 0)
                    kind = k;
            enum loom_algo a = algo_by_name(eq + 1, len - klen - 1);
            if (kind < 0) {
                snprintf(err, errlen, "LOOM_ALGO: unknown collective '%.*s' in '%s'",
                         (int)klen, p, spec);
                return -1;
            }
            if (a == LOOM_ALGO_AUTO || !algo_serves(a, (enum loom_op_kind)kind)) {
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
                if (algo_serves(a, (enum loom_op_kind)k)) {
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

enum loom_algo loom_coll_select(const struct loom_comm *comm,
                                const struct loom_op *op)
{
    if (comm->algo_forced[op->kind] != LOOM_ALGO_AUTO)
        return (enum loom_algo)comm->algo_forced[op->kind];
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE:
        return bytes <= LOOM_SMALL_ALLREDUCE || op->count < (uint64_t)comm->nranks
                   ? LOOM_ALGO_RD
                   : LOOM_ALGO_RING;
    case LOOM_OP_BROADCAST:
        return bytes <= LOOM_SMALL_BROADCAST ? LOOM_ALGO_BINOMIAL : LOOM_ALGO_CHAIN;
    case LOOM_OP_ALLGATHER:
    case LOOM_OP_REDUCE_SCATTER: return LOOM_ALGO_RING;
    case LOOM_OP_REDUCE: return LOOM_ALGO_CHAIN;
    case LOOM_OP_BARRIER: return LOOM_ALGO_DISSEMINATION;
    default: return LOOM_ALGO_AUTO;
    }
}

loom_result_t loom_coll_run(struct loom_comm *comm, struct loom_op *op)
{
    /* TEMP (wip-shm): shared memory first, then the network algorithms */
    int handled = 0;
    loom_result_t sres = loom_shm_coll_run(comm, op, &handled);
    if (handled)
        return sres;
    enum loom_algo a = loom_coll_select(comm, op);
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
        return a == LOOM_ALGO_RD ? loom_rd_allreduce(comm, op)
                                 : loom_ring_allreduce(comm, op);
    case LOOM_OP_ALLGATHER: return loom_ring_allgather(comm, op);
    case LOOM_OP_REDUCE_SCATTER: return loom_ring_reduce_scatter(comm, op);
    case LOOM_OP_BROADCAST:
        return a == LOOM_ALGO_BINOMIAL ? loom_binomial_broadcast(comm, op)
                                       : loom_chain_broadcast(comm, op);
    case LOOM_OP_REDUCE: return loom_chain_reduce(comm, op);
    case LOOM_OP_BARRIER: return loom_dissemination_barrier(comm, op);
    default: break;
    }
    loom_comm_set_error(comm, LOOM_ERROR_INTERNAL, "unknown op kind %d", op->kind);
    return LOOM_ERROR_INTERNAL;
}
