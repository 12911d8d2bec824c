/* hccl_coll.c - HCCL's collectives and point-to-point calls over Loom's.
 * Reductions take the types Loom reduces; data movement (broadcast,
 * allgather, send, recv, scatter, the alltoalls) takes every HCCL type with
 * a size, as bytes when Loom has no such type. The stream is a
 * loom_stream_t (libloom_acl's aclrtCreateStream makes one), or NULL to
 * complete before returning. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>

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
                              "uint8, int16, uint16, int32, uint32, int64, "
                              "uint64, fp16, bfp16, fp32 and fp64)",
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

/* A data movement to or from one rank (a root, a peer: `role`): every HCCL
 * type with a size, as bytes when Loom has no such type. */
static HcclResult ranked_move_args(const char *what, HcclComm comm,
                                   HcclDataType dt, uint64_t count,
                                   uint32_t rank, const char *role,
                                   loom_dtype_t *ldt, uint64_t *lcount)
{
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = move_args(what, dt, count, ldt, lcount);
    if (h == HCCL_SUCCESS && rank > INT32_MAX)
        h = loom_hccl_fail(HCCL_E_PARA, what, "%s %u is out of range", role,
                           rank);
    return h;
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
    HcclResult h = ranked_move_args(what, comm, dataType, count, root, "root",
                                    &dt, &lcount);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_broadcast(buf, lcount, dt, (int)root, (loom_comm_t)comm,
                               (loom_stream_t)stream),
                what, comm);
}

LOOM_HCCL_API HcclResult HcclSend(void *sendBuf, uint64_t count,
                                  HcclDataType dataType, uint32_t destRank,
                                  HcclComm comm, aclrtStream stream)
{
    const char *what = "HcclSend";
    loom_dtype_t dt;
    uint64_t lcount;
    HcclResult h = ranked_move_args(what, comm, dataType, count, destRank,
                                    "rank", &dt, &lcount);
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
    HcclResult h = ranked_move_args(what, comm, dataType, count, srcRank,
                                    "rank", &dt, &lcount);
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

LOOM_HCCL_API HcclResult HcclScatter(void *sendBuf, void *recvBuf,
                                     uint64_t recvCount, HcclDataType dataType,
                                     uint32_t root, HcclComm comm,
                                     aclrtStream stream)
{
    const char *what = "HcclScatter";
    loom_dtype_t dt;
    uint64_t count;
    HcclResult h = ranked_move_args(what, comm, dataType, recvCount, root,
                                    "root", &dt, &count);
    if (h != HCCL_SUCCESS)
        return h;
    return done(loom_scatter(sendBuf, recvBuf, count, dt, (int)root,
                             (loom_comm_t)comm, (loom_stream_t)stream),
                what, comm);
}

/* alltoall's send and receive sides must agree: Loom moves one type. */
static HcclResult same_type(const char *what, HcclDataType send,
                            HcclDataType recv)
{
    if (send == recv)
        return HCCL_SUCCESS;
    return loom_hccl_fail(HCCL_E_PARA, what, "sendType %d and recvType %d "
                                             "differ (Loom does not convert)",
                          (int)send, (int)recv);
}

LOOM_HCCL_API HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount,
                                      HcclDataType sendType,
                                      const void *recvBuf, uint64_t recvCount,
                                      HcclDataType recvType, HcclComm comm,
                                      aclrtStream stream)
{
    const char *what = "HcclAlltoAll";
    loom_dtype_t dt;
    uint64_t count;
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = same_type(what, sendType, recvType);
    if (h == HCCL_SUCCESS && sendCount != recvCount)
        h = loom_hccl_fail(HCCL_E_PARA, what, "sendCount %llu and recvCount "
                                              "%llu differ (each block is "
                                              "one count)",
                           (unsigned long long)sendCount,
                           (unsigned long long)recvCount);
    if (h == HCCL_SUCCESS)
        h = move_args(what, sendType, sendCount, &dt, &count);
    if (h != HCCL_SUCCESS)
        return h;
    /* HCCL declares recvBuf const; it is written */
    return done(loom_alltoall(sendBuf, (void *)(uintptr_t)recvBuf, count, dt,
                              (loom_comm_t)comm, (loom_stream_t)stream),
                what, comm);
}

/* Run loom_alltoallv with counts and displacements in elements of dt; a
 * type Loom only moves goes as bytes, its arrays scaled to bytes. */
static HcclResult alltoallv(const char *what, HcclComm comm, const void *sendBuf,
                            const uint64_t *sc, const uint64_t *sd,
                            const void *recvBuf, const uint64_t *rc,
                            const uint64_t *rd, HcclDataType dt,
                            aclrtStream stream)
{
    loom_dtype_t ldt;
    uint64_t one;
    HcclResult h = move_args(what, dt, 1, &ldt, &one);
    if (h != HCCL_SUCCESS)
        return h;
    int n = 0;
    loom_comm_size((loom_comm_t)comm, &n);
    uint64_t *scaled = NULL;
    if (one != 1) {
        /* one element is `one` bytes */
        scaled = malloc(4 * (size_t)n * sizeof *scaled);
        if (!scaled)
            return loom_hccl_fail(HCCL_E_MEMORY, what, "out of memory");
        const uint64_t *src[4] = {sc, sd, rc, rd};
        for (int a = 0; a < 4; a++)
            for (int j = 0; j < n; j++) {
                if (src[a][j] > UINT64_MAX / one) {
                    free(scaled);
                    return loom_hccl_fail(HCCL_E_PARA, what, "count or "
                                          "displacement %llu of %s is too "
                                          "large", (unsigned long long)src[a][j],
                                          loom_hccl_dtype_name(dt));
                }
                scaled[(size_t)a * n + j] = src[a][j] * one;
            }
        sc = scaled;
        sd = scaled + n;
        rc = scaled + 2 * (size_t)n;
        rd = scaled + 3 * (size_t)n;
    }
    loom_result_t res = loom_alltoallv(sendBuf, sc, sd, (void *)(uintptr_t)recvBuf,
                                       rc, rd, ldt, (loom_comm_t)comm,
                                       (loom_stream_t)stream);
    free(scaled); /* loom_alltoallv copied them */
    return done(res, what, comm);
}

