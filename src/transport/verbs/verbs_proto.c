/* verbs_proto.c - the verbs transport's wire formats and arithmetic
 * (verbs_proto.h). Pure code. */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/net.h"
#include "transport/verbs/verbs_proto.h"

/* ---- immediate data ---- */

uint32_t loom_verbs_imm_encode(enum loom_verbs_imm_kind kind, uint32_t cts_seq)
{
    return (uint32_t)kind << 30 | (cts_seq & 0xffffu);
}

int loom_verbs_imm_decode(uint32_t imm, enum loom_verbs_imm_kind *kind, uint16_t *seq16)
{
    uint32_t k = imm >> 30;
    if (k < LOOM_VERBS_IMM_DATA || k > LOOM_VERBS_IMM_CTS || (imm & 0x3fff0000u))
        return -1;
    *kind = (enum loom_verbs_imm_kind)k;
    *seq16 = (uint16_t)imm;
    return 0;
}

uint32_t loom_verbs_seq_expand(uint32_t expected, uint16_t seq16)
{
    /* the signed 16-bit distance from expected's low bits */
    int16_t d = (int16_t)(uint16_t)(seq16 - (uint16_t)expected);
    return expected + (uint32_t)(int32_t)d;
}

/* ---- CTS entries ---- */

void loom_verbs_cts_encode(const struct loom_verbs_cts *c, uint8_t out[LOOM_VERBS_CTS_LEN])
{
    loom_put_le64(out, c->addr);
    loom_put_le32(out + 8, c->rkey);
    loom_put_le32(out + 12, c->len);
    loom_put_le64(out + 16, c->msg);
    loom_put_le64(out + 24, c->offset);
    loom_put_le64(out + 32, c->msg_len);
    loom_put_le64(out + 40, c->count);
    loom_put_le32(out + 48, c->tag);
    loom_put_le32(out + 52, c->desc);
    loom_put_le32(out + 56, c->cts);
    loom_put_le32(out + 60, c->flags);
}

void loom_verbs_cts_decode(const uint8_t in[LOOM_VERBS_CTS_LEN], struct loom_verbs_cts *c)
{
    c->addr = loom_get_le64(in);
    c->rkey = loom_get_le32(in + 8);
    c->len = loom_get_le32(in + 12);
    c->msg = loom_get_le64(in + 16);
    c->offset = loom_get_le64(in + 24);
    c->msg_len = loom_get_le64(in + 32);
    c->count = loom_get_le64(in + 40);
    c->tag = loom_get_le32(in + 48);
    c->desc = loom_get_le32(in + 52);
    c->cts = loom_get_le32(in + 56);
    c->flags = loom_get_le32(in + 60);
}

int loom_verbs_cts_check(const struct loom_verbs_cts *c, uint32_t want_cts, uint64_t want_msg,
                         char *why, size_t len)
{
    if (c->cts != want_cts) {
        snprintf(why, len, "clear-to-send entry #%u arrived where #%u was due", c->cts, want_cts);
        return -1;
    }
    if (c->msg != want_msg) {
        snprintf(why, len, "clear-to-send entry #%u is for message %llu, not %llu", c->cts,
                 (unsigned long long)c->msg, (unsigned long long)want_msg);
        return -1;
    }
    if (c->flags & ~LOOM_VERBS_CTS_F_BOUNCE) {
        snprintf(why, len, "clear-to-send entry #%u has unknown flags 0x%x", c->cts, c->flags);
        return -1;
    }
    /* the chunk lies in the message: offset + len <= msg_len, no overflow;
     * only an empty message has an empty chunk */
    if (c->offset > c->msg_len || c->len > c->msg_len - c->offset ||
        (c->len == 0 && c->msg_len != 0)) {
        snprintf(why, len,
                 "clear-to-send entry #%u asks for %u bytes at offset %llu of a "
                 "%llu-byte message",
                 c->cts, c->len, (unsigned long long)c->offset, (unsigned long long)c->msg_len);
        return -1;
    }
    return 0;
}

/* ---- connection blob ---- */

