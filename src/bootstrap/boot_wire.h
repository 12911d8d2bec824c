/* boot_wire.h - the bootstrap's wire messages and the pure checks applied to
 * what a peer sends (no sockets: the fuzz target drives them directly).
 *
 * Little-endian. A rank opens a socket to rank 0's port and sends the
 * out-of-band preamble of kind "BOST" (oob.h), which hands it to rank 0's
 * bootstrap; then, in order:
 *   the handshake of every Loom socket (net/handshake.h, protocol "boot",
 *          magics "BLCH", "BLHI", "BLPR"): rank 0 challenges, the rank's
 *          hello signed with the job key carries this payload (16 bytes +
 *          entry): rank u32 | nranks u32 | table_hash u64 | entry, the
 *          rank's out-of-band entry (its address and host hash, oob.h);
 *          rank 0 proves the key back, or refuses (a wrong key) with why
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

#include "net/handshake.h"

#define LOOM_BOOT_HELLO_MAGIC 0x49484c42u  /* "BLHI" */
#define LOOM_BOOT_ANSWER_MAGIC 0x4e414c42u /* "BLAN" */
#define LOOM_BOOT_CHAL_MAGIC 0x48434c42u   /* "BLCH" */
#define LOOM_BOOT_PROOF_MAGIC 0x52504c42u  /* "BLPR" */
#define LOOM_BOOT_VERSION 4
#define LOOM_BOOT_HELLO_LEN 16 /* the payload before the entry */
#define LOOM_BOOT_ENTRY_MAX 1024
#define LOOM_BOOT_ANSWER_LEN 8
#define LOOM_BOOT_CTX "boot"

/* The bootstrap's handshake (no payload check: rank 0 judges a hello once
 * the key is proved, and answers). */
extern const struct loom_hs_proto loom_boot_hs;

struct loom_boot_hello {
    uint32_t rank;
    uint32_t nranks;
    uint64_t table_hash;
    const uint8_t *entry; /* decode: into the payload               */
    size_t entry_len;
};

/* The payload (LOOM_BOOT_HELLO_LEN + h->entry_len bytes) into out. */
void loom_boot_hello_encode(const struct loom_boot_hello *h, uint8_t *out);
/* A payload of len bytes: 0 with *h set, or -1 (why) when it is shorter
 * than its fixed part. */
int loom_boot_hello_decode(const uint8_t *in, size_t len, struct loom_boot_hello *h, char *why,
                           size_t whylen);

#endif
