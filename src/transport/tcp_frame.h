/* tcp_frame.h - the tcp transport's wire headers (little-endian, fixed size).
 *
 * Frame (one per stripe, 48 bytes):
 *   0 magic u32 | 4 version u16 | 6 stripe u16 | 8 tag u32 | 12 desc u32
 *  16 comm_id u64 | 24 seq u64 (message number on this peer link) | 32 len u64
 *  40 count u64
 * tag, desc and count are the collective call's fingerprint (its sequence
 * number, kind/dtype/op/root, count): a receive checks them against its own
 * call, so two ranks in different calls are told so, by name.
 * A control frame has stripe 0xffff and no payload: tag is its type (BYE:
 * the sender is leaving in order; ABORT: it failed, desc = its result,
 * seq = its call's sequence number, count = the rank it blames + 1, 0 none).
 * Nothing follows a control frame on that socket.
 * Hello (first bytes of every connection, 32 bytes):
 *   0 magic u32 | 4 version u16 | 6 sock u16 | 8 from u32 | 12 to u32
 *  16 comm_id u64 | 24 nonce u64 (the acceptor's endpoint nonce) */
#ifndef LOOM_TCP_FRAME_H
#define LOOM_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_TCP_FRAME_MAGIC 0x4d4f4f4cu /* "LOOM" */
#define LOOM_TCP_HELLO_MAGIC 0x4f4c4548u /* "HELO" */
#define LOOM_TCP_VERSION 2
#define LOOM_TCP_FRAME_LEN 48
#define LOOM_TCP_CONTROL_STRIPE 0xffffu
#define LOOM_TCP_CTL_BYE 1u
#define LOOM_TCP_CTL_ABORT 2u
#define LOOM_TCP_HELLO_LEN 32

struct loom_tcp_frame {
    uint32_t magic;
    uint16_t version;
    uint16_t stripe;
    uint32_t tag;
    uint32_t desc;
    uint64_t comm_id;
    uint64_t seq;
    uint64_t len;
    uint64_t count;
};

struct loom_tcp_hello {
    uint32_t magic;
    uint16_t version;
    uint16_t sock;
    uint32_t from;
    uint32_t to;
    uint64_t comm_id;
    uint64_t nonce;
};

void loom_tcp_frame_encode(const struct loom_tcp_frame *f, uint8_t *out);
void loom_tcp_frame_decode(const uint8_t *in, struct loom_tcp_frame *f);
void loom_tcp_hello_encode(const struct loom_tcp_hello *h, uint8_t *out);
void loom_tcp_hello_decode(const uint8_t *in, struct loom_tcp_hello *h);

#endif
