/* fuzz_frame.c - libFuzzer target: any 48+ bytes through the tcp frame
 * decoder and the receive path's header check (tcp_check.h). The expected
 * values come from the bytes after the header, and once from the decoded
 * frame itself, which must then pass. Round trip: encoding what was decoded
 * gives back the input. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "transport/tcp/tcp_check.h"
#include "transport/tcp/tcp_frame.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < LOOM_TCP_FRAME_LEN)
        return 0;
    struct loom_tcp_frame f;
    loom_tcp_frame_decode(data, &f);
    uint8_t again[LOOM_TCP_FRAME_LEN];
    loom_tcp_frame_encode(&f, again);
    fail_if(memcmp(again, data, LOOM_TCP_FRAME_LEN) != 0);

    /* Expectations from the rest of the input (zeros when short). */
    uint8_t tail[42] = {0};
    size_t n = size - LOOM_TCP_FRAME_LEN;
    memcpy(tail, data + LOOM_TCP_FRAME_LEN, n < sizeof tail ? n : sizeof tail);
    struct loom_tcp_expect e = {
        .comm_id = loom_get_le64(tail), .seq = loom_get_le64(tail + 8),
        .stripe = loom_get_le16(tail + 16), .len = loom_get_le64(tail + 18),
        .tag = loom_get_le32(tail + 26), .desc = loom_get_le32(tail + 30),
        .count = loom_get_le64(tail + 34), .sock_index = (int)(tail[0] & 63)};
    char why[300];
    why[0] = '\0';
    enum loom_tcp_check rc = loom_tcp_frame_check(&f, &e, why, sizeof why);
    fail_if(rc != LOOM_TCP_FRAME_OK && rc != LOOM_TCP_FRAME_BAD &&
            rc != LOOM_TCP_FRAME_CONTROL && rc != LOOM_TCP_FRAME_OTHER_CALL);
    fail_if((rc == LOOM_TCP_FRAME_BAD || rc == LOOM_TCP_FRAME_OTHER_CALL) &&
            (why[0] == '\0' || strlen(why) >= sizeof why));
    int loom = f.magic == LOOM_TCP_FRAME_MAGIC && f.version == LOOM_TCP_VERSION &&
               f.comm_id == e.comm_id;
    fail_if((rc == LOOM_TCP_FRAME_CONTROL) != (loom && f.stripe == LOOM_TCP_CONTROL_STRIPE));
    int match = loom && f.stripe != LOOM_TCP_CONTROL_STRIPE && f.seq == e.seq &&
                f.stripe == e.stripe && f.len == e.len && f.tag == e.tag &&
                f.desc == e.desc && f.count == e.count;
    fail_if((rc == LOOM_TCP_FRAME_OK) != match);

    /* The frame it describes is accepted when it is a Loom data frame. */
    struct loom_tcp_expect self = {.comm_id = f.comm_id, .seq = f.seq,
                                   .stripe = f.stripe, .len = f.len, .tag = f.tag,
                                   .desc = f.desc, .count = f.count, .sock_index = 0};
    rc = loom_tcp_frame_check(&f, &self, why, sizeof why);
    fail_if((rc == LOOM_TCP_FRAME_OK) !=
            (f.magic == LOOM_TCP_FRAME_MAGIC && f.version == LOOM_TCP_VERSION &&
             f.stripe != LOOM_TCP_CONTROL_STRIPE));
    /* A tiny message buffer truncates but never overflows. */
    char small[8];
    rc = loom_tcp_frame_check(&f, &e, small, sizeof small);
    if (rc == LOOM_TCP_FRAME_BAD || rc == LOOM_TCP_FRAME_OTHER_CALL)
        fail_if(memchr(small, '\0', sizeof small) == NULL);
    return 0;
}
