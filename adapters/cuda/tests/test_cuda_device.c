/* test_cuda_device.c - the CUDA adapter on a real GPU, used as an
 * application uses it (public headers, libloom + libloom_cuda, cudart):
 * two ranks on device 0 allreduce device buffers on a CUDA stream, the
 * copies in and out enqueued on the same stream, one
 * cudaStreamSynchronize, results checked. Exits 77 (SKIP) with the reason
 * on a host without a CUDA driver or device; tests/gpu/run.sh is the
 * full GPU suite. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom.h"
#include "loom_cuda.h"

#define COUNT (3 * 1024 * 1024 + 17) /* several staging pieces */

static int rank_main(int rank, const loom_unique_id_t *id)
{
    loom_comm_t comm;
    if (loom_comm_init_rank(&comm, 2, id, rank) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s\n", rank, loom_get_error_string(NULL));
        return 10;
    }
    int dev;
    if (loom_cuda_set_device(comm, &dev) != LOOM_SUCCESS || cudaSetDevice(dev) != cudaSuccess) {
        fprintf(stderr, "rank %d: device: %s\n", rank, loom_cuda_error_string());
        return 11;
    }
    cudaStream_t cs;
    loom_stream_t ls;
    if (cudaStreamCreate(&cs) != cudaSuccess || loom_stream_create_cuda(cs, &ls) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: stream: %s\n", rank, loom_cuda_error_string());
        return 12;
    }
    float *host, *dbuf;
    if (cudaMallocHost((void **)&host, COUNT * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&dbuf, COUNT * sizeof(float)) != cudaSuccess)
        return 13;
    for (int i = 0; i < COUNT; i++)
        host[i] = (float)((rank + 1) * (i % 1000));
    cudaMemcpyAsync(dbuf, host, COUNT * sizeof(float), cudaMemcpyHostToDevice, cs);
    if (loom_allreduce(dbuf, dbuf, COUNT, LOOM_FLOAT32, LOOM_SUM, comm, ls) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: allreduce: %s\n", rank, loom_get_error_string(comm));
        return 14;
    }
    cudaMemcpyAsync(host, dbuf, COUNT * sizeof(float), cudaMemcpyDeviceToHost, cs);
    if (cudaStreamSynchronize(cs) != cudaSuccess || loom_stream_synchronize(ls) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: synchronize: %s\n", rank, loom_get_error_string(comm));
        return 15;
    }
    for (int i = 0; i < COUNT; i++)
        if (host[i] != (float)(3 * (i % 1000))) {
            fprintf(stderr, "rank %d: element %d = %g, expected %g\n", rank, i, host[i],
                    (double)(3 * (i % 1000)));
            return 16;
        }
    loom_stream_destroy(ls);
    cudaStreamDestroy(cs);
    cudaFree(dbuf);
    cudaFreeHost(host);
    loom_comm_destroy(comm);
    return 0;
}

/* Is CUDA usable here? Asked in a child: a process must not fork after
 * CUDA started in it. 0: yes; 77: no, the reason in why. */
static int probe(char *why, size_t len)
{
    int fd[2];
    if (pipe(fd) < 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        const char *reason = "";
        loom_result_t res = loom_cuda_available(&reason);
        ssize_t w = write(fd[1], reason, strlen(reason));
        (void)w;
        _exit(res == LOOM_SUCCESS ? 0 : reason[0] ? 77 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], why, len - 1);
    why[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void)
{
    char why[512];
    int rc = probe(why, sizeof why);
    if (rc) {
        printf("%s: %s\n", rc == 77 ? "SKIP" : "FAIL", why[0] ? why : "no reason given");
        return rc;
    }
    setenv("LOOM_CUDA_DEVICE", "0", 1); /* both ranks on one GPU */
    /* rank 0's unique id, handed to rank 1 through shared memory */
    struct share {
        volatile int ready;
        loom_unique_id_t id;
    } *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(120);
            if (r == 0) {
                if (loom_get_unique_id(&sh->id) != LOOM_SUCCESS) {
                    fprintf(stderr, "unique id: %s\n", loom_get_error_string(NULL));
                    _exit(9);
                }
                __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
            } else {
                while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE))
                    usleep(1000);
            }
            _exit(rank_main(r, &sh->id));
        }
    }
    int failed = 0;
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (status %d)\n", r, st);
            failed = 1;
        }
    }
    if (!failed)
        printf("PASS: 2 ranks on device 0, allreduce of %d floats on device buffers\n", COUNT);
    return failed;
}
