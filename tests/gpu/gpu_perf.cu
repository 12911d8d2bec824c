/* gpu_perf.cu - allreduce bandwidth on device buffers beside host buffers
 * (tests/gpu/run.sh starts it under loom-run, every rank on one device).
 * For each size (default 1 MiB and 64 MiB; arguments are sizes in MiB):
 *   host   : blocking loom_allreduce on malloc'd memory (as all_reduce_perf
 *            -z 1 does)
 *   device : loom_allreduce on cudaMalloc'd memory, enqueued on a CUDA
 *            stream back to back, one cudaStreamSynchronize at the end
 * float32 sum in place, 5 warm-up then timed iterations; the time is the
 * slowest rank's; busbw = size / time * 2 (n - 1) / n (nccl-tests). Also
 * the mean time one device call took to enqueue. The device results of the
 * last call are checked. */
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"

static double slowest(loom_comm_t comm, double t)
{
    double m = t;
    LOOM_OK(loom_allreduce(&t, &m, 1, LOOM_FLOAT64, LOOM_MAX, comm, NULL), comm);
    return m;
}

int main(int argc, char **argv)
{
    int rank, n, dev;
    loom_comm_t comm = gpu_join(&rank, &n, &dev);
    size_t sizes[8] = {1u << 20, 64u << 20};
    int nsizes = 2;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++)
            sizes[nsizes++] = (size_t)atof(argv[i]) * (1u << 20);
    }
    cudaStream_t cs;
    CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    loom_stream_t ls;
    if (loom_stream_create_cuda(cs, &ls) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: loom_stream_create_cuda: %s\n", rank, loom_cuda_error_string());
        return 3;
    }
    if (rank == 0) {
        printf("# gpu_perf: allreduce float32 sum in place, %d ranks on device %d\n", n, dev);
        printf("# %10s %6s %12s %10s %12s %10s %7s %10s\n", "size(B)", "iters", "host(us)",
               "busbw", "device(us)", "busbw", "dev/host", "enqueue(us)");
    }
    int wrong = 0;
    for (int s = 0; s < nsizes; s++) {
        size_t bytes = sizes[s];
        uint64_t count = bytes / sizeof(float);
        int iters = bytes >= (32u << 20) ? 20 : 100;
        float *h = (float *)malloc(bytes);
        float *d;
        CUDA_OK(cudaMalloc(&d, bytes));
        for (uint64_t i = 0; i < count; i++)
            h[i] = 1.0f;
        /* host buffers, blocking */
        for (int i = 0; i < 5; i++)
            LOOM_OK(loom_allreduce(h, h, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL), comm);
        LOOM_OK(loom_barrier(comm, NULL), comm);
        double t0 = now_s();
        for (int i = 0; i < iters; i++)
            LOOM_OK(loom_allreduce(h, h, count, LOOM_FLOAT32, LOOM_SUM, comm, NULL), comm);
        double th = slowest(comm, (now_s() - t0) / iters);
        /* device buffers, on the stream */
        for (int i = 0; i < 5; i++)
            LOOM_OK(loom_allreduce(d, d, count, LOOM_FLOAT32, LOOM_SUM, comm, ls), comm);
        CUDA_OK(cudaStreamSynchronize(cs));
        LOOM_OK(loom_stream_synchronize(ls), comm);
        /* a known input for the check: 1 + rank everywhere */
        for (uint64_t i = 0; i < count; i++)
            h[i] = (float)(rank + 1);
        CUDA_OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, cs));
        CUDA_OK(cudaStreamSynchronize(cs));
        LOOM_OK(loom_barrier(comm, NULL), comm);
        double enq = 0;
        t0 = now_s();
        for (int i = 0; i < iters; i++) {
            double e0 = now_s();
            /* alternately sum and max: the result stays small and known */
            LOOM_OK(loom_allreduce(d, d, count, LOOM_FLOAT32, i == 0 ? LOOM_SUM : LOOM_MAX, comm,
                                   ls), comm);
            enq += now_s() - e0;
        }
        CUDA_OK(cudaStreamSynchronize(cs));
        double td = slowest(comm, (now_s() - t0) / iters);
        LOOM_OK(loom_stream_synchronize(ls), comm);
        CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
        float want = (float)(n * (n + 1) / 2);
        for (uint64_t i = 0; i < count; i++)
            if (h[i] != want) {
                if (!wrong)
                    fprintf(stderr, "rank %d: %zu bytes: element %llu = %g, expected %g\n", rank,
                            bytes, (unsigned long long)i, h[i], want);
                wrong = 1;
                break;
            }
        double f = 2.0 * (n - 1) / n;
        if (rank == 0)
            printf("  %10zu %6d %12.1f %10.2f %12.1f %10.2f %7.2f %10.2f\n", bytes, iters,
                   th * 1e6, bytes / th * f / 1e9, td * 1e6, bytes / td * f / 1e9, th / td,
                   enq / iters * 1e6);
        CUDA_OK(cudaFree(d));
        free(h);
    }
    if (rank == 0)
        printf("# busbw in GB/s; dev/host = device busbw / host busbw (goal >= 0.80 at 64 MiB, "
               "4 ranks)\n");
    loom_stream_destroy(ls);
    CUDA_OK(cudaStreamDestroy(cs));
    loom_comm_destroy(comm);
    return wrong;
}
