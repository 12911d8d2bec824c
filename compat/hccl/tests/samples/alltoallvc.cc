// alltoallvc.cc - as HCCL's 08_alltoallvc example, with uneven blocks:
// every rank passes the whole count matrix (row i: what rank i sends each
// rank; zeros included), blocks packed in rank order (HcclAlltoAllVC).
#include "sample.h"

static uint64_t Count(uint32_t from, uint32_t to)
{
    return (2 * from + to + 1) % 4;
}

static float Elem(uint32_t from, uint32_t to, uint64_t i)
{
    return static_cast<float>(from * 100 + to * 10 + i);
}

static int Sample(const Rank &r)
{
    uint32_t n = r.size;
    std::vector<uint64_t> matrix(static_cast<size_t>(n) * n);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++)
            matrix[i * n + j] = Count(i, j);
    std::vector<float> v, want;
    for (uint32_t j = 0; j < n; j++) {
        for (uint64_t i = 0; i < Count(r.rank, j); i++)
            v.push_back(Elem(r.rank, j, i));
        for (uint64_t i = 0; i < Count(j, r.rank); i++)
            want.push_back(Elem(j, r.rank, i));
    }
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    if (!v.empty() && DeviceFloats(v, &sendBuf))
        return 1;
    if (!want.empty())
        ACL_OK(aclrtMalloc(&recvBuf, want.size() * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclAlltoAllVC(sendBuf, matrix.data(), HCCL_DATA_TYPE_FP32, recvBuf,
                           HCCL_DATA_TYPE_FP32, comm, stream));
    return Complete(r, comm, stream, "HcclAlltoAllVC", recvBuf, want, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("alltoallvc", Sample);
}
