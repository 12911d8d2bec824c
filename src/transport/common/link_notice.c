/* link_notice.c - failure notices on the control channel (link_notice.h). */
#include "build_config.h"

#include <stdio.h>

#include "transport/common/link_notice.h"

struct loom_link_notice loom_link_notice_of(const struct loom_tx *tx, loom_result_t res)
{
    return (struct loom_link_notice){.culprit = tx->notice_culprit >= 0 ? tx->notice_culprit
                                                                        : tx->blame - 1,
                                     .code = res < 0 ? res : LOOM_ERROR_ABORTED,
                                     .seq = tx->notice_seq,
                                     .count = tx->notice_count,
                                     .desc = tx->notice_desc};
}

/* FAIL: flags = culprit + 1 (0 none), w0 = call, w1 = count,
 * w2 = desc | (result as u32) << 32 */
void loom_link_notice_encode(const struct loom_link_notice *n, struct loom_link_frame *f)
{
    f->type = LOOM_LINK_FAIL;
    f->flags = (uint16_t)(n->culprit + 1);
    f->w0 = n->seq;
    f->w1 = n->count;
    f->w2 = n->desc | (uint64_t)(uint32_t)n->code << 32;
}

void loom_link_notice_decode(const struct loom_link_frame *f, struct loom_link_notice *n)
{
    n->culprit = (int)f->flags - 1;
    n->code = (loom_result_t)(int32_t)(uint32_t)(f->w2 >> 32);
    n->seq = f->w0;
    n->count = f->w1;
    n->desc = (uint32_t)f->w2;
}

loom_result_t loom_link_notice_apply(struct loom_tx *tx, int r, const struct loom_link_notice *n,
                                     const char *(*describe)(struct loom_tx *tx, int rank,
                                                             char *buf, size_t len),
                                     char *why, size_t len)
{
    unsigned long long q = (unsigned long long)n->seq;
    if (n->code == LOOM_ERROR_MISMATCH && n->culprit == tx->params.rank) {
        /* it found this rank in another call: its call, for the message
         * naming both */
        tx->mismatch = (struct loom_tx_mismatch){.valid = 1, .peer = r,
                                                 .tag = (uint32_t)n->seq, .desc = n->desc,
                                                 .count = n->count};
        snprintf(why, len, "is in another collective call (it stopped in call #%llu)", q);
        return LOOM_ERROR_MISMATCH;
    }
    const char *who = NULL;
    char d[256];
    if (n->culprit >= 0 && n->culprit < tx->params.nranks && n->culprit != r) {
        who = n->culprit == tx->params.rank ? "this rank" : describe(tx, n->culprit, d, sizeof d);
        if (n->culprit != tx->params.rank)
            tx->blame = n->culprit + 1; /* pass the original cause on */
    }
    loom_tx_stop_reason(why, len, n->code, q, who);
    return LOOM_ERROR_REMOTE;
}
