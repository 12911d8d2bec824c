/* api.c - the public collective calls: validate once, pack a descriptor,
 * submit (queue.c). */
#include "build_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "comm/comm.h"
#include "core/core.h"
#include "core/group.h"
#include "comm/redop.h"
#include "base/util.h"

static loom_result_t bad(struct loom_comm *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static loom_result_t bad(struct loom_comm *comm, const char *fmt, ...)
{
    char msg[sizeof comm->errmsg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    loom_comm_set_arg_error(comm, "%s", msg);
    /* a group with a bad call runs none of its calls */
    loom_group_fail(LOOM_ERROR_INVALID_ARGUMENT);
    return LOOM_ERROR_INVALID_ARGUMENT;
}

static int is_float(loom_dtype_t t)
{
    return t == LOOM_FLOAT16 || t == LOOM_BFLOAT16 || t == LOOM_FLOAT32 ||
           t == LOOM_FLOAT64;
}

static int has_root(enum loom_op_kind k)
{
    return k == LOOM_OP_BROADCAST || k == LOOM_OP_REDUCE || k == LOOM_OP_GATHER ||
           k == LOOM_OP_SCATTER;
}

static int reduces(enum loom_op_kind k)
{
    return k == LOOM_OP_ALLREDUCE || k == LOOM_OP_REDUCE || k == LOOM_OP_REDUCE_SCATTER;
}

/* Which of the two buffers this rank's part of op reads / writes. */
static void needs(const struct loom_comm *comm, const struct loom_op *op, int *send,
                  int *recv)
{
    int root = comm->rank == op->root;
    *send = *recv = 1;
    switch (op->kind) {
    case LOOM_OP_REDUCE: case LOOM_OP_GATHER: *recv = root; break;
    case LOOM_OP_SCATTER: *send = root; break;
    case LOOM_OP_SEND: *recv = 0; break;
    case LOOM_OP_RECV: *send = 0; break;
    default: break;
    }
}

/* redop: the caller's loom_redop_t, resolved here (reducing kinds). */
static loom_result_t submit(struct loom_op *op, loom_redop_t redop,
                            struct loom_comm *comm, loom_stream_t stream)
{
    const char *name = loom_op_kind_name(op->kind);
    /* The message is the last failed call's: a call that fails here sets
     * its own, one that is submitted starts without one (queue.c), so a
     * call that succeeds leaves "" (a sticky error's message stays, as
     * every call returns that error). */
    op->prescale = op->postscale = 1.0;
    if (op->kind != LOOM_OP_BARRIER) {
        if ((unsigned)op->dtype >= LOOM_DTYPE_COUNT)
            return bad(comm, "%s: dtype %d is not a loom_dtype_t", name, (int)op->dtype);
        if (reduces(op->kind)) {
            if (loom_redop_resolve(redop, op) != 0)
                return bad(comm, "%s: op %d is not a loom_redop_t (built in, or live "
                           "from loom_redop_create)", name, (int)redop);
            if (op->scaled && !is_float(op->dtype))
                return bad(comm, "%s: a scaled %s needs a floating-point dtype, not %s",
                           name, loom_redop_name(op->op), loom_dtype_name(op->dtype));
        }
        if (op->count > (uint64_t)(SIZE_MAX / 2) / loom_dtype_size(op->dtype) /
                            (uint64_t)comm->nranks)
            return bad(comm, "%s: count %llu is too large", name,
                       (unsigned long long)op->count);
        if (has_root(op->kind) && (op->root < 0 || op->root >= comm->nranks))
            return bad(comm, "%s: root %d is not a rank of this communicator (0..%d)",
                       name, op->root, comm->nranks - 1);
        if (loom_op_kind_is_p2p(op->kind) && (op->peer < 0 || op->peer >= comm->nranks) &&
            !(op->tagged && op->kind == LOOM_OP_RECV && op->peer == LOOM_ANY_SOURCE))
            return bad(comm, "%s: peer %d is not a rank of this communicator (0..%d%s)", name,
                       op->peer, comm->nranks - 1,
                       op->tagged && op->kind == LOOM_OP_RECV ? ", or LOOM_ANY_SOURCE" : "");
        if (op->tagged && op->utag < 0 && !(op->kind == LOOM_OP_RECV && op->utag == LOOM_ANY_TAG))
            return bad(comm, "%s: tag %d is negative (a receive may pass LOOM_ANY_TAG)", name,
                       op->utag);
        if (op->count > 0) {
            int need_send, need_recv;
            needs(comm, op, &need_send, &need_recv);
            if (need_send && !op->sendbuf)
                return bad(comm, "%s: %s is NULL with count %llu", name,
                           op->kind == LOOM_OP_SEND ? "buf" : "sendbuf",
                           (unsigned long long)op->count);
            if (need_recv && !op->recvbuf)
                return bad(comm, "%s: %s is NULL with count %llu", name,
                           op->kind == LOOM_OP_RECV ? "buf" : "recvbuf",
                           (unsigned long long)op->count);
        }
    }
    op->stream = stream;
    if (op->kind == LOOM_OP_ALLREDUCE) /* float32 sums of large 16-bit calls: 2 */
        op->nseqs = loom_coalesce_seqs(op, 1);
    if (loom_group_depth() > 0) {
        loom_comm_clear_errmsg(comm);
        return loom_group_add(comm, op);
    }
    if (loom_op_kind_is_p2p(op->kind) && op->peer == comm->rank && !op->tagged)
        return bad(comm, "%s: a %s to this rank itself completes only inside a group "
                   "(loom_group_start/end) that also holds its match", name,
                   op->kind == LOOM_OP_SEND ? "send" : "receive");
    return loom_comm_submit(comm, op);
}

#define CHECK_COMM(comm)                                                       \
    do {                                                                       \
        if (!(comm)) {                                                         \
            loom_set_thread_error("%s: comm is NULL", __func__);               \
            return LOOM_ERROR_INVALID_ARGUMENT;                                \
        }                                                                      \
    } while (0)

LOOM_API loom_result_t loom_allreduce(const void *sendbuf, void *recvbuf,
                                      uint64_t count, loom_dtype_t dtype,
                                      loom_redop_t op, loom_comm_t comm,
                                      loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_ALLREDUCE, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = count, .dtype = dtype};
    return submit(&d, op, comm, stream);
}

LOOM_API loom_result_t loom_allgather(const void *sendbuf, void *recvbuf,
                                      uint64_t sendcount, loom_dtype_t dtype,
                                      loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_ALLGATHER, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = sendcount, .dtype = dtype};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_broadcast(void *buf, uint64_t count,
                                      loom_dtype_t dtype, int root,
                                      loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_BROADCAST, .sendbuf = buf, .recvbuf = buf,
                        .count = count, .dtype = dtype, .root = root};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_reduce_scatter(const void *sendbuf, void *recvbuf,
                                           uint64_t recvcount,
                                           loom_dtype_t dtype, loom_redop_t op,
                                           loom_comm_t comm,
                                           loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_REDUCE_SCATTER, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = recvcount, .dtype = dtype};
    return submit(&d, op, comm, stream);
}

