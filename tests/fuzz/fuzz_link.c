/* fuzz_link.c - libFuzzer target: any bytes through the control channel's
 * decoders (src/transport/common/link_wire.h), the hello's payload an
 * acceptor reads once the handshake checked the key (fuzz_net_handshake
 * fuzzes that) and the frames that follow, with either transport's magics.
 * Invariants: what decodes encodes back to the same bytes, a payload of
 * another length is refused, a frame decoded has a known type. */
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
    {
        size_t len = size < 64 ? size : 64;
        uint8_t *in = malloc(len ? len : 1);
        fail_if(!in);
        memcpy(in, data, len);
        struct loom_link_hello h;
        int rc = loom_link_hello_decode(in, len, &h);
        fail_if((rc == 0) != (len == LOOM_LINK_HELLO_LEN));
        if (rc == 0) {
            uint8_t again[LOOM_LINK_HELLO_LEN];
            loom_link_hello_encode(&h, again);
            fail_if(memcmp(again, in, LOOM_LINK_HELLO_LEN) != 0);
        }
        free(in);
    }
    if (size >= LOOM_LINK_FRAME_LEN) {
        struct loom_link_frame f;
        if (loom_link_frame_decode(p, data, &f) == 0) {
            fail_if(f.type < LOOM_LINK_BYE || f.type > LOOM_LINK_PING);
            uint8_t again[LOOM_LINK_FRAME_LEN];
            loom_link_frame_encode(p, &f, again);
            fail_if(memcmp(again, data, LOOM_LINK_FRAME_LEN) != 0);
        }
    }
    return 0;
}
