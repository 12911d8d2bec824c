/* verbs_proto.h - the verbs transport's protocol as pure code: immediate
 * data, clear-to-send entries, the connection blob, control-channel frames,
 * sequence and credit arithmetic, work-request ids and error mapping.
 * Nothing here touches a device (or includes <infiniband/verbs.h>), so all
 * of it is unit-tested and fuzzed without one.
 *
 * The protocol, per direction of a pair of ranks (A sends to B):
 *  1. B posts a receive; for each chunk of it B picks where the bytes may
 *     land (its registered user buffer, or one of its pre-registered bounce
 *     slots) and RDMA-writes a clear-to-send entry (CTS, 64 bytes: address,
 *     rkey, length, message number, offset, and the receive's fingerprint)
 *     into A's CTS ring, ending with immediate data (kind CTS, CTS number).
 *     CTS entries are B's credits to A: at most the ring's size are out.
 *  2. A takes CTS entries in order (they arrive in order on the RC queue
 *     pair). When the fingerprint and length match its send, A RDMA-writes
 *     the chunk (from its registered buffer, or through one of its
 *     pre-registered staging slots) to the address given, the last write
 *     with immediate data (kind DATA, the same CTS number). When they do
 *     not match, A fails naming B's call and tells B so on the control
 *     channel (a FAIL frame naming B), so that B names A's call.
 *  3. B's completion for that immediate says the chunk is there (RC places
 *     a queue pair's writes in order, and a receive completion is
 *     generated only after its data is placed): B copies it out of a
 *     bounce slot if it used one, and advertises the next chunk.
 * The CTS number in immediate data is 16 bits of a 32-bit counter; with at
 * most LOOM_VERBS_CTS_MAX entries out, the receiver recovers the full
 * number from the one it expects (loom_verbs_seq_expand). */
#ifndef LOOM_VERBS_PROTO_H
#define LOOM_VERBS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* ---- immediate data (32 bits; travels big-endian as verbs wants) ---- */
enum loom_verbs_imm_kind {
    LOOM_VERBS_IMM_DATA = 1, /* the last write of a chunk landed        */
    LOOM_VERBS_IMM_CTS = 2,  /* a CTS entry landed in the sender's ring */
};
/* kind (2 bits) | reserved (14) | CTS number, low 16 bits */
uint32_t loom_verbs_imm_encode(enum loom_verbs_imm_kind kind, uint32_t cts_seq);
/* 0 and *kind, *seq16 when well formed; -1 otherwise. */
int loom_verbs_imm_decode(uint32_t imm, enum loom_verbs_imm_kind *kind, uint16_t *seq16);
/* The 32-bit number whose low 16 bits are seq16 nearest to expected
 * (modular): the full CTS number when fewer than 2^15 are out. */
uint32_t loom_verbs_seq_expand(uint32_t expected, uint16_t seq16);

/* ---- credits: counters that wrap ----
 * Both ends count CTS entries with 32-bit counters that wrap: `posted`
 * advertised, `done` consumed. Out = posted - done (mod 2^32); a new one
 * may go when out < limit. Ring index of number n: n % entries (entries a
 * power of two, so wrapping keeps it continuous). */
static inline uint32_t loom_verbs_credits_out(uint32_t posted, uint32_t done)
{
    return posted - done;
}
static inline int loom_verbs_credit_free(uint32_t posted, uint32_t done, uint32_t limit)
{
    return loom_verbs_credits_out(posted, done) < limit;
}
static inline uint32_t loom_verbs_ring_index(uint32_t n, uint32_t entries)
{
    return n & (entries - 1);
}
/* 1 when seq lies in [first, first + count) modulo 2^32. */
static inline int loom_verbs_seq_in_window(uint32_t seq, uint32_t first, uint32_t count)
{
    return seq - first < count;
}

/* ---- clear-to-send entry (64 bytes, little-endian) ----
 *  0 addr u64 | 8 rkey u32 | 12 len u32 | 16 msg u64 | 24 offset u64
 * 32 msg_len u64 | 40 count u64 | 48 tag u32 | 52 desc u32 | 56 cts u32
 * 60 flags u32 */
#define LOOM_VERBS_CTS_LEN 64
#define LOOM_VERBS_CTS_MAX 1024      /* ring entries at most (2^10 < 2^15)  */
#define LOOM_VERBS_CTS_F_BOUNCE 0x1u /* lands in a bounce slot: copied out  */
struct loom_verbs_cts {
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;     /* bytes of this chunk (> 0 unless msg_len 0) */
    uint64_t msg;     /* message number on this direction (1..)  */
    uint64_t offset;  /* of the chunk in the message             */
    uint64_t msg_len; /* the receive's length                    */
    uint64_t count;   /* the receive's fingerprint               */
    uint32_t tag, desc;
    uint32_t cts; /* this entry's CTS number (a self-check)  */
    uint32_t flags;
};
void loom_verbs_cts_encode(const struct loom_verbs_cts *c, uint8_t out[LOOM_VERBS_CTS_LEN]);
void loom_verbs_cts_decode(const uint8_t in[LOOM_VERBS_CTS_LEN], struct loom_verbs_cts *c);
/* Checks an entry against what the sender expects next: its CTS number,
 * message number, and the chunk lying inside the message. 0 ok; -1 with
 * why (protocol breach: the peer's state is corrupt). A fingerprint or
 * length that differs from the send is not checked here (that is a
 * mismatch, not a breach). */
