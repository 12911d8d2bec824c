/* op.c - op kinds' names and the formatting of call fingerprints. */
#include "build_config.h"

#include <stdio.h>

#include "op.h"

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
    if ((unsigned)kind >= LOOM_OP_KIND_COUNT || !kind_names[kind])
        return "unknown";
    return kind_names[kind];
}

void loom_op_format(uint32_t desc, uint64_t count, uint64_t seq, char *buf,
                    size_t len)
{
    enum loom_op_kind kind = (enum loom_op_kind)(desc & 0xf);
    loom_dtype_t dtype = (loom_dtype_t)((desc >> 4) & 0xf);
    loom_redop_t op = (loom_redop_t)((desc >> 8) & 0xf);
    int root = (int)(desc >> 12);
    unsigned long long c = (unsigned long long)count;
    unsigned long long q = (unsigned long long)(seq & ~LOOM_SEQ_INTERNAL);
    const char *num = seq & LOOM_SEQ_INTERNAL ? " (set-up #" : " #";
    const char *end = seq & LOOM_SEQ_INTERNAL ? ")" : "";
    switch (kind) {
    case LOOM_OP_BARRIER:
        snprintf(buf, len, "barrier%s%llu%s", num, q, end);
        break;
    case LOOM_OP_ALLGATHER:
        snprintf(buf, len, "allgather(%s, %llu)%s%llu%s", loom_dtype_name(dtype), c, num,
                 q, end);
        break;
    case LOOM_OP_BROADCAST:
        snprintf(buf, len, "broadcast(%s, %llu, root %d)%s%llu%s", loom_dtype_name(dtype),
                 c, root, num, q, end);
        break;
    case LOOM_OP_REDUCE:
        snprintf(buf, len, "reduce(%s, %llu, %s, root %d)%s%llu%s", loom_dtype_name(dtype),
                 c, loom_redop_name(op), root, num, q, end);
        break;
    default:
        snprintf(buf, len, "%s(%s, %llu, %s)%s%llu%s", loom_op_kind_name(kind),
                 loom_dtype_name(dtype), c, loom_redop_name(op), num, q, end);
        break;
    }
}

void loom_op_describe(const struct loom_op *op, char *buf, size_t len)
{
    loom_op_format(loom_op_desc(op), op->count, op->seq, buf, len);
}
