// reduce_scatter.cc - as HCCL's 04_reduce_scatter example: the sum of
// every rank's buffer, block k to rank k (HcclReduceScatter).
#include "sample.h"

static float In(uint32_t rank, uint64_t i)
{
    return static_cast<float>(rank + 2 * i);
}

static int Sample(const Rank &r)
{
    uint64_t recvCount = 5, total = recvCount * r.size;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(total), want(recvCount, 0.0f);
    for (uint64_t i = 0; i < total; i++)
        v[i] = In(r.rank, i);
    for (uint64_t i = 0; i < recvCount; i++)
        for (uint32_t k = 0; k < r.size; k++)
            want[i] += In(k, r.rank * recvCount + i);
    if (DeviceFloats(v, &sendBuf))
        return 1;
    ACL_OK(aclrtMalloc(&recvBuf, recvCount * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclReduceScatter(sendBuf, recvBuf, recvCount, HCCL_DATA_TYPE_FP32,
                              HCCL_REDUCE_SUM, comm, stream));
    return Complete(r, comm, stream, "HcclReduceScatter", recvBuf, want, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("reduce_scatter", Sample);
}