size_t loom_verbs_blob_encode(const struct loom_verbs_blob *b, uint8_t *out, size_t cap)
{
    if (cap < LOOM_VERBS_BLOB_LEN)
        return 0;
    memset(out, 0, LOOM_VERBS_BLOB_LEN);
    loom_put_le32(out, LOOM_VERBS_BLOB_MAGIC);
    loom_put_le16(out + 4, LOOM_VERBS_BLOB_VERSION);
    loom_put_le16(out + 6, LOOM_VERBS_BLOB_LEN);
    loom_put_le64(out + 8, b->comm_id);
    loom_put_le32(out + 16, b->from);
    loom_put_le32(out + 20, b->to);
    loom_put_le64(out + 24, b->nonce);
    memcpy(out + 32, b->token, LOOM_VERBS_TOKEN_LEN);
    loom_put_le32(out + 64, b->qpn);
    loom_put_le32(out + 68, b->psn);
    memcpy(out + 72, b->gid, 16);
    loom_put_le16(out + 88, b->lid);
    out[90] = b->mtu;
    out[91] = b->port;
    out[92] = b->gid_index;
    out[93] = b->flags;
    loom_put_le32(out + 116, b->cts_entries);
    loom_put_le64(out + 120, b->cts_addr);
    loom_put_le32(out + 128, b->cts_rkey);
    loom_put_le32(out + 144, b->max_msg);
    return LOOM_VERBS_BLOB_LEN;
}

int loom_verbs_blob_decode(const uint8_t *in, size_t len, uint64_t comm_id, int nranks, int self,
                           struct loom_verbs_blob *b, char *why, size_t whylen)
{
    if (len < 8 || loom_get_le32(in) != LOOM_VERBS_BLOB_MAGIC) {
        snprintf(why, whylen, "not a verbs connection blob (%zu bytes)", len);
        return -1;
    }
    uint16_t version = loom_get_le16(in + 4), blen = loom_get_le16(in + 6);
    if (version != LOOM_VERBS_BLOB_VERSION) {
        snprintf(why, whylen, "connection blob version %u (this Loom speaks %u)", version,
                 LOOM_VERBS_BLOB_VERSION);
        return -1;
    }
    if (blen < LOOM_VERBS_BLOB_LEN || blen > LOOM_VERBS_BLOB_MAX || blen != len) {
        snprintf(why, whylen,
                 "connection blob says %u bytes, %zu arrived (at least %d, "
                 "at most %d)",
                 blen, len, LOOM_VERBS_BLOB_LEN, LOOM_VERBS_BLOB_MAX);
        return -1;
    }
    memset(b, 0, sizeof *b);
    b->comm_id = loom_get_le64(in + 8);
    b->from = loom_get_le32(in + 16);
    b->to = loom_get_le32(in + 20);
    b->nonce = loom_get_le64(in + 24);
    memcpy(b->token, in + 32, LOOM_VERBS_TOKEN_LEN);
    b->qpn = loom_get_le32(in + 64);
    b->psn = loom_get_le32(in + 68);
    memcpy(b->gid, in + 72, 16);
    b->lid = loom_get_le16(in + 88);
    b->mtu = in[90];
    b->port = in[91];
    b->gid_index = in[92];
    b->flags = in[93];
    b->cts_entries = loom_get_le32(in + 116);
    b->cts_addr = loom_get_le64(in + 120);
    b->cts_rkey = loom_get_le32(in + 128);
    b->max_msg = loom_get_le32(in + 144);

    if (b->comm_id != comm_id) {
        snprintf(why, whylen, "connection blob of communicator %016llx, not %016llx",
                 (unsigned long long)b->comm_id, (unsigned long long)comm_id);
        return -1;
    }
    if (b->from >= (uint32_t)nranks || b->to != (uint32_t)self || b->from == b->to) {
        snprintf(why, whylen, "connection blob from rank %u to rank %u (this is rank %d of %d)",
                 b->from, b->to, self, nranks);
        return -1;
    }
    /* QP numbers and PSNs are 24-bit; ports 1..255; MTU enum 1..5 */
    if (b->qpn == 0 || b->qpn > 0xffffffu || b->psn > 0xffffffu || b->port == 0 || b->mtu < 1 ||
        b->mtu > 5) {
        snprintf(why, whylen, "connection blob has qpn %u, psn %u, port %u, mtu %u", b->qpn, b->psn,
                 b->port, b->mtu);
        return -1;
    }
    if (b->cts_entries < 4 || b->cts_entries > LOOM_VERBS_CTS_MAX ||
        (b->cts_entries & (b->cts_entries - 1)) || b->cts_addr == 0) {
        snprintf(why, whylen, "connection blob has a CTS ring of %u entries at 0x%llx",
                 b->cts_entries, (unsigned long long)b->cts_addr);
        return -1;
    }
    if (b->max_msg < 4096) {
        snprintf(why, whylen, "connection blob says the largest message is %u bytes", b->max_msg);
        return -1;
    }
    if (b->flags & ~(LOOM_VERBS_BLOB_F_ETHERNET | LOOM_VERBS_BLOB_F_REPLY)) {
        snprintf(why, whylen, "connection blob has unknown flags 0x%x", b->flags);
        return -1;
    }
    return 0;
}

