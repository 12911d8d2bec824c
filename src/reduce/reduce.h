/* reduce.h - element-wise reduction kernels for every dtype x op.
 *
 * float16 and bfloat16 are reduced in float32 and rounded back to nearest
 * even. LOOM_AVG reduces as LOOM_SUM; loom_reduce_avg_finish() divides at the
 * end (integers truncate toward zero). Integer SUM/PROD wrap (unsigned
 * arithmetic), never undefined behaviour. MIN/MAX of floats propagate NaN:
 * if either operand is NaN the result is NaN (which NaN is unspecified).
 * MIN/MAX of equal operands return a's value, so min(+0.0, -0.0) is +0.0 and
 * min(-0.0, +0.0) is -0.0. float16/bfloat16 results round to nearest even
 * (overflow gives inf; NaN stays a quiet NaN). Float arithmetic assumes the
 * default rounding mode (round to nearest). */
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

/* Convenience: dst = a op b. (Named loom_reduce_apply, not loom_reduce: that
 * name is the public reduce collective in loom.h.) */
void loom_reduce_apply(void *dst, const void *a, const void *b, size_t count,
                       loom_dtype_t dtype, loom_redop_t op);

/* buf[i] /= n (the last step of LOOM_AVG). */
void loom_reduce_avg_finish(void *buf, size_t count, loom_dtype_t dtype, int n);

/* Scalar conversions, exposed for tests and perf checks. */
float loom_half_to_float(uint16_t h);
uint16_t loom_float_to_half(float f);      /* round to nearest even */
float loom_bf16_to_float(uint16_t b);
uint16_t loom_float_to_bf16(float f);      /* round to nearest even, NaN kept */

/* Kernel sets. loom_reduce_get() uses LOOM_REDUCE_IMPL_AUTO: AVX2 (+F16C
 * for float16) when the CPU has both, else the portable set. Tests and
 * benchmarks ask for one set explicitly. Every set gives bit-identical
 * results (NaN payloads aside). */
typedef enum loom_reduce_impl {
    LOOM_REDUCE_IMPL_AUTO = 0,
    LOOM_REDUCE_IMPL_GENERIC = 1, /* portable C, vectorised for the base ISA */
    LOOM_REDUCE_IMPL_AVX2 = 2,    /* x86-64 with AVX2 and F16C              */
    LOOM_REDUCE_IMPL_COUNT = 3
} loom_reduce_impl_t;

/* The kernel of one set; NULL for an invalid pair or a set this CPU (or
 * build) lacks. */
loom_reduce_fn loom_reduce_get_impl(loom_dtype_t dtype, loom_redop_t op,
                                    loom_reduce_impl_t impl);
/* Whether a set runs here, and its name ("auto", "generic", "avx2"). */
int loom_reduce_impl_available(loom_reduce_impl_t impl);
const char *loom_reduce_impl_name(loom_reduce_impl_t impl);

#endif
