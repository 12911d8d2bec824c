/* netns_job.c - one rank of a multi-host job for the network-namespace
 * harness (tests/netns/run.sh). Joins through loom_comm_init_env (the rank
 * table and rank come from LOOM_RANK_TABLE / LOOM_RANK), runs a checked
 * workload of allreduce, allgather, broadcast and reduce_scatter over
 * several sizes, and reports on one line:
 *
 *   RESULT rank=R ok=1 ops=N bytes=B seconds=T      (stdout, exit 0)
 *   RESULT rank=R ok=0 ...  + the first wrong elements   (exit 3)
 *   ERROR  rank=R op=KIND count=C after=T result=NAME   (stderr, exit 2)
 *   MESSAGE <loom_get_error_string()>                   (stderr)
 *
 * usage: netns_job [-i ITERS] [-c COUNT,COUNT,...] [-f] [-s SEED]
 *   -i  iterations of the workload (default 2)
 *   -c  element counts (default 0,1,7,4099,262147,1048573)
 *   -f  forever: repeat until a call fails (the link-down case); prints
 *       "PROGRESS rank=R iter=I" on stdout after each iteration
 *   -s  seed of the inputs (default 1)
 *
 * "after" is the time from the start of the failing call to its return:
 * how long the library took to report the fault. */
#include "build_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/coll_check.h"
#include "loom.h"

#define JOB_MAX_COUNTS 16
#define JOB_MAX_COUNT (64ull << 20) /* elements; bounds what -c may ask for */

struct job {
    loom_comm_t comm;
    int rank, n;
    uint64_t seed;
    uint64_t ops, bytes;
    int wrong;
    char *a, *b;
    size_t cap;
};

static double job_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void job_wrong(struct job *j, const char *what, uint64_t count, uint64_t i)
{
    if (j->wrong++ < 5)
        fprintf(stderr, "WRONG rank=%d %s count=%" PRIu64 " element=%" PRIu64 "\n", j->rank,
                what, count, i);
}

/* Runs one collective of kind k on count elements and checks it. Returns
 * the call's result; a wrong element is counted in j->wrong. */
static loom_result_t job_one(struct job *j, int k, uint64_t count, const char **kname)
{
    static const char *const names[] = {"allreduce", "allgather", "broadcast",
                                        "reduce_scatter"};
    /* a different dtype/op per kind, so the workload covers several kernels */
    static const loom_dtype_t types[] = {LOOM_FLOAT32, LOOM_INT32, LOOM_UINT8, LOOM_INT64};
    static const loom_redop_t ops[] = {LOOM_SUM, LOOM_SUM, LOOM_SUM, LOOM_MAX};
    loom_dtype_t t = types[k];
    loom_redop_t op = ops[k];
    size_t es = loom_dtype_size(t);
    uint64_t seed = j->seed++;
    int n = j->n, r = j->rank;
    loom_result_t res = LOOM_SUCCESS;
    *kname = names[k];
    switch (k) {
    case 0:
        cc_fill(j->a, t, op, seed, r, 0, count);
        res = loom_allreduce(j->a, j->b, count, t, op, j->comm, NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && i < count; i++)
            if (!cc_check_reduced(j->b, i, t, op, seed, n, i)) {
                job_wrong(j, names[k], count, i);
                break;
            }
        j->bytes += count * es;
        break;
    case 1:
        cc_fill(j->a, t, op, seed, r, 0, count);
        res = loom_allgather(j->a, j->b, count, t, j->comm, NULL);
        for (int q = 0; res == LOOM_SUCCESS && q < n; q++)
            for (uint64_t i = 0; i < count; i++)
                if (!cc_check_copy(j->b, (uint64_t)q * count + i, t, seed, q, i)) {
                    job_wrong(j, names[k], count, (uint64_t)q * count + i);
                    q = n;
                    break;
                }
        j->bytes += count * es * (uint64_t)n;
        break;
    case 2: {
        int root = (int)(seed % (uint64_t)n);
        if (r == root)
            cc_fill(j->a, t, op, seed, root, 0, count);
        else
            memset(j->a, 0x5a, (size_t)count * es);
        res = loom_broadcast(j->a, count, t, root, j->comm, NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && i < count; i++)
            if (!cc_check_copy(j->a, i, t, seed, root, i)) {
                job_wrong(j, names[k], count, i);
                break;
            }
        j->bytes += count * es;
        break;
    }
    default: /* reduce_scatter: block q of each input is elements q*count.. */
        cc_fill(j->a, t, op, seed, r, 0, (uint64_t)n * count);
        res = loom_reduce_scatter(j->a, j->b, count, t, op, j->comm, NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && i < count; i++)
            if (!cc_check_reduced(j->b, i, t, op, seed, n, (uint64_t)r * count + i)) {
                job_wrong(j, names[k], count, i);
                break;
            }
        j->bytes += count * es * (uint64_t)n;
        break;
    }
    j->ops++;
    return res;
}

