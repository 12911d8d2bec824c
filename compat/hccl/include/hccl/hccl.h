/*
 * hccl/hccl.h - HCCL's C API (Huawei CANN's collective communication
 * library) on Loom: link with libloom_hccl (`pkg-config --cflags --libs
 * loom-hccl`). Signatures as CANN documents them; the header is Loom's own.
 *
 * Every call returns HcclResult. Where HCCL runs on an NPU stream, Loom
 * takes a Loom stream: `stream` NULL makes the call complete before it
 * returns; otherwise it is a loom_stream_t (a host stream, a hooks stream,
 * or the CUDA adapter's), the call returns once enqueued and completes in
 * order on that stream. Buffers are host memory unless the stream's hooks
 * stage device memory. docs/hccl.md has the whole mapping: results, types,
 * environment, and what Loom does not do.
 */
#ifndef LOOM_HCCL_H
#define LOOM_HCCL_H

#include <hccl/hccl_types.h>
/* As CANN's hccl.h: the ACL runtime's declarations come with it (on Loom,
 * libloom_acl's: -lascendcl in a CANN-shaped folder, see docs/hccl.md). */
#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOOM_HCCL_BUILDING_LIBRARY) && defined(__GNUC__)
#define LOOM_HCCL_API __attribute__((visibility("default")))
#else
#define LOOM_HCCL_API
#endif

/* The stream argument of the calls below is CANN's aclrtStream (acl/acl.h):
 * NULL, or a loom_stream_t, which is what libloom_acl's aclrtCreateStream
 * makes. */

/* ---- communicators ------------------------------------------------------ */

/* Join the job that the rank table clusterInfo describes (HCCL's JSON:
 * versions 1.0, 1.2, group_list) as rank. clusterInfo NULL or "": the path
 * in RANK_TABLE_FILE. RANK_ID, RANK_SIZE and DEVICE_ID, when set, must agree
 * with rank and the table (an error names both). */
LOOM_HCCL_API HcclResult HcclCommInitClusterInfo(const char *clusterInfo,
                                                 uint32_t rank,
                                                 HcclComm *comm);
/* The same with options (HcclCommConfigInit first). */
LOOM_HCCL_API HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo,
                                                       uint32_t rank,
                                                       HcclCommConfig *config,
                                                       HcclComm *comm);

/* On one process (usually rank 0's): pick this host's address, open the
 * rendezvous there and describe it in *rootInfo, which the program then
 * gives every rank. */
LOOM_HCCL_API HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
/* Every rank, with the same rootInfo and nRanks. */
LOOM_HCCL_API HcclResult HcclCommInitRootInfo(uint32_t nRanks,
                                              const HcclRootInfo *rootInfo,
                                              uint32_t rank, HcclComm *comm);
LOOM_HCCL_API HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks,
                                                    const HcclRootInfo *rootInfo,
                                                    uint32_t rank,
                                                    const HcclCommConfig *config,
                                                    HcclComm *comm);

/* Wait for pending work, then free. */
LOOM_HCCL_API HcclResult HcclCommDestroy(HcclComm comm);
LOOM_HCCL_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
LOOM_HCCL_API HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

/* HCCL_SUCCESS in *asyncError while comm works; else the error that broke
 * it (an op that failed on a stream, a lost peer). Neither waits nor
 * communicates. */
LOOM_HCCL_API HcclResult HcclGetCommAsyncError(HcclComm comm,
                                               HcclResult *asyncError);
/* A short name of code. Never NULL. */
LOOM_HCCL_API const char *HcclGetErrorString(HcclResult code);

/* ---- collectives: every rank calls the same ones in the same order ------- */

LOOM_HCCL_API HcclResult HcclAllReduce(void *sendBuf, void *recvBuf,
                                       uint64_t count, HcclDataType dataType,
                                       HcclReduceOp op, HcclComm comm,
                                       aclrtStream stream);
