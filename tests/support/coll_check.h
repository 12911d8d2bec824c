/* coll_check.h - inputs every rank can compute for every other rank, and
 * the reference results of each collective, for the tests and perf tools.
 *
 * Integers: pseudo-random bits (sums and products wrap, so any reduction
 * order gives the same answer). Floats: small integers, and powers of two
 * for products, so every partial result is exact in every float type and
 * the order of reduction cannot change the answer; LOOM_AVG alone rounds. */
#ifndef LOOM_COLL_CHECK_H
#define LOOM_COLL_CHECK_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "loom.h"
#include "reduce/reduce.h"

static inline uint64_t cc_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline int cc_is_float(loom_dtype_t t)
{
    return t == LOOM_FLOAT16 || t == LOOM_BFLOAT16 || t == LOOM_FLOAT32 ||
           t == LOOM_FLOAT64;
}

static inline int cc_is_signed(loom_dtype_t t)
{
    return t == LOOM_INT8 || t == LOOM_INT16 || t == LOOM_INT32 || t == LOOM_INT64;
}

/* Input element i of rank r. */
static inline uint64_t cc_int_input(uint64_t seed, int r, uint64_t i)
{
    return cc_mix(seed * 1000003ull + (uint64_t)r * 0x100000001b3ull + i);
}

static inline double cc_float_input(uint64_t seed, int r, uint64_t i, loom_redop_t op)
{
    uint64_t x = cc_mix(seed * 7919ull + (uint64_t)r * 104729ull + i);
    if (op == LOOM_PROD) {
        static const double v[] = {1, -1, 2, 0.5, -2, -0.5, 1, 1};
        return v[x & 7];
    }
    return (double)((int)(x % 17) - 8);
}

/* Store integer bits / a double into element i of buf. */
static inline void cc_store_int(void *buf, loom_dtype_t t, uint64_t i, uint64_t v)
{
    switch (t) {
    case LOOM_INT8: case LOOM_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case LOOM_INT16: case LOOM_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case LOOM_INT32: case LOOM_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[i] = v; break;
    }
}

static inline uint64_t cc_load_int(const void *buf, loom_dtype_t t, uint64_t i)
{
    switch (t) {
    case LOOM_INT8: case LOOM_UINT8: return ((const uint8_t *)buf)[i];
    case LOOM_INT16: case LOOM_UINT16: return ((const uint16_t *)buf)[i];
    case LOOM_INT32: case LOOM_UINT32: return ((const uint32_t *)buf)[i];
    default: return ((const uint64_t *)buf)[i];
    }
}

static inline void cc_store_float(void *buf, loom_dtype_t t, uint64_t i, double v)
{
    switch (t) {
    case LOOM_FLOAT16: ((uint16_t *)buf)[i] = loom_float_to_half((float)v); break;
    case LOOM_BFLOAT16: ((uint16_t *)buf)[i] = loom_float_to_bf16((float)v); break;
    case LOOM_FLOAT32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

static inline double cc_load_float(const void *buf, loom_dtype_t t, uint64_t i)
{
    switch (t) {
    case LOOM_FLOAT16: return loom_half_to_float(((const uint16_t *)buf)[i]);
    case LOOM_BFLOAT16: return loom_bf16_to_float(((const uint16_t *)buf)[i]);
    case LOOM_FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* Fill count elements of rank r's input, starting at element index first. */
static inline void cc_fill(void *buf, loom_dtype_t t, loom_redop_t op, uint64_t seed,
                           int r, uint64_t first, uint64_t count)
{
    for (uint64_t k = 0; k < count; k++) {
        if (cc_is_float(t))
            cc_store_float(buf, t, k, cc_float_input(seed, r, first + k, op));
        else
            cc_store_int(buf, t, k, cc_int_input(seed, r, first + k));
    }
}

/* Sign-extend the low bits of an integer dtype. */
static inline int64_t cc_signed(uint64_t v, loom_dtype_t t)
{
    switch (t) {
    case LOOM_INT8: return (int8_t)(uint8_t)v;
    case LOOM_INT16: return (int16_t)(uint16_t)v;
    case LOOM_INT32: return (int32_t)(uint32_t)v;
    default: return (int64_t)v;
    }
}

static inline uint64_t cc_mask(loom_dtype_t t)
{
    size_t s = loom_dtype_size(t);
    return s == 8 ? ~0ull : ((1ull << (8 * s)) - 1);
}

/* Check element i (input index idx) of a reduction over n ranks.
 * Returns 1 if right. */
static inline int cc_check_reduced(const void *out, uint64_t i, loom_dtype_t t,
                                   loom_redop_t op, uint64_t seed, int n, uint64_t idx)
{
    if (cc_is_float(t)) {
        double acc = cc_float_input(seed, 0, idx, op);
        for (int r = 1; r < n; r++) {
            double v = cc_float_input(seed, r, idx, op);
            switch (op) {
            case LOOM_SUM: case LOOM_AVG: acc += v; break;
            case LOOM_PROD: acc *= v; break;
            case LOOM_MIN: acc = v < acc ? v : acc; break;
            case LOOM_MAX: acc = v > acc ? v : acc; break;
            default: break;
            }
        }
        double got = cc_load_float(out, t, i);
        if (op != LOOM_AVG)
            return got == acc;
        double want = acc / n;
        double tol = t == LOOM_FLOAT64 ? 1e-12 : t == LOOM_FLOAT32 ? 1e-6
                   : t == LOOM_FLOAT16 ? 2e-3 : 1.6e-2;
        return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
    }
    uint64_t m = cc_mask(t);
    uint64_t acc = cc_int_input(seed, 0, idx) & m;
    for (int r = 1; r < n; r++) {
        uint64_t v = cc_int_input(seed, r, idx) & m;
        switch (op) {
        case LOOM_SUM: case LOOM_AVG: acc = (acc + v) & m; break;
        case LOOM_PROD: acc = (acc * v) & m; break;
        case LOOM_MIN:
            if (cc_is_signed(t) ? cc_signed(v, t) < cc_signed(acc, t) : v < acc)
                acc = v;
            break;
        case LOOM_MAX:
            if (cc_is_signed(t) ? cc_signed(v, t) > cc_signed(acc, t) : v > acc)
                acc = v;
            break;
        default: break;
        }
    }
    if (op == LOOM_AVG) {
        if (cc_is_signed(t))
            acc = (uint64_t)(cc_signed(acc, t) / n) & m;
        else
            acc = (acc / (uint64_t)n) & m;
    }
    return (cc_load_int(out, t, i) & m) == acc;
}

/* Element i of rank r's input, as stored: for allgather/broadcast checks. */
static inline int cc_check_copy(const void *out, uint64_t i, loom_dtype_t t,
                                uint64_t seed, int r, uint64_t idx)
{
    if (cc_is_float(t))
        return cc_load_float(out, t, i) == cc_float_input(seed, r, idx, LOOM_SUM);
    return (cc_load_int(out, t, i) & cc_mask(t)) == (cc_int_input(seed, r, idx) & cc_mask(t));
}

#endif
