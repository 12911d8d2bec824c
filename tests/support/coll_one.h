/* coll_one.h - one collective call with seeded inputs, every element of its
 * result checked against coll_check.h, and the 64 bytes past an
 * out-of-place output checked untouched; plus the bounded failure report
 * the multi-process collective tests share.
 *
 * A test includes this after coll_check.h; FAIL(...) needs a `rank` in
 * scope. Each rank is its own process, so the static failure count is
 * per rank. */
#ifndef LOOM_COLL_ONE_H
#define LOOM_COLL_ONE_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../perf/coll_check.h"
#include "loom.h"

/* Collective kinds, in the order of enum loom_op_kind. */
enum { K_ALLREDUCE, K_ALLGATHER, K_BROADCAST, K_REDUCE_SCATTER, K_REDUCE, K_NKINDS };

static const char *const kname[K_NKINDS] = {"allreduce", "allgather", "broadcast", "reduce_scatter",
                                            "reduce"};
static const loom_redop_t ops[] = {LOOM_SUM, LOOM_PROD, LOOM_MIN, LOOM_MAX, LOOM_AVG};

/* Failures on this rank; only the first 10 are printed. */
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

/* One call of kind (K_*) on count elements; the root, where there is one,
 * is seed % n. Reports at most 3 wrong elements per call. Returns 0 when
 * the call succeeded and its result checks. */
static int one(loom_comm_t comm, int rank, int n, int kind, loom_dtype_t t, loom_redop_t op,
               uint64_t count, int inplace, uint64_t seed)
{
    if (kind < 0 || kind >= K_NKINDS) {
        FAIL("one: no collective kind %d", kind);
        return 1;
    }
    size_t es = loom_dtype_size(t);
    size_t full = (size_t)count * (size_t)n * es;
    const char *place = inplace ? "in-place" : "out-of-place";
    char *a = malloc(full + 64), *b = malloc(full + 64);
    if (!a || !b) {
        FAIL("%s %s count %" PRIu64 ": out of memory", kname[kind], loom_dtype_name(t), count);
        free(a);
        free(b);
        return 1;
    }
    memset(b, 0xa5, full + 64);
    int root = (int)(seed % (uint64_t)n), bad = 0;
    loom_result_t res = LOOM_SUCCESS;
    switch (kind) {
    case K_ALLREDUCE: {
        char *out = inplace ? a : b;
        cc_fill(a, t, op, seed, rank, 0, count);
        res = loom_allreduce(a, out, count, t, op, comm, NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && i < count && bad < 3; i++)
            if (!cc_check_reduced(out, i, t, op, seed, n, i))
                bad++, FAIL("allreduce %s %s count %" PRIu64 " %s: element %" PRIu64 " wrong",
                            loom_dtype_name(t), loom_redop_name(op), count, place, i);
        break;
    }
    case K_ALLGATHER: {
        char *in = inplace ? b + (size_t)rank * count * es : a;
        cc_fill(in, t, LOOM_SUM, seed, rank, 0, count);
        res = loom_allgather(in, b, count, t, comm, NULL);
        for (int r = 0; res == LOOM_SUCCESS && r < n; r++)
            for (uint64_t i = 0; i < count && bad < 3; i++)
                if (!cc_check_copy(b, (uint64_t)r * count + i, t, seed, r, i))
                    bad++, FAIL("allgather %s count %" PRIu64 " %s: block %d element %" PRIu64
                                " wrong",
                                loom_dtype_name(t), count, place, r, i);
        break;
    }
    case K_BROADCAST:
        if (rank == root)
            cc_fill(a, t, LOOM_SUM, seed, root, 0, count);
        else
            memset(a, 0x5a, (size_t)count * es);
        res = loom_broadcast(a, count, t, root, comm, NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && i < count && bad < 3; i++)
            if (!cc_check_copy(a, i, t, seed, root, i))
                bad++, FAIL("broadcast %s count %" PRIu64 " root %d: element %" PRIu64 " wrong",
                            loom_dtype_name(t), count, root, i);
        break;
    case K_REDUCE_SCATTER: {
        /* the input is n blocks; block j of rank r is elements j*count..
         * of its input sequence */
        char *out = inplace ? a + (size_t)rank * count * es : b;
        cc_fill(a, t, op, seed, rank, 0, (uint64_t)n * count);
        res = loom_reduce_scatter(a, out, count, t, op, comm, NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && i < count && bad < 3; i++)
            if (!cc_check_reduced(out, i, t, op, seed, n, (uint64_t)rank * count + i))
                bad++, FAIL("reduce_scatter %s %s count %" PRIu64 " %s: element %" PRIu64 " wrong",
                            loom_dtype_name(t), loom_redop_name(op), count, place, i);
        break;
    }
    case K_REDUCE: {
        char *out = inplace ? a : b;
        cc_fill(a, t, op, seed, rank, 0, count);
        res = loom_reduce(a, inplace ? a : (rank == root ? b : NULL), count, t, op, root, comm,
                          NULL);
        for (uint64_t i = 0; res == LOOM_SUCCESS && rank == root && i < count && bad < 3; i++)
            if (!cc_check_reduced(out, i, t, op, seed, n, i))
                bad++, FAIL("reduce %s %s count %" PRIu64 " root %d %s: element %" PRIu64 " wrong",
                            loom_dtype_name(t), loom_redop_name(op), count, root, place, i);
        break;
    }
    }
    if (res != LOOM_SUCCESS)
        FAIL("%s %s count %" PRIu64 ": %s: %s", kname[kind], loom_dtype_name(t), count,
             loom_result_string(res), loom_get_error_string(comm));
    /* nothing written past the end of an out-of-place output (broadcast has
     * none; reduce has one on the root only) */
    if (!inplace && kind != K_BROADCAST && (kind != K_REDUCE || rank == root)) {
        size_t outb = kind == K_ALLGATHER ? full : (size_t)count * es;
        for (size_t k = outb; k < outb + 64; k++)
            if ((unsigned char)b[k] != 0xa5) {
                FAIL("%s %s count %" PRIu64 ": byte %zu past the output was written", kname[kind],
                     loom_dtype_name(t), count, k - outb);
                bad++;
                break;
            }
    }
    free(a);
    free(b);
    return res != LOOM_SUCCESS || bad;
}

#endif
