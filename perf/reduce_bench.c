/* reduce_bench.c - single-thread throughput of the reduction kernels.
 *
 * Prints GB/s of output (bytes of dst written per second) for fp32, fp16,
 * bf16 and int32 SUM with each kernel set, out of place (dst = a + b) and in
 * place (a += b), next to memcpy of the same size. Sizes: 64 MiB (memory
 * bound) and 256 KiB (cache resident, which shows the arithmetic cost).
 *
 *   reduce_bench [-s output-bytes] [-n iterations]
 */
#include "build_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"
#include "reduce/reduce.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Repeat until at least min_s has passed (and iters times); GB/s. */
static double rate(loom_reduce_fn fn, void *d, const void *a, const void *b,
                   size_t count, size_t bytes, int iters)
{
    double min_s = 0.2, t0, t;
    long reps = 0;
    if (fn != NULL)
        fn(d, a, b, count); /* warm up */
    else
        memcpy(d, a, bytes);
    t0 = now_s();
    do {
        for (int i = 0; i < iters; i++) {
            if (fn != NULL)
                fn(d, a, b, count);
            else
                memcpy(d, a, bytes);
        }
        reps += iters;
        t = now_s() - t0;
    } while (t < min_s);
    return (double)bytes * (double)reps / t / 1e9;
}

static void *alloc_filled(size_t bytes, unsigned seed)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == NULL) {
        fprintf(stderr, "reduce_bench: cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    /* small finite values in every dtype: 0x3c00 is 1.0 in fp16, and the
     * low byte patterns keep fp32/bf16 finite */
    uint16_t *h = p;
    for (size_t i = 0; i < bytes / 2; i++)
        h[i] = (uint16_t)(0x3c00 + ((i * 7 + seed) & 0xff));
    return p;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -1;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    else if (*end == 'G' || *end == 'g')
        v <<= 30, end++;
    if (*end != '\0' || v < 64)
        return -1;
    *out = (size_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    size_t sizes[2] = {64u << 20, 256u << 10};
    int nsizes = 2, iters = 3, opt;

    while ((opt = getopt(argc, argv, "s:n:h")) != -1) {
        switch (opt) {
        case 's':
            if (parse_size(optarg, &sizes[0]) != 0) {
                fprintf(stderr, "reduce_bench: -s %s: want a byte count >= 64 "
                                "(suffix K, M or G allowed)\n", optarg);
                return 2;
            }
            nsizes = 1;
            break;
        case 'n':
            iters = atoi(optarg);
            if (iters < 1) {
                fprintf(stderr, "reduce_bench: -n %s: want a count >= 1\n", optarg);
                return 2;
            }
            break;
        default:
            fprintf(stderr, "usage: reduce_bench [-s output-bytes] [-n iterations]\n");
            return opt == 'h' ? 0 : 2;
        }
    }

    static const struct {
        loom_dtype_t dtype;
        const char *label;
    } kernels[] = {
        {LOOM_FLOAT32, "fp32 sum"},
        {LOOM_FLOAT16, "fp16 sum"},
        {LOOM_BFLOAT16, "bf16 sum"},
        {LOOM_INT32, "int32 sum"},
    };

    printf("# reduce_bench: 1 thread, GB/s of output (dst bytes / s)\n");
    printf("# auto kernel set here: %s\n",
           loom_reduce_impl_available(LOOM_REDUCE_IMPL_AVX2) ? "avx2" : "generic");
    printf("%-10s %-8s %10s %12s %12s\n", "kernel", "impl", "bytes", "d=a+b GB/s",
           "a+=b GB/s");
    for (int s = 0; s < nsizes; s++) {
        size_t bytes = sizes[s];
        void *a = alloc_filled(bytes, 1), *b = alloc_filled(bytes, 2);
        void *d = alloc_filled(bytes, 3);
        printf("%-10s %-8s %10zu %12.2f %12s\n", "memcpy", "libc", bytes,
               rate(NULL, d, a, b, 0, bytes, iters), "-");
        for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
            size_t count = bytes / loom_dtype_size(kernels[k].dtype);
            for (int impl = LOOM_REDUCE_IMPL_GENERIC; impl < LOOM_REDUCE_IMPL_COUNT;
                 impl++) {
                loom_reduce_fn fn = loom_reduce_get_impl(
                    kernels[k].dtype, LOOM_SUM, (loom_reduce_impl_t)impl);
                if (fn == NULL)
                    continue;
                double out = rate(fn, d, a, b, count, bytes, iters);
                /* in place: a accumulates; refill so fp values stay finite */
                memcpy(d, a, bytes);
                double inplace = rate(fn, d, d, b, count, bytes, iters);
                printf("%-10s %-8s %10zu %12.2f %12.2f\n", kernels[k].label,
                       loom_reduce_impl_name((loom_reduce_impl_t)impl), bytes,
                       out, inplace);
            }
        }
        free(a);
        free(b);
        free(d);
    }
    return 0;
}
