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
 * the sender is leaving in order; ABORT: it failed in the call whose
 * fingerprint is seq/desc/count, len = its result (high 32 bits) and the
 * rank it blames + 1 (low 32 bits, 0 none)). Nothing follows a control frame
 * on that socket.
 * Hello (first bytes of every connection, 32 bytes):
 *   0 magic u32 | 4 version u16 | 6 sock u16 | 8 from u32 | 12 to u32
 *  16 comm_id u64 | 24 nonce u64 (the acceptor's endpoint nonce)
 *
 * Connection setup with the job key (auth.h), in order:
 *   acceptor -> connector: challenge, an auth message, magic "TCHL", flags
 *       LOOM_AUTH_FLAG_KEYED when it has a key, its challenge cA
 *   connector -> acceptor: hello (32) | auth trailer (68): flags u32 | cC (32)
 *       | mac(key, "tcp", 'C', cA, cC, hello) (32; zeros without a key)
 *   acceptor -> connector: proof, an auth message, magic "TPRF", flags KEYED
 *       (and LOOM_TCP_PROOF_REFUSED when it rejects the key, then closes),
 *       mac(key, "tcp", 'A', cC, cA, hello) (zeros without a key)
 * The hello is checked (loom_tcp_hello_check) only as a whole, key first. */
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

/* ---- connection authentication (the hello and what surrounds it) ---- */
struct loom_auth_key;

#define LOOM_TCP_CHAL_MAGIC 0x4c484354u  /* "TCHL" */
#define LOOM_TCP_PROOF_MAGIC 0x46525054u /* "TPRF" */
#define LOOM_TCP_AUTH_VERSION 1
#define LOOM_TCP_AUTH_LEN 68             /* flags u32 | cC 32 | mac 32     */
#define LOOM_TCP_SIGNED_HELLO_LEN (LOOM_TCP_HELLO_LEN + LOOM_TCP_AUTH_LEN)
#define LOOM_TCP_PROOF_REFUSED 0x2u      /* proof flag: key rejected        */
#define LOOM_TCP_AUTH_CTX "tcp"

/* Check results. */
#define LOOM_TCP_HELLO_OK 0
#define LOOM_TCP_HELLO_DROP (-1)     /* not for us: wrong magic, job, rank */
#define LOOM_TCP_HELLO_BAD_KEY (-2)  /* the job key does not match          */

/* What the acceptor expects of a hello. */
struct loom_tcp_hello_expect {
    int rank, nranks, nsocks;
    uint64_t comm_id;
    uint64_t nonce;                   /* the acceptor's endpoint nonce     */
    const struct loom_auth_key *key;
    const uint8_t *ca;                /* the challenge sent (32 bytes)     */
};

/* Acceptor: check a signed hello (LOOM_TCP_SIGNED_HELLO_LEN bytes): magic,
 * version, key (flag and mac), communicator, addressee and nonce, sender
 * rank and socket index. *h is the decoded hello; why says what was wrong. */
int loom_tcp_hello_check(const struct loom_tcp_hello_expect *e,
                         const uint8_t *msg, struct loom_tcp_hello *h, char *why,
                         size_t whylen);
/* Connector: the trailer after the hello (32 bytes) it sends. */
int loom_tcp_hello_sign(const struct loom_auth_key *key, const uint8_t *ca,
                        const uint8_t *cc, const uint8_t *hello,
                        uint8_t *trailer);
/* Connector: check the acceptor's challenge; *ca set on LOOM_TCP_HELLO_OK. */
int loom_tcp_chal_check(const uint8_t *in, uint8_t *ca, char *why,
                        size_t whylen);
/* Acceptor: the proof (or, refused != 0, the refusal) for a signed hello. */
int loom_tcp_proof_make(const struct loom_auth_key *key, int refused,
                        const uint8_t *signed_hello, const uint8_t *ca,
                        uint8_t *out);
/* Connector: check the acceptor's proof for the hello it sent. */
int loom_tcp_proof_check(const struct loom_auth_key *key, const uint8_t *in,
                         const uint8_t *ca, const uint8_t *cc,
                         const uint8_t *hello, char *why, size_t whylen);

#endif