LOOM_HCCL_API HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts,
                                       const void *sdispls, HcclDataType sendType,
                                       const void *recvBuf, const void *recvCounts,
                                       const void *rdispls, HcclDataType recvType,
                                       HcclComm comm, aclrtStream stream)
{
    const char *what = "HcclAlltoAllV";
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = same_type(what, sendType, recvType);
    if (h == HCCL_SUCCESS && (!sendCounts || !sdispls || !recvCounts || !rdispls))
        h = loom_hccl_fail(HCCL_E_PTR, what, "%s is NULL",
                           !sendCounts ? "sendCounts" : !sdispls ? "sdispls"
                           : !recvCounts ? "recvCounts" : "rdispls");
    if (h != HCCL_SUCCESS)
        return h;
    return alltoallv(what, comm, sendBuf, sendCounts, sdispls, recvBuf,
                     recvCounts, rdispls, sendType, stream);
}

LOOM_HCCL_API HcclResult HcclAlltoAllVC(const void *sendBuf,
                                        const void *sendCountMatrix,
                                        HcclDataType sendType,
                                        const void *recvBuf,
                                        HcclDataType recvType, HcclComm comm,
                                        aclrtStream stream)
{
    const char *what = "HcclAlltoAllVC";
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS)
        h = same_type(what, sendType, recvType);
    if (h == HCCL_SUCCESS && !sendCountMatrix)
        h = loom_hccl_fail(HCCL_E_PTR, what, "sendCountMatrix is NULL");
    if (h != HCCL_SUCCESS)
        return h;
    int n = 0, me = 0;
    loom_comm_size((loom_comm_t)comm, &n);
    loom_comm_rank((loom_comm_t)comm, &me);
    const uint64_t *m = sendCountMatrix;
    uint64_t *v = malloc(4 * (size_t)n * sizeof *v);
    if (!v)
        return loom_hccl_fail(HCCL_E_MEMORY, what, "out of memory");
    /* this rank's row is what it sends, its column what it receives, each
     * packed in rank order */
    uint64_t *sc = v, *sd = v + n, *rc = v + 2 * (size_t)n, *rd = v + 3 * (size_t)n;
    uint64_t so = 0, ro = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = m[(size_t)me * n + j];
        rc[j] = m[(size_t)j * n + me];
        sd[j] = so;
        rd[j] = ro;
        if (sc[j] > UINT64_MAX - so || rc[j] > UINT64_MAX - ro) {
            free(v);
            return loom_hccl_fail(HCCL_E_PARA, what, "the counts of rank %d's "
                                                     "row or column overflow", me);
        }
        so += sc[j];
        ro += rc[j];
    }
    h = alltoallv(what, comm, sendBuf, sc, sd, recvBuf, rc, rd, sendType, stream);
    free(v);
    return h;
}

LOOM_HCCL_API HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo,
                                           uint32_t itemNum, HcclComm comm,
                                           aclrtStream stream)
{
    const char *what = "HcclBatchSendRecv";
    HcclResult h = need_comm(what, comm);
    if (h == HCCL_SUCCESS && itemNum && !sendRecvInfo)
        h = loom_hccl_fail(HCCL_E_PTR, what, "sendRecvInfo is NULL with itemNum "
                                             "%u", itemNum);
    /* every item is checked before any is posted: a bad one posts nothing */
    for (uint32_t i = 0; h == HCCL_SUCCESS && i < itemNum; i++) {
        const HcclSendRecvItem *it = &sendRecvInfo[i];
        loom_dtype_t dt;
        uint64_t count;
        if (it->sendRecvType != HCCL_SEND && it->sendRecvType != HCCL_RECV)
            h = loom_hccl_fail(HCCL_E_PARA, what, "item %u: sendRecvType %d is "
                                                  "not HCCL_SEND or HCCL_RECV",
                               i, (int)it->sendRecvType);
        else if (it->remoteRank > INT32_MAX)
            h = loom_hccl_fail(HCCL_E_PARA, what, "item %u: remoteRank %u is out "
                                                  "of range", i, it->remoteRank);
        else
            h = move_args(what, it->dataType, it->count, &dt, &count);
    }
    if (h != HCCL_SUCCESS)
        return h;
    loom_result_t res = loom_group_start();
    for (uint32_t i = 0; res == LOOM_SUCCESS && i < itemNum; i++) {
        const HcclSendRecvItem *it = &sendRecvInfo[i];
        loom_dtype_t dt;
        uint64_t count;
        move_args(what, it->dataType, it->count, &dt, &count);
        res = it->sendRecvType == HCCL_SEND
                  ? loom_send(it->buf, count, dt, (int)it->remoteRank,
                              (loom_comm_t)comm, (loom_stream_t)stream)
                  : loom_recv(it->buf, count, dt, (int)it->remoteRank,
                              (loom_comm_t)comm, (loom_stream_t)stream);
    }
    /* the group ends whatever happened inside it; it runs nothing after a
     * failed call and returns that call's error */
    loom_result_t eres = loom_group_end();
    return done(res != LOOM_SUCCESS ? res : eres, what, comm);
}
