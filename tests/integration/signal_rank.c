/* signal_rank - one rank of tests/integration/test_signals.sh's jobs:
 *
 *   signal_rank URL SIZE RANK
 *
 * Joins (loom_comm_init_url), allreduces 1000 int64 (rank + 1) * (i + 1)
 * and checks each against n(n+1)/2 * (i + 1), prints "ready" and then
 * waits to be signalled: rank 0 inside a second allreduce that the others
 * never join (blocked in a collective waiting for its peers), the others
 * in pause(). Installs no signal handler: how it ends is what the
 * libraries it loaded made of the signal. Exit 1 (with a line) when the
 * first allreduce fails or is wrong, 2 when the second one returns. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loom.h"

#define COUNT 1000

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: signal_rank URL SIZE RANK\n");
        return 1;
    }
    loom_comm_t comm = NULL;
    int n = atoi(argv[2]), rank = atoi(argv[3]);
    if (loom_comm_init_url(argv[1], n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "signal_rank %d: join: %s\n", rank, loom_get_error_string(NULL));
        return 1;
    }
    int64_t buf[COUNT];
    for (int i = 0; i < COUNT; i++)
        buf[i] = (int64_t)(rank + 1) * (i + 1);
    if (loom_allreduce(buf, buf, COUNT, LOOM_INT64, LOOM_SUM, comm, NULL) != LOOM_SUCCESS) {
        fprintf(stderr, "signal_rank %d: allreduce: %s\n", rank, loom_get_error_string(comm));
        return 1;
    }
    for (int i = 0; i < COUNT; i++) {
        if (buf[i] != (int64_t)n * (n + 1) / 2 * (i + 1)) {
            fprintf(stderr, "signal_rank %d: element %d is %lld\n", rank, i, (long long)buf[i]);
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    if (rank == 0) {
        loom_result_t res = loom_allreduce(buf, buf, COUNT, LOOM_INT64, LOOM_SUM, comm, NULL);
        fprintf(stderr, "signal_rank 0: the allreduce no peer joined returned %d: %s\n", res,
                loom_get_error_string(comm));
        return 2;
    }
    for (;;)
        pause();
}
