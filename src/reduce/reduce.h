/* reduce.h - element-wise reduction kernels for every dtype x op.
 *
 * float16 and bfloat16 are reduced in float32 and rounded back to nearest
 * even. LOOM_AVG reduces as LOOM_SUM; loom_reduce_avg_finish() divides at the
 * end (integers truncate toward zero). Integer SUM/PROD wrap (unsigned
 * arithmetic), never undefined behaviour. MIN/MAX of floats propagate NaN. */
#ifndef LOOM_REDUCE_H
#define LOOM_REDUCE_H

#include <stddef.h>
#include "loom.h"

/* dst[i] = a[i] op b[i] for i < count. dst may equal a or b (exactly; no
 * partial overlap). */
typedef void (*loom_reduce_fn)(void *dst, const void *a, const void *b,
                               size_t count);

/* The kernel for dtype x op (AVG gives SUM's); NULL for an invalid pair. */
loom_reduce_fn loom_reduce_get(loom_dtype_t dtype, loom_redop_t op);

/* Convenience: dst = a op b. */
void loom_reduce_apply(void *dst, const void *a, const void *b, size_t count,
                 loom_dtype_t dtype, loom_redop_t op);

/* buf[i] /= n (the last step of LOOM_AVG). */
void loom_reduce_avg_finish(void *buf, size_t count, loom_dtype_t dtype, int n);

/* Scalar conversions, exposed for tests and perf checks. */
float loom_half_to_float(uint16_t h);
uint16_t loom_float_to_half(float f);      /* round to nearest even */
float loom_bf16_to_float(uint16_t b);
uint16_t loom_float_to_bf16(float f);      /* round to nearest even, NaN kept */

#endif