LOOM_API loom_result_t loom_reduce(const void *sendbuf, void *recvbuf,
                                   uint64_t count, loom_dtype_t dtype,
                                   loom_redop_t op, int root, loom_comm_t comm,
                                   loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_REDUCE, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = count, .dtype = dtype,
                        .root = root};
    return submit(&d, op, comm, stream);
}

LOOM_API loom_result_t loom_barrier(loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_BARRIER, .dtype = LOOM_UINT8};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_send(const void *buf, uint64_t count,
                                 loom_dtype_t dtype, int peer, loom_comm_t comm,
                                 loom_stream_t stream)
{
    CHECK_COMM(comm);
    /* root: the sender, as the fingerprint on the wire has it */
    struct loom_op d = {.kind = LOOM_OP_SEND, .sendbuf = buf, .count = count,
                        .dtype = dtype, .root = comm->rank, .peer = peer};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_recv(void *buf, uint64_t count, loom_dtype_t dtype,
                                 int peer, loom_comm_t comm,
                                 loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_RECV, .recvbuf = buf, .count = count,
                        .dtype = dtype, .root = peer, .peer = peer};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_send_tagged(const void *buf, uint64_t count, loom_dtype_t dtype,
                                        int peer, int tag, loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_SEND,
                        .sendbuf = buf,
                        .count = count,
                        .dtype = dtype,
                        .root = comm->rank,
                        .peer = peer,
                        .tagged = 1,
                        .utag = tag};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_recv_tagged(void *buf, uint64_t count, loom_dtype_t dtype, int peer,
                                        int tag, int *source, loom_comm_t comm,
                                        loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_RECV,
                        .recvbuf = buf,
                        .count = count,
                        .dtype = dtype,
                        .root = peer,
                        .peer = peer,
                        .tagged = 1,
                        .utag = tag,
                        .source = source};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_alltoall(const void *sendbuf, void *recvbuf,
                                     uint64_t count, loom_dtype_t dtype,
                                     loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_ALLTOALL, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = count, .dtype = dtype};
    return submit(&d, LOOM_SUM, comm, stream);
}

