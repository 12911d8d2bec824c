/* oob_wire.h - the out-of-band service's wire format, encoded and decoded
 * by pure functions (no sockets; fuzzed). Little-endian.
 *
 * Every socket a peer opens to a rank's OOB port starts with a preamble:
 *   magic u32 | version u16 | flags u16 | namespace u64          (16 bytes)
 * "LOOB" continues with the handshake (net/handshake.h, protocol "oob",
 * version LOOM_OOB_HS_VERSION), whose payload is the hello below, then
 * messages; any other known kind (a
 * transport's socket, the bootstrap's) is handed to its owner as is.
 *   hello   job id u64 | from u32 | to u32 | nranks u32          (20 bytes)
 *   message kind u8 | pad u8[3] | tag u32 | len u32 | pad u32 | namespace u64
 *           (24 bytes), then len bytes; kind 1: a message, 2: a lookup of tag.
 * Sockets carry one direction: answers go back on a socket of their own. */
#ifndef LOOM_OOB_WIRE_H
#define LOOM_OOB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#define LOOM_OOB_MAGIC 0x424f4f4cu       /* "LOOB" */
#define LOOM_OOB_CHAL_MAGIC 0x48434f42u  /* "BOCH" */
#define LOOM_OOB_PROOF_MAGIC 0x52504f42u /* "BOPR" */
#define LOOM_OOB_HELLO_MAGIC 0x4c484f42u /* "BOHL" */
#define LOOM_OOB_VERSION 1               /* the preamble's                  */
#define LOOM_OOB_HS_VERSION 2            /* the handshake's (hello layout)  */
#define LOOM_OOB_HELLO_LEN 20
#define LOOM_OOB_HDR_LEN 24
#define LOOM_OOB_KIND_MSG 1
#define LOOM_OOB_KIND_GET 2

struct loom_oob_pre {
    uint32_t kind; /* LOOM_OOB_MAGIC or LOOM_OOB_KIND_*   */
    uint16_t version;
    uint16_t flags;
    uint64_t ns;
};

struct loom_oob_hello {
    uint64_t job_id;
    uint32_t from, to, nranks;
};

struct loom_oob_hdr {
    uint8_t kind; /* LOOM_OOB_KIND_MSG or _GET           */
    uint32_t tag;
    uint32_t len;
    uint64_t ns;
};

void loom_oob_pre_encode(const struct loom_oob_pre *p, uint8_t *out);
/* A preamble of this version naming "LOOB" or a known socket kind; else
 * LOOM_ERROR_PROTOCOL, why saying what it was. */
loom_result_t loom_oob_pre_decode(const uint8_t *in, struct loom_oob_pre *p, char *why,
                                  size_t whylen);

void loom_oob_hello_encode(const struct loom_oob_hello *h, uint8_t *out);
/* len must be LOOM_OOB_HELLO_LEN and from < nranks; else LOOM_ERROR_PROTOCOL. */
loom_result_t loom_oob_hello_decode(const uint8_t *in, size_t len, struct loom_oob_hello *h,
                                    char *why, size_t whylen);
/* Whether a decoded hello is for this rank of this job: LOOM_HS_ACCEPT,
 * LOOM_HS_HOLD while job_id is 0 (not known yet), or LOOM_HS_DROP (why). */
int loom_oob_hello_match(const struct loom_oob_hello *h, int rank, int nranks, uint64_t job_id,
                         char *why, size_t whylen);

void loom_oob_hdr_encode(const struct loom_oob_hdr *h, uint8_t *out);
/* A known kind and len <= LOOM_OOB_MSG_MAX; else LOOM_ERROR_PROTOCOL. */
loom_result_t loom_oob_hdr_decode(const uint8_t *in, struct loom_oob_hdr *h, char *why,
                                  size_t whylen);

#endif
