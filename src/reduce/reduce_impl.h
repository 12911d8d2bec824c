/* reduce_impl.h - the kernel tables behind loom_reduce_get() (internal to
 * src/reduce). */
#ifndef LOOM_REDUCE_IMPL_H
#define LOOM_REDUCE_IMPL_H

#include <stddef.h>
#include "reduce/reduce.h"

/* Columns of a kernel table: LOOM_SUM, LOOM_PROD, LOOM_MIN, LOOM_MAX (AVG
 * uses the SUM column). */
#define LOOM_REDUCE_TABLE_OPS 4

/* Portable kernels: every slot filled. */
extern const loom_reduce_fn
    loom_reduce_generic_table[LOOM_DTYPE_COUNT][LOOM_REDUCE_TABLE_OPS];

/* AVX2 + F16C kernels; only usable when loom_reduce_x86_supported() is true.
 * Every slot is NULL when the library was not built for x86-64. */
extern const loom_reduce_fn
    loom_reduce_x86_table[LOOM_DTYPE_COUNT][LOOM_REDUCE_TABLE_OPS];
int loom_reduce_x86_supported(void);

/* The avg finish loops, compiled with the kernels. */
void loom_reduce_avg_finish_kernel(void *buf, size_t count, loom_dtype_t dtype,
                                   int n);

#endif