LOOM_HCCL_API HcclResult HcclBroadcast(void *buf, uint64_t count,
                                       HcclDataType dataType, uint32_t root,
                                       HcclComm comm, aclrtStream stream);
/* recvBuf gets block `rank` (recvCount elements) of the reduced sendBuf. */
LOOM_HCCL_API HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf,
                                           uint64_t recvCount,
                                           HcclDataType dataType,
                                           HcclReduceOp op, HcclComm comm,
                                           aclrtStream stream);
/* recvBuf gets every rank's sendCount elements, in rank order. */
LOOM_HCCL_API HcclResult HcclAllGather(void *sendBuf, void *recvBuf,
                                       uint64_t sendCount,
                                       HcclDataType dataType, HcclComm comm,
                                       aclrtStream stream);
/* recvBuf matters on root only. */
LOOM_HCCL_API HcclResult HcclReduce(void *sendBuf, void *recvBuf,
                                    uint64_t count, HcclDataType dataType,
                                    HcclReduceOp op, uint32_t root,
                                    HcclComm comm, aclrtStream stream);
LOOM_HCCL_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

/* Rank j receives block j (recvCount elements) of root's sendBuf (sendBuf
 * matters on root only). */
LOOM_HCCL_API HcclResult HcclScatter(void *sendBuf, void *recvBuf,
                                     uint64_t recvCount, HcclDataType dataType,
                                     uint32_t root, HcclComm comm,
                                     aclrtStream stream);
/* Block j of sendCount elements to rank j; rank j's block into block j of
 * recvBuf. sendCount == recvCount and sendType == recvType. */
LOOM_HCCL_API HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount,
                                      HcclDataType sendType,
                                      const void *recvBuf, uint64_t recvCount,
                                      HcclDataType recvType, HcclComm comm,
                                      aclrtStream stream);
/* sendCounts, sdispls, recvCounts, rdispls: uint64_t arrays of rankSize
 * elements (counts and offsets in elements); rank i's sendCounts[j] must
 * equal rank j's recvCounts[i] (else an error naming both). Over
 * loom_alltoallv. */
LOOM_HCCL_API HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts,
                                       const void *sdispls, HcclDataType sendType,
                                       const void *recvBuf, const void *recvCounts,
                                       const void *rdispls, HcclDataType recvType,
                                       HcclComm comm, aclrtStream stream);
/* sendCountMatrix: rankSize x rankSize uint64_t, [i * rankSize + j] is what
 * rank i sends rank j; every rank passes the same matrix. Blocks lie packed
 * in rank order in both buffers. */
LOOM_HCCL_API HcclResult HcclAlltoAllVC(const void *sendBuf,
                                        const void *sendCountMatrix,
                                        HcclDataType sendType,
                                        const void *recvBuf,
                                        HcclDataType recvType, HcclComm comm,
                                        aclrtStream stream);

/* ---- point to point: only the two ranks take part ------------------------ */

/* Messages between two ranks match in the order they were issued; count and
 * dataType must agree with the receive (a mismatch is an error naming both
 * calls). With stream NULL both block until the message has moved, so two
 * ranks that exchange must order their calls (one sends first). */
LOOM_HCCL_API HcclResult HcclSend(void *sendBuf, uint64_t count,
                                  HcclDataType dataType, uint32_t destRank,
                                  HcclComm comm, aclrtStream stream);
LOOM_HCCL_API HcclResult HcclRecv(void *recvBuf, uint64_t count,
                                  HcclDataType dataType, uint32_t srcRank,
                                  HcclComm comm, aclrtStream stream);
/* The sends and receives of sendRecvInfo[0..itemNum) posted together, so
 * that they progress together (a ring exchange needs no ordering): a Loom
 * group. */
LOOM_HCCL_API HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo,
                                           uint32_t itemNum, HcclComm comm,
                                           aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_HCCL_H */
