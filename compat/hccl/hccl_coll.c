/* hccl_coll.c - HCCL's collectives and point-to-point calls over Loom's.
 * Reductions take the types Loom reduces; data movement (broadcast,
 * allgather, send, recv) takes every HCCL type with a size, as bytes when
 * Loom has no such type. The stream is a
 * loom_stream_t, or NULL to complete before returning. */
#include "build_config.h"

#include <stdint.h>

#include "hccl_internal.h"

/* A reduction's communicator, dtype and op, or the reported reason why not. */
static HcclResult reduce_args(const char *what, HcclComm comm, HcclDataType dt,
                              HcclReduceOp op, loom_dtype_t *ldt,
                              loom_redop_t *lop)
{
    if (!comm)
        return loom_hccl_fail(HCCL_E_PTR, what, "comm is NULL");
    int rc = loom_hccl_reduce_dtype(dt, ldt);
    if (rc == -2)
        return loom_hccl_fail(HCCL_E_PARA, what, "dataType %d is not an "
                                                 "HcclDataType", (int)dt);
    if (rc == -1)
        return loom_hccl_fail(HCCL_E_NOT_SUPPORT, what,
                              "Loom does not reduce %s (it reduces int8, "
                              "uint8, int32, uint32, int64, uint64, fp16, "
                              "bfp16, fp32 and fp64)",
                              loom_hccl_dtype_name(dt));
    if (loom_hccl_redop(op, lop) < 0)
        return loom_hccl_fail(HCCL_E_PARA, what, "op %d is not an "
                                                 "HcclReduceOp (sum 0, prod 1, "
                                                 "max 2, min 3)", (int)op);
    return HCCL_SUCCESS;
}

/* A data movement's dtype and count: Loom's type when it has one, else
 * count * size bytes. */
static HcclResult move_args(const char *what, HcclDataType dt, uint64_t count,
                            loom_dtype_t *ldt, uint64_t *lcount)
{
    if (loom_hccl_reduce_dtype(dt, ldt) == 0) {
        *lcount = count;
        return HCCL_SUCCESS;
    }
    size_t size = loom_hccl_dtype_size(dt);
    if (size == 0)
        return loom_hccl_fail(HCCL_E_PARA, what, "dataType %d is not an "
                                                 "HcclDataType", (int)dt);
    if (count > UINT64_MAX / size)
        return loom_hccl_fail(HCCL_E_PARA, what, "count %llu of %s is too "
                                                 "large",
                              (unsigned long long)count,
                              loom_hccl_dtype_name(dt));
    *ldt = LOOM_UINT8;
    *lcount = count * size;
    return HCCL_SUCCESS;
}

static HcclResult done(loom_result_t res, const char *what, HcclComm comm)
{
    if (res == LOOM_SUCCESS)
        return HCCL_SUCCESS;
    return loom_hccl_fail_loom(res, what, (loom_comm_t)comm);
}

static HcclResult need_comm(const char *what, HcclComm comm)
{
    return comm ? HCCL_SUCCESS
                : loom_hccl_fail(HCCL_E_PTR, what, "comm is NULL");
}

LOOM_HCCL_API HcclResult HcclAllReduce(void *sendBuf, void *recvBuf,
                                       uint64_t count, HcclDataType dataType,
                                       HcclReduceOp op, HcclComm comm,
                                       aclrtStream stream)
{
    const char *what = "HcclAllReduce";
    loom_dtype_t dt;
    loom_redop_t lop;
    HcclResult h = reduce_args(what, comm, dataType, op, &dt, &lop);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_allreduce(sendBuf, recvBuf, count, dt, lop,
                               (loom_comm_t)comm, (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclReduce(void *sendBuf, void *recvBuf,
                                    uint64_t count, HcclDataType dataType,
                                    HcclReduceOp op, uint32_t root,
                                    HcclComm comm, aclrtStream stream)
{
    const char *what = "HcclReduce";
    loom_dtype_t dt;
    loom_redop_t lop;
    HcclResult h = reduce_args(what, comm, dataType, op, &dt, &lop);
    if (h != HCCL_SUCCESS)
        return h;
    if (root > INT32_MAX)
        return loom_hccl_fail(HCCL_E_PARA, what, "root %u is out of range",
                              root);
    return done(loom_reduce(sendBuf, recvBuf, count, dt, lop, (int)root,
                            (loom_comm_t)comm, (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf,
                                           uint64_t recvCount,
                                           HcclDataType dataType,
                                           HcclReduceOp op, HcclComm comm,
                                           aclrtStream stream)
{
    const char *what = "HcclReduceScatter";
    loom_dtype_t dt;
    loom_redop_t lop;
    HcclResult h = reduce_args(what, comm, dataType, op, &dt, &lop);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_reduce_scatter(sendBuf, recvBuf, recvCount, dt, lop,
                                    (loom_comm_t)comm, (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclAllGather(void *sendBuf, void *recvBuf,
                                       uint64_t sendCount,
                                       HcclDataType dataType, HcclComm comm,
                                       aclrtStream stream)
{
    const char *what = "HcclAllGather";
    loom_dtype_t dt;
    uint64_t count;
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = move_args(what, dataType, sendCount, &dt, &count);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_allgather(sendBuf, recvBuf, count, dt, (loom_comm_t)comm,
                               (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclBroadcast(void *buf, uint64_t count,
                                       HcclDataType dataType, uint32_t root,
                                       HcclComm comm, aclrtStream stream)
{
    const char *what = "HcclBroadcast";
    loom_dtype_t dt;
    uint64_t lcount;
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = move_args(what, dataType, count, &dt, &lcount);
    if (h != HCCL_SUCCESS)
        return h;
    if (root > INT32_MAX)
        return loom_hccl_fail(HCCL_E_PARA, what, "root %u is out of range",
                              root);
    return done(loom_broadcast(buf, lcount, dt, (int)root, (loom_comm_t)comm,
                               (loom_stream_t)stream),
                what, comm);
}

/* Send and recv move data: every HCCL type with a size, as bytes when Loom
 * has no such type. */
static HcclResult p2p_args(const char *what, HcclComm comm, HcclDataType dt,
                           uint64_t count, uint32_t peer, loom_dtype_t *ldt,
                           uint64_t *lcount)
{
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = move_args(what, dt, count, ldt, lcount);
    if (h == HCCL_SUCCESS && peer > INT32_MAX)
        h = loom_hccl_fail(HCCL_E_PARA, what, "rank %u is out of range", peer);
    return h;
}

LOOM_HCCL_API HcclResult HcclSend(void *sendBuf, uint64_t count,
                                  HcclDataType dataType, uint32_t destRank,
                                  HcclComm comm, aclrtStream stream)
{
    const char *what = "HcclSend";
    loom_dtype_t dt;
    uint64_t lcount;
    HcclResult h = p2p_args(what, comm, dataType, count, destRank, &dt, &lcount);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_send(sendBuf, lcount, dt, (int)destRank,
                          (loom_comm_t)comm, (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclRecv(void *recvBuf, uint64_t count,
                                  HcclDataType dataType, uint32_t srcRank,
                                  HcclComm comm, aclrtStream stream)
{
    const char *what = "HcclRecv";
    loom_dtype_t dt;
    uint64_t lcount;
    HcclResult h = p2p_args(what, comm, dataType, count, srcRank, &dt, &lcount);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_recv(recvBuf, lcount, dt, (int)srcRank, (loom_comm_t)comm,
                          (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)
{
    HcclResult h = need_comm("HcclBarrier", comm);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_barrier((loom_comm_t)comm, (loom_stream_t)stream),
                "HcclBarrier", comm);
}
