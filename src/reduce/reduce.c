/* reduce.c - kernel selection, avg finish and the exported scalar
 * conversions. The kernels themselves live in reduce_generic.c and
 * reduce_x86.c. */
#include "build_config.h"

#include <stdint.h>

#include "loom.h"
#include "reduce/reduce.h"
#include "reduce/reduce_convert.h"
#include "reduce/reduce_impl.h"

int loom_reduce_impl_available(loom_reduce_impl_t impl)
{
    switch (impl) {
    case LOOM_REDUCE_IMPL_AUTO:
    case LOOM_REDUCE_IMPL_GENERIC:
        return 1;
    case LOOM_REDUCE_IMPL_AVX2:
        return loom_reduce_x86_supported();
    default:
        return 0;
    }
}

const char *loom_reduce_impl_name(loom_reduce_impl_t impl)
{
    switch (impl) {
    case LOOM_REDUCE_IMPL_AUTO: return "auto";
    case LOOM_REDUCE_IMPL_GENERIC: return "generic";
    case LOOM_REDUCE_IMPL_AVX2: return "avx2";
    default: return "invalid-impl";
    }
}

loom_reduce_fn loom_reduce_get_impl(loom_dtype_t dtype, loom_redop_t op,
                                    loom_reduce_impl_t impl)
{
    if ((unsigned)dtype >= LOOM_DTYPE_COUNT || (unsigned)op >= LOOM_REDOP_COUNT)
        return NULL;
    unsigned col = (op == LOOM_AVG) ? (unsigned)LOOM_SUM : (unsigned)op;

    switch (impl) {
    case LOOM_REDUCE_IMPL_AUTO:
        if (loom_reduce_x86_supported())
            return loom_reduce_x86_table[dtype][col];
        return loom_reduce_generic_table[dtype][col];
    case LOOM_REDUCE_IMPL_GENERIC:
        return loom_reduce_generic_table[dtype][col];
    case LOOM_REDUCE_IMPL_AVX2:
        if (!loom_reduce_x86_supported())
            return NULL;
        return loom_reduce_x86_table[dtype][col];
    default:
        return NULL;
    }
}

loom_reduce_fn loom_reduce_get(loom_dtype_t dtype, loom_redop_t op)
{
    return loom_reduce_get_impl(dtype, op, LOOM_REDUCE_IMPL_AUTO);
}

/* Callers validate dtype and op before they get here (collectives do it at
 * enqueue); an invalid pair leaves dst untouched. */
void loom_reduce_apply(void *dst, const void *a, const void *b, size_t count,
                       loom_dtype_t dtype, loom_redop_t op)
{
    loom_reduce_fn fn = loom_reduce_get(dtype, op);
    if (fn != NULL && count > 0)
        fn(dst, a, b, count);
}

/* n is the number of contributions (ranks), >= 1; n <= 1 leaves buf as it
 * is (dividing by 1 is the identity; n <= 0 has no meaning). */
void loom_reduce_avg_finish(void *buf, size_t count, loom_dtype_t dtype, int n)
{
    if (n <= 1 || count == 0 || (unsigned)dtype >= LOOM_DTYPE_COUNT)
        return;
    loom_reduce_avg_finish_kernel(buf, count, dtype, n);
}

float loom_half_to_float(uint16_t h)
{
    return loom_rc_h2f(h);
}

uint16_t loom_float_to_half(float f)
{
    return loom_rc_f2h(f);
}

float loom_bf16_to_float(uint16_t b)
{
    return loom_rc_b2f(b);
}

uint16_t loom_float_to_bf16(float f)
{
    return loom_rc_f2b(f);
}
