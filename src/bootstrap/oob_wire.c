/* oob_wire.c - the out-of-band service's codec (oob_wire.h). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "wire.h"
#include "bootstrap/oob.h"
#include "bootstrap/oob_wire.h"
#include "net/handshake.h"

void loom_oob_pre_encode(const struct loom_oob_pre *p, uint8_t *out)
{
    memset(out, 0, LOOM_OOB_PREAMBLE_LEN);
    loom_put_le32(out, p->kind);
    loom_put_le16(out + 4, p->version);
    loom_put_le16(out + 6, p->flags);
    loom_put_le64(out + 8, p->ns);
}

static int known_kind(uint32_t kind)
{
    return kind == LOOM_OOB_MAGIC || kind == LOOM_OOB_KIND_TCP || kind == LOOM_OOB_KIND_BOOT ||
           kind == LOOM_OOB_KIND_VERBS || kind == LOOM_OOB_KIND_OFI;
}

loom_result_t loom_oob_pre_decode(const uint8_t *in, struct loom_oob_pre *p, char *why,
                                  size_t whylen)
{
    p->kind = loom_get_le32(in);
    p->version = loom_get_le16(in + 4);
    p->flags = loom_get_le16(in + 6);
    p->ns = loom_get_le64(in + 8);
    if (!known_kind(p->kind)) {
        snprintf(why, whylen, "not a Loom socket (preamble 0x%08x)", (unsigned)p->kind);
        return LOOM_ERROR_PROTOCOL;
    }
    if (p->version != LOOM_OOB_VERSION) {
        snprintf(why, whylen, "a Loom socket of OOB version %u, this rank speaks %u", p->version,
                 LOOM_OOB_VERSION);
        return LOOM_ERROR_PROTOCOL;
    }
    return LOOM_SUCCESS;
}

void loom_oob_hello_encode(const struct loom_oob_hello *h, uint8_t *out)
{
    loom_put_le64(out, h->job_id);
    loom_put_le32(out + 8, h->from);
    loom_put_le32(out + 12, h->to);
    loom_put_le32(out + 16, h->nranks);
}

loom_result_t loom_oob_hello_decode(const uint8_t *in, size_t len, struct loom_oob_hello *h,
                                    char *why, size_t whylen)
{
    if (len != LOOM_OOB_HELLO_LEN) {
        snprintf(why, whylen, "OOB hello of %zu bytes, expected %d", len, LOOM_OOB_HELLO_LEN);
        return LOOM_ERROR_PROTOCOL;
    }
    h->job_id = loom_get_le64(in);
    h->from = loom_get_le32(in + 8);
    h->to = loom_get_le32(in + 12);
    h->nranks = loom_get_le32(in + 16);
    if (h->from >= h->nranks) {
        snprintf(why, whylen, "OOB hello from rank %u of %u", (unsigned)h->from,
                 (unsigned)h->nranks);
        return LOOM_ERROR_PROTOCOL;
    }
    return LOOM_SUCCESS;
}

int loom_oob_hello_match(const struct loom_oob_hello *h, int rank, int nranks, uint64_t job_id,
                         char *why, size_t whylen)
{
    if (h->to != (uint32_t)rank || h->nranks != (uint32_t)nranks) {
        snprintf(why, whylen, "it is for rank %u of %u, this is rank %d of %d", (unsigned)h->to,
                 (unsigned)h->nranks, rank, nranks);
        return LOOM_HS_DROP;
    }
    if (job_id == 0)
        return LOOM_HS_HOLD;
    if (h->job_id != job_id) {
        snprintf(why, whylen, "it is for job %016llx, this is job %016llx (another job)",
                 (unsigned long long)h->job_id, (unsigned long long)job_id);
        return LOOM_HS_DROP;
    }
    return LOOM_HS_ACCEPT;
}

void loom_oob_hdr_encode(const struct loom_oob_hdr *h, uint8_t *out)
{
    memset(out, 0, LOOM_OOB_HDR_LEN);
    out[0] = h->kind;
    loom_put_le32(out + 4, h->tag);
    loom_put_le32(out + 8, h->len);
    loom_put_le64(out + 16, h->ns);
}

loom_result_t loom_oob_hdr_decode(const uint8_t *in, struct loom_oob_hdr *h, char *why,
                                  size_t whylen)
{
    h->kind = in[0];
    h->tag = loom_get_le32(in + 4);
    h->len = loom_get_le32(in + 8);
    h->ns = loom_get_le64(in + 16);
    if (h->kind != LOOM_OOB_KIND_MSG && h->kind != LOOM_OOB_KIND_GET) {
        snprintf(why, whylen, "bad message header: kind %u", h->kind);
        return LOOM_ERROR_PROTOCOL;
    }
    if (h->len > LOOM_OOB_MSG_MAX) {
        snprintf(why, whylen, "bad message header: %u bytes exceed the limit of %u",
                 (unsigned)h->len, (unsigned)LOOM_OOB_MSG_MAX);
        return LOOM_ERROR_PROTOCOL;
    }
    return LOOM_SUCCESS;
}
