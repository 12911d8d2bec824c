/* redop.h - resolving a loom_redop_t, built in or made by
 * loom_redop_create, into an op descriptor's fields. */
#ifndef LOOM_REDOP_H
#define LOOM_REDOP_H

#include "op.h"

/* Sets d->op (the base op), d->prescale, d->postscale and d->accum from op.
 * Returns -1 when op is neither built in nor a live created op. */
int loom_redop_resolve(loom_redop_t op, struct loom_op *d);

/* The factors an op scales its input and its result by: 1.0 unless
 * d->scaled, so an op built inside the library without the caller's
 * loom_redop_t (zero-initialised) never scales. */
static inline double loom_op_pre(const struct loom_op *d)
{
    return d->scaled ? d->prescale : 1.0;
}

static inline double loom_op_post(const struct loom_op *d)
{
    return d->scaled ? d->postscale : 1.0;
}

/* Whether d asks for more than its base op (scaling, float32 sums). */
static inline int loom_op_has_attr(const struct loom_op *d)
{
    return d->scaled ||
           (d->accum == LOOM_ACCUM_FLOAT32 &&
            (d->dtype == LOOM_FLOAT16 || d->dtype == LOOM_BFLOAT16));
}

#endif