/* ---- errors ---- */

struct loom_verbs_wc_error loom_verbs_wc_error(int status)
{
    /* enum ibv_wc_status values (verbs ABI; verbs_qp.c asserts them) */
    switch (status) {
    case 0: return (struct loom_verbs_wc_error){LOOM_SUCCESS, "IBV_WC_SUCCESS", "no error"};
    case 1:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_INTERNAL, "IBV_WC_LOC_LEN_ERR",
            "a message was longer than the receive buffer posted for it (a Loom bug)"};
    case 2:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_INTERNAL, "IBV_WC_LOC_QP_OP_ERR",
            "the queue pair refused a work request (a Loom bug or a device fault)"};
    case 4:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_INTERNAL, "IBV_WC_LOC_PROT_ERR",
            "a local buffer was not covered by its memory registration"};
    case 5:
        return (struct loom_verbs_wc_error){LOOM_ERROR_REMOTE, "IBV_WC_WR_FLUSH_ERR",
                                            "flushed: the queue pair had already failed"};
    case 7:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_PROTOCOL, "IBV_WC_BAD_RESP_ERR",
            "the peer's adapter answered with an unexpected transport opcode"};
    case 8:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_INTERNAL, "IBV_WC_LOC_ACCESS_ERR",
            "a local memory access was refused (registration without local write?)"};
    case 9:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_PROTOCOL, "IBV_WC_REM_INV_REQ_ERR",
            "the peer refused the request as invalid (length or opcode)"};
    case 10:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_PROTOCOL, "IBV_WC_REM_ACCESS_ERR",
            "the peer refused the memory key or range written to (a stale or wrong rkey)"};
    case 11:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_REMOTE, "IBV_WC_REM_OP_ERR",
            "the peer could not complete the operation (its queue pair failed)"};
    case 12:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_REMOTE, "IBV_WC_RETRY_EXC_ERR",
            "the peer's adapter stopped answering (process gone, link or switch down)"};
    case 13:
        return (struct loom_verbs_wc_error){
            LOOM_ERROR_PROTOCOL, "IBV_WC_RNR_RETRY_EXC_ERR",
            "the peer had no receive posted for immediate data (a Loom bug)"};
    case 16:
        return (struct loom_verbs_wc_error){LOOM_ERROR_REMOTE, "IBV_WC_REM_ABORT_ERR",
                                            "the peer aborted the operation"};
    case 19:
        return (struct loom_verbs_wc_error){LOOM_ERROR_SYSTEM, "IBV_WC_FATAL_ERR",
                                            "the adapter reported a fatal error"};
    case 20:
        return (struct loom_verbs_wc_error){LOOM_ERROR_REMOTE, "IBV_WC_RESP_TIMEOUT_ERR",
                                            "the peer's response timed out"};
    case 21:
        return (struct loom_verbs_wc_error){LOOM_ERROR_SYSTEM, "IBV_WC_GENERAL_ERR",
                                            "the adapter reported a general error"};
    default:
        return (struct loom_verbs_wc_error){LOOM_ERROR_SYSTEM, "IBV_WC_(other)",
                                            "an unexpected completion status"};
    }
}

loom_result_t loom_verbs_errno_result(int err)
{
    switch (err) {
    case 0: return LOOM_SUCCESS;
    case ENOMEM:
    case ENOBUFS: return LOOM_ERROR_NO_MEMORY;
    case EINVAL: return LOOM_ERROR_INVALID_ARGUMENT;
    case ENOSYS:
    case EOPNOTSUPP:
    case ENODEV:
    case ENXIO: return LOOM_ERROR_NOT_SUPPORTED;
    case ETIMEDOUT: return LOOM_ERROR_TIMEOUT;
    default: return LOOM_ERROR_SYSTEM;
    }
}
