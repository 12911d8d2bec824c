/* boot_wire.h - the bootstrap's wire messages and the pure checks applied to
 * what a peer sends (no sockets: the fuzz target drives them directly).
 *
 * Little-endian. A rank opens a socket to rank 0's port and sends the
 * out-of-band preamble of kind "BOST" (oob.h), which hands it to rank 0's
 * bootstrap; then, in order:
 *   challenge (root -> rank, 40 bytes): auth message (auth.h), magic "BLCH",
 *          flags LOOM_AUTH_FLAG_KEYED when rank 0 has a job key, root's
 *          challenge cA
 *   hello  (rank -> root, 28 bytes + ep + 64): magic "BLHI" u32 | version u16
 *          | flags u16 | rank u32 | nranks u32 | table_hash u64 | ep_len u32 |
 *          ep | cC (32) | mac (32; zeros without a key). ep is the rank's
 *          out-of-band entry (its address and host hash, oob.h).
 *   proof  (root -> rank, 40 bytes): auth message, magic "BLPR", root's mac
 *          (zeros without a key) -- or, instead, a refusal answer
 *   answer (root -> rank, 8 bytes + body): magic "BLAN" u32 | version u16 |
 *          status u16; status 0: comm_id u64 | nranks u32 | parent u32 |
 *          the parent's entry (LOOM_OOB_ENTRY_LEN bytes): the rank then takes
 *          the job's table of entries from its parent in a tree (fan-out 8) over
 *          the ranks, through the out-of-band service, so that rank 0 sends
 *          O(N) bytes in all; otherwise refused, status = -loom_result_t:
 *          len u32 | message */
#ifndef LOOM_BOOT_WIRE_H
#define LOOM_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"

#define LOOM_BOOT_HELLO_MAGIC 0x49484c42u  /* "BLHI" */
#define LOOM_BOOT_ANSWER_MAGIC 0x4e414c42u /* "BLAN" */
#define LOOM_BOOT_CHAL_MAGIC 0x48434c42u   /* "BLCH" */
#define LOOM_BOOT_PROOF_MAGIC 0x52504c42u  /* "BLPR" */
#define LOOM_BOOT_VERSION 3
#define LOOM_BOOT_HELLO_LEN 28
#define LOOM_BOOT_AUTH_LEN (LOOM_AUTH_CHAL_LEN + LOOM_AUTH_MAC_LEN)
#define LOOM_BOOT_ANSWER_LEN 8
#define LOOM_BOOT_CTX "boot"

/* Results of the checks below. */
#define LOOM_BOOT_OK 0
#define LOOM_BOOT_DROP (-1)      /* not a Loom bootstrap message          */
#define LOOM_BOOT_TOO_LONG (-2)  /* a Loom hello with an oversized field  */
#define LOOM_BOOT_BAD_KEY (-3)   /* the job key does not match            */

struct loom_boot_hello {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint32_t rank;
    uint32_t nranks;
    uint64_t table_hash;
    uint32_t ep_len;
};

void loom_boot_hello_encode(const struct loom_boot_hello *h, uint8_t *out);
void loom_boot_hello_decode(const uint8_t *in, struct loom_boot_hello *h);

/* Root, on the first LOOM_BOOT_HELLO_LEN bytes: magic, version, and ep_len
 * <= ep_max. On LOOM_BOOT_OK *need is the full hello's length (fixed part,
 * endpoint and auth trailer); otherwise why says what was wrong. */
int loom_boot_hello_head_check(const uint8_t *in, size_t ep_max, size_t *need,
                               char *why, size_t whylen);

/* Root, on the whole hello (len = *need from the head check): the sender's
 * key flag matches ours and, with a key, its mac over (cA, its cC, the hello
 * and endpoint) is right. LOOM_BOOT_OK or LOOM_BOOT_BAD_KEY (why set). */
int loom_boot_hello_auth_check(const struct loom_auth_key *key,
                               const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                               const uint8_t *msg, size_t len, char *why,
                               size_t whylen);

/* Rank, on the root's challenge: LOOM_BOOT_OK with *ca set, else
 * LOOM_BOOT_DROP (why). */
int loom_boot_chal_check(const uint8_t in[LOOM_AUTH_MSG_LEN],
                         uint8_t ca[LOOM_AUTH_CHAL_LEN], char *why,
                         size_t whylen);

/* Rank, on the root's proof (msg: the hello it sent, endpoint included):
 * LOOM_BOOT_OK, LOOM_BOOT_DROP (not a proof) or LOOM_BOOT_BAD_KEY. */
int loom_boot_proof_check(const struct loom_auth_key *key,
                          const uint8_t in[LOOM_AUTH_MSG_LEN],
                          const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                          const uint8_t cc[LOOM_AUTH_CHAL_LEN],
                          const uint8_t *msg, size_t msglen, char *why,
                          size_t whylen);

/* Rank: the trailer after its hello (cC and mac; mac zeros without a key). */
loom_result_t loom_boot_hello_sign(const struct loom_auth_key *key,
                                   const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t cc[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t *msg, size_t msglen,
                                   uint8_t trailer[LOOM_BOOT_AUTH_LEN]);

/* Root: the proof message for an accepted hello. */
loom_result_t loom_boot_proof_make(const struct loom_auth_key *key,
                                   const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t cc[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t *msg, size_t msglen,
                                   uint8_t out[LOOM_AUTH_MSG_LEN]);

#endif