/* One side's counts and displacements: present, within size_t, and a
 * buffer where any block is not empty. */
static loom_result_t check_blocks(struct loom_comm *comm, const char *side,
                                  const void *buf, const uint64_t *counts,
                                  const uint64_t *displs, size_t esz)
{
    const char *cname = side[0] == 's' ? "sendcounts" : "recvcounts";
    const char *dname = side[0] == 's' ? "sdispls" : "rdispls";
    if (!counts || !displs)
        return bad(comm, "alltoallv: %s is NULL", counts ? dname : cname);
    uint64_t limit = (uint64_t)(SIZE_MAX / 2) / esz;
    for (int j = 0; j < comm->nranks; j++) {
        if (counts[j] > limit || displs[j] > limit - counts[j])
            return bad(comm, "alltoallv: %s[%d] %llu at %s[%d] %llu is too large", cname,
                       j, (unsigned long long)counts[j], dname, j,
                       (unsigned long long)displs[j]);
        if (counts[j] && !buf)
            return bad(comm, "alltoallv: %s is NULL with %s[%d] %llu", side, cname, j,
                       (unsigned long long)counts[j]);
    }
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_alltoallv(const void *sendbuf, const uint64_t *sendcounts,
                                      const uint64_t *sdispls, void *recvbuf,
                                      const uint64_t *recvcounts,
                                      const uint64_t *rdispls, loom_dtype_t dtype,
                                      loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    if ((unsigned)dtype >= LOOM_DTYPE_COUNT)
        return bad(comm, "alltoallv: dtype %d is not a loom_dtype_t", (int)dtype);
    if (loom_group_depth() > 0)
        return bad(comm, "alltoallv: not inside a group (loom_group_start/end); call it "
                   "before or after the group");
    size_t esz = loom_dtype_size(dtype);
    LOOM_CHECK(check_blocks(comm, "sendbuf", sendbuf, sendcounts, sdispls, esz));
    LOOM_CHECK(check_blocks(comm, "recvbuf", recvbuf, recvcounts, rdispls, esz));
    int me = comm->rank, n = comm->nranks;
    if (sendcounts[me] != recvcounts[me])
        return bad(comm, "alltoallv: rank %d sends itself %llu elements (sendcounts[%d]) "
                   "but receives %llu (recvcounts[%d])", me,
                   (unsigned long long)sendcounts[me], me,
                   (unsigned long long)recvcounts[me], me);
    size_t row = (size_t)n * sizeof(uint64_t);
    uint64_t *v = malloc(4 * row);
    if (!v)
        return bad(comm, "alltoallv: cannot allocate %zu bytes for the counts", 4 * row);
    memcpy(v, sendcounts, row);
    memcpy(v + n, sdispls, row);
    memcpy(v + 2 * (size_t)n, recvcounts, row);
    memcpy(v + 3 * (size_t)n, rdispls, row);
    struct loom_op d = {.kind = LOOM_OP_ALLTOALLV, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .dtype = dtype, .vcounts = v};
    loom_result_t res = submit(&d, LOOM_SUM, comm, stream);
    /* a queued stream op owns the counts now (freed when it has run) */
    if (!stream || res < 0)
        free(v);
    return res;
}

LOOM_API loom_result_t loom_gather(const void *sendbuf, void *recvbuf,
                                   uint64_t sendcount, loom_dtype_t dtype,
                                   int root, loom_comm_t comm,
                                   loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_GATHER, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = sendcount, .dtype = dtype,
                        .root = root};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_scatter(const void *sendbuf, void *recvbuf,
                                    uint64_t recvcount, loom_dtype_t dtype,
                                    int root, loom_comm_t comm,
                                    loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_SCATTER, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = recvcount, .dtype = dtype,
                        .root = root};
    return submit(&d, LOOM_SUM, comm, stream);
}

LOOM_API loom_result_t loom_comm_get_async_error(loom_comm_t comm,
                                                 loom_result_t *error)
{
    if (!comm || !error)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *error = loom_comm_error(comm);
    return LOOM_SUCCESS;
}
