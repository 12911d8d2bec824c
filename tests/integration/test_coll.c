/* test_coll.c - every collective x dtype x op x count x placement on real
 * processes over loopback, each rank checking its own result.
 *
 * usage: test_coll [N...]   (default: 1 2 3 4 5 8)
 * env:   LOOM_TEST_BIG (default 1000003): the large count
 *        LOOM_TEST_RANKTABLE=FILE: join through that table instead of tcp:// */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"
#include "harness.h"
#include "loom.h"

struct cfg {
    int port;
    uint64_t big;
    const char *table;
};

static int fails;

static void fail_msg(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_msg(int rank, const char *fmt, ...)
{
    if (fails++ < 10) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "rank %d: ", rank);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}
#define FAIL(...) fail_msg(rank, __VA_ARGS__)

static const loom_redop_t ops[] = {LOOM_SUM, LOOM_PROD, LOOM_MIN, LOOM_MAX, LOOM_AVG};

/* One call; returns 0 when the result checks. */
static int one(loom_comm_t comm, int rank, int n, int kind, loom_dtype_t t,
               loom_redop_t op, uint64_t count, int inplace, uint64_t seed)
{
    size_t es = loom_dtype_size(t);
    loom_result_t res = LOOM_SUCCESS;
    int bad = 0;
    const char *kname[] = {"allreduce", "allgather", "broadcast", "reduce_scatter", "reduce"};
    size_t full = (size_t)count * (size_t)n * es;
    char *a = malloc(full + 64), *b = malloc(full + 64);
    if (!a || !b) {
        FAIL("out of memory");
        return 1;
    }
    memset(b, 0xa5, full + 64);
    int root = (int)(seed % (uint64_t)n);
    switch (kind) {
    case 0: /* allreduce */
        cc_fill(a, t, op, seed, rank, 0, count);
        res = loom_allreduce(a, inplace ? a : b, count, t, op, comm, NULL);
        for (uint64_t i = 0; res == 0 && i < count && bad < 3; i++)
            if (!cc_check_reduced(inplace ? a : b, i, t, op, seed, n, i))
                bad++, FAIL("%s %s %s count %" PRIu64 " %s: element %" PRIu64 " wrong",
                            kname[kind], loom_dtype_name(t), loom_redop_name(op), count,
                            inplace ? "in-place" : "out-of-place", i);
        break;
    case 1: { /* allgather */
        char *out = b;
        char *in = inplace ? out + (size_t)rank * count * es : a;
        cc_fill(in, t, LOOM_SUM, seed, rank, 0, count);
        res = loom_allgather(in, out, count, t, comm, NULL);
        for (int r = 0; res == 0 && r < n; r++)
            for (uint64_t i = 0; i < count && bad < 3; i++)
                if (!cc_check_copy(out, (uint64_t)r * count + i, t, seed, r, i))
                    bad++, FAIL("allgather %s count %" PRIu64 " %s: block %d element %" PRIu64
                                " wrong", loom_dtype_name(t), count,
                                inplace ? "in-place" : "out-of-place", r, i);
        break;
    }
    case 2: /* broadcast */
        if (rank == root)
            cc_fill(a, t, LOOM_SUM, seed, root, 0, count);
        else
            memset(a, 0x5a, (size_t)count * es);
        res = loom_broadcast(a, count, t, root, comm, NULL);
        for (uint64_t i = 0; res == 0 && i < count && bad < 3; i++)
            if (!cc_check_copy(a, i, t, seed, root, i))
                bad++, FAIL("broadcast %s count %" PRIu64 " root %d: element %" PRIu64
                            " wrong", loom_dtype_name(t), count, root, i);
        break;
    case 3: { /* reduce_scatter: input is n blocks; block j of rank r is
                 elements j*count.. of its input sequence */
        cc_fill(a, t, op, seed, rank, 0, (uint64_t)n * count);
        char *out = inplace ? a + (size_t)rank * count * es : b;
        res = loom_reduce_scatter(a, out, count, t, op, comm, NULL);
        for (uint64_t i = 0; res == 0 && i < count && bad < 3; i++)
            if (!cc_check_reduced(out, i, t, op, seed, n, (uint64_t)rank * count + i))
                bad++, FAIL("reduce_scatter %s %s count %" PRIu64 " %s: element %" PRIu64
                            " wrong", loom_dtype_name(t), loom_redop_name(op), count,
                            inplace ? "in-place" : "out-of-place", i);
        break;
    }
    case 4: /* reduce */
        cc_fill(a, t, op, seed, rank, 0, count);
        res = loom_reduce(a, inplace ? a : (rank == root ? b : NULL), count, t, op, root,
                          comm, NULL);
        if (rank == root)
            for (uint64_t i = 0; res == 0 && i < count && bad < 3; i++)
                if (!cc_check_reduced(inplace ? a : b, i, t, op, seed, n, i))
                    bad++, FAIL("reduce %s %s count %" PRIu64 " root %d %s: element %" PRIu64
                                " wrong", loom_dtype_name(t), loom_redop_name(op), count,
                                root, inplace ? "in-place" : "out-of-place", i);
        break;
    }
    if (res != LOOM_SUCCESS)
        FAIL("%s %s count %" PRIu64 ": %s: %s", kname[kind], loom_dtype_name(t), count,
             loom_result_string(res), loom_get_error_string(comm));
    /* nothing written past the end of the output */
    if (!inplace && kind != 2) {
        size_t outb = kind == 1 ? full : kind == 3 ? (size_t)count * es
                    : (size_t)count * es;
        if (kind != 4 || rank == root)
            for (size_t k = outb; k < outb + 64; k++)
                if ((unsigned char)b[k] != 0xa5) {
                    FAIL("%s %s count %" PRIu64 ": byte %zu past the output was written",
                         kname[kind], loom_dtype_name(t), count, k - outb);
                    bad++;
                    break;
                }
    }
    free(a);
    free(b);
    return res != LOOM_SUCCESS || bad;
}

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