static int job_parse_counts(const char *s, uint64_t *counts, int *ncounts)
{
    *ncounts = 0;
    while (*s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || v > JOB_MAX_COUNT || *ncounts == JOB_MAX_COUNTS ||
            (*end != ',' && *end != '\0'))
            return -1;
        counts[(*ncounts)++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    return *ncounts > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    uint64_t counts[JOB_MAX_COUNTS] = {0, 1, 7, 4099, 262147, 1048573};
    int ncounts = 6, iters = 2, forever = 0, opt;
    struct job j = {.seed = 1};
    while ((opt = getopt(argc, argv, "i:c:fs:")) != -1) {
        switch (opt) {
        case 'i': iters = atoi(optarg); break;
        case 'c':
            if (job_parse_counts(optarg, counts, &ncounts) != 0) {
                fprintf(stderr, "netns_job: -c wants up to %d counts <= %llu, comma-separated\n",
                        JOB_MAX_COUNTS, JOB_MAX_COUNT);
                return 64;
            }
            break;
        case 'f': forever = 1; break;
        case 's': j.seed = strtoull(optarg, NULL, 10); break;
        default:
            fprintf(stderr, "usage: netns_job [-i ITERS] [-c COUNT,...] [-f] [-s SEED]\n");
            return 64;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    double t0 = job_now();
    loom_result_t res = loom_comm_init_env(&j.comm);
    if (res != LOOM_SUCCESS) {
        const char *rk = getenv("LOOM_RANK");
        fprintf(stderr, "ERROR rank=%s op=init count=0 after=%.2f result=%s\nMESSAGE %s\n",
                rk ? rk : "?", job_now() - t0, loom_result_string(res),
                loom_get_error_string(NULL));
        return 2;
    }
    loom_comm_rank(j.comm, &j.rank);
    loom_comm_size(j.comm, &j.n);
    uint64_t maxc = 0;
    for (int c = 0; c < ncounts; c++)
        maxc = counts[c] > maxc ? counts[c] : maxc;
    /* the largest buffer any kind needs: n blocks of 8-byte elements */
    j.cap = (size_t)maxc * (size_t)j.n * 8 + 64;
    j.a = malloc(j.cap);
    j.b = malloc(j.cap);
    if (!j.a || !j.b) {
        fprintf(stderr, "ERROR rank=%d op=alloc count=%" PRIu64 " after=0 result=%s\n"
                "MESSAGE cannot allocate 2 x %zu bytes\n", j.rank, maxc,
                loom_result_string(LOOM_ERROR_NO_MEMORY), j.cap);
        return 2;
    }
    int rc = 0;
    for (int it = 0; forever || it < iters; it++) {
        for (int c = 0; c < ncounts && rc == 0; c++)
            for (int k = 0; k < 4 && rc == 0; k++) {
                const char *kname;
                double s = job_now();
                res = job_one(&j, k, counts[c], &kname);
                if (res != LOOM_SUCCESS) {
                    fprintf(stderr, "ERROR rank=%d op=%s count=%" PRIu64 " after=%.2f "
                            "result=%s\nMESSAGE %s\n", j.rank, kname, counts[c],
                            job_now() - s, loom_result_string(res),
                            loom_get_error_string(j.comm));
                    rc = 2;
                }
            }
        if (rc == 0 && j.wrong)
            rc = 3;
        if (rc != 0)
            break;
        if (forever)
            printf("PROGRESS rank=%d iter=%d\n", j.rank, it);
    }
    double secs = job_now() - t0;
    if (rc != 2)
        printf("RESULT rank=%d ok=%d ops=%" PRIu64 " bytes=%" PRIu64 " seconds=%.2f\n",
               j.rank, rc == 0, j.ops, j.bytes, secs);
    loom_comm_destroy(j.comm);
    free(j.a);
    free(j.b);
    return rc;
}
