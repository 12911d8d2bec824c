/* reduce_generic.c - portable kernels for every dtype x op.
 *
 * The library is built with the user's CFLAGS (typically -O2, which in GCC 12
 * vectorises only trivially cheap loops), so this file asks GCC for -O3 on
 * its own: the loops are then vectorised for the baseline ISA (SSE2 on
 * x86-64). Clang vectorises at -O2 already. */
#include "build_config.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <stdint.h>

#include "loom.h"
#include "reduce/reduce_impl.h"
#include "reduce/reduce_gen.h"

#define LOOM_RG_GENERIC /* no target attribute */

LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_i8, int8_t, uint8_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_u8, uint8_t, uint8_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_i16, int16_t, uint16_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_u16, uint16_t, uint16_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_i32, int32_t, uint32_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_u32, uint32_t, uint32_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_i64, int64_t, uint64_t)
LOOM_RG_INT_ELEMS(LOOM_RG_GENERIC, g_u64, uint64_t, uint64_t)
LOOM_RG_HALF_ELEMS(LOOM_RG_GENERIC, g_f16, loom_rc_h2f_vec, loom_rc_f2h_vec)
LOOM_RG_HALF_ELEMS(LOOM_RG_GENERIC, g_bf16, loom_rc_b2f, loom_rc_f2b)
LOOM_RG_FLOAT_ELEMS(LOOM_RG_GENERIC, g_f32, float)
LOOM_RG_FLOAT_ELEMS(LOOM_RG_GENERIC, g_f64, double)

LOOM_RG_OPS(LOOM_RG_GENERIC, g_i8, int8_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_u8, uint8_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_i16, int16_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_u16, uint16_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_i32, int32_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_u32, uint32_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_i64, int64_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_u64, uint64_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_f16, uint16_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_bf16, uint16_t)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_f32, float)
LOOM_RG_OPS(LOOM_RG_GENERIC, g_f64, double)

const loom_reduce_fn
    loom_reduce_generic_table[LOOM_DTYPE_COUNT][LOOM_REDUCE_TABLE_OPS] = {
        [LOOM_INT8] = LOOM_RG_ROW(g_i8),
        [LOOM_UINT8] = LOOM_RG_ROW(g_u8),
        [LOOM_INT16] = LOOM_RG_ROW(g_i16),
        [LOOM_UINT16] = LOOM_RG_ROW(g_u16),
        [LOOM_INT32] = LOOM_RG_ROW(g_i32),
        [LOOM_UINT32] = LOOM_RG_ROW(g_u32),
        [LOOM_INT64] = LOOM_RG_ROW(g_i64),
        [LOOM_UINT64] = LOOM_RG_ROW(g_u64),
        [LOOM_FLOAT16] = LOOM_RG_ROW(g_f16),
        [LOOM_BFLOAT16] = LOOM_RG_ROW(g_bf16),
        [LOOM_FLOAT32] = LOOM_RG_ROW(g_f32),
        [LOOM_FLOAT64] = LOOM_RG_ROW(g_f64),
};

/* buf[i] /= n. Signed integers are divided in int64_t (C's / truncates toward
 * zero; n >= 1 so INT64_MIN / n cannot overflow); 16-bit floats in float32,
 * rounded back to nearest even. */
#define LOOM_RG_DIV_LOOP(T, W)                                                 \
    do {                                                                       \
        T *restrict p = buf;                                                   \
        for (size_t i = 0; i < count; i++)                                     \
            p[i] = (T)((W)p[i] / (W)n);                                        \
    } while (0)

#define LOOM_RG_DIV_HALF_LOOP(TOF, FROMF)                                      \
    do {                                                                       \
        uint16_t *restrict p = buf;                                            \
        float fn = (float)n;                                                   \
        for (size_t i = 0; i < count; i++)                                     \
            p[i] = FROMF(TOF(p[i]) / fn);                                      \
    } while (0)

void loom_reduce_avg_finish_kernel(void *buf, size_t count, loom_dtype_t dtype,
                                   int n)
{
    switch (dtype) {
    case LOOM_INT8: LOOM_RG_DIV_LOOP(int8_t, int64_t); break;
    case LOOM_UINT8: LOOM_RG_DIV_LOOP(uint8_t, uint64_t); break;
    case LOOM_INT16: LOOM_RG_DIV_LOOP(int16_t, int64_t); break;
    case LOOM_UINT16: LOOM_RG_DIV_LOOP(uint16_t, uint64_t); break;
    case LOOM_INT32: LOOM_RG_DIV_LOOP(int32_t, int64_t); break;
    case LOOM_UINT32: LOOM_RG_DIV_LOOP(uint32_t, uint64_t); break;
    case LOOM_INT64: LOOM_RG_DIV_LOOP(int64_t, int64_t); break;
    case LOOM_UINT64: LOOM_RG_DIV_LOOP(uint64_t, uint64_t); break;
    case LOOM_FLOAT16: LOOM_RG_DIV_HALF_LOOP(loom_rc_h2f_vec, loom_rc_f2h_vec); break;
    case LOOM_BFLOAT16: LOOM_RG_DIV_HALF_LOOP(loom_rc_b2f, loom_rc_f2b); break;
    case LOOM_FLOAT32: LOOM_RG_DIV_LOOP(float, float); break;
    case LOOM_FLOAT64: LOOM_RG_DIV_LOOP(double, double); break;
    default: break;
    }
}
