// alltoall.cc - as HCCL's 06_alltoall example: block j of every rank's
// buffer to rank j, received in rank order (HcclAlltoAll).
#include "sample.h"

static float Elem(uint32_t from, uint32_t to, uint64_t i)
{
    return static_cast<float>(from * 100 + to * 10 + i);
}

static int Sample(const Rank &r)
{
    uint64_t blk = 2, total = blk * r.size;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(total), want(total);
    for (uint32_t j = 0; j < r.size; j++)
        for (uint64_t i = 0; i < blk; i++) {
            v[j * blk + i] = Elem(r.rank, j, i);
            want[j * blk + i] = Elem(j, r.rank, i);
        }
    if (DeviceFloats(v, &sendBuf))
        return 1;
    ACL_OK(aclrtMalloc(&recvBuf, total * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclAlltoAll(sendBuf, blk, HCCL_DATA_TYPE_FP32, recvBuf, blk, HCCL_DATA_TYPE_FP32,
                         comm, stream));
    return Complete(r, comm, stream, "HcclAlltoAll", recvBuf, want, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("alltoall", Sample);
}
