/* op.c - op kinds' names and the formatting of call fingerprints. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "op.h"

static const char *const kind_names[LOOM_OP_KIND_COUNT] = {
    [LOOM_OP_ALLREDUCE] = "allreduce",
    [LOOM_OP_ALLGATHER] = "allgather",
    [LOOM_OP_BROADCAST] = "broadcast",
    [LOOM_OP_REDUCE_SCATTER] = "reduce_scatter",
    [LOOM_OP_REDUCE] = "reduce",
    [LOOM_OP_BARRIER] = "barrier",
    [LOOM_OP_ALLTOALL] = "alltoall",
    [LOOM_OP_GATHER] = "gather",
    [LOOM_OP_SCATTER] = "scatter",
    [LOOM_OP_SEND] = "send",
    [LOOM_OP_RECV] = "recv",
    [LOOM_OP_GROUP] = "group",
    [LOOM_OP_ALLTOALLV] = "alltoallv",
};

const char *loom_op_kind_name(enum loom_op_kind kind)
{
    if ((unsigned)kind >= LOOM_OP_KIND_COUNT || !kind_names[kind])
        return "unknown";
    return kind_names[kind];
}

void loom_op_release(struct loom_op *op)
{
    if (op->kind == LOOM_OP_GROUP) {
        free(op->subs);
        op->subs = NULL;
        op->nsubs = 0;
    }
    free(op->vcounts);
    op->vcounts = NULL;
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
    case LOOM_OP_ALLTOALL:
        snprintf(buf, len, "%s(%s, %llu)%s%llu%s", loom_op_kind_name(kind),
                 loom_dtype_name(dtype), c, num, q, end);
        break;
    case LOOM_OP_BROADCAST:
    case LOOM_OP_GATHER:
    case LOOM_OP_SCATTER:
        snprintf(buf, len, "%s(%s, %llu, root %d)%s%llu%s", loom_op_kind_name(kind),
                 loom_dtype_name(dtype), c, root, num, q, end);
        break;
    case LOOM_OP_REDUCE:
        snprintf(buf, len, "reduce(%s, %llu, %s, root %d)%s%llu%s", loom_dtype_name(dtype),
                 c, loom_redop_name(op), root, num, q, end);
        break;
    case LOOM_OP_SEND:
        /* the wire's view of a message: root is the sender */
        snprintf(buf, len, "send(%s, %llu, from rank %d) #%llu", loom_dtype_name(dtype),
                 c, root, q);
        break;
    case LOOM_OP_GROUP:
        snprintf(buf, len, "group(%llu calls) #%llu", c, q);
        break;
    case LOOM_OP_ALLTOALLV:
        if (root == 1) /* one message of the call: its own count */
            snprintf(buf, len, "alltoallv(%s, %llu to this rank)%s%llu%s",
                     loom_dtype_name(dtype), c, num, q, end);
        else
            snprintf(buf, len, "alltoallv(%s)%s%llu%s", loom_dtype_name(dtype), num, q,
                     end);
        break;
    default:
        snprintf(buf, len, "%s(%s, %llu, %s)%s%llu%s", loom_op_kind_name(kind),
                 loom_dtype_name(dtype), c, loom_redop_name(op), num, q, end);
        break;
    }
}

/* ", tag 5" / ", any tag" of a tagged call; "" for an untagged one */
static void tag_text(const struct loom_op *op, char *buf, size_t len)
{
    if (!op->tagged)
        buf[0] = '\0';
    else if (op->utag == LOOM_ANY_TAG)
        snprintf(buf, len, ", any tag");
    else
        snprintf(buf, len, ", tag %d", op->utag);
}

void loom_op_describe(const struct loom_op *op, char *buf, size_t len)
{
    unsigned long long c = (unsigned long long)op->count, q = (unsigned long long)op->seq;
    char tag[32];
    tag_text(op, tag, sizeof tag);
    if (op->kind == LOOM_OP_RECV && op->peer == LOOM_ANY_SOURCE) {
        snprintf(buf, len, "recv(%s, %llu, from any rank%s)", loom_dtype_name(op->dtype), c, tag);
        return;
    }
    if (op->tagged) { /* not numbered: matched by tag, not by place */
        snprintf(buf, len, "%s(%s, %llu, %s rank %d%s)", loom_op_kind_name(op->kind),
                 loom_dtype_name(op->dtype), c, op->kind == LOOM_OP_SEND ? "to" : "from", op->peer,
                 tag);
        return;
    }
    switch (op->kind) {
    case LOOM_OP_SEND:
        snprintf(buf, len, "send(%s, %llu, to rank %d) #%llu", loom_dtype_name(op->dtype),
                 c, op->peer, q);
        break;
    case LOOM_OP_RECV:
        snprintf(buf, len, "recv(%s, %llu, from rank %d) #%llu",
                 loom_dtype_name(op->dtype), c, op->peer, q);
        break;
    case LOOM_OP_GROUP:
        snprintf(buf, len, "group(%d calls) #%llu", op->nsubs, q);
        break;
    default:
        loom_op_format(loom_op_desc(op), op->count, op->seq, buf, len);
        break;
    }
}

void loom_op_describe_vpeer(const struct loom_op *op, int nranks, int peer, char *buf,
                            size_t len)
{
    const uint64_t *v = op->vcounts;
    if (!v || peer < 0 || peer >= nranks) {
        loom_op_describe(op, buf, len);
        return;
    }
    /* vcounts: sendcounts, sdispls, recvcounts, rdispls */
    snprintf(buf, len, "alltoallv(%s, %llu from rank %d, %llu to it) #%llu",
             loom_dtype_name(op->dtype), (unsigned long long)v[2 * (size_t)nranks + peer],
             peer, (unsigned long long)v[peer], (unsigned long long)op->seq);
}
