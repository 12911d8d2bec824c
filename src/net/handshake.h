/* handshake.h - the signed hello every Loom socket opens with: one small
 * non-blocking state machine (connect side, accept side) with a deadline,
 * and a blocking helper. Each user (bootstrap, OOB service, tcp, the link
 * layer) supplies a protocol description: its magics and version, a mac
 * context, a payload bound, and a check of the payload on the accept side.
 *
 * Wire (little-endian), after whatever preamble routed the socket:
 *   challenge  acceptor -> connector, 40 bytes: chal_magic u32 | version u16 |
 *              flags u16 (KEYED) | cA (32)
 *   hello      connector -> acceptor, 12 + len + 64 bytes: hello_magic u32 |
 *              version u16 | flags u16 (KEYED) | len u32 | payload (len) |
 *              cC (32) | mac(key, ctx, 'C', cA, cC, head and payload)
 *   proof      acceptor -> connector, 40 bytes: proof_magic u32 | version u16
 *              | flags u16 (KEYED) | mac(key, ctx, 'A', cC, cA, head and
 *              payload) -- or a refusal: flags REFUSED, 32 zero bytes, then
 *              code u16 (-loom_result_t) | n u16 | n bytes of reason
 * Macs are zeros without a job key; both sides say whether they have one, so
 * "key on one side only" is refused (auth.h). The acceptor checks the key
 * before anything the payload claims. The messages are decoded by the pure
 * functions at the end (fuzzed); nothing else parses them. */
#ifndef LOOM_NET_HANDSHAKE_H
#define LOOM_NET_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"
#include "auth.h"

#define LOOM_HS_HEAD_LEN 12
#define LOOM_HS_TRAILER_LEN (LOOM_AUTH_CHAL_LEN + LOOM_AUTH_MAC_LEN)
#define LOOM_HS_REASON_MAX 200
#define LOOM_HS_FLAG_REFUSED 0x2u  /* proof: the hello was refused       */
#define LOOM_HS_PAYLOAD_MAX 65536u /* ceiling of any protocol's bound    */

/* What a payload check returns (negative: a loom_result_t, the hello is
 * refused and the connector told why). */
#define LOOM_HS_ACCEPT 0
#define LOOM_HS_HOLD                                                                               \
    1 /* not yet decidable: step again later (e.g. the job
                          * id is not known yet); the deadline still runs  */
#define LOOM_HS_DROP                                                                               \
    2 /* close without an answer (the connector sees EOF
                          * and may retry)                                 */

struct loom_hs_proto {
    const char *name; /* "oob", "tcp", ...: in messages          */
    const char *ctx;  /* mac context, one per protocol           */
    uint32_t chal_magic, hello_magic, proof_magic;
    uint16_t version;
    uint32_t payload_max; /* <= LOOM_HS_PAYLOAD_MAX                  */
    /* Accept side, after the key checked out: one of the results above;
     * why (whylen bytes) says what was wrong. NULL: accept any payload. */
    int (*check)(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen);
};

/* A protocol description, in struct loom_hs_proto's order: each user's
 * table is then one line of its constants. */
#define LOOM_HS_PROTO(name_, ctx_, chal_, hello_, proof_, version_, max_, check_)                  \
    {                                                                                              \
        .name = (name_), .ctx = (ctx_), .chal_magic = (chal_), .hello_magic = (hello_),            \
        .proof_magic = (proof_), .version = (version_), .payload_max = (max_), .check = (check_)   \
    }

/* Results of a step (negative: a loom_result_t, hs->err says what). */
#define LOOM_HS_AGAIN                                                                              \
    0 /* wait for hs->events on the socket (0: for the
                          * user, after LOOM_HS_HOLD), or the deadline     */
#define LOOM_HS_DONE 1

struct loom_hs {
    const struct loom_hs_proto *proto;
    const struct loom_auth_key *key;
    void *arg;  /* for proto->check                        */
    int fd;     /* non-blocking; never closed here         */
    int accept; /* 1: accept side                          */
    int state;
    int code;        /* the failure, once failed                */
    short events;    /* what the next step waits for            */
    double deadline; /* loom_now() seconds                      */
    double started;
    uint8_t ca[LOOM_AUTH_CHAL_LEN], cc[LOOM_AUTH_CHAL_LEN];
    uint8_t *msg; /* the hello: head, payload, trailer       */
    size_t msg_len;
    uint8_t io[40 + 4 + LOOM_HS_REASON_MAX];
    size_t io_len;         /* bytes wanted in io (or to send)         */
    size_t done;           /* of io_len, or of msg_len               */
    size_t received, sent; /* bytes read from and sent to the peer    */
    char peer[96];
    char err[512];
    size_t why_off; /* err past "<name> handshake with <peer>: " */
};

/* struct loom_hs holds no pointer into itself: it may be moved (copied)
 * between steps. Start a handshake on a connected non-blocking socket. peer names the other
 * side in errors ("rank 3 (10.0.0.2:4000)"); NULL: its address. The connect
 * side copies payload (len <= proto->payload_max). timeout: seconds from now.
 * Errors: LOOM_ERROR_INVALID_ARGUMENT, LOOM_ERROR_NO_MEMORY,
 * LOOM_ERROR_SYSTEM (no randomness), each with hs->err set. */
