// broadcast.cc - as HCCL's 02_broadcast example: root 0's buffer to every
// rank, in place (HcclBroadcast).
#include "sample.h"

static int Sample(const Rank &r)
{
    uint64_t count = 4 * r.size;
    const uint32_t root = 0;
    void *buf = nullptr;
    ACL_OK(aclrtSetDevice(r.device));
    std::vector<float> v(count), want(count);
    for (uint64_t i = 0; i < count; i++) {
        v[i] = static_cast<float>(r.rank == root ? 500 + i : 0);
        want[i] = static_cast<float>(500 + i);
    }
    if (DeviceFloats(v, &buf))
        return 1;
    HcclComm comm;
    aclrtStream stream;
    if (Open(r, &comm, &stream))
        return 1;
    HCCL_OK(HcclBroadcast(buf, count, HCCL_DATA_TYPE_FP32, root, comm, stream));
    return Complete(r, comm, stream, "HcclBroadcast", buf, want, {buf});
}

int main()
{
    return RunSample("broadcast", Sample);
}
