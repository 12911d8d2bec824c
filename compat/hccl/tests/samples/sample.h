// sample.h - what the sample programs share. Each program is one of
// HCCL's example programs (hicann/hccl examples/01_point_to_point and
// 02_collectives), written for Loom's tests from their documented
// behaviour: the same calls made the same way, results checked.
//
// Two forms, as HCCL runs them:
//  - one process, one thread per device (the examples): the main thread
//    calls aclInit, aclrtGetDeviceCount, aclrtSetDevice(0) and
//    HcclGetRootInfo into aclrtMallocHost memory; each thread
//    aclrtSetDevice(i), HcclCommInitRootInfo(n, &root, i, &comm) and its
//    call on its own stream;
//  - one process per rank (RANK_TABLE_FILE and RANK_ID set, RANK_SIZE the
//    job's ranks, DEVICE_ID this rank's device): HcclCommInitClusterInfo.
// Built as C++14 with -Werror against a CANN-shaped folder
// (-I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64 -lhccl -lascendcl).
#ifndef LOOM_SAMPLE_H
#define LOOM_SAMPLE_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hccl/hccl.h"
#include "hccl/hccl_types.h"

#define ACL_OK(call)                                                               \
    do {                                                                           \
        aclError e_ = (call);                                                      \
        if (e_ != ACL_SUCCESS) {                                                   \
            std::printf("%s:%d: %s returned ACL error %d\n", __FILE__, __LINE__,   \
                        #call, e_);                                                \
            return 1;                                                              \
        }                                                                          \
    } while (0)

#define HCCL_OK(call)                                                              \
    do {                                                                           \
        HcclResult e_ = (call);                                                    \
        if (e_ != HCCL_SUCCESS) {                                                  \
            std::printf("%s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #call, \
                        static_cast<int>(e_), HcclGetErrorString(e_));             \
            return 1;                                                              \
        }                                                                          \
    } while (0)

// One rank: its number, the job's size, its device, and how it joins.
struct Rank {
    uint32_t rank;
    uint32_t size;
    int32_t device;
    const HcclRootInfo *root; // thread form
    const char *table;        // process form
};

inline HcclResult JoinComm(const Rank &r, HcclComm *comm)
{
    if (r.table)
        return HcclCommInitClusterInfo(r.table, r.rank, comm);
    return HcclCommInitRootInfo(r.size, r.root, r.rank, comm);
}

// Device memory of n floats holding v (copied from host memory, as the
// examples fill theirs).
inline int DeviceFloats(const std::vector<float> &v, void **dev)
{
    size_t bytes = v.size() * sizeof(float);
    void *host = nullptr;
    ACL_OK(aclrtMalloc(dev, bytes, ACL_MEM_MALLOC_HUGE_ONLY));
    ACL_OK(aclrtMallocHost(&host, bytes));
    std::memcpy(host, v.data(), bytes);
    ACL_OK(aclrtMemcpy(*dev, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    ACL_OK(aclrtFreeHost(host));
    return 0;
}

// Copy n floats of device memory back and compare them with want; print
// the rank's output as the examples do.
inline int Expect(const Rank &r, const char *what, const void *dev,
                  const std::vector<float> &want)
{
    size_t bytes = want.size() * sizeof(float);
    void *host = nullptr;
    if (bytes == 0)
        return 0;
    ACL_OK(aclrtMallocHost(&host, bytes));
    ACL_OK(aclrtMemcpy(host, bytes, dev, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    const float *got = static_cast<const float *>(host);
    std::string line = "rankId: " + std::to_string(r.rank) + ", output: [";
    int bad = -1;
    for (size_t i = 0; i < want.size(); i++) {
        if (i < 16)
            line += " " + std::to_string(static_cast<long>(got[i]));
        if (bad < 0 && got[i] != want[i])
            bad = static_cast<int>(i);
    }
    line += want.size() > 16 ? " ... ]" : " ]";
    if (bad >= 0)
        std::printf("%s\nFAIL: %s: rank %u element %d is %g, want %g\n", line.c_str(),
                    what, r.rank, bad, static_cast<double>(got[bad]),
                    static_cast<double>(want[bad]));
    else
        std::printf("%s\n", line.c_str());
    ACL_OK(aclrtFreeHost(host));
    return bad >= 0 ? 1 : 0;
}

// The communicator and the stream of a rank, made as the examples make
// them.
inline int Open(const Rank &r, HcclComm *comm, aclrtStream *stream)
{
    HCCL_OK(JoinComm(r, comm));
    ACL_OK(aclrtCreateStream(stream));
    return 0;
}

typedef int (*SampleFn)(const Rank &);

inline int RunThreads(const char *name, SampleFn fn)
{
    uint32_t n = 0;
    ACL_OK(aclrtGetDeviceCount(&n));
    std::printf("Found %u NPU device(s) available\n", n);
    ACL_OK(aclrtSetDevice(0));
    void *buf = nullptr;
    ACL_OK(aclrtMallocHost(&buf, sizeof(HcclRootInfo)));
    HcclRootInfo *root = static_cast<HcclRootInfo *>(buf);
    HCCL_OK(HcclGetRootInfo(root));
    std::vector<int> rc(n, -1);
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < n; i++)
        threads.emplace_back([&, i] {
            Rank r = {i, n, static_cast<int32_t>(i), root, nullptr};
            rc[i] = fn(r);
        });
    int failed = 0;
    for (uint32_t i = 0; i < n; i++) {
        threads[i].join();
        failed += rc[i] != 0;
    }
    ACL_OK(aclrtFreeHost(buf));
    ACL_OK(aclrtResetDevice(0));
    if (failed) {
        std::printf("FAIL: %s: %d of %u ranks failed\n", name, failed, n);
        return 1;
    }
    std::printf("%s: %u ranks ok\n", name, n);
    return 0;
}

inline int RunProcess(const char *name, SampleFn fn, const char *table)
{
    const char *id = std::getenv("RANK_ID"), *size = std::getenv("RANK_SIZE");
    const char *dev = std::getenv("DEVICE_ID");
    if (!id || !size) {
        std::printf("FAIL: %s: RANK_TABLE_FILE needs RANK_ID and RANK_SIZE\n", name);
        return 1;
    }
    Rank r = {static_cast<uint32_t>(std::atoi(id)), static_cast<uint32_t>(std::atoi(size)),
              static_cast<int32_t>(dev ? std::atoi(dev) : 0), nullptr, table};
    if (fn(r) != 0) {
        std::printf("FAIL: %s: rank %u failed\n", name, r.rank);
        return 1;
    }
    std::printf("%s: rank %u of %u ok\n", name, r.rank, r.size);
    return 0;
}

inline int RunSample(const char *name, SampleFn fn)
{
    ACL_OK(aclInit(NULL));
    const char *table = std::getenv("RANK_TABLE_FILE");
    int rc = table && *table ? RunProcess(name, fn, table) : RunThreads(name, fn);
    ACL_OK(aclFinalize());
    return rc;
}

// Stream, communicator and buffers of one rank, freed in the order the
// examples free them.
inline int Finish(const Rank &r, HcclComm comm, aclrtStream stream,
                  std::vector<void *> bufs)
{
    HCCL_OK(HcclCommDestroy(comm));
    for (void *b : bufs)
        if (b)
            ACL_OK(aclrtFree(b));
    ACL_OK(aclrtDestroyStream(stream));
    ACL_OK(aclrtResetDevice(r.device));
    return 0;
}

// Wait for the stream, check the result, free what the rank holds.
inline int Complete(const Rank &r, HcclComm comm, aclrtStream stream, const char *what,
                    const void *result, const std::vector<float> &want,
                    std::vector<void *> bufs)
{
    ACL_OK(aclrtSynchronizeStream(stream));
    if (Expect(r, what, result, want))
        return 1;
    return Finish(r, comm, stream, bufs);
}

#endif
