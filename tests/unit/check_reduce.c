/* check_reduce.c - reduction kernels against an independent scalar reference.
 *
 * The reference here is written from the definitions, not from the library:
 * half and bfloat16 conversions go through frexp/ldexp/rint on doubles, float
 * ops are done in double and rounded once to float (exact for + and * of two
 * floats since 53 >= 2 * 24 + 2), integers are computed in 64 bits and then
 * truncated. Every available kernel set (generic, avx2, auto) is checked. */
#include "build_config.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "reduce/reduce.h"
#include "reduce/reduce_convert.h" /* the kernels' vectorisable variants */

/* Check's ck_assert records a mark point (a write to a pipe) on every pass;
 * the loops here run millions of checks, so they test first and abort only
 * on failure. */
#define REQUIRE(cond, ...)                                                     \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg(__VA_ARGS__);                                         \
    } while (0)
#define REQUIRE_U16(got, want, what)                                           \
    do {                                                                       \
        unsigned g_ = (got), w_ = (want);                                      \
        if (g_ != w_)                                                          \
            ck_abort_msg("%s: 0x%04x, want 0x%04x", (what), g_, w_);           \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Independent reference conversions                                         */
/* ------------------------------------------------------------------------ */

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int half_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }
static int bf16_is_nan(uint16_t b) { return (b & 0x7fff) > 0x7f80; }

/* binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits. */
static double ref_h2d(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

/* Round a finite double to binary16, nearest even. */
static uint16_t ref_d2h(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    if (isnan(v))
        return 0x7e00;
    v = fabs(v);
    if (v < ldexp(1.0, -14)) { /* subnormal range: units of 2^-24 */
        double r = rint(ldexp(v, 24));
        return (uint16_t)(sign | (uint16_t)r); /* r == 1024 is 2^-14 */
    }
    if (isinf(v))
        return sign | 0x7c00;
    int ex;
    double fr = frexp(v, &ex); /* v = fr * 2^ex, fr in [0.5, 1) */
    double r = rint(ldexp(fr, 11)); /* 11 significant bits */
    if (r == 2048.0) {
        r = 1024.0;
        ex++;
    }
    int biased = ex + 14;
    if (biased >= 31)
        return sign | 0x7c00;
    return (uint16_t)(sign | (biased << 10) | ((int)r - 1024));
}

/* bfloat16: 1 sign, 8 exponent (bias 127), 7 fraction bits. */
static double ref_b2d(uint16_t b)
{
    int e = (b >> 7) & 0xff, m = b & 0x7f;
    double s = (b & 0x8000) ? -1.0 : 1.0;
    if (e == 255)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, -133);
    return s * ldexp(128 + m, e - 134);
}

static uint16_t ref_d2b(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    if (isnan(v))
        return 0x7fc0;
    v = fabs(v);
    if (v < ldexp(1.0, -126)) {
        double r = rint(ldexp(v, 133));
        return (uint16_t)(sign | (uint16_t)r);
    }
    if (isinf(v))
        return sign | 0x7f80;
    int ex;
    double fr = frexp(v, &ex);
    double r = rint(ldexp(fr, 8));
    if (r == 256.0) {
        r = 128.0;
        ex++;
    }
    int biased = ex + 126;
    if (biased >= 255)
        return sign | 0x7f80;
    return (uint16_t)(sign | (biased << 7) | ((int)r - 128));
}

/* ------------------------------------------------------------------------ */
/* Conversion tests                                                          */
/* ------------------------------------------------------------------------ */

/* loom_float_to_half(), after checking that the portable kernels' variant
 * (loom_rc_f2h_vec) gives the same bits. */
static uint16_t f2h_both(float f)
{
    uint16_t h = loom_float_to_half(f), v = loom_rc_f2h_vec(f);
    REQUIRE(h == v, "float %a: loom_float_to_half 0x%04x, vector variant 0x%04x",
            f, h, v);
    return h;
}

START_TEST(test_half_exhaustive)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = loom_half_to_float(h);
        double want = ref_h2d(h);
        REQUIRE(f32_to_bits(loom_rc_h2f_vec(h)) == f32_to_bits(f),
                "half 0x%04x: vector variant differs", h);
        if (half_is_nan(h)) {
            REQUIRE(isnan(f), "half 0x%04x -> %a, want NaN", h, f);
            REQUIRE(half_is_nan(f2h_both(f)),
                          "half NaN 0x%04x did not stay NaN", h);
            continue;
        }
        REQUIRE((double)f == want && !signbit(f) == !signbit(want),
                      "half 0x%04x -> %a, want %a", h, f, want);
        REQUIRE(ref_d2h(want) == h, "reference round trip of 0x%04x", h);
        REQUIRE(f2h_both(f) == h,
                      "half 0x%04x round trip gave 0x%04x", h,
                      f2h_both(f));
    }
}
END_TEST

/* For each pair of adjacent finite halves, the float midpoint rounds to the
 * even one and its float neighbours to the nearer one. */
