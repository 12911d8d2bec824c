/* group.c - grouped calls: what loom_group_start/end collect on a thread
 * and how they become one op per communicator.
 *
 * A group's op (kind LOOM_OP_GROUP) holds the communicator's calls: its
 * sends and receives first, in call order, then its collectives, in call
 * order. Every rank applies that same order, so the point-to-point part
 * (which progresses as one batch) never waits behind a collective that a
 * peer put after it, and matching stays FIFO per peer. The op takes one
 * collective call number per collective run (coll/group_run.c decides,
 * from what every rank agrees on: kinds, counts, dtypes, ops). */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core.h"
#include "group.h"
#include "stream/stream.h"
#include "base/util.h"

struct pending {
    struct loom_comm *comm;
    struct loom_op op;
};

/* this thread's group */
static __thread int g_depth;
static __thread struct pending *g_calls;
static __thread size_t g_n, g_cap;
static __thread loom_result_t g_err;

int loom_group_depth(void)
{
    return g_depth;
}

void loom_group_fail(loom_result_t err)
{
    if (g_depth > 0 && g_err == LOOM_SUCCESS)
        g_err = err;
}

LOOM_API loom_result_t loom_group_start(void)
{
    if (g_depth == 0) {
        g_n = 0;
        g_err = LOOM_SUCCESS;
    }
    g_depth++;
    return LOOM_SUCCESS;
}

loom_result_t loom_group_add(struct loom_comm *comm, const struct loom_op *op)
{
    for (size_t i = 0; i < g_n; i++) {
        if (g_calls[i].comm == comm && g_calls[i].op.stream != op->stream) {
            pthread_mutex_lock(&comm->lock);
            if (comm->error == LOOM_SUCCESS)
                snprintf(comm->errmsg, sizeof comm->errmsg,
                         "%s in a group: the calls on one communicator must use "
                         "one stream (an earlier call used another)",
                         loom_op_kind_name(op->kind));
            pthread_mutex_unlock(&comm->lock);
            if (g_err == LOOM_SUCCESS)
                g_err = LOOM_ERROR_INVALID_ARGUMENT;
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
    }
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 32;
        struct pending *p = realloc(g_calls, cap * sizeof *p);
        if (!p) {
            g_err = LOOM_ERROR_NO_MEMORY;
            return LOOM_ERROR_NO_MEMORY;
        }
        g_calls = p;
        g_cap = cap;
    }
    g_calls[g_n].comm = comm;
    g_calls[g_n].op = *op;
    g_n++;
    return LOOM_SUCCESS;
}

/* The group's op for comm: its calls from g_calls[first..), p2p first. */
static loom_result_t build(struct loom_comm *comm, size_t first, struct loom_op *gop)
{
    int n = 0;
    for (size_t i = first; i < g_n; i++)
        n += g_calls[i].comm == comm;
    struct loom_op *subs = malloc((size_t)n * sizeof *subs);
    if (!subs)
        return LOOM_ERROR_NO_MEMORY;
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = first; i < g_n; i++)
            if (g_calls[i].comm == comm &&
                loom_op_kind_is_p2p(g_calls[i].op.kind) == (pass == 0))
                subs[k++] = g_calls[i].op;
    *gop = (struct loom_op){.kind = LOOM_OP_GROUP, .dtype = LOOM_UINT8,
                            .count = (uint64_t)n, .subs = subs, .nsubs = n,
                            .stream = subs[0].stream, .prescale = 1.0,
                            .postscale = 1.0};
    gop->nseqs = loom_group_nruns(subs, n);
    return LOOM_SUCCESS;
}

/* A group of one call runs as that call, unless it is a send or receive
 * to this rank itself (only a group can pair those). */
static int alone(const struct loom_comm *comm, size_t first)
{
    int n = 0;
    size_t at = first;
    for (size_t i = first; i < g_n; i++)
        if (g_calls[i].comm == comm) {
            n++;
            at = i;
        }
    const struct loom_op *op = &g_calls[at].op;
    return n == 1 && !(loom_op_kind_is_p2p(op->kind) && op->peer == comm->rank);
}

LOOM_API loom_result_t loom_group_end(void)
{
    if (g_depth == 0) {
        loom_set_thread_error("loom_group_end: no group was started on this thread");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (--g_depth > 0)
        return LOOM_SUCCESS;
    loom_result_t first_err = g_err;
    size_t n = g_n;
    g_n = 0;
    g_err = LOOM_SUCCESS;
    if (first_err < 0 || n == 0)
        return first_err;
    g_n = n; /* build() reads g_calls[0..g_n) */

    /* the communicators, in order of first appearance */
    struct loom_comm **comms = malloc(n * sizeof *comms);
    struct loom_op *ops = malloc(n * sizeof *ops);
    loom_stream_t *tmp = calloc(n, sizeof *tmp);
    size_t nc = 0;
    loom_result_t res = LOOM_SUCCESS;
    if (!comms || !ops || !tmp) {
        res = LOOM_ERROR_NO_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        size_t c = 0;
        while (c < nc && comms[c] != g_calls[i].comm)
            c++;
        if (c < nc)
            continue;
        comms[nc] = g_calls[i].comm;
        if (alone(comms[nc], i)) {
            ops[nc] = g_calls[i].op;
        } else if ((res = build(comms[nc], i, &ops[nc])) < 0) {
            break;
        }
        nc++;
    }
    if (res < 0) {
        for (size_t c = 0; c < nc; c++)
            loom_op_release(&ops[c]);
        goto out;
    }

    /* One blocking communicator runs inline; several get a host stream
     * each, so that they progress at once (one waiting on a peer that is
     * itself in another communicator's part of its group cannot stall). */
    for (size_t c = 0; c < nc; c++) {
        loom_result_t r;
        if (!ops[c].stream && nc > 1 && (r = loom_stream_new_host(&tmp[c])) < 0) {
            loom_op_release(&ops[c]);
            if (res == LOOM_SUCCESS)
                res = r;
            continue;
        }
        if (tmp[c])
            ops[c].stream = tmp[c];
        r = loom_comm_submit(comms[c], &ops[c]);
        /* a blocking op is done; a queued one now belongs to the queue */
        if (r < 0 || !ops[c].stream)
            loom_op_release(&ops[c]);
        if (r < 0 && res == LOOM_SUCCESS)
            res = r;
    }
    for (size_t c = 0; c < nc; c++)
        if (tmp[c]) {
            loom_result_t r = loom_stream_drain(tmp[c]);
            if (r < 0 && res == LOOM_SUCCESS)
                res = r;
            loom_stream_free(tmp[c]);
        }
out:
    free(comms);
    free(ops);
    free(tmp);
    g_n = 0;
    return res;
}
