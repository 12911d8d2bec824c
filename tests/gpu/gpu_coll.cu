/* gpu_coll.cu - the CUDA adapter on a GPU (tests/gpu/run.sh starts it
 * under loom-run, every rank on one device with LOOM_CUDA_DEVICE=0):
 *   1. every collective on device buffers, float32, float16, bfloat16 and
 *      int32, in and out of place, 1 element to several staging pieces;
 *      the inputs written by a kernel on the stream, the results copied
 *      out on the stream, one cudaStreamSynchronize per call;
 *   2. ordering: a slow kernel, a kernel that writes the input, the
 *      allreduce, a kernel that consumes the result, all enqueued without
 *      host synchronisation, then one cudaStreamSynchronize: exact;
 *   3. the host returns from the call long before the op ends, and the
 *      enqueue time of a small call (median of 1000).
 * --events: the event-polling fallback instead of stream memory
 * operations. Exit 0 when every result is right. */
#include <algorithm>
#include <string.h>
#include <vector>

#include "gpu_common.h"

__global__ static void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* out[i] = 2 * in[i] + 1 (float32): consumes an allreduce's result. */
__global__ static void consume(const float *in, float *out, uint64_t n)
{
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x)
        out[k] = 2.0f * in[k] + 1.0f;
}

static long long g_cycles_per_ms;
static int g_fails;