loom_result_t loom_hs_connect(struct loom_hs *hs, const struct loom_hs_proto *proto,
                              const struct loom_auth_key *key, int fd, const char *peer,
                              const void *payload, size_t len, double timeout);
loom_result_t loom_hs_accept(struct loom_hs *hs, const struct loom_hs_proto *proto,
                             const struct loom_auth_key *key, int fd, const char *peer, void *arg,
                             double timeout);

/* Move as far as the socket allows: LOOM_HS_DONE, LOOM_HS_AGAIN (poll for
 * hs->events, at most until hs->deadline), or an error naming the peer and
 * what was wrong: LOOM_ERROR_PROTOCOL (not a Loom socket, another protocol
 * or version, malformed), LOOM_ERROR_MISMATCH (job key), LOOM_ERROR_TIMEOUT,
 * LOOM_ERROR_REMOTE (closed), LOOM_ERROR_SYSTEM, or the code of a refusal
 * (either side). Past the deadline any step fails with LOOM_ERROR_TIMEOUT. */
int loom_hs_step(struct loom_hs *hs);

/* Step until done, an error, the deadline, or wake_fd (>= 0) readable
 * (LOOM_ERROR_ABORTED). */
loom_result_t loom_hs_run(struct loom_hs *hs, int wake_fd);

/* Once failed: hs->err without the words naming the protocol and the peer
 * (the refusal's reason itself, when the other side refused), for a user
 * whose message names the peer first. */
const char *loom_hs_why(const struct loom_hs *hs);
/* The same as a predicate for "<peer> ...": a job key that does not match
 * (connect side) says so and how to fix it; else "failed the <name>
 * handshake: why". Returns buf. */
const char *loom_hs_blame(const struct loom_hs *hs, char *buf, size_t len);
/* Connect side: the whole hello is sent (the acceptor may hold the socket
 * as its peer's already). */
int loom_hs_hello_sent(const struct loom_hs *hs);

/* Accept side, once done: the payload the connector sent. */
const uint8_t *loom_hs_payload(const struct loom_hs *hs, size_t *len);

/* Free what the handshake holds (not the socket). */
void loom_hs_free(struct loom_hs *hs);

/* ---- the pure decoders (no sockets; fuzzed) ---------------------------- */

/* Connector, on the challenge: *ca set on success. */
loom_result_t loom_hs_chal_check(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                 const uint8_t in[LOOM_AUTH_MSG_LEN],
                                 uint8_t ca[LOOM_AUTH_CHAL_LEN], char *why, size_t whylen);
/* Acceptor, on the hello's first LOOM_HS_HEAD_LEN bytes: magic, version,
 * length bound; *need is the whole hello's length. */
loom_result_t loom_hs_head_check(const struct loom_hs_proto *p, const uint8_t in[LOOM_HS_HEAD_LEN],
                                 size_t *need, char *why, size_t whylen);
/* Acceptor, on the whole hello (len = *need): the key flag and the mac. */
loom_result_t loom_hs_hello_verify(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                   const uint8_t ca[LOOM_AUTH_CHAL_LEN], const uint8_t *msg,
                                   size_t len, char *why, size_t whylen);
/* Connector, on the proof for the hello it sent (msg, len): success, a
 * failed check, or LOOM_HS_REFUSED when it is a refusal (the reason
 * follows: loom_hs_reason_decode). */
#define LOOM_HS_REFUSED 1
int loom_hs_proof_check(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                        const uint8_t in[LOOM_AUTH_MSG_LEN], const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                        const uint8_t cc[LOOM_AUTH_CHAL_LEN], const uint8_t *msg, size_t len,
                        char *why, size_t whylen);
/* A refusal's 4-byte head: *n, the reason's length; its code (a
 * loom_result_t, LOOM_ERROR_PROTOCOL when out of range) is returned. */
loom_result_t loom_hs_reason_head(const uint8_t in[4], size_t *n);
/* The reason's n bytes as printable text (others as '?'). */
void loom_hs_reason_text(const uint8_t *in, size_t n, char *out, size_t outlen);

/* Encoders (the state machine's; tests and fuzz use them too). */
void loom_hs_chal_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                       const uint8_t ca[LOOM_AUTH_CHAL_LEN], uint8_t out[LOOM_AUTH_MSG_LEN]);
/* The whole hello into out (LOOM_HS_HEAD_LEN + len + LOOM_HS_TRAILER_LEN). */
loom_result_t loom_hs_hello_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                 const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                                 const uint8_t cc[LOOM_AUTH_CHAL_LEN], const void *payload,
                                 size_t len, uint8_t *out);
loom_result_t loom_hs_proof_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                 const uint8_t ca[LOOM_AUTH_CHAL_LEN], const uint8_t *msg,
                                 size_t len, uint8_t out[LOOM_AUTH_MSG_LEN]);
/* A refusal (proof, code, reason) into out; returns its length. */
size_t loom_hs_refusal_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                            loom_result_t code, const char *reason, uint8_t *out);

#endif
