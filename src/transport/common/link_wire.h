/* link_wire.h - the control channel's wire format, one for every transport
 * that keeps its own peers (ofi, verbs): one TCP socket per connected peer,
 * taken from the out-of-band service, opened with the handshake of every
 * Loom socket (net/handshake.h: the acceptor challenges, the connector's
 * hello is signed with the job key, the acceptor proves the key back or
 * refuses) and then carrying fixed-size frames. Encoders and decoders are
 * pure, no sockets (tests/fuzz/fuzz_link.c drives the decoders with any
 * bytes).
 *
 * The hello's payload, connector (lower rank) -> acceptor (48 bytes):
 *   0 from u32 | 4 to u32 | 8 comm_id u64 | 16 token [32]
 * the token being the one the acceptor put in its blob. Then both send
 * frames (40):
 *   0 magic u32 | 4 type u16 | 6 flags u16 | 8 comm_id u64
 *  16 w0 u64 | 24 w1 u64 | 32 w2 u64
 * Each transport has its own magics and mac context (struct
 * loom_link_proto), so that a socket handed to the wrong one is refused. */
#ifndef LOOM_LINK_WIRE_H
#define LOOM_LINK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_LINK_VERSION 2
#define LOOM_LINK_TOKEN_LEN 32
#define LOOM_LINK_HELLO_LEN 48
#define LOOM_LINK_FRAME_LEN 40

/* Frames after the handshake. BYE: leaving in order (w0: how many of the peer's messages arrived, where the transport
 * counts them); FAIL: failed in call w0 (seq), w1 = count, w2 = desc |
 * (result as u32) << 32, flags = culprit + 1 (0 none, ranks below 65535);
 * GOT: w0 as BYE's, sent just before a FAIL; PING: keepalive on an idle
 * link. */
enum loom_link_frame_type {
    LOOM_LINK_BYE = 2, /* 1 was the hello's answer: not a frame */
    LOOM_LINK_FAIL = 3,
    LOOM_LINK_GOT = 4,
    LOOM_LINK_PING = 5,
};

/* A transport's constants. */
struct loom_link_proto {
    uint32_t hello_magic;        /* "LFCH", "LVCH": the handshake's three
                                  * messages (their order tells them apart) */
    uint32_t frame_magic;        /* "LFCF", "LVCF"                          */
    const char *mac_ctx;         /* "loom-ofi-ctl", "loom-verbs-ctl"        */
};

struct loom_link_hello {
    uint32_t from, to;
    uint64_t comm_id;
    uint8_t token[LOOM_LINK_TOKEN_LEN];
};

struct loom_link_frame {
    uint16_t type, flags;
    uint64_t comm_id;
    uint64_t w0, w1, w2;
};

void loom_link_hello_encode(const struct loom_link_hello *h, uint8_t out[LOOM_LINK_HELLO_LEN]);
/* -1 when len is not LOOM_LINK_HELLO_LEN. */
int loom_link_hello_decode(const uint8_t *in, size_t len, struct loom_link_hello *h);
void loom_link_frame_encode(const struct loom_link_proto *p, const struct loom_link_frame *f,
                            uint8_t out[LOOM_LINK_FRAME_LEN]);
/* -1 when the magic is wrong or the type unknown. */
int loom_link_frame_decode(const struct loom_link_proto *p, const uint8_t in[LOOM_LINK_FRAME_LEN],
                           struct loom_link_frame *f);
/* Fill buf with a fresh token (getrandom; without an entropy source,
 * bytes still unique per process and call). */
void loom_link_token(void *buf, size_t len);

#endif
