/* test_scale.c - many ranks on one host (64 by default; LOOM_TEST_SCALE_N),
 * over the network only (LOOM_SHM=0): every rank joins, runs small and large
 * allreduces, a broadcast and an allgather and checks each result exactly
 * against what it computes itself; then it counts its open file descriptors.
 * Connections are made per peer on first use, so a rank holds sockets only
 * to the peers its algorithms used (recursive doubling: log2 N partners;
 * ring: two neighbours), never to all N - 1.
 *
 *   test_scale [N]    exit 0 when every rank passed; prints the fd counts */
#include "build_config.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../support/harness.h"
#include "loom.h"

struct shared {
    int port;
    atomic_int fds_max, socks_max, init_ms_max;
    atomic_int ar_fds_max, ar_socks_max; /* after the 8-byte allreduces only */
    atomic_int arrived[2], counted[2];   /* phases: nobody runs ahead while */
};                                       /* another counts                  */

/* Open file descriptors of this process, and how many are sockets. */
static void count_fds(int *all, int *socks)
{
    *all = *socks = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = 0;
        if ((int)strtol(e->d_name, NULL, 10) == dirfd(d))
            continue;
        (*all)++;
        if (strncmp(target, "socket:", 7) == 0)
            (*socks)++;
    }
    closedir(d);
}

/* Count this rank's descriptors once every rank is here, and let nobody go
 * on (and connect to new peers) until every rank has counted. */
static void count_phase(struct shared *sh, int k, int n, int *fds, int *socks)
{
    atomic_fetch_add(&sh->arrived[k], 1);
    harness_counter_wait(&sh->arrived[k], n, 60);
    usleep(1500000); /* out-of-band sockets close after a second idle */
    count_fds(fds, socks);
    atomic_fetch_add(&sh->counted[k], 1);
    harness_counter_wait(&sh->counted[k], n, 60);
}

static void atomic_max(atomic_int *a, int v)
{
    int cur = atomic_load(a);
    while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
        ;
}

static int rank_main(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    setenv("LOOM_SHM", "0", 1);
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "120", 1);
    int fds0, socks0;
    count_fds(&fds0, &socks0);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", sh->port);
    double t0 = harness_now();
    loom_comm_t comm;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(NULL));
        return 10;
    }
    atomic_max(&sh->init_ms_max, (int)((harness_now() - t0) * 1000));
    /* 8 bytes: recursive doubling */
    int64_t x = rank + 1;
    if (loom_allreduce(&x, &x, 1, LOOM_INT64, LOOM_SUM, comm, NULL) ||
        x != (int64_t)n * (n + 1) / 2) {
        fprintf(stderr, "rank %d: 8-byte allreduce: %lld\n", rank, (long long)x);
        return 11;
    }
    for (int k = 0; k < 20; k++)
        if (loom_allreduce(&x, &x, 1, LOOM_INT64, LOOM_MAX, comm, NULL))
            return 11;
    /* the allreduce workload's descriptors */
    int fds, socks;
    count_phase(sh, 0, n, &fds, &socks);
    atomic_max(&sh->ar_fds_max, fds - fds0);
    atomic_max(&sh->ar_socks_max, socks - socks0);
    /* 1 MiB: the ring; small integers, so float sums are exact */
    enum { COUNT = 1 << 18 };
    float *buf = malloc(COUNT * sizeof *buf);
    for (int i = 0; i < COUNT; i++)
        buf[i] = (float)((rank + i) % 7);
    if (loom_allreduce(buf, buf, COUNT, LOOM_FLOAT32, LOOM_SUM, comm, NULL)) {
        fprintf(stderr, "rank %d: 1 MiB allreduce: %s\n", rank, loom_get_error_string(comm));
        return 12;
    }
    for (int i = 0; i < COUNT; i++) {
        float want = 0;
        for (int r = 0; r < n; r++)
            want += (float)((r + i) % 7);
        if (buf[i] != want) {
            fprintf(stderr, "rank %d: element %d is %g, expected %g\n", rank, i, buf[i],
                    want);
            return 13;
        }
    }
    /* broadcast and allgather of a few bytes */
    int b = rank == 3 % n ? 4242 : -1;
    if (loom_broadcast(&b, 1, LOOM_INT32, 3 % n, comm, NULL) || b != 4242)
        return 14;
    int32_t *all = malloc(sizeof *all * (size_t)n), me = rank * 3;
    if (loom_allgather(&me, all, 1, LOOM_INT32, comm, NULL))
        return 15;
    for (int r = 0; r < n; r++)
        if (all[r] != r * 3)
            return 16;
    /* the 8-byte workload once more, after the others (steady state) */
    for (int k = 0; k < 20; k++)
        if (loom_allreduce(&x, &x, 1, LOOM_INT64, LOOM_MAX, comm, NULL))
            return 17;
    count_phase(sh, 1, n, &fds, &socks);
    atomic_max(&sh->fds_max, fds - fds0);
    atomic_max(&sh->socks_max, socks - socks0);
    /* before destroy: nobody leaves while another still needs it */
    loom_barrier(comm, NULL);
    free(buf);
    free(all);
    loom_comm_destroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0;
    if (n <= 0 && getenv("LOOM_TEST_SCALE_N"))
        n = atoi(getenv("LOOM_TEST_SCALE_N"));
    if (n <= 0)
        n = 64;
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 2;
    sh->port = harness_free_port();
    atomic_init(&sh->fds_max, 0);
    atomic_init(&sh->socks_max, 0);
    atomic_init(&sh->init_ms_max, 0);
    atomic_init(&sh->ar_fds_max, 0);
    atomic_init(&sh->ar_socks_max, 0);
    for (int k = 0; k < 2; k++) {
        atomic_init(&sh->arrived[k], 0);
        atomic_init(&sh->counted[k], 0);
    }
    double t0 = harness_now();
    int rc = harness_run(n, rank_main, sh, 280, NULL);
    int log2n = 0;
    while ((1 << (log2n + 1)) <= n)
        log2n++;
    /* the allreduce workload: recursive doubling's log2 N partners (one more
     * where a remainder folds in) and the out-of-band listener; besides
     * sockets, the out-of-band wake-up and the transport's epoll and
     * wake-up. With allgather (Bruck: distances 2^k), the 1 MiB ring and a
     * broadcast as well: about twice as many partners. Never all N - 1. */
    int ar_socks_limit = log2n + 2, ar_fds_limit = ar_socks_limit + 3;
    int socks_limit = 2 * log2n + 5, fds_limit = socks_limit + 3;
    printf("test_scale: %d ranks in %.1f s: slowest init %d ms\n"
           "  allreduce only: Loom's fds per rank at most %d (sockets %d); limits %d, %d\n"
           "  all collectives: Loom's fds per rank at most %d (sockets %d); limits %d, %d\n",
           n, harness_now() - t0, atomic_load(&sh->init_ms_max),
           atomic_load(&sh->ar_fds_max), atomic_load(&sh->ar_socks_max), ar_fds_limit,
           ar_socks_limit, atomic_load(&sh->fds_max), atomic_load(&sh->socks_max),
           fds_limit, socks_limit);
    if (rc)
        return 1;
    if (atomic_load(&sh->ar_socks_max) > ar_socks_limit ||
        atomic_load(&sh->ar_fds_max) > ar_fds_limit ||
        atomic_load(&sh->socks_max) > socks_limit || atomic_load(&sh->fds_max) > fds_limit) {
        printf("test_scale: too many descriptors per rank\n");
        return 1;
    }
    return 0;
}
