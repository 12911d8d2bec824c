/* reduce_gen.h - macros that stamp out one kernel per dtype x op.
 *
 * Included only by the kernel files (reduce_generic.c, reduce_x86.c), which
 * compile it with their own target attribute. Each kernel is a plain loop
 * over restrict pointers so the compiler vectorises it; because dst may be
 * exactly a or b, each kernel has four bodies (dst distinct, dst == a,
 * dst == b, dst == a == b), each of which is alias-free under restrict. */
#ifndef LOOM_REDUCE_GEN_H
#define LOOM_REDUCE_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce_convert.h"

/* Scalar operations. Ties return the first operand; a NaN operand gives NaN
 * (float MIN/MAX propagate NaN: select y when y < x or y is NaN, else x,
 * which is NaN when x is). Integer SUM/PROD are computed in the unsigned type
 * U so they wrap instead of overflowing. */
#define LOOM_RG_ISUM(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define LOOM_RG_IPROD(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define LOOM_RG_MIN(x, y) ((y) < (x) ? (y) : (x))
#define LOOM_RG_MAX(x, y) ((x) < (y) ? (y) : (x))
#define LOOM_RG_FSUM(x, y) ((x) + (y))
#define LOOM_RG_FPROD(x, y) ((x) * (y))
#define LOOM_RG_FMIN(x, y) (((y) < (x) || (y) != (y)) ? (y) : (x))
#define LOOM_RG_FMAX(x, y) (((x) < (y) || (y) != (y)) ? (y) : (x))

/* The four alias cases and the entry point. ELEM(x, y) computes one result
 * from two elements of type T. */
#define LOOM_RG_KERNEL(ATTR, NAME, T, ELEM)                                    \
    ATTR static void NAME##_3(T *restrict d, const T *restrict a,              \
                              const T *restrict b, size_t n)                   \
    {                                                                          \
        for (size_t i = 0; i < n; i++)                                         \
            d[i] = ELEM(a[i], b[i]);                                           \
    }                                                                          \
    ATTR static void NAME##_da(T *restrict d, const T *restrict b, size_t n)   \
    {                                                                          \
        for (size_t i = 0; i < n; i++)                                         \
            d[i] = ELEM(d[i], b[i]);                                           \
    }                                                                          \
    ATTR static void NAME##_db(T *restrict d, const T *restrict a, size_t n)   \
    {                                                                          \
        for (size_t i = 0; i < n; i++)                                         \
            d[i] = ELEM(a[i], d[i]);                                           \
    }                                                                          \
    ATTR static void NAME##_dd(T *restrict d, size_t n)                        \
    {                                                                          \
        for (size_t i = 0; i < n; i++)                                         \
            d[i] = ELEM(d[i], d[i]);                                           \
    }                                                                          \
    ATTR static void NAME(void *dst, const void *a, const void *b, size_t n)   \
    {                                                                          \
        if (dst == a && dst == b)                                              \
            NAME##_dd((T *)dst, n);                                            \
        else if (dst == a)                                                     \
            NAME##_da((T *)dst, (const T *)b, n);                              \
        else if (dst == b)                                                     \
            NAME##_db((T *)dst, (const T *)a, n);                              \
        else                                                                   \
            NAME##_3((T *)dst, (const T *)a, (const T *)b, n);                 \
    }

/* Element functions for one integer type (T signed or unsigned, U unsigned of
 * the same width). */
#define LOOM_RG_INT_ELEMS(ATTR, P, T, U)                                       \
    ATTR static inline T P##_sum_e(T x, T y) { return LOOM_RG_ISUM(T, U, x, y); } \
    ATTR static inline T P##_prod_e(T x, T y) { return LOOM_RG_IPROD(T, U, x, y); } \
    ATTR static inline T P##_min_e(T x, T y) { return LOOM_RG_MIN(x, y); }     \
    ATTR static inline T P##_max_e(T x, T y) { return LOOM_RG_MAX(x, y); }

#define LOOM_RG_FLOAT_ELEMS(ATTR, P, T)                                        \
    ATTR static inline T P##_sum_e(T x, T y) { return LOOM_RG_FSUM(x, y); }    \
    ATTR static inline T P##_prod_e(T x, T y) { return LOOM_RG_FPROD(x, y); }  \
    ATTR static inline T P##_min_e(T x, T y) { return LOOM_RG_FMIN(x, y); }    \
    ATTR static inline T P##_max_e(T x, T y) { return LOOM_RG_FMAX(x, y); }

/* 16-bit floats: widen to float32, operate, round back to nearest even. */
#define LOOM_RG_HALF_ELEMS(ATTR, P, TOF, FROMF)                                \
    ATTR static inline uint16_t P##_sum_e(uint16_t x, uint16_t y)              \
    { return FROMF(LOOM_RG_FSUM(TOF(x), TOF(y))); }                            \
    ATTR static inline uint16_t P##_prod_e(uint16_t x, uint16_t y)             \
    { return FROMF(LOOM_RG_FPROD(TOF(x), TOF(y))); }                           \
    ATTR static inline uint16_t P##_min_e(uint16_t x, uint16_t y)              \
    { float fx = TOF(x), fy = TOF(y); return FROMF(LOOM_RG_FMIN(fx, fy)); }    \
    ATTR static inline uint16_t P##_max_e(uint16_t x, uint16_t y)              \
    { float fx = TOF(x), fy = TOF(y); return FROMF(LOOM_RG_FMAX(fx, fy)); }

/* The four op kernels of one dtype, from its element functions. */
#define LOOM_RG_OPS(ATTR, P, T)                                                \
    LOOM_RG_KERNEL(ATTR, P##_sum, T, P##_sum_e)                                \
    LOOM_RG_KERNEL(ATTR, P##_prod, T, P##_prod_e)                              \
    LOOM_RG_KERNEL(ATTR, P##_min, T, P##_min_e)                                \
    LOOM_RG_KERNEL(ATTR, P##_max, T, P##_max_e)

/* One table row: {SUM, PROD, MIN, MAX}. */
#define LOOM_RG_ROW(P) { P##_sum, P##_prod, P##_min, P##_max }

#endif
