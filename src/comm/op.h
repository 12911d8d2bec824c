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
#include "transport/transport.h"

enum loom_op_kind {
    LOOM_OP_ALLREDUCE = 0,
    LOOM_OP_ALLGATHER,
    LOOM_OP_BROADCAST,
    LOOM_OP_REDUCE_SCATTER,
    LOOM_OP_REDUCE,
    LOOM_OP_BARRIER,
    /* below here, no shared-memory engine (they run over the
     * transport on every communicator) */
    LOOM_OP_ALLTOALL,
    LOOM_OP_GATHER,
    LOOM_OP_SCATTER,
    /* point-to-point: not collective, no sequence number of the
     * communicator. On the wire a receive carries the send's fingerprint
     * (kind SEND, root = the sending rank), so that the two match. */
    LOOM_OP_SEND,
    LOOM_OP_RECV,
    /* the calls of one loom_group_start/end on one communicator (group.c) */
    LOOM_OP_GROUP,
    /* blocks of any size per peer (alltoallv.c): each message carries its
     * own element count, so a rank that expects another count is named */
    LOOM_OP_ALLTOALLV,
    LOOM_OP_KIND_COUNT /* at most 16: the fingerprint keeps 4 bits */
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
                               LOOM_SEQ_INTERNAL set and count apart;
                               send/recv: per peer and direction, from 1
                               (set on execution)                            */
    int internal;           /* Loom's own set-up call (loom_comm_internal)   */
    int sticky;             /* failed at its start with an earlier error     */
    enum loom_mem_type mem; /* of sendbuf/recvbuf as the algorithm sees them */
    /* device-buffer staging (src/stream/stage.c), set at enqueue: a call
     * on an adapter's stream whose buffers are device memory runs as
     * npieces calls numbered seq .. seq + npieces - 1 */
    unsigned stage_dev;     /* bit 0: sendbuf, bit 1: recvbuf is device memory */
    uint32_t npieces;       /* 1 unless staged                               */
    int peer;               /* send/recv: the other rank (root: the sender);
                               a tagged receive: LOOM_ANY_SOURCE too        */
    /* loom_send_tagged / loom_recv_tagged: matched by (source, tag) apart
     * from untagged messages (coll/tagged.c) */
    int tagged;
    int utag;    /* the caller's tag (a receive: LOOM_ANY_TAG too) */
    int *source; /* tagged receive: gets the sender's rank (or NULL) */
    /* a reduction op made by loom_redop_create, resolved at the call
     * (op holds its base): sum/avg scaled, 16-bit floats summed in float32 */
    double prescale, postscale;  /* read through loom_op_pre/post (redop.h) */
    int scaled;             /* 0 (as zero-initialised ops are): no scaling   */
    int accum;              /* loom_accum_t                                  */
    /* group: its calls on this communicator, in call order (owned; freed by
     * loom_op_release), and the collective sequence numbers it takes (any
     * op: 0 means 1; api.c sets 2 for a call that runs as two collectives) */
    struct loom_op *subs;
    int nsubs;
    uint32_t nseqs;
    void *exec;             /* group: the executor's state, for messages    */
    /* alltoallv: sendcounts, sdispls, recvcounts, rdispls (nranks each, in
     * elements), copied at the call (owned; freed by loom_op_release);
     * count is 0, which every rank agrees on */
    uint64_t *vcounts;
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

static inline int loom_op_kind_is_p2p(enum loom_op_kind kind)
{
    return kind == LOOM_OP_SEND || kind == LOOM_OP_RECV;
}

/* How many of the communicator's collective sequence numbers op takes: 0
 * for point-to-point (ranks not involved must not diverge), a group's
 * count of collective runs, 1 otherwise. */
static inline uint32_t loom_op_nseqs(const struct loom_op *op)
{
    if (loom_op_kind_is_p2p(op->kind))
        return 0;
    return op->kind == LOOM_OP_GROUP || op->nseqs ? op->nseqs : 1;
}

/* Free what an op owns beyond itself (a group's calls, alltoallv's
 * counts). */
void loom_op_release(struct loom_op *op);

/* The call's fingerprint carried by every message: kind, dtype, op and
 * root packed (4+4+4+20 bits); with the sequence number and the count it
 * lets a receiver tell, and name, a peer that is in another call. */
static inline uint32_t loom_op_desc(const struct loom_op *op)
{
    uint32_t kind = op->kind == LOOM_OP_RECV ? LOOM_OP_SEND : (uint32_t)op->kind;
    return kind | ((uint32_t)op->dtype & 0xf) << 4 |
           ((uint32_t)op->op & 0xf) << 8 | ((uint32_t)op->root & 0xfffff) << 12;
}

/* The fingerprint of one alltoallv message: the call's, marked (root 1) as
 * a message whose count is that message's elements. */
static inline uint32_t loom_op_desc_vmsg(const struct loom_op *op)
{
    return loom_op_desc(op) | 1u << 12;
}

/* "allreduce(float32, 1024, sum) #17" from a fingerprint ("... (set-up #2)"
 * for an internal call). */
void loom_op_format(uint32_t desc, uint64_t count, uint64_t seq, char *buf,
                    size_t len);
/* The same for an op, naming its peer for send/recv ("recv(float32, 12,
 * from rank 0) #3") and its calls for a group. */
void loom_op_describe(const struct loom_op *op, char *buf, size_t len);
/* An alltoallv op as peer sees it: "alltoallv(int32, 3 from rank 2, 5 to
 * it) #4". */
void loom_op_describe_vpeer(const struct loom_op *op, int nranks, int peer, char *buf,
                            size_t len);

#endif
