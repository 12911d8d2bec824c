/* fuzz_link.c - libFuzzer target: any bytes through the control channel's
 * decoders (src/transport/common/link_wire.h), the hello an acceptor reads
 * from a socket the out-of-band service handed it and the frames that
 * follow, with either transport's magics. Invariants: what decodes encodes
 * back to the same bytes, a frame decoded has a known type, and the mac of
 * any hello is computed within its buffers. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/common/link_wire.h"

static const struct loom_link_proto protos[] = {
    {0x4843464cu, 0x4643464cu, "loom-ofi-ctl"},
    {0x4843564cu, 0x4643564cu, "loom-verbs-ctl"},
};

static void fail_if(int cond)
{
    if (cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const struct loom_link_proto *p = &protos[data[0] & 1];
    data++;
    size--;
    if (size >= LOOM_LINK_HELLO_LEN) {
        struct loom_link_hello h;
        if (loom_link_hello_decode(p, data, &h) == 0) {
            uint8_t again[LOOM_LINK_HELLO_LEN];
            loom_link_hello_encode(p, &h, again);
            fail_if(memcmp(again, data, LOOM_LINK_HELLO_LEN) != 0);
            uint8_t key[32], mac[32];
            memset(key, 0x5a, sizeof key);
            loom_link_mac(p, key, sizeof key, 'C', data, mac);
            loom_link_mac(p, NULL, 0, 'A', data, mac);
            for (int i = 0; i < 32; i++)
                fail_if(mac[i] != 0);
        }
    }
    if (size >= LOOM_LINK_FRAME_LEN) {
        struct loom_link_frame f;
        if (loom_link_frame_decode(p, data, &f) == 0) {
            fail_if(f.type < LOOM_LINK_ACK || f.type > LOOM_LINK_PING);
            uint8_t again[LOOM_LINK_FRAME_LEN];
            loom_link_frame_encode(p, &f, again);
            fail_if(memcmp(again, data, LOOM_LINK_FRAME_LEN) != 0);
        }
    }
    return 0;
}
