/* algo.c - algorithm names and LOOM_ALGO (see algo.h). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algo.h"

static const char *const algo_names[] = {
    [LOOM_ALGO_AUTO] = "auto",
    [LOOM_ALGO_RING] = "ring",
    [LOOM_ALGO_RD] = "rd",
    [LOOM_ALGO_CHAIN] = "chain",
    [LOOM_ALGO_BINOMIAL] = "binomial",
    [LOOM_ALGO_DISSEMINATION] = "dissemination",
    [LOOM_ALGO_TREE] = "tree",
    [LOOM_ALGO_RHD] = "rhd",
    [LOOM_ALGO_BRUCK] = "bruck",
    [LOOM_ALGO_SCATTER_ALLGATHER] = "scatter_allgather",
    [LOOM_ALGO_SHM] = "shm",
    [LOOM_ALGO_HIER] = "hier",
    [LOOM_ALGO_SHM_COPY] = "shm_copy",
    [LOOM_ALGO_SHM_READ] = "shm_read",
    [LOOM_ALGO_SHM_PUSH] = "shm_push",
    [LOOM_ALGO_SHM_LL] = "shm_ll",
    [LOOM_ALGO_SHM_PIPE] = "shm_pipe",
};

const char *loom_algo_name(enum loom_algo algo)
{
    if ((unsigned)algo >= sizeof algo_names / sizeof algo_names[0])
        return "unknown";
    return algo_names[algo];
}

/* Which algorithms serve which collective. */
int loom_algo_serves(enum loom_algo a, enum loom_op_kind k)
{
    if (loom_algo_is_shm(a))
        return (unsigned)k <= LOOM_OP_BARRIER; /* the shared-memory engine's */
    if (a == LOOM_ALGO_HIER)
        return k == LOOM_OP_ALLREDUCE || k == LOOM_OP_BROADCAST || k == LOOM_OP_ALLGATHER;
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
                if (strlen(loom_op_kind_name((enum loom_op_kind)k)) == klen &&
                    strncasecmp(p, loom_op_kind_name((enum loom_op_kind)k), klen) == 0)
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
                         (int)(len - klen - 1), eq + 1, loom_op_kind_name((enum loom_op_kind)kind));
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

