// alltoallv.cc - as HCCL's 07_alltoallv example, with uneven blocks:
// rank i sends rank j (i + j) % 3 elements (zeros included), at
// displacements of its choosing (HcclAlltoAllV).
#include "sample.h"

static uint64_t Count(uint32_t from, uint32_t to)
{
    return (from + to) % 3;
}

static float Elem(uint32_t from, uint32_t to, uint64_t i)
{
    return static_cast<float>(from * 100 + to * 10 + i);
}

static int Sample(const Rank &r)
{
    uint32_t n = r.size;
    std::vector<uint64_t> sendCounts(n), sdispls(n), recvCounts(n), rdispls(n);
    uint64_t stotal = 0, rtotal = 0;
    // the send blocks lie in reverse rank order with a gap of one, to show
    // the displacements are used
    for (uint32_t j = n; j-- > 0;) {
        sendCounts[j] = Count(r.rank, j);
        sdispls[j] = stotal;
        stotal += sendCounts[j] + 1;
    }
    for (uint32_t j = 0; j < n; j++) {
        recvCounts[j] = Count(j, r.rank);
        rdispls[j] = rtotal;
        rtotal += recvCounts[j];
    }
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(stotal, -1.0f), want(rtotal);
    for (uint32_t j = 0; j < n; j++) {
        for (uint64_t i = 0; i < sendCounts[j]; i++)
            v[sdispls[j] + i] = Elem(r.rank, j, i);
        for (uint64_t i = 0; i < recvCounts[j]; i++)
            want[rdispls[j] + i] = Elem(j, r.rank, i);
    }
    if (DeviceFloats(v, &sendBuf))
        return 1;
    if (rtotal)
        ACL_OK(aclrtMalloc(&recvBuf, rtotal * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclAlltoAllV(sendBuf, sendCounts.data(), sdispls.data(), HCCL_DATA_TYPE_FP32,
                          recvBuf, recvCounts.data(), rdispls.data(), HCCL_DATA_TYPE_FP32,
                          comm, stream));
    return Complete(r, comm, stream, "HcclAlltoAllV", recvBuf, want, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("alltoallv", Sample);
}
