// scatter.cc - as HCCL's 09_scatter example: block k of root 0's buffer
// to rank k (HcclScatter).
#include "sample.h"

static int Sample(const Rank &r)
{
    uint64_t recvCount = 3;
    const uint32_t root = 0;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    if (r.rank == root) {
        std::vector<float> v(recvCount * r.size);
        for (uint64_t i = 0; i < v.size(); i++)
            v[i] = static_cast<float>(700 + i);
        if (DeviceFloats(v, &sendBuf))
            return 1;
    }
    ACL_OK(aclrtMalloc(&recvBuf, recvCount * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclScatter(sendBuf, recvBuf, recvCount, HCCL_DATA_TYPE_FP32, root, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    std::vector<float> want(recvCount);
    for (uint64_t i = 0; i < recvCount; i++)
        want[i] = static_cast<float>(700 + r.rank * recvCount + i);
    if (Expect(r, "HcclScatter", recvBuf, want))
        return 1;
    return Finish(r, comm, stream, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("scatter", Sample);
}
