/* tcp_check.c - validation of a received frame header (see tcp_check.h). */
#include "build_config.h"

#include <stdio.h>

#include "transport/tcp/tcp_check.h"

enum loom_tcp_check loom_tcp_frame_check(const struct loom_tcp_frame *f,
                                         const struct loom_tcp_expect *e, char *why, size_t whylen)
{
    if (f->magic != LOOM_TCP_FRAME_MAGIC) {
        snprintf(why, whylen, "sent a frame with bad magic 0x%08x", (unsigned)f->magic);
    } else if (f->version != LOOM_TCP_VERSION) {
        snprintf(why, whylen, "sent protocol version %u, expected %u", f->version,
                 LOOM_TCP_VERSION);
    } else if (f->comm_id != e->comm_id) {
        snprintf(why, whylen, "sent a frame of communicator 0x%016llx, expected 0x%016llx",
                 (unsigned long long)f->comm_id, (unsigned long long)e->comm_id);
    } else if (f->stripe == LOOM_TCP_CONTROL_STRIPE) {
        return LOOM_TCP_FRAME_CONTROL;
    } else if (f->tag != e->tag || f->desc != e->desc || f->count != e->count) {
        snprintf(why, whylen,
                 "is in another collective call (call %u, 0x%08x, count %llu; "
                 "this rank is in call %u, 0x%08x, count %llu)",
                 f->tag, f->desc, (unsigned long long)f->count, e->tag, e->desc,
                 (unsigned long long)e->count);
        return LOOM_TCP_FRAME_OTHER_CALL;
    } else if (f->seq != e->seq || f->stripe != e->stripe) {
        snprintf(why, whylen,
                 "sent message %llu stripe %u on socket %d where message %llu "
                 "stripe %u was expected",
                 (unsigned long long)f->seq, f->stripe, e->sock_index, (unsigned long long)e->seq,
                 e->stripe);
    } else if (f->len != e->len || f->tag != e->tag) {
        snprintf(why, whylen,
                 "sent %llu bytes with tag %u (message %llu, stripe %u) where "
                 "the posted receive expects %llu bytes with tag %u",
                 (unsigned long long)f->len, f->tag, (unsigned long long)f->seq, f->stripe,
                 (unsigned long long)e->len, e->tag);
    } else {
        return LOOM_TCP_FRAME_OK;
    }
    return LOOM_TCP_FRAME_BAD;
}
