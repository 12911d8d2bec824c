/* stage_one.h - one collective on a stream with its buffers in chosen
 * memory (host, or a test's "device" memory the CPU cannot touch), every
 * element of the result checked against coll_check.h through the memory's
 * CPU view. Shared by the staging tests (tests/integration/test_stage.c)
 * and the CUDA adapter's tests against a fake driver. Each rank is its own
 * process, so the static failure count is per rank. */
#ifndef LOOM_STAGE_ONE_H
#define LOOM_STAGE_ONE_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../perf/coll_check.h"
#include "loom.h"

/* Collective kinds, in the order of enum loom_op_kind. */
enum { SC_ALLREDUCE, SC_ALLGATHER, SC_BROADCAST, SC_REDUCE_SCATTER, SC_REDUCE, SC_NKINDS };
static const char *const sc_kind_name[SC_NKINDS] = {"allreduce", "allgather", "broadcast",
                                                    "reduce_scatter", "reduce"};
static const loom_redop_t sc_ops[] = {LOOM_SUM, LOOM_PROD, LOOM_MIN, LOOM_MAX, LOOM_AVG};

/* Failures on this rank; only the first 10 are printed. */
static int sc_fails;

static void sc_fail(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sc_fail(int rank, const char *fmt, ...)
{
    if (sc_fails++ < 10) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "rank %d: ", rank);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

enum sc_place { SC_HOST = 0, SC_DEV, SC_MANAGED, SC_PINNED, SC_NPLACES };
static const char *const sc_place_name[SC_NPLACES] = {"host", "device", "managed", "pinned"};

/* Where buffers come from: alloc returns an address of place (NULL when it
 * cannot), view the CPU's view of it, release frees everything allocated
 * since the last release. */
struct sc_mem {
    void *ctx;
    void *(*alloc)(void *ctx, enum sc_place place, size_t bytes);
    void *(*view)(void *ctx, enum sc_place place, void *p);
    void (*release)(void *ctx);
};

/* One call of kind on count elements: sendbuf in sp, recvbuf in rp
 * (in place: one buffer, in sp; broadcast: one buffer, in sp). Enqueued on
 * stream s, then the stream synchronized. The root is seed % n. Returns 0
 * when the call succeeded and its result checks. */
static int sc_one(loom_comm_t comm, loom_stream_t s, int rank, int n, int kind, loom_dtype_t t,
                  loom_redop_t op, uint64_t count, int inplace, enum sc_place sp, enum sc_place rp,
                  uint64_t seed, const struct sc_mem *m)
{
    size_t es = loom_dtype_size(t), blk = (size_t)count * es, all = blk * (size_t)n;
    int root = (int)(seed % (uint64_t)n), bad = 0;
    char what[160];
    snprintf(what, sizeof what, "%s %s %s count %" PRIu64 " %s send %s recv %s", sc_kind_name[kind],
             loom_dtype_name(t), loom_redop_name(op), count, inplace ? "in-place" : "out-of-place",
             sc_place_name[sp], sc_place_name[rp]);
    if (inplace || kind == SC_BROADCAST)
        rp = sp;
    size_t sbytes = kind == SC_REDUCE_SCATTER ? all : blk;
    size_t rbytes = kind == SC_ALLGATHER ? all : blk;
    char *sbuf = NULL, *rbuf = NULL;
    /* in place: allgather's input is this rank's block of the output,
     * reduce_scatter's output this rank's block of the input */
    if (inplace || kind == SC_BROADCAST) {
        size_t big = sbytes > rbytes ? sbytes : rbytes;
        char *b = m->alloc(m->ctx, sp, big ? big : 1);
        if (!b) {
            sc_fail(rank, "%s: cannot allocate", what);
            return 1;
        }
        sbuf = rbuf = b;
        if (kind == SC_ALLGATHER)
            sbuf = b + (size_t)rank * blk;
        if (kind == SC_REDUCE_SCATTER)
            rbuf = b + (size_t)rank * blk;
    } else {
        sbuf = m->alloc(m->ctx, sp, sbytes ? sbytes : 1);
        rbuf = m->alloc(m->ctx, rp, rbytes ? rbytes : 1);
        if (!sbuf || !rbuf) {
            sc_fail(rank, "%s: cannot allocate", what);
            m->release(m->ctx);
            return 1;
        }
    }
    char *sv = m->view(m->ctx, sp, sbuf), *rv = m->view(m->ctx, rp, rbuf);
    if (kind == SC_REDUCE_SCATTER) {
        for (int b = 0; b < n; b++)
            cc_fill(sv + (size_t)b * blk, t, op, seed, rank, (uint64_t)b * count, count);
    } else if (kind != SC_BROADCAST || rank == root) {
        cc_fill(sv, t, op, seed, rank, 0, count);
    } else {
        memset(sv, 0x5a, blk);
    }
    loom_result_t res;
    switch (kind) {
    case SC_ALLREDUCE: res = loom_allreduce(sbuf, rbuf, count, t, op, comm, s); break;
    case SC_ALLGATHER: res = loom_allgather(sbuf, rbuf, count, t, comm, s); break;
    case SC_BROADCAST: res = loom_broadcast(sbuf, count, t, root, comm, s); break;
    case SC_REDUCE_SCATTER: res = loom_reduce_scatter(sbuf, rbuf, count, t, op, comm, s); break;
    default: res = loom_reduce(sbuf, rbuf, count, t, op, root, comm, s); break;
    }
    if (res == LOOM_SUCCESS)
        res = loom_stream_synchronize(s);
    if (res != LOOM_SUCCESS) {
        sc_fail(rank, "%s: %s (%s)", what, loom_result_string(res), loom_get_error_string(comm));
        m->release(m->ctx);
        return 1;
    }
    for (uint64_t i = 0; i < count && bad < 3; i++) {
        int ok = 1;
        switch (kind) {
        case SC_ALLREDUCE: ok = cc_check_reduced(rv, i, t, op, seed, n, i); break;
        case SC_REDUCE: ok = rank != root || cc_check_reduced(rv, i, t, op, seed, n, i); break;
        case SC_REDUCE_SCATTER:
            ok = cc_check_reduced(rv, i, t, op, seed, n, (uint64_t)rank * count + i);
            break;
        case SC_BROADCAST: ok = cc_check_copy(rv, i, t, seed, root, i); break;
        default:
            for (int r = 0; r < n && ok; r++)
                ok = cc_check_copy(rv + (size_t)r * blk, i, t, seed, r, i);
            break;
        }
        if (!ok)
            bad++, sc_fail(rank, "%s: element %" PRIu64 " wrong", what, i);
    }
    m->release(m->ctx);
    return bad != 0;
}

#endif