int loom_verbs_cts_check(const struct loom_verbs_cts *c, uint32_t want_cts, uint64_t want_msg,
                         char *why, size_t len);

/* ---- connection blob (through the out-of-band service) ----
 * What a rank tells a peer to connect one RC queue pair to it. Versioned
 * and bounded; a decoder accepts version 1 (and longer blobs of later
 * minor versions, ignoring what follows what it knows).
 *   0 magic u32 "LVBL" | 4 version u16 | 6 len u16 | 8 comm_id u64
 *  16 from u32 | 20 to u32 | 24 nonce u64 | 32 token [32]
 *  64 qpn u32 | 68 psn u32 | 72 gid [16] | 88 lid u16 | 90 mtu u8
 *  91 port u8 | 92 gid_index u8 | 93 flags u8 | 94 reserved u16
 *  96 reserved [20] | 116 cts_entries u32
 * 120 cts_addr u64 | 128 cts_rkey u32 | 132 reserved u32 | 136 reserved u64
 * 144 max_msg u32 | 148 reserved u32 -> 152 bytes (reserved: zero) */
#define LOOM_VERBS_BLOB_MAGIC 0x4c42564cu /* "LVBL" */
#define LOOM_VERBS_BLOB_VERSION 1
#define LOOM_VERBS_BLOB_LEN 152
#define LOOM_VERBS_BLOB_MAX 512
#define LOOM_VERBS_TOKEN_LEN 32
#define LOOM_VERBS_BLOB_F_ETHERNET 0x1u /* RoCE: address by GID (GRH)    */
#define LOOM_VERBS_BLOB_F_REPLY 0x2u    /* the receiver answers a blob     */
struct loom_verbs_blob {
    uint64_t comm_id;
    uint32_t from, to;
    uint64_t nonce;                      /* the sender's instance                   */
    uint8_t token[LOOM_VERBS_TOKEN_LEN]; /* what the control hello must carry */
    uint32_t qpn, psn;
    uint8_t gid[16];
    uint16_t lid;
    uint8_t mtu; /* enum ibv_mtu: 1 (256) .. 5 (4096)       */
    uint8_t port, gid_index, flags;
    uint32_t cts_entries; /* power of two, 4..LOOM_VERBS_CTS_MAX     */
    uint64_t cts_addr;    /* the CTS ring peers write into           */
    uint32_t cts_rkey;
    uint32_t max_msg; /* largest single write the port takes     */
};
/* Writes LOOM_VERBS_BLOB_LEN bytes; returns that. */
size_t loom_verbs_blob_encode(const struct loom_verbs_blob *b, uint8_t *out, size_t cap);
/* 0 and *b when the bytes are a well-formed blob for comm_id, from a rank
 * below nranks, to `self`; -1 with why otherwise. */
int loom_verbs_blob_decode(const uint8_t *in, size_t len, uint64_t comm_id, int nranks, int self,
                           struct loom_verbs_blob *b, char *why, size_t whylen);

/* ---- control channel (one TCP socket per connected peer) ----
 * The format is common/link_wire.h's, with the verbs transport's magics and
 * mac context ("loom-verbs-ctl"). */
#define LOOM_VERBS_HELLO_MAGIC 0x4843564cu /* "LVCH" */
#define LOOM_VERBS_FRAME_MAGIC 0x4643564cu /* "LVCF" */

/* ---- work-request ids ----
 * peer (24 bits) | kind (4) | index (36): the completion finds its peer and
 * what it finished without a lookup. */
enum loom_verbs_wr_kind {
    LOOM_VERBS_WR_RECV = 1, /* a receive for immediate data            */
    LOOM_VERBS_WR_CTS = 2,  /* a CTS write (signalled now and then)    */
    LOOM_VERBS_WR_DATA = 3, /* a data write (index: its send slot)     */
};
static inline uint64_t loom_verbs_wrid(int peer, enum loom_verbs_wr_kind kind, uint64_t index)
{
    return (uint64_t)(uint32_t)peer << 40 | (uint64_t)kind << 36 | (index & ((1ull << 36) - 1));
}
static inline int loom_verbs_wrid_peer(uint64_t id)
{
    return (int)(id >> 40);
}
static inline enum loom_verbs_wr_kind loom_verbs_wrid_kind(uint64_t id)
{
    return (enum loom_verbs_wr_kind)((id >> 36) & 0xf);
}
static inline uint64_t loom_verbs_wrid_index(uint64_t id)
{
    return id & ((1ull << 36) - 1);
}

/* ---- chunking ----
 * How a receive of len bytes is cut: into pieces of at most `max` bytes
 * (the port's largest message for a registered buffer, the bounce slot size
 * otherwise); the number of chunks (at least 1, for a 0-byte message). */
static inline uint64_t loom_verbs_nchunks(uint64_t len, uint64_t max)
{
    return len == 0 ? 1 : (len + max - 1) / max;
}

/* ---- errors ----
 * A work completion's status as the transport reports it: the result, the
 * status's enum name ("IBV_WC_REM_ACCESS_ERR") and what it most likely
 * means here. status is enum ibv_wc_status's value (values fixed by the
 * verbs ABI). */
struct loom_verbs_wc_error {
    loom_result_t res;
    const char *name;
    const char *hint;
};
struct loom_verbs_wc_error loom_verbs_wc_error(int status);
/* errno of a failed verbs call, as a result (ENOMEM -> NO_MEMORY, ...). */
loom_result_t loom_verbs_errno_result(int err);

#endif
