/* reduce_convert.h - inline float16/bfloat16 <-> float32 conversions.
 *
 * Portable (integer bit manipulation only, so the result does not depend on
 * the FPU rounding mode or FTZ/DAZ). The kernels inline these; reduce.c
 * exports them as loom_half_to_float() and friends. */
#ifndef LOOM_REDUCE_CONVERT_H
#define LOOM_REDUCE_CONVERT_H

#include <stdint.h>
#include <string.h>

static inline uint32_t loom_rc_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float loom_rc_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16 -> binary32, exact for every input (NaN payload kept, shifted). */
static inline float loom_rc_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1fu) /* inf / NaN */
        return loom_rc_f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return loom_rc_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
        return loom_rc_f32_from_bits(sign);
    /* subnormal: mant * 2^-24; normalise so the leading 1 is bit 10 */
    uint32_t shift = 0;
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        shift++;
    }
    /* value = 1.m * 2^(-14 - shift) */
    return loom_rc_f32_from_bits(sign | ((113u - shift) << 23) |
                                 ((mant & 0x3ffu) << 13));
}

/* binary32 -> binary16, round to nearest even; overflow gives inf; NaN stays a
 * (quiet) NaN. */
static inline uint16_t loom_rc_f2h(float f)
{
    uint32_t x = loom_rc_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: quiet it, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (halfway past 65504) or inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: a normal half */
        uint32_t odd = (ax >> 13) & 1u;
        /* rebias 127 -> 15, then add 0x0fff (+1 if odd) so the carry out of
         * the dropped 13 bits rounds to nearest, ties to even */
        ax += 0xc8000fffu + odd; /* 0xc8000000 == -(112 << 23) mod 2^32 */
        return (uint16_t)(sign | (ax >> 13));
    }
    if (ax < 0x33000000u) /* <= 2^-25 (half the smallest subnormal): 0 */
        return (uint16_t)sign;
    /* subnormal half: value / 2^-24 = mant24 >> shift, shift in 14..24 */
    uint32_t e = ax >> 23;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++; /* may carry into 0x400, the smallest normal: still correct */
    return (uint16_t)(sign | q);
}

/* All-ones when cond, else zero; and a select built from it. Written as
 * masks because GCC keeps some ?: as branches, which stops vectorisation. */
static inline uint32_t loom_rc_mask(int cond)
{
    return (uint32_t)0 - (uint32_t)(cond != 0);
}

static inline uint32_t loom_rc_select(uint32_t mask, uint32_t yes, uint32_t no)
{
    return (yes & mask) | (no & ~mask);
}

/* Variants for the portable kernels: no loops or early returns, so GCC can
 * vectorise them (SSE2 has no per-lane variable shift, hence the float
 * tricks). Same results as loom_rc_h2f/loom_rc_f2h under the default
 * rounding mode (round to nearest), which the kernels' float arithmetic
 * assumes anyway; FTZ/DAZ do not matter because no float operation here
 * takes or makes a subnormal float32. */
static inline float loom_rc_h2f_vec(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t abs = h & 0x7fffu;
    uint32_t normal = (abs << 13) + (112u << 23);          /* rebias 15 -> 127 */
    uint32_t special = (abs << 13) | 0x7f800000u;          /* inf / NaN */
    /* subnormal: mant * 2^-24, exact in float32 and never subnormal there */
    uint32_t sub = loom_rc_f32_bits((float)(int32_t)abs * 0x1p-24f);
    uint32_t r = loom_rc_select(loom_rc_mask(abs >= 0x7c00u), special, normal);
    r = loom_rc_select(loom_rc_mask(abs < 0x0400u), sub, r);
    return loom_rc_f32_from_bits(sign | r);
}

static inline uint16_t loom_rc_f2h_vec(float f)
{
    uint32_t x = loom_rc_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    uint32_t odd = (ax >> 13) & 1u;
    uint32_t normal = (ax + 0xc8000fffu + odd) >> 13;       /* as loom_rc_f2h */
    /* |f| < 2^-14: adding 0.5 leaves the bits below 2^-24 to the FPU's round
     * to nearest even; the difference in bits is the subnormal half (0x400,
     * the smallest normal, when it rounds up) */
    uint32_t is_small = loom_rc_mask(ax < 0x38800000u);
    float small = loom_rc_f32_from_bits(ax & is_small);
    uint32_t sub = loom_rc_f32_bits(small + 0.5f) - 0x3f000000u;
    uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
    uint32_t r = loom_rc_select(is_small, sub, normal);
    r = loom_rc_select(loom_rc_mask(ax >= 0x477ff000u), 0x7c00u, r);
    r = loom_rc_select(loom_rc_mask(ax > 0x7f800000u), nan, r);
    return (uint16_t)(sign | r);
}

/* bfloat16 -> binary32: the upper 16 bits. */
static inline float loom_rc_b2f(uint16_t b)
{
    return loom_rc_f32_from_bits((uint32_t)b << 16);
}

/* binary32 -> bfloat16, round to nearest even; NaN stays a quiet NaN. */
static inline uint16_t loom_rc_f2b(float f)
{
    uint32_t x = loom_rc_f32_bits(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x0040u;
    /* branch-free select so the kernels vectorise */
    return (uint16_t)(((x & 0x7fffffffu) > 0x7f800000u) ? nan : rounded);
}

#endif