#define FAILF(...)                                                                     \
    do {                                                                               \
        if (g_fails++ < 10) {                                                          \
            fprintf(stderr, "rank %d: ", g_rank);                                      \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

enum { K_ALLREDUCE, K_ALLGATHER, K_BROADCAST, K_REDUCE_SCATTER, K_REDUCE, K_N };
static const char *const kname[K_N] = {"allreduce", "allgather", "broadcast", "reduce_scatter",
                                       "reduce"};

/* One checked call on device buffers. */
static void one(loom_comm_t comm, loom_stream_t ls, cudaStream_t cs, int rank, int n, int kind,
                loom_dtype_t t, loom_redop_t op, uint64_t count, int inplace, uint32_t seed,
                char *dbuf_a, char *dbuf_b, char *host)
{
    size_t es = loom_dtype_size(t), blk = count * es;
    int root = (int)(seed % (uint32_t)n);
    char *send = dbuf_a, *recv = inplace ? dbuf_a : dbuf_b;
    if (inplace && kind == K_ALLGATHER)
        send = dbuf_a + (size_t)rank * blk;
    if (inplace && kind == K_REDUCE_SCATTER)
        recv = dbuf_a + (size_t)rank * blk;
    if (kind == K_BROADCAST)
        recv = send;
    /* inputs, by a kernel on the stream */
    if (kind == K_REDUCE_SCATTER)
        for (int b = 0; b < n; b++)
            gpu_fill_async(send + (size_t)b * blk, t, seed, rank, (uint64_t)b * count, count, cs);
    else if (kind != K_BROADCAST || rank == root)
        gpu_fill_async(send, t, seed, rank, 0, count, cs);
    else
        CUDA_OK(cudaMemsetAsync(send, 0x7f, blk, cs));
    loom_result_t res;
    switch (kind) {
    case K_ALLREDUCE: res = loom_allreduce(send, recv, count, t, op, comm, ls); break;
    case K_ALLGATHER: res = loom_allgather(send, recv, count, t, comm, ls); break;
    case K_BROADCAST: res = loom_broadcast(send, count, t, root, comm, ls); break;
    case K_REDUCE_SCATTER: res = loom_reduce_scatter(send, recv, count, t, op, comm, ls); break;
    default: res = loom_reduce(send, recv, count, t, op, root, comm, ls); break;
    }
    if (res != LOOM_SUCCESS) {
        FAILF("%s %s count %llu: %s", kname[kind], gpu_dtype_name(t), (unsigned long long)count,
              loom_get_error_string(comm));
        return;
    }
    size_t rbytes = kind == K_ALLGATHER ? blk * (size_t)n : blk;
    CUDA_OK(cudaMemcpyAsync(host, recv, rbytes, cudaMemcpyDeviceToHost, cs));
    CUDA_OK(cudaStreamSynchronize(cs));
    LOOM_OK(loom_stream_synchronize(ls), comm);
    int bad = 0;
    for (uint64_t i = 0; i < count && bad < 3; i++) {
        int ok = 1;
        switch (kind) {
        case K_ALLREDUCE: ok = gpu_load(host, t, i) == gpu_reduced(seed, n, i, op); break;
        case K_REDUCE:
            ok = rank != root || gpu_load(host, t, i) == gpu_reduced(seed, n, i, op);
            break;
        case K_REDUCE_SCATTER:
            ok = gpu_load(host, t, i) == gpu_reduced(seed, n, (uint64_t)rank * count + i, op);
            break;
        case K_BROADCAST: ok = gpu_load(host, t, i) == (float)gpu_input(seed, root, i); break;
        default:
            for (int r = 0; r < n && ok; r++)
                ok = gpu_load(host + (size_t)r * blk, t, i) == (float)gpu_input(seed, r, i);
        }
        if (!ok) {
            bad++;
            FAILF("%s %s %s count %llu %s: element %llu wrong", kname[kind], gpu_dtype_name(t),
                  loom_redop_name(op), (unsigned long long)count,
                  inplace ? "in-place" : "out-of-place", (unsigned long long)i);
        }
    }
}

/* Part 2: slow kernel, producer, allreduce, consumer; one synchronize. */
static void ordering(loom_comm_t comm, loom_stream_t ls, cudaStream_t cs, int rank, int n,
                     float *dbuf, float *dout, float *host, uint64_t count)
{
    for (int rep = 0; rep < 3; rep++) {
        uint32_t seed = 1000 + (uint32_t)rep;
        /* ranks reach the call at different times */
        spin<<<1, 1, 0, cs>>>(g_cycles_per_ms * (5 + 7 * ((rank + rep) % n)));
        gpu_fill_async(dbuf, LOOM_FLOAT32, seed, rank, 0, count, cs);
        LOOM_OK(loom_allreduce(dbuf, dbuf, count, LOOM_FLOAT32, LOOM_SUM, comm, ls), comm);
        consume<<<256, 256, 0, cs>>>(dbuf, dout, count);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpyAsync(host, dout, count * sizeof(float), cudaMemcpyDeviceToHost, cs));
        CUDA_OK(cudaStreamSynchronize(cs));
        int bad = 0;
        for (uint64_t i = 0; i < count && bad < 3; i++)
            if (host[i] != 2.0f * gpu_reduced(seed, n, i, LOOM_SUM) + 1.0f) {
                bad++;
                FAILF("ordering rep %d: element %llu = %g, expected %g", rep,
                      (unsigned long long)i, host[i], 2.0f * gpu_reduced(seed, n, i, LOOM_SUM) + 1.0f);
            }
    }
    LOOM_OK(loom_stream_synchronize(ls), comm);
}

int main(int argc, char **argv)
{
    int events = argc > 1 && strcmp(argv[1], "--events") == 0;
    int rank, n, dev;
    loom_comm_t comm = gpu_join(&rank, &n, &dev);
    int khz;
    CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    g_cycles_per_ms = khz;
    cudaStream_t cs;
    CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    loom_stream_t ls;
    loom_cuda_options_t o = {sizeof o, events ? LOOM_CUDA_SYNC_EVENTS : LOOM_CUDA_SYNC_AUTO};
    loom_cuda_sync_t chosen;
    if (loom_stream_create_cuda_ex(cs, &o, &ls, &chosen) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: loom_stream_create_cuda_ex: %s\n", rank, loom_cuda_error_string());
        return 3;
    }
    if (rank == 0)
        printf("gpu_coll: %d ranks on device %d, ordering by %s\n", n, dev,
               chosen == LOOM_CUDA_SYNC_MEMOPS ? "stream memory operations" : "events");

    /* 1. the matrix; 3M+1 float32 = 4 pieces of LOOM_STAGE_CHUNK (4 MiB) */
    const uint64_t counts[] = {1, 4099, 3 * 1024 * 1024 + 1};
    const loom_dtype_t types[] = {LOOM_FLOAT32, LOOM_FLOAT16, LOOM_BFLOAT16, LOOM_INT32};
    size_t maxb = counts[2] * 4 * (size_t)n;
    char *da, *db, *host;
    CUDA_OK(cudaMalloc(&da, maxb));
    CUDA_OK(cudaMalloc(&db, maxb));
    CUDA_OK(cudaMallocHost(&host, maxb));
    double t0 = now_s();
    int calls = 0;
    uint32_t seed = 1;
    for (int k = 0; k < K_N; k++)
        for (int ti = 0; ti < 4; ti++)
            for (int c = 0; c < 3; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    loom_redop_t op = (k == K_ALLGATHER || k == K_BROADCAST) ? LOOM_SUM
                                      : (seed % 3 == 0 ? LOOM_MAX : seed % 3 == 1 ? LOOM_MIN
                                                                                    : LOOM_SUM);
                    one(comm, ls, cs, rank, n, k, types[ti], op, counts[c], inplace, seed++, da,
                        db, host);
                    calls++;
                }
    if (rank == 0)
        printf("gpu_coll: %d calls (5 collectives x 4 dtypes x 3 counts x in/out of place) "
               "in %.1f s, %s\n", calls, now_s() - t0, g_fails ? "WRONG RESULTS" : "all right");

    /* 2. ordering, 64 MiB */
    uint64_t big = 16u << 20;
    float *dout;
    CUDA_OK(cudaFree(db));
    CUDA_OK(cudaMalloc(&dout, big * sizeof(float)));
    float *dbig;
    CUDA_OK(cudaFree(da));
    CUDA_OK(cudaMalloc(&dbig, big * sizeof(float)));
    float *hbig;
    CUDA_OK(cudaFreeHost(host));
    CUDA_OK(cudaMallocHost(&hbig, big * sizeof(float)));
    int before = g_fails;
    ordering(comm, ls, cs, rank, n, dbig, dout, hbig, big);
    if (rank == 0)
        printf("gpu_coll: ordering (slow kernel -> producer -> allreduce 64 MiB -> consumer, one "
               "cudaStreamSynchronize) x3: %s\n", g_fails == before ? "exact" : "WRONG");

    /* 3. the call returns before the op: a 200 ms kernel ahead of it */
    spin<<<1, 1, 0, cs>>>(g_cycles_per_ms * 200);
    double c0 = now_s();
    LOOM_OK(loom_allreduce(dbig, dbig, big, LOOM_FLOAT32, LOOM_SUM, comm, ls), comm);
    double c1 = now_s();
    CUDA_OK(cudaStreamSynchronize(cs));
    double c2 = now_s();
    LOOM_OK(loom_stream_synchronize(ls), comm);
    if (c1 - c0 > 1e-3 || (c1 - c0) * 100 > c2 - c0)
        FAILF("the call took %.1f us of the op's %.1f ms: it waited", (c1 - c0) * 1e6,
              (c2 - c0) * 1e3);
    /* enqueue time of a small call, back to back */
    std::vector<double> enq;
    for (int i = 0; i < 1000; i++) {
        double e0 = now_s();
        LOOM_OK(loom_allreduce(dbig, dbig, 1, LOOM_FLOAT32, LOOM_SUM, comm, ls), comm);
        enq.push_back(now_s() - e0);
    }
    CUDA_OK(cudaStreamSynchronize(cs));
    LOOM_OK(loom_stream_synchronize(ls), comm);
    std::sort(enq.begin(), enq.end());
    if (rank == 0)
        printf("gpu_coll: the call returned in %.1f us, the op (after a 200 ms kernel) ended "
               "%.1f ms later; enqueue of a 1-element allreduce: median %.2f us, p99 %.2f us "
               "(goal < 10 us)%s\n",
               (c1 - c0) * 1e6, (c2 - c1) * 1e3, enq[500] * 1e6, enq[990] * 1e6,
               enq[500] * 1e6 < 10 ? "" : " SLOWER THAN THE GOAL");

    loom_stream_destroy(ls);
    CUDA_OK(cudaStreamDestroy(cs));
    loom_comm_destroy(comm);
    if (g_fails)
        fprintf(stderr, "rank %d: %d failures\n", rank, g_fails);
    return g_fails ? 1 : 0;
}
