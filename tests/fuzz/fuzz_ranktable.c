/* fuzz_ranktable.c - libFuzzer target: any bytes through the rank-table
 * parser and, when they form a valid table, through every getter. The
 * sanitizers catch overreads and leaks; asserts catch broken invariants. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>

#include "loom.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

static void walk_diag(const loom_diag_t *diag)
{
    size_t n = 0;
    fail_if(loom_diag_count(diag, &n) != LOOM_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        loom_diag_severity_t sev;
        const char *path, *msg;
        fail_if(loom_diag_get(diag, i, &sev, &path, &msg) != LOOM_SUCCESS);
        fail_if(!path || !msg || (sev != LOOM_DIAG_ERROR &&
                                  sev != LOOM_DIAG_WARNING));
    }
    fail_if(loom_diag_get(diag, n, NULL, NULL, NULL) == LOOM_SUCCESS);
}

static void walk_table(const loom_ranktable_t *t)
{
    const char *version;
    int nranks, nservers;
    uint64_t hash;
    fail_if(loom_ranktable_version(t, &version) != LOOM_SUCCESS || !version);
    fail_if(loom_ranktable_nranks(t, &nranks) != LOOM_SUCCESS || nranks < 1);
    fail_if(loom_ranktable_nservers(t, &nservers) != LOOM_SUCCESS ||
            nservers < 1);
    for (int r = 0; r < nranks; r++) {
        loom_rank_info_t ri;
        fail_if(loom_ranktable_rank_info(t, r, &ri) != LOOM_SUCCESS);
        fail_if(ri.rank != r || !ri.address || !ri.server_id);
        fail_if(ri.local_rank < 0 || ri.local_rank >= ri.local_size);
        loom_rank_addrs_t a = {.struct_size = sizeof a};
        fail_if(loom_ranktable_rank_addrs(t, r, &a) != LOOM_SUCCESS);
        fail_if(!a.device_address && !a.host_address);
        fail_if(ri.address != a.device_address && ri.address != a.host_address);
    }
    int total = 0;
    for (int s = 0; s < nservers; s++) {
        int ranks[8], count = 0;
        fail_if(loom_ranktable_server_ranks(t, s, ranks, 8, &count) !=
                LOOM_SUCCESS);
        fail_if(count < 1);
        total += count;
    }
    fail_if(total != nranks);
    fail_if(loom_ranktable_hash(t, &hash) != LOOM_SUCCESS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    loom_ranktable_t *t = NULL;
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_ranktable_parse((const char *)data, size, "fuzz",
                                             &t, &diag);
    fail_if(res == LOOM_SUCCESS ? !t : t != NULL);
    if (diag)
        walk_diag(diag);
    if (t)
        walk_table(t);
    loom_ranktable_free(t);
    loom_diag_free(diag);
    return 0;
}
