/* api.c - the public collective calls: validate once, pack a descriptor,
 * submit (queue.c). */
#include "build_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "util.h"

static loom_result_t bad(struct loom_comm *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static loom_result_t bad(struct loom_comm *comm, const char *fmt, ...)
{
    /* argument errors are not sticky: the communicator is still usable */
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&comm->lock);
    if (comm->error == LOOM_SUCCESS)
        vsnprintf(comm->errmsg, sizeof comm->errmsg, fmt, ap);
    pthread_mutex_unlock(&comm->lock);
    va_end(ap);
    /* returned to the caller, who reports it: INFO (loom_comm_set_error) */
    LOOM_INFO(LOOM_SUB_COLL, "%s", comm->errmsg);
    return LOOM_ERROR_INVALID_ARGUMENT;
}

static loom_result_t submit(struct loom_op *op, struct loom_comm *comm,
                            loom_stream_t stream)
{
    const char *name = loom_op_kind_name(op->kind);
    if (op->kind != LOOM_OP_BARRIER) {
        if ((unsigned)op->dtype >= LOOM_DTYPE_COUNT)
            return bad(comm, "%s: dtype %d is not a loom_dtype_t", name, (int)op->dtype);
        if ((op->kind == LOOM_OP_ALLREDUCE || op->kind == LOOM_OP_REDUCE ||
             op->kind == LOOM_OP_REDUCE_SCATTER) &&
            (unsigned)op->op >= LOOM_REDOP_COUNT)
            return bad(comm, "%s: op %d is not a loom_redop_t", name, (int)op->op);
        if (op->count > (uint64_t)(SIZE_MAX / 2) / loom_dtype_size(op->dtype) /
                            (uint64_t)comm->nranks)
            return bad(comm, "%s: count %llu is too large", name,
                       (unsigned long long)op->count);
        if (op->count > 0) {
            int need_send = 1, need_recv = 1;
            if (op->kind == LOOM_OP_REDUCE && comm->rank != op->root)
                need_recv = 0;
            if (need_send && !op->sendbuf)
                return bad(comm, "%s: sendbuf is NULL with count %llu", name,
                           (unsigned long long)op->count);
            if (need_recv && !op->recvbuf)
                return bad(comm, "%s: recvbuf is NULL with count %llu", name,
                           (unsigned long long)op->count);
        }
        if ((op->kind == LOOM_OP_BROADCAST || op->kind == LOOM_OP_REDUCE) &&
            (op->root < 0 || op->root >= comm->nranks))
            return bad(comm, "%s: root %d is not a rank of this communicator (0..%d)",
                       name, op->root, comm->nranks - 1);
    }
    op->stream = stream;
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
                        .recvbuf = recvbuf, .count = count, .dtype = dtype,
                        .op = op};
    return submit(&d, comm, stream);
}

LOOM_API loom_result_t loom_allgather(const void *sendbuf, void *recvbuf,
                                      uint64_t sendcount, loom_dtype_t dtype,
                                      loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_ALLGATHER, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = sendcount, .dtype = dtype};
    return submit(&d, comm, stream);
}

LOOM_API loom_result_t loom_broadcast(void *buf, uint64_t count,
                                      loom_dtype_t dtype, int root,
                                      loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_BROADCAST, .sendbuf = buf, .recvbuf = buf,
                        .count = count, .dtype = dtype, .root = root};
    return submit(&d, comm, stream);
}

LOOM_API loom_result_t loom_reduce_scatter(const void *sendbuf, void *recvbuf,
                                           uint64_t recvcount,
                                           loom_dtype_t dtype, loom_redop_t op,
                                           loom_comm_t comm,
                                           loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_REDUCE_SCATTER, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = recvcount, .dtype = dtype,
                        .op = op};
    return submit(&d, comm, stream);
}

LOOM_API loom_result_t loom_reduce(const void *sendbuf, void *recvbuf,
                                   uint64_t count, loom_dtype_t dtype,
                                   loom_redop_t op, int root, loom_comm_t comm,
                                   loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_REDUCE, .sendbuf = sendbuf,
                        .recvbuf = recvbuf, .count = count, .dtype = dtype,
                        .op = op, .root = root};
    return submit(&d, comm, stream);
}

LOOM_API loom_result_t loom_barrier(loom_comm_t comm, loom_stream_t stream)
{
    CHECK_COMM(comm);
    struct loom_op d = {.kind = LOOM_OP_BARRIER, .dtype = LOOM_UINT8};
    return submit(&d, comm, stream);
}
