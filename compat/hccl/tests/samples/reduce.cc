// reduce.cc - as HCCL's 05_reduce example: the sum of every rank's buffer
// on root 0 (HcclReduce).
#include "sample.h"

static int Sample(const Rank &r)
{
    uint64_t count = 2 * r.size;
    const uint32_t root = 0;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(count), want(count, 0.0f);
    for (uint64_t i = 0; i < count; i++) {
        v[i] = static_cast<float>(r.rank * 3 + i);
        for (uint32_t k = 0; k < r.size; k++)
            want[i] += static_cast<float>(k * 3 + i);
    }
    if (DeviceFloats(v, &sendBuf))
        return 1;
    ACL_OK(aclrtMalloc(&recvBuf, count * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclReduce(sendBuf, recvBuf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, root,
                       comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    if (r.rank == root && Expect(r, "HcclReduce", recvBuf, want))
        return 1;
    return Finish(r, comm, stream, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("reduce", Sample);
}
