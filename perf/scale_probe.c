/* scale_probe.c - one rank of a growth measurement (perf/scale-growth): joins
 * through tcp:// (public API only, so the same source measures any build of
 * Loom), then prints one line of what it cost this rank:
 *   rank N init_s S wchar B rchar B fds F socks K rss_kb R first_us U steady_us V
 * init_s: loom_comm_init_url; wchar/rchar: bytes this process wrote/read by
 * system call during init (/proc/self/io: for rank 0, its bootstrap bytes);
 * fds, socks: its open descriptors (and sockets) after the allreduces;
 * rss_kb: VmRSS then; first_us: the first 8-byte allreduce; steady_us: the
 * median of 50 more.
 *   usage: scale_probe PORT NRANKS RANK */
#include <dirent.h>
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

static long long io_field(const char *name)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, name, strlen(name)) == 0)
            v = atoll(line + strlen(name) + 1);
    if (f)
        fclose(f);
    return v;
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
    long long w0 = io_field("wchar"), r0 = io_field("rchar");
    double t0 = now();
    loom_comm_t comm;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(NULL));
        return 1;
    }
    double t_init = now() - t0;
    long long w1 = io_field("wchar"), r1 = io_field("rchar");
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
    printf("rank %d init_s %.4f wchar %lld rchar %lld fds %d socks %d rss_kb %ld "
           "first_us %.1f steady_us %.1f\n",
           rank, t_init, w1 - w0, r1 - r0, all, socks, rss, first * 1e6, steady[25] * 1e6);
    fflush(stdout);
    sleep(1); /* nobody leaves while another may still count */
    loom_comm_destroy(comm);
    return 0;
}
