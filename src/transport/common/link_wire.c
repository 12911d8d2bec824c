/* link_wire.c - the control channel's wire format (link_wire.h). */
#include "build_config.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util.h"
#include "wire.h"
#include "transport/common/link_wire.h"

void loom_link_hello_encode(const struct loom_link_hello *h, uint8_t out[LOOM_LINK_HELLO_LEN])
{
    loom_put_le32(out, h->from);
    loom_put_le32(out + 4, h->to);
    loom_put_le64(out + 8, h->comm_id);
    memcpy(out + 16, h->token, LOOM_LINK_TOKEN_LEN);
}

int loom_link_hello_decode(const uint8_t *in, size_t len, struct loom_link_hello *h)
{
    if (len != LOOM_LINK_HELLO_LEN)
        return -1;
    h->from = loom_get_le32(in);
    h->to = loom_get_le32(in + 4);
    h->comm_id = loom_get_le64(in + 8);
    memcpy(h->token, in + 16, LOOM_LINK_TOKEN_LEN);
    return 0;
}

void loom_link_frame_encode(const struct loom_link_proto *p, const struct loom_link_frame *f,
                            uint8_t out[LOOM_LINK_FRAME_LEN])
{
    loom_put_le32(out, p->frame_magic);
    loom_put_le16(out + 4, f->type);
    loom_put_le16(out + 6, f->flags);
    loom_put_le64(out + 8, f->comm_id);
    loom_put_le64(out + 16, f->w0);
    loom_put_le64(out + 24, f->w1);
    loom_put_le64(out + 32, f->w2);
}

int loom_link_frame_decode(const struct loom_link_proto *p, const uint8_t in[LOOM_LINK_FRAME_LEN],
                           struct loom_link_frame *f)
{
    if (loom_get_le32(in) != p->frame_magic)
        return -1;
    f->type = loom_get_le16(in + 4);
    f->flags = loom_get_le16(in + 6);
    f->comm_id = loom_get_le64(in + 8);
    f->w0 = loom_get_le64(in + 16);
    f->w1 = loom_get_le64(in + 24);
    f->w2 = loom_get_le64(in + 32);
    return f->type >= LOOM_LINK_BYE && f->type <= LOOM_LINK_PING ? 0 : -1;
}

void loom_link_token(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n = getrandom(p, len, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            /* no entropy source: still unique per process and call */
            uint64_t x = loom_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)p;
            for (size_t i = 0; i < len; i++, x = x * 6364136223846793005ull + 1)
                p[i] = (uint8_t)(x >> 56);
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}
