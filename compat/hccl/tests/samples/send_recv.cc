// send_recv.cc - as HCCL's 01_send_recv example: each even rank sends its
// buffer to the next rank, which receives it (HcclSend / HcclRecv on a
// stream).
#include "sample.h"

static int Sample(const Rank &r)
{
    uint64_t count = r.size;
    void *sendBuf = nullptr, *recvBuf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    bool sender = r.rank % 2 == 0;
    if (sender && r.rank + 1 >= r.size) // an odd job's last rank has no partner
        sender = false;
    else if (sender) {
        std::vector<float> v(count);
        for (uint64_t i = 0; i < count; i++)
            v[i] = static_cast<float>(r.rank * 1000 + i);
        if (DeviceFloats(v, &sendBuf))
            return 1;
        HCCL_OK(HcclSend(sendBuf, count, HCCL_DATA_TYPE_FP32, r.rank + 1, comm, stream));
    } else {
        ACL_OK(aclrtMalloc(&recvBuf, count * sizeof(float), ACL_MEM_MALLOC_HUGE_ONLY));
        HCCL_OK(HcclRecv(recvBuf, count, HCCL_DATA_TYPE_FP32, r.rank - 1, comm, stream));
    }
    ACL_OK(aclrtSynchronizeStream(stream));
    if (recvBuf) {
        std::vector<float> want(count);
        for (uint64_t i = 0; i < count; i++)
            want[i] = static_cast<float>((r.rank - 1) * 1000 + i);
        if (Expect(r, "HcclRecv", recvBuf, want))
            return 1;
    }
    return Finish(r, comm, stream, {sendBuf, recvBuf});
}

int main()
{
    return RunSample("send_recv", Sample);
}
