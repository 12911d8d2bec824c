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
 * the sender is leaving in order; ABORT: a failure notice, the link
 * layer's (common/link_notice.h), its FAIL frame's flags in desc and its
 * words w0, w1, w2 in seq, count, len). Nothing follows a control frame on
 * that socket.
 * Each socket opens with the signed handshake of every Loom socket
 * (net/handshake.h, protocol "tcp"): the acceptor (lower rank) challenges,
 * the connector's hello carries this payload (20 bytes), the acceptor
 * proves the job key back or refuses:
 *   0 from u32 | 4 to u32 | 8 comm_id u64 | 16 sock u32
 * The handshake checks the key; loom_tcp_hello_check the rest. */
#ifndef LOOM_TCP_FRAME_H
#define LOOM_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_TCP_FRAME_MAGIC 0x4d4f4f4cu /* "LOOM" */
#define LOOM_TCP_VERSION 2
#define LOOM_TCP_FRAME_LEN 48
#define LOOM_TCP_CONTROL_STRIPE 0xffffu
#define LOOM_TCP_CTL_BYE 1u
#define LOOM_TCP_CTL_ABORT 2u
#define LOOM_TCP_HELLO_LEN 20

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
    uint32_t from;
    uint32_t to;
    uint64_t comm_id;
    uint32_t sock;
};

void loom_tcp_frame_encode(const struct loom_tcp_frame *f, uint8_t *out);
void loom_tcp_frame_decode(const uint8_t *in, struct loom_tcp_frame *f);
void loom_tcp_hello_encode(const struct loom_tcp_hello *h, uint8_t *out);
void loom_tcp_hello_decode(const uint8_t *in, struct loom_tcp_hello *h);

/* The handshake's constants (magics "TCHL", "HELO", "TPRF"). */
#define LOOM_TCP_CHAL_MAGIC 0x4c484354u  /* "TCHL" */
#define LOOM_TCP_HELLO_MAGIC 0x4f4c4548u /* "HELO" */
#define LOOM_TCP_PROOF_MAGIC 0x46525054u /* "TPRF" */
#define LOOM_TCP_HS_VERSION 2
#define LOOM_TCP_HS_CTX "tcp"

/* What the acceptor expects of a hello. */
struct loom_tcp_hello_expect {
    int rank, nranks, nsocks;
    uint64_t comm_id;
};

/* Acceptor: check a hello's payload (len bytes): its length, communicator,
 * addressee, sender rank and socket index. LOOM_HS_ACCEPT with *h set, or
 * LOOM_HS_DROP (not for this rank: the connector may retry) with why. */
int loom_tcp_hello_check(const struct loom_tcp_hello_expect *e, const uint8_t *payload, size_t len,
                         struct loom_tcp_hello *h, char *why, size_t whylen);

#endif
