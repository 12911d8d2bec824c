/* state.c - a communicator's errors, the names of its ranks, and the scratch
 * its algorithms reuse: what every layer above the transports touches. */
#include "build_config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "base/util.h"

static void comm_set_error_v(struct loom_comm *comm, unsigned subsys, loom_result_t res,
                             const char *fmt, va_list ap)
{
    char msg[sizeof comm->errmsg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&comm->lock);
    int first = comm->error == LOOM_SUCCESS;
    if (first) {
        comm->error = res;
        memcpy(comm->errmsg, msg, sizeof msg);
    }
    pthread_mutex_unlock(&comm->lock);
    if (first)
        LOOM_INFO(subsys, "%s", msg);
}

void loom_comm_set_error(struct loom_comm *comm, loom_result_t res,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    comm_set_error_v(comm, LOOM_SUB_COLL, res, fmt, ap);
    va_end(ap);
}

void loom_comm_set_error_sub(struct loom_comm *comm, unsigned subsys,
                             loom_result_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    comm_set_error_v(comm, subsys, res, fmt, ap);
    va_end(ap);
}

void loom_comm_set_arg_error(struct loom_comm *comm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&comm->lock);
    if (comm->error == LOOM_SUCCESS)
        vsnprintf(comm->errmsg, sizeof comm->errmsg, fmt, ap);
    pthread_mutex_unlock(&comm->lock);
    va_end(ap);
    LOOM_INFO(LOOM_SUB_COLL, "%s", comm->errmsg);
}

void loom_comm_clear_errmsg(struct loom_comm *comm)
{
    pthread_mutex_lock(&comm->lock);
    if (comm->error == LOOM_SUCCESS)
        comm->errmsg[0] = '\0';
    pthread_mutex_unlock(&comm->lock);
}

loom_result_t loom_comm_error(struct loom_comm *comm)
{
    pthread_mutex_lock(&comm->lock);
    loom_result_t res = comm->error;
    pthread_mutex_unlock(&comm->lock);
    return res;
}

const char *loom_comm_describe(void *arg, int rank)
{
    struct loom_comm *comm = arg;
    if (!comm->rank_desc || rank < 0 || rank >= comm->nranks)
        return "rank ?";
    return comm->rank_desc[rank];
}

/* Scratch grows to the next power of two (at least 64 KiB) and never
 * shrinks, so that a run of growing calls does not free and allocate (and,
 * on transports that register memory, register) it again each time. */
void *loom_comm_scratch(struct loom_comm *comm, size_t bytes)
{
    if (bytes <= comm->scratch_size)
        return comm->scratch;
    size_t want = 64 << 10;
    while (want < bytes && want < SIZE_MAX / 2)
        want *= 2;
    if (want < bytes)
        want = bytes;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0)
        return NULL;
    bytes = want;
    free(comm->scratch);
    comm->scratch = p;
    comm->scratch_size = bytes;
    return p;
}

struct loom_tx_req *loom_comm_reqs(struct loom_comm *comm, size_t n)
{
    if (n <= comm->nreqs)
        return comm->reqs;
    struct loom_tx_req *r = calloc(n, sizeof *r);
    if (!r)
        return NULL;
    free(comm->reqs);
    comm->reqs = r;
    comm->nreqs = n;
    return r;
}

/* This rank's index among the ranks of its server, and their number: by
 * the rank table's server when there is one, else by host. */
void loom_comm_local_place(const struct loom_comm *comm, int *index, int *size)
{
    if (!comm->server_of) {
        *index = comm->local_index;
        *size = comm->local_size;
        return;
    }
    *index = *size = 0;
    for (int r = 0; r < comm->nranks; r++)
        if (comm->server_of[r] == comm->server_of[comm->rank]) {
            if (r < comm->rank)
                (*index)++;
            (*size)++;
        }
}
