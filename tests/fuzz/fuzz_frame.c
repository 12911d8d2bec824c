/* fuzz_frame.c - libFuzzer target: any 40+ bytes through the tcp frame
 * decoder and the receive path's header check (tcp_check.h). The expected
 * values come from the bytes after the header, and once from the decoded
 * frame itself, which must then pass. Round trip: encoding what was decoded
 * gives back the input (the reserved word aside). */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net.h"
#include "transport/tcp_check.h"
#include "transport/tcp_frame.h"

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
    fail_if(memcmp(again, data, 12) != 0 ||
            memcmp(again + 16, data + 16, LOOM_TCP_FRAME_LEN - 16) != 0);
    fail_if(loom_get_le32(again + 12) != 0);

    /* Expectations from the rest of the input (zeros when short). */
    uint8_t tail[30] = {0};
    size_t n = size - LOOM_TCP_FRAME_LEN;
    memcpy(tail, data + LOOM_TCP_FRAME_LEN, n < sizeof tail ? n : sizeof tail);
    struct loom_tcp_expect e = {
        .comm_id = loom_get_le64(tail), .seq = loom_get_le64(tail + 8),
        .stripe = loom_get_le16(tail + 16), .len = loom_get_le64(tail + 18),
        .tag = loom_get_le32(tail + 26), .sock_index = (int)(tail[0] & 63)};
    char why[300];
    why[0] = '\0';
    int rc = loom_tcp_frame_check(&f, &e, why, sizeof why);
    fail_if(rc != 0 && rc != -1);
    fail_if(rc == -1 && (why[0] == '\0' || strlen(why) >= sizeof why));
    int match = f.magic == LOOM_TCP_FRAME_MAGIC && f.version == LOOM_TCP_VERSION &&
                f.comm_id == e.comm_id && f.seq == e.seq &&
                f.stripe == e.stripe && f.len == e.len && f.tag == e.tag;
    fail_if((rc == 0) != match);

    /* The frame it describes is accepted when it is a Loom frame. */
    struct loom_tcp_expect self = {.comm_id = f.comm_id, .seq = f.seq,
                                   .stripe = f.stripe, .len = f.len,
                                   .tag = f.tag, .sock_index = 0};
    rc = loom_tcp_frame_check(&f, &self, why, sizeof why);
    fail_if((rc == 0) != (f.magic == LOOM_TCP_FRAME_MAGIC &&
                          f.version == LOOM_TCP_VERSION));
    /* A tiny message buffer truncates but never overflows. */
    char small[8];
    if (loom_tcp_frame_check(&f, &e, small, sizeof small) != 0)
        fail_if(memchr(small, '\0', sizeof small) == NULL);
    return 0;
}
