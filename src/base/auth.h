/* auth.h - the job key and its HMAC-SHA256 challenge-response (libcrypto).
 *
 * Every bootstrap and tcp connection runs the same mutual exchange:
 *   acceptor  -> connector: a fresh 32-byte challenge cA
 *   connector -> acceptor : hello || cC (its own fresh challenge) ||
 *                           mac(key, ctx, 'C', cA, cC, hello)
 *   acceptor  -> connector: mac(key, ctx, 'A', cC, cA, hello)
 * where mac = HMAC-SHA256(key, "loom-v1" || ctx || role || c1 || c2 || hello)
 * and ctx names the protocol ("boot", "tcp"), so a proof for one cannot be
 * replayed on the other. The hello carries the job identity (table hash or
 * communicator id), so a proof binds it too. The key itself never travels.
 * Without a key no mac is computed; both sides still say whether they have
 * one, so "key on one side only" is refused. */
#ifndef LOOM_AUTH_H
#define LOOM_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#define LOOM_AUTH_CHAL_LEN 32
#define LOOM_AUTH_MAC_LEN 32
#define LOOM_AUTH_KEY_MAX 1024

struct loom_auth_key {
    int set;                        /* 0: no key configured              */
    int world_readable;             /* the key file could be read by all */
    size_t len;
    uint8_t bytes[LOOM_AUTH_KEY_MAX];
};

/* The job key from LOOM_JOB_KEY, else from the file LOOM_JOB_KEY_FILE, else
 * none (key->set = 0, success). A file that is missing, unreadable, empty or
 * longer than LOOM_AUTH_KEY_MAX is an error naming its path. */
loom_result_t loom_auth_key_from_config(struct loom_auth_key *key, char *err,
                                        size_t errlen);
/* Read a key file: its bytes, one trailing "\n" (or "\r\n") dropped. A file
 * others may read is used with a warning (key->world_readable = 1). */
loom_result_t loom_auth_key_from_file(const char *path, struct loom_auth_key *key,
                                      char *err, size_t errlen);
/* Set the key from bytes (len 0: no key). len must be <= LOOM_AUTH_KEY_MAX. */
loom_result_t loom_auth_key_set(struct loom_auth_key *key, const void *bytes,
                                size_t len);
/* Wipe the key's bytes. */
void loom_auth_key_clear(struct loom_auth_key *key);

/* A fresh random challenge (getrandom). */
loom_result_t loom_auth_challenge(uint8_t chal[LOOM_AUTH_CHAL_LEN]);

/* out = HMAC-SHA256(key, data). */
loom_result_t loom_auth_hmac_sha256(const void *key, size_t keylen,
                                    const void *data, size_t len,
                                    uint8_t out[LOOM_AUTH_MAC_LEN]);

/* The proof described above; role is 'C' (connector) or 'A' (acceptor). */
loom_result_t loom_auth_mac(const struct loom_auth_key *key, const char *ctx,
                            char role, const uint8_t c1[LOOM_AUTH_CHAL_LEN],
                            const uint8_t c2[LOOM_AUTH_CHAL_LEN],
                            const void *hello, size_t hello_len,
                            uint8_t out[LOOM_AUTH_MAC_LEN]);

/* 1 when the proof matches the one expected (constant time), else 0. */
int loom_auth_verify(const struct loom_auth_key *key, const char *ctx, char role,
                     const uint8_t c1[LOOM_AUTH_CHAL_LEN],
                     const uint8_t c2[LOOM_AUTH_CHAL_LEN], const void *hello,
                     size_t hello_len, const uint8_t mac[LOOM_AUTH_MAC_LEN]);

/* The challenge and the acceptor's proof travel in one 40-byte message:
 *   magic u32 | version u16 | flags u16 | 32 bytes (challenge or mac)
 * (little-endian; each protocol has its own magics and flag bits). */
#define LOOM_AUTH_MSG_LEN (8 + LOOM_AUTH_CHAL_LEN)
#define LOOM_AUTH_FLAG_KEYED 0x1u   /* the sender has a job key */

struct loom_auth_msg {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint8_t body[LOOM_AUTH_CHAL_LEN];
};

void loom_auth_msg_encode(uint8_t out[LOOM_AUTH_MSG_LEN], uint32_t magic,
                          uint16_t version, uint16_t flags,
                          const uint8_t body[LOOM_AUTH_CHAL_LEN]);
void loom_auth_msg_decode(const uint8_t in[LOOM_AUTH_MSG_LEN],
                          struct loom_auth_msg *m);

/* Constant-time comparison: 1 when a and b hold the same len bytes. */
int loom_auth_equal(const void *a, const void *b, size_t len);

#endif
