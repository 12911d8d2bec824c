// allreduce.cc - as HCCL's 01_allreduce example: every rank's buffer
// summed into every rank's (HcclAllReduce, HCCL_REDUCE_SUM).
#include "sample.h"

static float In(uint32_t rank, uint64_t i)
{
    return static_cast<float>(rank * 10 + i % 7);
}

static int Sample(const Rank &r)
{
    uint64_t count = 8 * r.size + 3;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(count), want(count, 0.0f);
    for (uint64_t i = 0; i < count; i++) {
        v[i] = In(r.rank, i);
        for (uint32_t k = 0; k < r.size; k++)
            want[i] += In(k, i);
    }
    if (DeviceFloats(v, &sendBuf))
        return 1;
    ACL_OK(aclrtMalloc(&recvBuf, count * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclAllReduce(sendBuf, recvBuf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                          comm, stream));
    return Complete(r, comm, stream, "HcclAllReduce", recvBuf, want, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("allreduce", Sample);
}
