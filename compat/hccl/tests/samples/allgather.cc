// allgather.cc - as HCCL's 03_allgather example: every rank's block, in
// rank order, on every rank (HcclAllGather).
#include "sample.h"

static int Sample(const Rank &r)
{
    uint64_t count = 3;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(count), want(count * r.size);
    for (uint64_t i = 0; i < count; i++)
        v[i] = static_cast<float>(r.rank * 100 + i);
    for (uint32_t k = 0; k < r.size; k++)
        for (uint64_t i = 0; i < count; i++)
            want[k * count + i] = static_cast<float>(k * 100 + i);
    if (DeviceFloats(v, &sendBuf))
        return 1;
    ACL_OK(aclrtMalloc(&recvBuf, want.size() * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclAllGather(sendBuf, recvBuf, count, HCCL_DATA_TYPE_FP32, comm, stream));
    return Complete(r, comm, stream, "HcclAllGather", recvBuf, want, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("allgather", Sample);
}
