/* op.h - one call's descriptor, its fingerprint and its formatting.
 *
 * Every public call packs a struct loom_op (api.c) and submits it through
 * the one enqueue path (queue.c). The fingerprint (kind, dtype, op, root,
 * count, sequence number) travels with the call's messages, so that a rank
 * can name the call a peer is in when the two disagree. */
#ifndef LOOM_OP_H
#define LOOM_OP_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

enum loom_op_kind {
    LOOM_OP_ALLREDUCE = 0,
    LOOM_OP_ALLGATHER,
    LOOM_OP_BROADCAST,
    LOOM_OP_REDUCE_SCATTER,
    LOOM_OP_REDUCE,
    LOOM_OP_BARRIER,
    LOOM_OP_KIND_COUNT /* at most 16: the fingerprint keeps 4 bits */
};

/* Where an op's buffers live: host memory the CPU reads, or device memory
 * reached through a stream adapter's staging hooks. */
enum loom_mem_type {
    LOOM_MEM_HOST = 0,
    LOOM_MEM_DEVICE = 1
};

/* One call: the descriptor every entry point packs (one enqueue path,
 * validated once). */
struct loom_op {
    enum loom_op_kind kind;
    const void *sendbuf;
    void *recvbuf;
    uint64_t count;         /* allreduce/bcast/reduce: count; allgather: sendcount;
                               reduce_scatter: recvcount */
    loom_dtype_t dtype;
    loom_redop_t op;
    int root;
    uint64_t seq;           /* per communicator, from 1; internal ones have
                               LOOM_SEQ_INTERNAL set and count apart         */
    int internal;           /* Loom's own set-up call (loom_comm_internal)   */
    enum loom_mem_type mem; /* of sendbuf/recvbuf as the algorithm sees them */
    /* device-buffer staging (src/stream/stage.c), set at enqueue: a call
     * on an adapter's stream whose buffers are device memory runs as
     * npieces calls numbered seq .. seq + npieces - 1 */
    unsigned stage_dev;     /* bit 0: sendbuf, bit 1: recvbuf is device memory */
    uint32_t npieces;       /* 1 unless staged                               */
    /* stream bookkeeping (stream == NULL: blocking caller) */
    struct loom_stream *stream;
    uint64_t ticket;
    void *mark;
    void *wait_handle;
    /* completion for blocking callers */
    volatile int done;
    loom_result_t result;
    struct loom_op *next;
};

/* Sequence numbers of Loom's own set-up calls (never shown as a user's #n). */
#define LOOM_SEQ_INTERNAL (1ull << 63)

/* The tag a call's messages carry: the low 31 bits of its number, and bit
 * 31 for internal calls, so that an internal call never matches a user's. */
static inline uint32_t loom_op_tag(uint64_t seq)
{
    return (uint32_t)(seq & 0x7fffffffu) | ((seq & LOOM_SEQ_INTERNAL) ? 0x80000000u : 0);
}

/* The sequence number a tag came from, for a peer in the same numbering
 * as a call of ours numbered seq (the nearest one with those low bits). */
static inline uint64_t loom_op_tag_seq(uint32_t tag, uint64_t seq)
{
    uint64_t base = (tag & 0x80000000u) ? LOOM_SEQ_INTERNAL : 0;
    uint64_t hi = seq & ~LOOM_SEQ_INTERNAL & ~(uint64_t)0x7fffffffu;
    return base | hi | (tag & 0x7fffffffu);
}

/* "allreduce", "broadcast", ... ("unknown" out of range). */
const char *loom_op_kind_name(enum loom_op_kind kind);

/* The call's fingerprint carried by every message: kind, dtype, op and
 * root packed (4+4+4+20 bits); with the sequence number and the count it
 * lets a receiver tell, and name, a peer that is in another call. */
static inline uint32_t loom_op_desc(const struct loom_op *op)
{
    return (uint32_t)op->kind | ((uint32_t)op->dtype & 0xf) << 4 |
           ((uint32_t)op->op & 0xf) << 8 | ((uint32_t)op->root & 0xfffff) << 12;
}

/* "allreduce(float32, 1024, sum) #17" from a fingerprint ("... (set-up #2)"
 * for an internal call). */
void loom_op_format(uint32_t desc, uint64_t count, uint64_t seq, char *buf,
                    size_t len);
/* The same for an op. */
void loom_op_describe(const struct loom_op *op, char *buf, size_t len);

#endif