START_TEST(test_half_halfway)
{
    for (uint32_t i = 0; i < 0x7c00; i++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t lo = (uint16_t)(i | (neg ? 0x8000 : 0));
            uint16_t hi = (uint16_t)(lo + 1); /* 0x7bff + 1 is inf */
            /* past 0x7bff (65504) the next step would be 65536 */
            double hi_val = (i == 0x7bff) ? (neg ? -65536.0 : 65536.0)
                                          : ref_h2d(hi);
            double mid = (ref_h2d(lo) + hi_val) / 2;
            float fmid = (float)mid;
            REQUIRE((double)fmid == mid, "midpoint not exact in float");
            uint16_t even = (lo & 1) ? hi : lo;
            REQUIRE(f2h_both(fmid) == even,
                          "midpoint %a of 0x%04x/0x%04x -> 0x%04x, want 0x%04x",
                          mid, lo, hi, f2h_both(fmid), even);
            REQUIRE_U16(ref_d2h(fmid), even, "reference midpoint");
            float below = nextafterf(fmid, 0.0f); /* toward lo */
            float above = nextafterf(fmid, neg ? -INFINITY : INFINITY);
            REQUIRE(f2h_both(below) == lo,
                          "%a -> 0x%04x, want 0x%04x", below,
                          f2h_both(below), lo);
            REQUIRE(f2h_both(above) == hi,
                          "%a -> 0x%04x, want 0x%04x", above,
                          f2h_both(above), hi);
        }
    }
    /* explicit edges */
    ck_assert_uint_eq(f2h_both(65504.0f), 0x7bff);
    ck_assert_uint_eq(f2h_both(65519.996f), 0x7bff);
    ck_assert_uint_eq(f2h_both(65520.0f), 0x7c00);
    ck_assert_uint_eq(f2h_both(-1e9f), 0xfc00);
    ck_assert_uint_eq(f2h_both(INFINITY), 0x7c00);
    ck_assert_uint_eq(f2h_both(-INFINITY), 0xfc00);
    ck_assert_uint_eq(f2h_both(0x1p-24f), 0x0001);
    ck_assert_uint_eq(f2h_both(0x1p-25f), 0x0000);     /* tie -> 0 */
    ck_assert_uint_eq(f2h_both(0x1.000002p-25f), 0x0001);
    ck_assert_uint_eq(f2h_both(0x3p-25f), 0x0002);     /* tie -> 2 */
    ck_assert_uint_eq(f2h_both(-0.0f), 0x8000);
    ck_assert_uint_eq(f2h_both(1e-30f), 0x0000);
    ck_assert_uint_eq(f2h_both(FLT_TRUE_MIN), 0x0000);
    ck_assert_uint_eq(f2h_both(1.0f + 0x1p-11f), 0x3c00);
    ck_assert_uint_eq(f2h_both(1.0f + 0x3p-11f), 0x3c02);
    ck_assert(half_is_nan(f2h_both(NAN)));
    ck_assert(half_is_nan(f2h_both(bits_to_f32(0x7f800001)))); /* sNaN */
    ck_assert(half_is_nan(f2h_both(bits_to_f32(0xffc00000))));
}
END_TEST

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

START_TEST(test_half_random_floats)
{
    uint64_t s = 0x1234567ull;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        if (i & 1) /* concentrate on the half range (exponents 97..143) */
            u = (u & 0x807fffffu) | ((97u + (u >> 23) % 47u) << 23);
        float f = bits_to_f32(u);
        uint16_t got = f2h_both(f);
        if (isnan(f)) {
            REQUIRE(half_is_nan(got), "NaN 0x%08x -> 0x%04x", u, got);
            continue;
        }
        REQUIRE(got == ref_d2h(f), "float 0x%08x (%a) -> 0x%04x, want 0x%04x",
                      u, f, got, ref_d2h(f));
    }
}
END_TEST

START_TEST(test_bf16_exhaustive)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t b = (uint16_t)i;
        float f = loom_bf16_to_float(b);
        REQUIRE(f32_to_bits(f) == (uint32_t)b << 16, "bf16 0x%04x widening", b);
        if (bf16_is_nan(b)) {
            uint16_t back = loom_float_to_bf16(f);
            REQUIRE(isnan(f), "bf16 0x%04x -> not NaN", b);
            REQUIRE(bf16_is_nan(back) && (back & 0x0040),
                          "bf16 NaN 0x%04x -> 0x%04x, want a quiet NaN", b, back);
            continue;
        }
        REQUIRE((double)f == ref_b2d(b), "bf16 0x%04x reference", b);
        REQUIRE_U16(ref_d2b(f), b, "reference bf16 round trip");
        REQUIRE_U16(loom_float_to_bf16(f), b, "bf16 round trip");
        /* halfway to the next one up in magnitude, and its neighbours */
        if ((b & 0x7fff) < 0x7f80) {
            uint32_t mid = ((uint32_t)b << 16) | 0x8000u;
            uint16_t even = (b & 1) ? (uint16_t)(b + 1) : b;
            REQUIRE(loom_float_to_bf16(bits_to_f32(mid)) == even,
                          "bf16 midpoint 0x%08x -> 0x%04x, want 0x%04x", mid,
                          loom_float_to_bf16(bits_to_f32(mid)), even);
            REQUIRE_U16(ref_d2b(bits_to_f32(mid)), even, "reference bf16 midpoint");
            REQUIRE_U16(loom_float_to_bf16(bits_to_f32(mid - 1)), b,
                        "below a bf16 midpoint");
            REQUIRE_U16(loom_float_to_bf16(bits_to_f32(mid + 1)),
                        (uint16_t)(b + 1), "above a bf16 midpoint");
        }
    }
    ck_assert_uint_eq(loom_float_to_bf16(FLT_MAX), 0x7f80); /* rounds up */
    ck_assert_uint_eq(loom_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    ck_assert_uint_eq(loom_float_to_bf16(1.0f + 0x3p-8f), 0x3f82);
    ck_assert_uint_eq(loom_float_to_bf16(bits_to_f32(0x7f800001)) & 0xffc0,
                      0x7fc0); /* signalling NaN whose payload is all low bits */
}
END_TEST

