/* scale_probe.c - one rank of a growth measurement (perf/scale-growth): joins
 * through tcp:// (public API only, so the same source measures any build of
 * Loom), then prints one line of what it cost this rank:
 *   rank N init_s S sent B received B fds F socks K rss_kb R first_us U steady_us V
 * init_s: loom_comm_init_url; sent/received: bytes this process moved
 * through sockets during init (counted by perf/scale_bytes.c when preloaded:
 * for rank 0, its bootstrap bytes);
 * fds, socks: its open descriptors (and sockets) after the allreduces;
 * rss_kb: VmRSS then; first_us: the first 8-byte allreduce; steady_us: the
 * median of 50 more.
 *   usage: scale_probe PORT NRANKS RANK */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Bytes this process moved through sockets so far: from perf/scale_bytes.c
 * when it is preloaded (perf/scale-growth does), else 0. */
static void socket_bytes(unsigned long long *sent, unsigned long long *received)
{
    void (*fn)(uint64_t *, uint64_t *) =
        (void (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "loom_scale_bytes");
    uint64_t s = 0, r = 0;
    if (fn)
        fn(&s, &r);
    *sent = s;
    *received = r;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

static void fds(int *all, int *socks)
{
    *all = *socks = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[300], t[256];
        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
            continue;
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(p, t, sizeof t - 1);
        if (n <= 0)
            continue;
        t[n] = 0;
        (*all)++;
        *socks += strncmp(t, "socket:", 7) == 0;
    }
    if (d)
        closedir(d);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: scale_probe PORT NRANKS RANK\n");
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]), rank = atoi(argv[3]);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    unsigned long long w0, r0, w1, r1;
    socket_bytes(&w0, &r0);
    double t0 = now();
    loom_comm_t comm;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(NULL));
        return 1;
    }
    double t_init = now() - t0;
    socket_bytes(&w1, &r1);
    int64_t x = rank;
    t0 = now();
    if (loom_allreduce(&x, &x, 1, LOOM_INT64, LOOM_SUM, comm, NULL) ||
        x != (int64_t)n * (n - 1) / 2) {
        fprintf(stderr, "rank %d: allreduce failed or wrong\n", rank);
        return 1;
    }
    double first = now() - t0, steady[50];
    for (int i = 0; i < 50; i++) {
        t0 = now();
        if (loom_allreduce(&x, &x, 1, LOOM_INT64, LOOM_MAX, comm, NULL))
            return 1;
        steady[i] = now() - t0;
    }
    qsort(steady, 50, sizeof steady[0], cmp);
    sleep(2); /* short-lived sockets close */
    int all, socks;
    fds(&all, &socks);
    long rss = rss_kb();
    printf("rank %d init_s %.4f sent %llu received %llu fds %d socks %d rss_kb %ld "
           "first_us %.1f steady_us %.1f\n",
           rank, t_init, w1 - w0, r1 - r0, all, socks, rss, first * 1e6, steady[25] * 1e6);
    fflush(stdout);
    sleep(1); /* nobody leaves while another may still count */
    loom_comm_destroy(comm);
    return 0;
}
