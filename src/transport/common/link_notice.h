/* link_notice.h - a failure notice on the control channel (a FAIL frame,
 * common/link_wire.h): what a failing rank tells its peers so that they
 * can name the cause, encoded, decoded and applied once for ofi and verbs. */
#ifndef LOOM_LINK_NOTICE_H
#define LOOM_LINK_NOTICE_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"
#include "transport/common/link_wire.h"
#include "transport/transport.h"

struct loom_link_notice {
    int culprit;                 /* the rank it blames, -1 none             */
    loom_result_t code;          /* the error it stopped with               */
    uint64_t seq;                /* its call (the failed call's fingerprint) */
    uint64_t count;
    uint32_t desc;
};

/* What this rank tells its peers when it stops with res (an error;
 * anything else says LOOM_ERROR_ABORTED): the call and culprit progress
 * recorded in tx (notice_*, blame). */
struct loom_link_notice loom_link_notice_of(const struct loom_tx *tx, loom_result_t res);

/* A FAIL frame's type, flags and words (comm_id left as it is). */
void loom_link_notice_encode(const struct loom_link_notice *n, struct loom_link_frame *f);
void loom_link_notice_decode(const struct loom_link_frame *f, struct loom_link_notice *n);

/* Peer r's notice, applied to tx: when it found this rank in another call
 * (LOOM_ERROR_MISMATCH naming this rank) tx->mismatch gets its call and
 * LOOM_ERROR_MISMATCH is returned; otherwise the rank it blames, when
 * another, is passed on (tx->blame) and LOOM_ERROR_REMOTE is returned. why
 * ends the sentence naming r either way. describe names a rank. */
loom_result_t loom_link_notice_apply(struct loom_tx *tx, int r, const struct loom_link_notice *n,
                                     const char *(*describe)(struct loom_tx *tx, int rank,
                                                             char *buf, size_t len),
                                     char *why, size_t len);

#endif
