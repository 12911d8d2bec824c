// batch_send_recv_ring.cc - as HCCL's 02_batch_send_recv_ring example:
// every rank sends to the next and receives from the previous in one
// HcclBatchSendRecv of two HcclSendRecvItem.
#include "sample.h"

static int Sample(const Rank &r)
{
    uint64_t count = r.size;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(count);
    for (uint64_t i = 0; i < count; i++)
        v[i] = static_cast<float>(r.rank * 1000 + i);
    if (DeviceFloats(v, &sendBuf))
        return 1;
    ACL_OK(aclrtMalloc(&recvBuf, count * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    uint32_t next = (r.rank + 1) % r.size, prev = (r.rank + r.size - 1) % r.size;
    HcclSendRecvItem items[2];
    items[0] = HcclSendRecvItem{HCCL_SEND, sendBuf, count, HCCL_DATA_TYPE_FP32, next};
    items[1] = HcclSendRecvItem{HCCL_RECV, recvBuf, count, HCCL_DATA_TYPE_FP32, prev};
    HCCL_OK(HcclBatchSendRecv(items, 2, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    std::vector<float> want(count);
    for (uint64_t i = 0; i < count; i++)
        want[i] = static_cast<float>(prev * 1000 + i);
    if (Expect(r, "HcclBatchSendRecv", recvBuf, want))
        return 1;
    return Finish(r, comm, stream, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("batch_send_recv_ring", Sample);
}
