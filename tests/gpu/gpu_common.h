/* gpu_common.h - shared by tests/gpu's programs (CUDA C++, nvcc): joining
 * through loom-run's environment, inputs every rank can compute for every
 * other rank (on the device or the host), dtypes, and checks that exit with
 * a message naming the call. Only Loom's public headers. */
#ifndef LOOM_GPU_COMMON_H
#define LOOM_GPU_COMMON_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "loom.h"
#include "loom_cuda.h"

#if !LOOM_CUDA_ADAPTER
#error "this Loom was built without the CUDA adapter (configure --with-cuda)"
#endif

static int g_rank = -1;

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__,   \
                    #call, cudaGetErrorString(e_));                                    \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

#define LOOM_OK(call, comm)                                                            \
    do {                                                                               \
        loom_result_t r_ = (call);                                                     \
        if (r_ != LOOM_SUCCESS) {                                                      \
            fprintf(stderr, "rank %d: %s:%d: %s: %s (%s)\n", g_rank, __FILE__, __LINE__, \
                    #call, loom_result_string(r_), loom_get_error_string(comm));        \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Join through loom-run (LOOM_RANK_TABLE, LOOM_RANK) and make this rank's
 * device current (LOOM_CUDA_DEVICE=0 puts every rank on one GPU). */
static loom_comm_t gpu_join(int *rank, int *n, int *dev)
{
    loom_comm_t comm;
    if (loom_comm_init_env(&comm) != LOOM_SUCCESS) {
        fprintf(stderr, "init: %s\n", loom_get_error_string(NULL));
        exit(3);
    }
    loom_comm_rank(comm, rank);
    loom_comm_size(comm, n);
    g_rank = *rank;
    if (loom_cuda_set_device(comm, dev) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: loom_cuda_set_device: %s\n", *rank, loom_cuda_error_string());
        exit(3);
    }
    CUDA_OK(cudaSetDevice(*dev));
    return comm;
}

/* Input element i of rank r: a small integer (-8..8). Sums over a few ranks
 * (|sum| <= 8n) are exact in every dtype tested, bfloat16's 8-bit
 * significand included up to 32 ranks. */
__host__ __device__ static inline int gpu_input(uint32_t seed, int r, uint64_t i)
{
    uint64_t x = (uint64_t)seed * 0x9e3779b97f4a7c15ull + (uint64_t)r * 0xbf58476d1ce4e5b9ull + i;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return (int)(x % 17) - 8;
}

__host__ __device__ static inline void gpu_store(void *buf, loom_dtype_t t, uint64_t i, float v)
{
    switch (t) {
    case LOOM_FLOAT16: ((__half *)buf)[i] = __float2half(v); break;
    case LOOM_BFLOAT16: ((__nv_bfloat16 *)buf)[i] = __float2bfloat16(v); break;
    case LOOM_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((float *)buf)[i] = v; break;
    }
}

__host__ __device__ static inline float gpu_load(const void *buf, loom_dtype_t t, uint64_t i)
{
    switch (t) {
    case LOOM_FLOAT16: return __half2float(((const __half *)buf)[i]);
    case LOOM_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)buf)[i]);
    case LOOM_INT32: return (float)((const int32_t *)buf)[i];
    default: return ((const float *)buf)[i];
    }
}

/* Fill count elements of rank r's input (element first + k at k). */
__global__ static void gpu_fill(void *buf, loom_dtype_t t, uint32_t seed, int r, uint64_t first,
                                uint64_t count)
{
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < count;
         k += (uint64_t)gridDim.x * blockDim.x)
        gpu_store(buf, t, k, (float)gpu_input(seed, r, first + k));
}

static void gpu_fill_async(void *buf, loom_dtype_t t, uint32_t seed, int r, uint64_t first,
                           uint64_t count, cudaStream_t s)
{
    if (count)
        gpu_fill<<<256, 256, 0, s>>>(buf, t, seed, r, first, count);
    CUDA_OK(cudaGetLastError());
}

/* The reduction of element idx over n ranks (sum, min, max). */
static float gpu_reduced(uint32_t seed, int n, uint64_t idx, loom_redop_t op)
{
    float acc = (float)gpu_input(seed, 0, idx);
    for (int r = 1; r < n; r++) {
        float v = (float)gpu_input(seed, r, idx);
        acc = op == LOOM_MIN ? (v < acc ? v : acc) : op == LOOM_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return acc;
}

static const char *gpu_dtype_name(loom_dtype_t t)
{
    return loom_dtype_name(t);
}

#endif
