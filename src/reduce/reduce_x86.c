/* reduce_x86.c - AVX2 kernels, with F16C for float16, chosen at run time.
 *
 * The library is not built with -march flags, so these functions carry
 * target attributes and are only called when loom_reduce_x86_supported()
 * says the CPU has AVX2 and F16C. The integer, float32/64 and bfloat16
 * kernels are the same loops as reduce_generic.c, compiled for AVX2 (wider
 * vectors, and pminsd/pcmpgtq/pmulld that SSE2 lacks). float16 uses the
 * F16C conversion instructions, eight elements at a time; the tail uses the
 * portable scalar conversion, which rounds identically. */
#include "build_config.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <stdint.h>

#include "loom.h"
#include "reduce/reduce_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>

#include "reduce/reduce_gen.h"

#define LOOM_RX_ATTR __attribute__((target("avx2,f16c")))

/* AVX2 from the compiler's runtime (which also checks that the OS saves YMM
 * state); F16C from CPUID leaf 1 directly, since clang before 15 does not
 * know __builtin_cpu_supports("f16c"). Cached: CPUID traps to the
 * hypervisor in a VM. */
int loom_reduce_x86_supported(void)
{
    static int cached = -1;
    int have = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (have >= 0)
        return have;
    unsigned eax, ebx, ecx = 0, edx;
    __builtin_cpu_init();
    have = __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
           (ecx & bit_F16C) != 0;
    __atomic_store_n(&cached, have, __ATOMIC_RELAXED);
    return have;
}

LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_i8, int8_t, uint8_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_u8, uint8_t, uint8_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_i16, int16_t, uint16_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_u16, uint16_t, uint16_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_i32, int32_t, uint32_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_u32, uint32_t, uint32_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_i64, int64_t, uint64_t)
LOOM_RG_INT_ELEMS(LOOM_RX_ATTR, x_u64, uint64_t, uint64_t)
LOOM_RG_FLOAT_ELEMS(LOOM_RX_ATTR, x_f32, float)
LOOM_RG_FLOAT_ELEMS(LOOM_RX_ATTR, x_f64, double)

LOOM_RG_OPS(LOOM_RX_ATTR, x_i8, int8_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_u8, uint8_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_i16, int16_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_u16, uint16_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_i32, int32_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_u32, uint32_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_i64, int64_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_u64, uint64_t)
LOOM_RG_OPS(LOOM_RX_ATTR, x_f32, float)
LOOM_RG_OPS(LOOM_RX_ATTR, x_f64, double)

/* float32 vector ops for the 16-bit types. They match LOOM_RG_F* exactly: MIN/MAX
 * pick y when y is NaN or strictly smaller (larger), else x. */
LOOM_RX_ATTR static inline __m256 x_vsum(__m256 x, __m256 y)
{
    return _mm256_add_ps(x, y);
}

LOOM_RX_ATTR static inline __m256 x_vprod(__m256 x, __m256 y)
{
    return _mm256_mul_ps(x, y);
}

LOOM_RX_ATTR static inline __m256 x_vmin(__m256 x, __m256 y)
{
    __m256 pick_y = _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_LT_OQ),
                                 _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    return _mm256_blendv_ps(x, y, pick_y);
}

LOOM_RX_ATTR static inline __m256 x_vmax(__m256 x, __m256 y)
{
    __m256 pick_y = _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ),
                                 _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    return _mm256_blendv_ps(x, y, pick_y);
}

/* Loads of a and b precede the store of each block, so dst == a or dst == b
 * is safe without the restrict variants the generated kernels need. */
#define LOOM_RX_F16_KERNEL(OP, SCALAR)                                         \
    LOOM_RX_ATTR static void x_f16_##OP(void *dst, const void *a,              \
                                        const void *b, size_t n)               \
    {                                                                          \
        uint16_t *d = dst;                                                     \
        const uint16_t *pa = a, *pb = b;                                       \
        size_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8) {                                           \
            __m256 x = _mm256_cvtph_ps(                                        \
                _mm_loadu_si128((const __m128i *)(pa + i)));                   \
            __m256 y = _mm256_cvtph_ps(                                        \
                _mm_loadu_si128((const __m128i *)(pb + i)));                   \
            __m128i r = _mm256_cvtps_ph(                                       \
                x_v##OP(x, y), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); \
            _mm_storeu_si128((__m128i *)(d + i), r);                           \
        }                                                                      \
        for (; i < n; i++) {                                                   \
            float x = loom_rc_h2f(pa[i]), y = loom_rc_h2f(pb[i]);              \
            d[i] = loom_rc_f2h(SCALAR(x, y));                                  \
        }                                                                      \
    }

