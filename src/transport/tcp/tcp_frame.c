/* tcp_frame.c - encode/decode the tcp transport's headers (see tcp_frame.h). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "net/handshake.h"

#include "net/net.h"
#include "transport/tcp/tcp_frame.h"

void loom_tcp_frame_encode(const struct loom_tcp_frame *f, uint8_t *out)
{
    loom_put_le32(out + 0, f->magic);
    loom_put_le16(out + 4, f->version);
    loom_put_le16(out + 6, f->stripe);
    loom_put_le32(out + 8, f->tag);
    loom_put_le32(out + 12, f->desc);
    loom_put_le64(out + 16, f->comm_id);
    loom_put_le64(out + 24, f->seq);
    loom_put_le64(out + 32, f->len);
    loom_put_le64(out + 40, f->count);
}

void loom_tcp_frame_decode(const uint8_t *in, struct loom_tcp_frame *f)
{
    f->magic = loom_get_le32(in + 0);
    f->version = loom_get_le16(in + 4);
    f->stripe = loom_get_le16(in + 6);
    f->tag = loom_get_le32(in + 8);
    f->desc = loom_get_le32(in + 12);
    f->comm_id = loom_get_le64(in + 16);
    f->seq = loom_get_le64(in + 24);
    f->len = loom_get_le64(in + 32);
    f->count = loom_get_le64(in + 40);
}

void loom_tcp_hello_encode(const struct loom_tcp_hello *h, uint8_t *out)
{
    loom_put_le32(out + 0, h->from);
    loom_put_le32(out + 4, h->to);
    loom_put_le64(out + 8, h->comm_id);
    loom_put_le32(out + 16, h->sock);
}

void loom_tcp_hello_decode(const uint8_t *in, struct loom_tcp_hello *h)
{
    h->from = loom_get_le32(in + 0);
    h->to = loom_get_le32(in + 4);
    h->comm_id = loom_get_le64(in + 8);
    h->sock = loom_get_le32(in + 16);
}

int loom_tcp_hello_check(const struct loom_tcp_hello_expect *e, const uint8_t *payload, size_t len,
                         struct loom_tcp_hello *h, char *why, size_t whylen)
{
    if (len != LOOM_TCP_HELLO_LEN) {
        snprintf(why, whylen, "a tcp hello of %zu bytes, expected %d", len, LOOM_TCP_HELLO_LEN);
        return LOOM_HS_DROP;
    }
    loom_tcp_hello_decode(payload, h);
    if (h->comm_id != e->comm_id) {
        snprintf(why, whylen, "communicator id 0x%016llx, expected 0x%016llx (another job?)",
                 (unsigned long long)h->comm_id, (unsigned long long)e->comm_id);
        return LOOM_HS_DROP;
    }
    if (h->to != (uint32_t)e->rank) {
        snprintf(why, whylen, "addressed to rank %u of another instance", h->to);
        return LOOM_HS_DROP;
    }
    if (h->from <= (uint32_t)e->rank || h->from >= (uint32_t)e->nranks) {
        snprintf(why, whylen,
                 "claims to be rank %u, which connects the other "
                 "way or does not exist",
                 h->from);
        return LOOM_HS_DROP;
    }
    if (h->sock >= (uint32_t)e->nsocks) {
        snprintf(why, whylen, "socket index %u, only %d per peer", h->sock, e->nsocks);
        return LOOM_HS_DROP;
    }
    return LOOM_HS_ACCEPT;
}
