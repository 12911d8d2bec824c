/* tcp_frame.c - encode/decode the tcp transport's headers (see tcp_frame.h). */
#include "build_config.h"

#include <string.h>

#include "transport/net.h"
#include "transport/tcp_frame.h"

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
    loom_put_le32(out + 0, h->magic);
    loom_put_le16(out + 4, h->version);
    loom_put_le16(out + 6, h->sock);
    loom_put_le32(out + 8, h->from);
    loom_put_le32(out + 12, h->to);
    loom_put_le64(out + 16, h->comm_id);
    loom_put_le64(out + 24, h->nonce);
}

void loom_tcp_hello_decode(const uint8_t *in, struct loom_tcp_hello *h)
{
    h->magic = loom_get_le32(in + 0);
    h->version = loom_get_le16(in + 4);
    h->sock = loom_get_le16(in + 6);
    h->from = loom_get_le32(in + 8);
    h->to = loom_get_le32(in + 12);
    h->comm_id = loom_get_le64(in + 16);
    h->nonce = loom_get_le64(in + 24);
}