START_TEST(test_bf16_random_floats)
{
    uint64_t s = 0xabcdefull;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        float f = bits_to_f32(u);
        uint16_t got = loom_float_to_bf16(f);
        if (isnan(f)) {
            REQUIRE(bf16_is_nan(got), "NaN 0x%08x -> 0x%04x", u, got);
            continue;
        }
        REQUIRE(got == ref_d2b(f), "float 0x%08x -> 0x%04x, want 0x%04x",
                      u, got, ref_d2b(f));
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reference kernels                                                         */
/* ------------------------------------------------------------------------ */

static const size_t dt_size[LOOM_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2};

static int dt_is_signed_int(loom_dtype_t dt)
{
    return dt == LOOM_INT8 || dt == LOOM_INT16 || dt == LOOM_INT32 || dt == LOOM_INT64;
}

static int dt_is_int(loom_dtype_t dt)
{
    return dt <= LOOM_UINT64 || dt == LOOM_INT16 || dt == LOOM_UINT16;
}

static int64_t load_s(loom_dtype_t dt, const void *p)
{
    switch (dt) {
    case LOOM_INT8: { int8_t v; memcpy(&v, p, 1); return v; }
    case LOOM_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case LOOM_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

static uint64_t load_u(loom_dtype_t dt, const void *p)
{
    switch (dt) {
    case LOOM_UINT8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case LOOM_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case LOOM_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* Store the low bytes of a two's complement value (little-endian aware). */
static void store_bits(loom_dtype_t dt, void *p, uint64_t v)
{
    switch (dt_size[dt]) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* Floats of every width as double; NaN stays NaN. */
static double load_f(loom_dtype_t dt, const void *p)
{
    switch (dt) {
    case LOOM_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return ref_h2d(v); }
    case LOOM_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return ref_b2d(v); }
    case LOOM_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    default: { double v; memcpy(&v, p, 8); return v; }
    }
}

/* NaN-propagating min/max; equal operands (also -0 vs +0) give x. */
static double ref_fmin(double x, double y)
{
    if (isnan(x))
        return x;
    if (isnan(y))
        return y;
    return (y < x) ? y : x;
}

static double ref_fmax(double x, double y)
{
    if (isnan(x))
        return x;
    if (isnan(y))
        return y;
    return (y > x) ? y : x;
}

static void ref_elem(loom_dtype_t dt, loom_redop_t op, void *d, const void *a,
                     const void *b)
{
    if (dt_is_int(dt)) {
        uint64_t r;
        if (dt_is_signed_int(dt)) {
            int64_t x = load_s(dt, a), y = load_s(dt, b);
            switch (op) {
            case LOOM_PROD: r = (uint64_t)x * (uint64_t)y; break;
            case LOOM_MIN: r = (uint64_t)(y < x ? y : x); break;
            case LOOM_MAX: r = (uint64_t)(y > x ? y : x); break;
            default: r = (uint64_t)x + (uint64_t)y; break;
            }
        } else {
            uint64_t x = load_u(dt, a), y = load_u(dt, b);
            switch (op) {
            case LOOM_PROD: r = x * y; break;
            case LOOM_MIN: r = y < x ? y : x; break;
            case LOOM_MAX: r = y > x ? y : x; break;
            default: r = x + y; break;
            }
        }
        store_bits(dt, d, r);
        return;
    }
    double x = load_f(dt, a), y = load_f(dt, b), r;
    switch (op) {
    case LOOM_PROD: r = x * y; break;
    case LOOM_MIN: r = ref_fmin(x, y); break;
    case LOOM_MAX: r = ref_fmax(x, y); break;
    default: r = x + y; break;
    }
    if (dt == LOOM_FLOAT64) {
        memcpy(d, &r, 8);
        return;
    }
    /* 16-bit types reduce in float32: one rounding to float, one to 16 bits */
    float f = (float)r;
    if (dt == LOOM_FLOAT32) {
        memcpy(d, &f, 4);
    } else {
        uint16_t h = (dt == LOOM_FLOAT16) ? ref_d2h(f) : ref_d2b(f);
        memcpy(d, &h, 2);
    }
}

/* Element equality: bitwise, any NaN equal to any NaN. */
static int elem_eq(loom_dtype_t dt, const void *x, const void *y)
{
    uint64_t u, v;
    switch (dt_size[dt]) {
    case 1: u = *(const uint8_t *)x; v = *(const uint8_t *)y; break;
    case 2: { uint16_t p, q; memcpy(&p, x, 2); memcpy(&q, y, 2); u = p; v = q; break; }
    case 4: { uint32_t p, q; memcpy(&p, x, 4); memcpy(&q, y, 4); u = p; v = q; break; }
    default: memcpy(&u, x, 8); memcpy(&v, y, 8); break;
    }
    if (u == v)
        return 1;
    switch (dt) {
    case LOOM_FLOAT16: return half_is_nan((uint16_t)u) && half_is_nan((uint16_t)v);
    case LOOM_BFLOAT16: return bf16_is_nan((uint16_t)u) && bf16_is_nan((uint16_t)v);
    case LOOM_FLOAT32:
        return (u & 0x7fffffffu) > 0x7f800000u && (v & 0x7fffffffu) > 0x7f800000u;
    case LOOM_FLOAT64:
        return (u << 1) > (0x7ff0000000000000ull << 1) &&
               (v << 1) > (0x7ff0000000000000ull << 1);
    default: return 0;
    }
}

static void fmt_elem(loom_dtype_t dt, const void *p, char *out, size_t len)
{
    uint64_t u = 0;
    memcpy(&u, p, dt_size[dt]); /* little-endian host */
    if (dt_is_int(dt))
        snprintf(out, len, "0x%llx", (unsigned long long)u);
    else
        snprintf(out, len, "0x%llx (%a)", (unsigned long long)u, load_f(dt, p));
}

/* ------------------------------------------------------------------------ */
/* Input generation                                                          */
/* ------------------------------------------------------------------------ */

static void fill_elem(loom_dtype_t dt, void *p, uint64_t *s)
{
    uint64_t r = rng_next(s);
    unsigned pick = (unsigned)(r >> 60); /* 0..15 */
    uint64_t v = rng_next(s);

    switch (dt) {
    case LOOM_INT8: case LOOM_UINT8: case LOOM_INT16: case LOOM_UINT16:
    case LOOM_INT32: case LOOM_UINT32: case LOOM_INT64: case LOOM_UINT64: {
        static const int64_t edges[] = {0, 1, -1, 2, -2, INT64_MAX, INT64_MIN};
        unsigned bits = (unsigned)dt_size[dt] * 8;
        if (pick < 3) {
            int64_t e = edges[v % 7];
            if (e == INT64_MAX) /* max of the type */
                v = dt_is_signed_int(dt) ? (~0ull >> (65 - bits)) : ~0ull;
            else if (e == INT64_MIN) /* min of the type */
                v = dt_is_signed_int(dt) ? (1ull << (bits - 1)) : 0;
            else
                v = (uint64_t)e;
        } else if (pick < 6) {
            v %= 16; /* small values make PROD chains meaningful */
        }
        store_bits(dt, p, v);
        break;
    }
    case LOOM_FLOAT16: {
        static const uint16_t edges[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00,
                                         0xfe01, 0x7bff, 0xfbff, 0x0001, 0x8001,
                                         0x03ff, 0x0400, 0x3c00, 0x1000, 0x3c01,
                                         0x7d00};
        uint16_t h;
        if (pick < 3)
            h = edges[v % 16];
        else if (pick < 9) /* full range, subnormals, inf and NaN */
            h = (uint16_t)v;
        else /* similar magnitudes (exponents 12..18) so sums round */
            h = (uint16_t)((v & 0x83ff) | ((12 + (v >> 16) % 7) << 10));
        memcpy(p, &h, 2);
        break;
    }
    case LOOM_BFLOAT16: {
        static const uint16_t edges[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0,
                                         0xffc1, 0x7f7f, 0xff7f, 0x0001, 0x8001,
                                         0x007f, 0x0080, 0x3f80, 0x3b80, 0x3f81,
                                         0x7fa0};
        uint16_t b;
        if (pick < 3)
            b = edges[v % 16];
        else if (pick < 9)
            b = (uint16_t)v;
        else
            b = (uint16_t)((v & 0x807f) | ((124 + (v >> 16) % 7) << 7));
        memcpy(p, &b, 2);
        break;
    }
    case LOOM_FLOAT32: {
        static const uint32_t edges[] = {0x00000000, 0x80000000, 0x7f800000,
                                         0xff800000, 0x7fc00000, 0xffc00001,
                                         0x7f7fffff, 0xff7fffff, 0x00000001,
                                         0x80000001, 0x007fffff, 0x00800000,
                                         0x3f800000, 0x33800000, 0x3f800001,
                                         0x7f800001};
        uint32_t u;
        if (pick < 3)
            u = edges[v % 16];
        else if (pick < 7)
            u = (uint32_t)v;
        else
            u = (uint32_t)((v & 0x807fffffu) | ((120 + (v >> 32) % 15) << 23));
        memcpy(p, &u, 4);
        break;
    }
    default: {
        static const uint64_t edges[] = {
            0, 0x8000000000000000ull, 0x7ff0000000000000ull,
            0xfff0000000000000ull, 0x7ff8000000000000ull, 0xfff8000000000001ull,
            0x7fefffffffffffffull, 0xffefffffffffffffull, 1,
            0x8000000000000001ull, 0x000fffffffffffffull, 0x0010000000000000ull,
            0x3ff0000000000000ull, 0x3ca0000000000000ull, 0x3ff0000000000001ull,
            0x7ff0000000000001ull};
        if (pick < 3)
            v = edges[v % 16];
        else if (pick >= 7)
            v = (v & 0x800fffffffffffffull) |
                ((uint64_t)(1015 + (rng_next(s) % 15)) << 52);
        memcpy(p, &v, 8);
        break;
    }
    }
}

static void fill(loom_dtype_t dt, void *buf, size_t count, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    unsigned char *p = buf;
    for (size_t i = 0; i < count; i++)
        fill_elem(dt, p + i * dt_size[dt], &s);
}

/* ------------------------------------------------------------------------ */
/* Kernel tests                                                              */
/* ------------------------------------------------------------------------ */

static const size_t counts[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 1000003};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* Compare got against want; report the first mismatch with its context. */
static void expect_equal(loom_dtype_t dt, loom_redop_t op, const char *impl,
                         const char *mode, size_t count, size_t misalign,
                         const unsigned char *a, const unsigned char *b,
                         const unsigned char *got, const unsigned char *want)
{
    size_t sz = dt_size[dt];
    if (count == 0 || memcmp(got, want, count * sz) == 0)
        return;
    for (size_t i = 0; i < count; i++) {
        if (elem_eq(dt, got + i * sz, want + i * sz))
            continue;
        char sa[64], sb[64], sg[64], sw[64];
        fmt_elem(dt, a + i * sz, sa, sizeof sa);
        fmt_elem(dt, b + i * sz, sb, sizeof sb);
        fmt_elem(dt, got + i * sz, sg, sizeof sg);
        fmt_elem(dt, want + i * sz, sw, sizeof sw);
        ck_abort_msg("%s %s impl=%s %s count=%zu misalign=%zu: element %zu: "
                     "%s op %s = %s, want %s",
                     loom_dtype_name(dt), loom_redop_name(op), impl, mode, count,
                     misalign, i, sa, sb, sg, sw);
    }
}

static void run_case(loom_dtype_t dt, loom_redop_t op, size_t count,
                     size_t misalign, uint64_t seed)
{
    size_t sz = dt_size[dt];
    size_t bytes = (count + 1) * sz;
    unsigned char *ma = malloc(bytes), *mb = malloc(bytes), *md = malloc(bytes);
    unsigned char *want = malloc(bytes), *want_aa = malloc(bytes);
    ck_assert(ma && mb && md && want && want_aa);
    unsigned char *a = ma + misalign * sz, *b = mb + misalign * sz;
    unsigned char *d = md + misalign * sz;

    fill(dt, a, count, seed);
    fill(dt, b, count, seed + 7777);
    for (size_t i = 0; i < count; i++) {
        ref_elem(dt, op, want + i * sz, a + i * sz, b + i * sz);
        ref_elem(dt, op, want_aa + i * sz, a + i * sz, a + i * sz);
    }

    /* "auto" is one of the others (checked in test_get_invalid) */
    for (int impl = LOOM_REDUCE_IMPL_GENERIC; impl < LOOM_REDUCE_IMPL_COUNT; impl++) {
        loom_reduce_fn fn = loom_reduce_get_impl(dt, op, (loom_reduce_impl_t)impl);
        const char *name = loom_reduce_impl_name((loom_reduce_impl_t)impl);
        if (!loom_reduce_impl_available((loom_reduce_impl_t)impl)) {
            REQUIRE(fn == NULL, "unavailable impl %s gave a kernel", name);
            continue;
        }
        REQUIRE(fn != NULL, "no %s kernel for %s %s", name, loom_dtype_name(dt),
                loom_redop_name(op));

        /* a sentinel after the last element must survive */
        memset(md, 0xa5, bytes);
        fn(d, a, b, count);
        expect_equal(dt, op, name, "dst distinct", count, misalign, a, b, d, want);
        for (size_t k = (misalign + count) * sz; k < bytes; k++)
            REQUIRE(md[k] == 0xa5, "%s wrote past count", name);

        memcpy(d, a, count * sz);
        fn(d, d, b, count);
        expect_equal(dt, op, name, "dst == a", count, misalign, a, b, d, want);

        memcpy(d, b, count * sz);
        fn(d, a, d, count);
        expect_equal(dt, op, name, "dst == b", count, misalign, a, b, d, want);

        memcpy(d, a, count * sz);
        fn(d, d, d, count);
        expect_equal(dt, op, name, "dst == a == b", count, misalign, a, a, d,
                     want_aa);
    }

    /* the convenience entry point */
    memset(d, 0, count * sz);
    loom_reduce_apply(d, a, b, count, dt, op);
    expect_equal(dt, op, "apply", "dst distinct", count, misalign, a, b, d, want);

    free(ma);
    free(mb);
    free(md);
    free(want);
    free(want_aa);
}

/* _i enumerates dtype x op. */
START_TEST(test_kernels)
{
    loom_dtype_t dt = (loom_dtype_t)(_i / LOOM_REDOP_COUNT);
    loom_redop_t op = (loom_redop_t)(_i % LOOM_REDOP_COUNT);
    for (size_t c = 0; c < NCOUNTS; c++) {
        /* the million-element case runs misaligned only, to stay fast */
        for (size_t mis = (counts[c] > 1000) ? 1 : 0; mis < 2; mis++)
            run_case(dt, op, counts[c], mis, (uint64_t)(_i * 1000 + c * 10 + mis));
    }
}
END_TEST

/* float16/bfloat16: every 16-bit a against a set of b, through each kernel
 * set (the F16C path converts in hardware; it must round like the
 * reference). 65536 + 5 elements so the scalar tail runs too. */
START_TEST(test_half_kernels_exhaustive)
{
    loom_dtype_t dt = (_i / LOOM_REDOP_COUNT) ? LOOM_BFLOAT16 : LOOM_FLOAT16;
    loom_redop_t op = (loom_redop_t)(_i % LOOM_REDOP_COUNT);
    static const uint16_t half_bs[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x0001,
                                       0x1000, 0x7bff, 0x7c00, 0xfc00, 0x7e00,
                                       0x3555, 0x0400, 0x83ff};
    static const uint16_t bf16_bs[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x0001,
                                       0x3b80, 0x7f7f, 0x7f80, 0xff80, 0x7fc0,
                                       0x3eab, 0x0080, 0x807f};
    const uint16_t *bs = (dt == LOOM_FLOAT16) ? half_bs : bf16_bs;
    size_t n = 65536 + 5;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *d = malloc(n * 2),
             *want = malloc(n * 2);
    ck_assert(a && b && d && want);
    for (size_t i = 0; i < n; i++)
        a[i] = (uint16_t)(i * 40503u); /* a permutation of all 16-bit values */

    for (size_t k = 0; k < 13; k++) {
        for (size_t i = 0; i < n; i++) {
            b[i] = bs[k];
            ref_elem(dt, op, &want[i], &a[i], &b[i]);
        }
        for (int impl = 0; impl < LOOM_REDUCE_IMPL_COUNT; impl++) {
            loom_reduce_fn fn = loom_reduce_get_impl(dt, op, (loom_reduce_impl_t)impl);
            if (fn == NULL)
                continue;
            fn(d, a, b, n);
            expect_equal(dt, op, loom_reduce_impl_name((loom_reduce_impl_t)impl),
                         "exhaustive", n, 0, (const unsigned char *)a,
                         (const unsigned char *)b, (const unsigned char *)d,
                         (const unsigned char *)want);
        }
    }
    free(a);
    free(b);
    free(d);
    free(want);
}
END_TEST

/* Known answers, independent of both implementations. */
START_TEST(test_known_values)
{
    for (int impl = 0; impl < LOOM_REDUCE_IMPL_COUNT; impl++) {
        loom_reduce_impl_t im = (loom_reduce_impl_t)impl;
        if (!loom_reduce_impl_available(im))
            continue;
        /* float16 sums: ties to even, overflow, subnormals, NaN */
        uint16_t ha[9] = {0x3c00, 0x3c01, 0x7bff, 0x7bff, 0x7bff, 0x0001, 0x7e00,
                          0x7c00, 0x03ff};
        uint16_t hb[9] = {0x1000, 0x1000, 0x7bff, 0x4c00, 0x4800, 0x0001, 0x3c00,
                          0xfc00, 0x0001};
        uint16_t hw[9] = {0x3c00, 0x3c02, 0x7c00, 0x7c00, 0x7bff, 0x0002, 0x7e00,
                          0x7e00, 0x0400};
        uint16_t hd[9];
        loom_reduce_get_impl(LOOM_FLOAT16, LOOM_SUM, im)(hd, ha, hb, 9);
        for (int i = 0; i < 9; i++) {
            if (half_is_nan(hw[i]))
                ck_assert_msg(half_is_nan(hd[i]), "f16 sum %d: 0x%04x", i, hd[i]);
            else
                ck_assert_msg(hd[i] == hw[i], "%s f16 sum %d: 0x%04x, want 0x%04x",
                              loom_reduce_impl_name(im), i, hd[i], hw[i]);
        }
        /* bfloat16 sums */
        uint16_t ba[5] = {0x3f80, 0x3f81, 0x7f7f, 0x7fc0, 0x0001};
        uint16_t bb[5] = {0x3b80, 0x3b80, 0x7f7f, 0x3f80, 0x0001};
        uint16_t bw[5] = {0x3f80, 0x3f82, 0x7f80, 0x7fc0, 0x0002};
        uint16_t bd[5];
        loom_reduce_get_impl(LOOM_BFLOAT16, LOOM_SUM, im)(bd, ba, bb, 5);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(i == 3 ? bf16_is_nan(bd[i]) : bd[i] == bw[i],
                          "bf16 sum %d: 0x%04x, want 0x%04x", i, bd[i], bw[i]);
        ck_assert_uint_eq(bd[4], bw[4]);
        /* float32 min/max propagate NaN from either side */
        float fa[4] = {NAN, 1.0f, 2.0f, -INFINITY};
        float fb[4] = {1.0f, NAN, -3.0f, 5.0f};
        float fd[4];
        loom_reduce_get_impl(LOOM_FLOAT32, LOOM_MIN, im)(fd, fa, fb, 4);
        ck_assert(isnan(fd[0]) && isnan(fd[1]));
        ck_assert(fd[2] == -3.0f && fd[3] == -INFINITY);
        loom_reduce_get_impl(LOOM_FLOAT32, LOOM_MAX, im)(fd, fa, fb, 4);
        ck_assert(isnan(fd[0]) && isnan(fd[1]));
        ck_assert(fd[2] == 2.0f && fd[3] == 5.0f);
        /* integers wrap */
        int8_t ia[3] = {127, -128, 16}, ib[3] = {1, -1, 16}, id[3];
        loom_reduce_get_impl(LOOM_INT8, LOOM_SUM, im)(id, ia, ib, 3);
        ck_assert_int_eq(id[0], -128);
        ck_assert_int_eq(id[1], 127);
        ck_assert_int_eq(id[2], 32);
        loom_reduce_get_impl(LOOM_INT8, LOOM_PROD, im)(id, ia, ib, 3);
        ck_assert_int_eq(id[0], 127);
        ck_assert_int_eq(id[1], -128);
        ck_assert_int_eq(id[2], 0);
        int64_t la[2] = {INT64_MAX, INT64_MIN}, lb[2] = {1, INT64_MIN}, ld[2];
        loom_reduce_get_impl(LOOM_INT64, LOOM_SUM, im)(ld, la, lb, 2);
        ck_assert(ld[0] == INT64_MIN && ld[1] == 0);
        loom_reduce_get_impl(LOOM_INT64, LOOM_MIN, im)(ld, la, lb, 2);
        ck_assert(ld[0] == 1 && ld[1] == INT64_MIN);
        uint32_t ua[2] = {0xffffffffu, 0x10000u}, ub[2] = {2, 0x10000u}, ud[2];
        loom_reduce_get_impl(LOOM_UINT32, LOOM_SUM, im)(ud, ua, ub, 2);
        ck_assert(ud[0] == 1 && ud[1] == 0x20000u);
        loom_reduce_get_impl(LOOM_UINT32, LOOM_PROD, im)(ud, ua, ub, 2);
        ck_assert(ud[0] == 0xfffffffeu && ud[1] == 0);
        /* 16-bit integers wrap at 16 bits and compare signed or not */
        int16_t sa[3] = {32767, -32768, -5}, sb[3] = {1, -1, 7}, sd[3];
        loom_reduce_get_impl(LOOM_INT16, LOOM_SUM, im)(sd, sa, sb, 3);
        ck_assert(sd[0] == -32768 && sd[1] == 32767 && sd[2] == 2);
        loom_reduce_get_impl(LOOM_INT16, LOOM_MIN, im)(sd, sa, sb, 3);
        ck_assert(sd[0] == 1 && sd[1] == -32768 && sd[2] == -5);
        loom_reduce_get_impl(LOOM_INT16, LOOM_PROD, im)(sd, sa, sb, 3);
        ck_assert(sd[0] == 32767 && sd[1] == -32768 && sd[2] == -35);
        uint16_t wa[3] = {0xffffu, 0x8000u, 3}, wb[3] = {2, 2, 0xfffeu}, wd[3];
        loom_reduce_get_impl(LOOM_UINT16, LOOM_SUM, im)(wd, wa, wb, 3);
        ck_assert(wd[0] == 1 && wd[1] == 0x8002u && wd[2] == 1);
        loom_reduce_get_impl(LOOM_UINT16, LOOM_MAX, im)(wd, wa, wb, 3);
        ck_assert(wd[0] == 0xffffu && wd[1] == 0x8000u && wd[2] == 0xfffeu);
    }
}
END_TEST

START_TEST(test_get_invalid)
{
    ck_assert(loom_reduce_get(LOOM_DTYPE_COUNT, LOOM_SUM) == NULL);
    ck_assert(loom_reduce_get(LOOM_FLOAT32, LOOM_REDOP_COUNT) == NULL);
    ck_assert(loom_reduce_get((loom_dtype_t)-1, LOOM_SUM) == NULL);
    ck_assert(loom_reduce_get_impl(LOOM_FLOAT32, LOOM_SUM, LOOM_REDUCE_IMPL_COUNT) == NULL);
    ck_assert(loom_reduce_get(LOOM_FLOAT32, LOOM_AVG) ==
              loom_reduce_get(LOOM_FLOAT32, LOOM_SUM));
    /* auto is the AVX2 set where the CPU has it, else the generic one */
    loom_reduce_impl_t best = loom_reduce_impl_available(LOOM_REDUCE_IMPL_AVX2)
                                  ? LOOM_REDUCE_IMPL_AVX2
                                  : LOOM_REDUCE_IMPL_GENERIC;
    for (int dt = 0; dt < LOOM_DTYPE_COUNT; dt++)
        for (int op = 0; op < LOOM_REDOP_COUNT; op++)
            ck_assert(loom_reduce_get((loom_dtype_t)dt, (loom_redop_t)op) ==
                      loom_reduce_get_impl((loom_dtype_t)dt, (loom_redop_t)op, best));
    ck_assert_str_eq(loom_reduce_impl_name(LOOM_REDUCE_IMPL_GENERIC), "generic");
    ck_assert(loom_reduce_impl_available(LOOM_REDUCE_IMPL_GENERIC));
    /* count 0 touches nothing */
    float x = 1.0f;
    loom_reduce_apply(&x, &x, &x, 0, LOOM_FLOAT32, LOOM_SUM);
    ck_assert(x == 1.0f);
    loom_reduce_apply(&x, &x, &x, 1, LOOM_DTYPE_COUNT, LOOM_SUM);
    ck_assert(x == 1.0f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* AVG finish                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_avg_finish_known)
{
    int8_t i8[6] = {-7, 7, -128, 127, -1, 0};
    loom_reduce_avg_finish(i8, 6, LOOM_INT8, 2);
    int8_t i8w[6] = {-3, 3, -64, 63, 0, 0};
    ck_assert_mem_eq(i8, i8w, sizeof i8);

    uint8_t u8[3] = {255, 7, 1};
    loom_reduce_avg_finish(u8, 3, LOOM_UINT8, 2);
    ck_assert(u8[0] == 127 && u8[1] == 3 && u8[2] == 0);

    int16_t i16[3] = {INT16_MIN, INT16_MAX, -7};
    loom_reduce_avg_finish(i16, 3, LOOM_INT16, 2);
    ck_assert(i16[0] == -16384 && i16[1] == 16383 && i16[2] == -3);

    uint16_t u16[2] = {0xffffu, 9};
    loom_reduce_avg_finish(u16, 2, LOOM_UINT16, 4);
    ck_assert(u16[0] == 0x3fffu && u16[1] == 2);

    int32_t i32[4] = {INT32_MIN, INT32_MAX, -10, 10};
    loom_reduce_avg_finish(i32, 4, LOOM_INT32, 3);
    ck_assert(i32[0] == -715827882 && i32[1] == 715827882);
    ck_assert(i32[2] == -3 && i32[3] == 3);

    uint32_t u32[1] = {0xffffffffu};
    loom_reduce_avg_finish(u32, 1, LOOM_UINT32, 16);
    ck_assert(u32[0] == 0x0fffffffu);

    int64_t i64[3] = {INT64_MIN, INT64_MAX, -5};
    loom_reduce_avg_finish(i64, 3, LOOM_INT64, 4);
    ck_assert(i64[0] == INT64_MIN / 4 && i64[1] == INT64_MAX / 4 && i64[2] == -1);

    uint64_t u64[1] = {UINT64_MAX};
    loom_reduce_avg_finish(u64, 1, LOOM_UINT64, 3);
    ck_assert(u64[0] == UINT64_MAX / 3);

    float f[5] = {3.0f, -3.0f, INFINITY, NAN, 1.0f};
    loom_reduce_avg_finish(f, 5, LOOM_FLOAT32, 2);
    ck_assert(f[0] == 1.5f && f[1] == -1.5f && f[2] == INFINITY && isnan(f[3]) &&
              f[4] == 0.5f);

    double g[2] = {1.0, -7.0};
    loom_reduce_avg_finish(g, 2, LOOM_FLOAT64, 4);
    ck_assert(g[0] == 0.25 && g[1] == -1.75);

    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7e00}; /* 1, -2, 2^-24, NaN */
    loom_reduce_avg_finish(h, 4, LOOM_FLOAT16, 3);
    ck_assert_uint_eq(h[0], 0x3555); /* 1/3 */
    ck_assert_uint_eq(h[1], 0xb955); /* -2/3 */
    ck_assert_uint_eq(h[2], 0x0000); /* 2^-24 / 3 rounds to 0 */
    ck_assert(half_is_nan(h[3]));

    uint16_t bf[2] = {0x3f80, 0x4040}; /* 1, 3 */
    loom_reduce_avg_finish(bf, 2, LOOM_BFLOAT16, 3);
    ck_assert_uint_eq(bf[0], 0x3eab); /* 1/3 */
    ck_assert_uint_eq(bf[1], 0x3f80); /* 1 */

    /* n == 1 and count == 0 change nothing */
    int32_t one[1] = {-9};
    loom_reduce_avg_finish(one, 1, LOOM_INT32, 1);
    ck_assert_int_eq(one[0], -9);
    loom_reduce_avg_finish(one, 0, LOOM_INT32, 4);
    ck_assert_int_eq(one[0], -9);
}
END_TEST

/* Random buffers against a reference division, for every dtype (_i). */
START_TEST(test_avg_finish_random)
{
    loom_dtype_t dt = (loom_dtype_t)_i;
    size_t sz = dt_size[dt], count = 10007;
    static const int ns[] = {2, 3, 7, 8, 1000};
    unsigned char *buf = malloc(count * sz), *want = malloc(count * sz);
    ck_assert(buf && want);
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k];
        fill(dt, buf, count, 555 + k);
        for (size_t i = 0; i < count; i++) {
            void *src = buf + i * sz, *dst = want + i * sz;
            if (dt_is_signed_int(dt)) {
                store_bits(dt, dst, (uint64_t)(load_s(dt, src) / n));
            } else if (dt_is_int(dt)) {
                store_bits(dt, dst, load_u(dt, src) / (uint64_t)n);
            } else if (dt == LOOM_FLOAT64) {
                double r = load_f(dt, src) / n;
                memcpy(dst, &r, 8);
            } else {
                float r = (float)(load_f(dt, src) / n); /* float32 division */
                if (dt == LOOM_FLOAT32) {
                    memcpy(dst, &r, 4);
                } else {
                    uint16_t h = (dt == LOOM_FLOAT16) ? ref_d2h(r) : ref_d2b(r);
                    memcpy(dst, &h, 2);
                }
            }
        }
        unsigned char *orig = malloc(count * sz);
        ck_assert(orig != NULL);
        memcpy(orig, buf, count * sz);
        loom_reduce_avg_finish(buf, count, dt, n);
        expect_equal(dt, LOOM_AVG, "avg_finish", "n", count, (size_t)n, orig,
                     orig, buf, want);
        free(orig);
    }
    free(buf);
    free(want);
}
END_TEST

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");

    TCase *conv = tcase_create("convert");
    tcase_add_test(conv, test_half_exhaustive);
    tcase_add_test(conv, test_half_halfway);
    tcase_add_test(conv, test_half_random_floats);
    tcase_add_test(conv, test_bf16_exhaustive);
    tcase_add_test(conv, test_bf16_random_floats);
    suite_add_tcase(s, conv);

    TCase *kern = tcase_create("kernels");
    tcase_add_loop_test(kern, test_kernels, 0, LOOM_DTYPE_COUNT * LOOM_REDOP_COUNT);
    tcase_add_loop_test(kern, test_half_kernels_exhaustive, 0, 2 * LOOM_REDOP_COUNT);
    tcase_add_test(kern, test_known_values);
    tcase_add_test(kern, test_get_invalid);
    suite_add_tcase(s, kern);

    TCase *avg = tcase_create("avg");
    tcase_add_test(avg, test_avg_finish_known);
    tcase_add_loop_test(avg, test_avg_finish_random, 0, LOOM_DTYPE_COUNT);
    suite_add_tcase(s, avg);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reduce_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
