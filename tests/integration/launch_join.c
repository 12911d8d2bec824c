/* launch_join - one rank of a job started by a launcher, for
 * tests/integration/test_launch.sh:
 *
 *   launch_join env         loom_comm_init_url("env://", -1, -1)
 *   launch_join initenv     loom_comm_init_env()
 *   launch_join url URL     loom_comm_init_url(URL, -1, -1)
 *   ... [mismatch]          then rank 0 calls allreduce, the others
 *                           allgather: every rank must fail, naming both
 *
 * After joining, each rank allreduces 1000 int64 (rank + 1) * (i + 1) and
 * checks every element against n(n+1)/2 * (i + 1), then prints
 * "launch_join: rank R of N ok". A failure prints one line, exit 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"

#define COUNT 1000

static int fail(const char *what, loom_comm_t comm)
{
    fprintf(stderr, "launch_join: %s: %s\n", what, loom_get_error_string(comm));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        goto usage;
    loom_comm_t comm = NULL;
    loom_result_t res;
    int next = 2;
    if (strcmp(argv[1], "env") == 0) {
        res = loom_comm_init_url("env://", -1, -1, &comm);
    } else if (strcmp(argv[1], "initenv") == 0) {
        res = loom_comm_init_env(&comm);
    } else if (strcmp(argv[1], "url") == 0 && argc > 2) {
        res = loom_comm_init_url(argv[2], -1, -1, &comm);
        next = 3;
    } else {
        goto usage;
    }
    int mismatch = argc > next && strcmp(argv[next], "mismatch") == 0;
    if (res != LOOM_SUCCESS)
        return fail("join", NULL);
    int rank, n;
    loom_comm_rank(comm, &rank);
    loom_comm_size(comm, &n);

    int64_t *buf = calloc(COUNT * (size_t)n, sizeof *buf);
    if (!buf)
        return fail("out of memory", NULL);
    for (int i = 0; i < COUNT; i++)
        buf[i] = (int64_t)(rank + 1) * (i + 1);
    if (mismatch) {
        res = rank == 0 ? loom_allreduce(buf, buf, COUNT, LOOM_INT64, LOOM_SUM, comm, NULL)
                        : loom_allgather(buf, buf + (size_t)rank * COUNT, COUNT,
                                         LOOM_INT64, comm, NULL);
        int rc = 2;
        if (res == LOOM_ERROR_MISMATCH)
            rc = fail("mismatched calls", comm);
        else
            fprintf(stderr, "launch_join: rank %d: mismatched calls returned %s\n", rank,
                    loom_result_string(res));
        free(buf);
        loom_comm_destroy(comm);
        return rc;
    }
    res = loom_allreduce(buf, buf, COUNT, LOOM_INT64, LOOM_SUM, comm, NULL);
    if (res != LOOM_SUCCESS) {
        int rc = fail("allreduce", comm);
        free(buf);
        loom_comm_destroy(comm);
        return rc;
    }
    int64_t tri = (int64_t)n * (n + 1) / 2;
    for (int i = 0; i < COUNT; i++)
        if (buf[i] != tri * (i + 1)) {
            fprintf(stderr, "launch_join: rank %d: element %d is %lld, want %lld\n", rank,
                    i, (long long)buf[i], (long long)(tri * (i + 1)));
            return 1;
        }
    free(buf);
    loom_comm_destroy(comm);
    printf("launch_join: rank %d of %d ok\n", rank, n);
    return 0;
usage:
    fprintf(stderr, "usage: launch_join env|initenv|url URL [mismatch]\n");
    return 2;
}
