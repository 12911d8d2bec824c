/* test_coll.c - every collective x dtype x op x count x placement on real
 * processes over loopback, each rank checking its own result.
 *
 * usage: test_coll [N...]   (default: 1 2 3 4 5 8)
 * env:   LOOM_TEST_BIG (default 1000003): the large count
 *        LOOM_TEST_RANKTABLE=FILE: join through that table instead of tcp:// */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../perf/coll_check.h"
#include "../support/coll_one.h"
#include "../support/harness.h"
#include "loom.h"

struct cfg {
    int port;
    uint64_t big;
    const char *table;
};

static int rank_main(int rank, int n, void *arg)
{
    struct cfg *c = arg;
    loom_comm_t comm;
    loom_result_t res;
    if (c->table) {
        res = loom_comm_init_ranktable(c->table, rank, &comm);
    } else {
        char url[64];
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", c->port);
        res = loom_comm_init_url(url, n, rank, &comm);
    }
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, loom_result_string(res),
                loom_get_error_string(NULL));
        return 1;
    }
    uint64_t counts[5] = {0, 1, 7, (uint64_t)(n > 1 ? n - 1 : 2), c->big};
    uint64_t seed = 1;
    for (int kind = 0; kind < 5; kind++)
        for (int t = 0; t < LOOM_DTYPE_COUNT; t++)
            for (int oi = 0; oi < 5; oi++) {
                if ((kind == 1 || kind == 2) && oi > 0)
                    continue; /* no reduction op */
                for (int ci = 0; ci < 5; ci++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        if (kind == 2 && inplace)
                            continue; /* broadcast is always in place */
                        /* the large count once per dtype for non-sum ops */
                        if (ci == 4 && oi > 0 && inplace)
                            continue;
                        one(comm, rank, n, kind, (loom_dtype_t)t, ops[oi], counts[ci],
                            inplace, seed++);
                        if (fails > 20)
                            goto out;
                    }
            }
    res = loom_barrier(comm, NULL);
    if (res != LOOM_SUCCESS)
        FAIL("barrier: %s", loom_get_error_string(comm));
out:
    loom_comm_destroy(comm);
    if (fails)
        fprintf(stderr, "rank %d: %d failures\n", rank, fails);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int ns[16] = {1, 2, 3, 4, 5, 8}, nn = 6;
    if (argc > 1) {
        nn = 0;
        for (int i = 1; i < argc && nn < 16; i++)
            ns[nn++] = atoi(argv[i]);
    }
    struct cfg c = {.big = 1000003};
    const char *big = getenv("LOOM_TEST_BIG");
    if (big)
        c.big = strtoull(big, NULL, 10);
    c.table = getenv("LOOM_TEST_RANKTABLE");
    setenv("LOOM_CHUNK_SIZE", getenv("LOOM_CHUNK_SIZE") ? getenv("LOOM_CHUNK_SIZE") : "16K", 1);
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "30", 0);
    setenv("LOOM_TIMEOUT", "60", 0);
    int failed = 0;
    for (int k = 0; k < nn; k++) {
        c.port = harness_free_port();
        if (c.table) {
            char pb[16];
            snprintf(pb, sizeof pb, "%d", c.port);
            setenv("LOOM_PORT_BASE", pb, 1);
        }
        double t0 = harness_now();
        int rc = harness_run(ns[k], rank_main, &c, 400, NULL);
        printf("%s n=%d%s%s (%.1f s)\n", rc ? "FAIL" : "PASS", ns[k],
               c.table ? " table " : "", c.table ? c.table : "", harness_now() - t0);
        fflush(stdout);
        failed |= rc;
    }
    return failed;
}
