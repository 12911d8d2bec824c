/* fuzz_verbs.c - libFuzzer target: any bytes through the verbs transport's
 * decoders (verbs_proto.h): the connection blob a peer sends through the
 * out-of-band service, the CTS entries a peer RDMA-writes into
 * this rank's memory, immediate data (the control channel's hellos and
 * frames: fuzz_link.c).
 * Invariants: a blob accepted is one the checks allow (and encodes back to
 * the same first LOOM_VERBS_BLOB_LEN bytes); a CTS entry accepted lies
 * inside its message; every refusal says why, within its buffer. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "transport/verbs/verbs_proto.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[200];
    if (size < 1)
        return 0;
    /* the first byte picks the expectations: nranks 1..16, self, comm id */
    int nranks = 1 + (data[0] & 15);
    int self = (data[0] >> 4) % nranks;
    uint64_t comm_id = size >= 16 ? loom_get_le64(data + 8) : 0;

    struct loom_verbs_blob b;
    why[0] = '\0';
    if (loom_verbs_blob_decode(data, size, comm_id, nranks, self, &b, why, sizeof why) == 0) {
        fail_if(b.comm_id != comm_id || b.to != (uint32_t)self || b.from >= (uint32_t)nranks ||
                b.from == b.to);
        fail_if(b.qpn == 0 || b.qpn > 0xffffff || b.psn > 0xffffff || b.mtu < 1 || b.mtu > 5);
        fail_if(b.cts_entries < 4 || b.cts_entries > LOOM_VERBS_CTS_MAX ||
                (b.cts_entries & (b.cts_entries - 1)));
        fail_if(size < LOOM_VERBS_BLOB_LEN || size > LOOM_VERBS_BLOB_MAX);
        uint8_t again[LOOM_VERBS_BLOB_MAX];
        fail_if(loom_verbs_blob_encode(&b, again, sizeof again) != LOOM_VERBS_BLOB_LEN);
        /* everything but the length field and reserved bytes comes back */
        fail_if(memcmp(again, data, 6) != 0);
        fail_if(memcmp(again + 8, data + 8, 86) != 0);
        fail_if(memcmp(again + 116, data + 116, 16) != 0);
        fail_if(memcmp(again + 144, data + 144, 4) != 0);
    } else {
        fail_if(why[0] == '\0' || strlen(why) >= sizeof why);
    }

    if (size >= LOOM_VERBS_CTS_LEN) {
        struct loom_verbs_cts c;
        loom_verbs_cts_decode(data, &c);
        uint8_t again[LOOM_VERBS_CTS_LEN];
        loom_verbs_cts_encode(&c, again);
        fail_if(memcmp(again, data, LOOM_VERBS_CTS_LEN) != 0);
        uint32_t want = size >= 68 ? loom_get_le32(data + 64) : c.cts;
        why[0] = '\0';
        if (loom_verbs_cts_check(&c, want, c.msg, why, sizeof why) == 0) {
            fail_if(c.offset > c.msg_len || c.len > c.msg_len - c.offset);
            fail_if(c.len == 0 && c.msg_len != 0);
            fail_if(c.cts != want);
        } else {
            fail_if(why[0] == '\0' || strlen(why) >= sizeof why);
        }
    }
    if (size >= 4) {
        enum loom_verbs_imm_kind k;
        uint16_t s;
        uint32_t imm = loom_get_le32(data);
        if (loom_verbs_imm_decode(imm, &k, &s) == 0)
            fail_if(loom_verbs_imm_encode(k, s) != imm);
    }
    return 0;
}