LOOM_RX_F16_KERNEL(sum, LOOM_RG_FSUM)
LOOM_RX_F16_KERNEL(prod, LOOM_RG_FPROD)
LOOM_RX_F16_KERNEL(min, LOOM_RG_FMIN)
LOOM_RX_F16_KERNEL(max, LOOM_RG_FMAX)

/* bfloat16 by hand: GCC's auto-vectorised loop spends half its time
 * repacking. Widening is a shift into the upper half; narrowing adds
 * 0x7fff + the lowest kept bit (round to nearest even, overflowing to inf),
 * quiets NaN instead, and packs 32 -> 16 bits. */
LOOM_RX_ATTR static inline __m256 x_bf16_widen(__m128i v)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

LOOM_RX_ATTR static inline __m256i x_bf16_round(__m256 f)
{
    __m256i x = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

#define LOOM_RX_BF16_KERNEL(OP, SCALAR)                                        \
    LOOM_RX_ATTR static void x_bf16_##OP(void *dst, const void *a,             \
                                         const void *b, size_t n)              \
    {                                                                          \
        uint16_t *d = dst;                                                     \
        const uint16_t *pa = a, *pb = b;                                       \
        size_t i = 0;                                                          \
        for (; i + 16 <= n; i += 16) {                                         \
            __m128i a0 = _mm_loadu_si128((const __m128i *)(pa + i));           \
            __m128i a1 = _mm_loadu_si128((const __m128i *)(pa + i + 8));       \
            __m128i b0 = _mm_loadu_si128((const __m128i *)(pb + i));           \
            __m128i b1 = _mm_loadu_si128((const __m128i *)(pb + i + 8));       \
            __m256i lo = x_bf16_round(x_v##OP(x_bf16_widen(a0), x_bf16_widen(b0))); \
            __m256i hi = x_bf16_round(x_v##OP(x_bf16_widen(a1), x_bf16_widen(b1))); \
            /* packus works per 128-bit lane; permute restores the order */ \
            __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), \
                                                      0xd8);                   \
            _mm256_storeu_si256((__m256i *)(d + i), packed);                   \
        }                                                                      \
        for (; i < n; i++) {                                                   \
            float x = loom_rc_b2f(pa[i]), y = loom_rc_b2f(pb[i]);              \
            d[i] = loom_rc_f2b(SCALAR(x, y));                                  \
        }                                                                      \
    }

LOOM_RX_BF16_KERNEL(sum, LOOM_RG_FSUM)
LOOM_RX_BF16_KERNEL(prod, LOOM_RG_FPROD)
LOOM_RX_BF16_KERNEL(min, LOOM_RG_FMIN)
LOOM_RX_BF16_KERNEL(max, LOOM_RG_FMAX)

const loom_reduce_fn
    loom_reduce_x86_table[LOOM_DTYPE_COUNT][LOOM_REDUCE_TABLE_OPS] = {
        [LOOM_INT8] = LOOM_RG_ROW(x_i8),
        [LOOM_UINT8] = LOOM_RG_ROW(x_u8),
        [LOOM_INT16] = LOOM_RG_ROW(x_i16),
        [LOOM_UINT16] = LOOM_RG_ROW(x_u16),
        [LOOM_INT32] = LOOM_RG_ROW(x_i32),
        [LOOM_UINT32] = LOOM_RG_ROW(x_u32),
        [LOOM_INT64] = LOOM_RG_ROW(x_i64),
        [LOOM_UINT64] = LOOM_RG_ROW(x_u64),
        [LOOM_FLOAT16] = LOOM_RG_ROW(x_f16),
        [LOOM_BFLOAT16] = LOOM_RG_ROW(x_bf16),
        [LOOM_FLOAT32] = LOOM_RG_ROW(x_f32),
        [LOOM_FLOAT64] = LOOM_RG_ROW(x_f64),
};

#else /* not x86-64: no variant, the portable kernels are used */

int loom_reduce_x86_supported(void)
{
    return 0;
}

const loom_reduce_fn
    loom_reduce_x86_table[LOOM_DTYPE_COUNT][LOOM_REDUCE_TABLE_OPS];

#endif
