/* shrink.c - going on after a failure: revoke a communicator on every rank,
 * and shrink it to the live ranks (or leave given ranks out) with one
 * answer on every rank (bootstrap/agree.h). */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/agree.h"
#include "bootstrap/oob.h"
#include "comm.h"
#include "config.h"
#include "core.h"
#include "log.h"
#include "util.h"
#include "wire.h"

/* Fail what runs and what comes on comm at once (on this rank), and on the
 * network steps' communicator that its calls drive. */
static void revoke_local(struct loom_comm *comm, const char *why)
{
    __atomic_store_n(&comm->revoked, 1, __ATOMIC_RELEASE);
    loom_comm_set_error_sub(comm, LOOM_SUB_INIT, LOOM_ERROR_REVOKED, "rank %d: %s",
                            comm->rank, why);
    for (struct loom_comm *c = comm; c; c = c->hier_sub) {
        __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
        if (c->tx && c->tx->ops->wake)
            c->tx->ops->wake(c->tx);
    }
    pthread_mutex_lock(&comm->lock);
    pthread_cond_broadcast(&comm->work_cv);
    pthread_cond_broadcast(&comm->done_cv);
    pthread_mutex_unlock(&comm->lock);
}

void loom_comm_revoke_notice(void *ctx, int from, const void *buf, size_t len)
{
    struct loom_comm *comm = ctx;
    char why[256];
    loom_result_t cause = len >= 4 ? (loom_result_t)(int32_t)loom_get_le32(buf)
                                   : LOOM_SUCCESS;
    if (__atomic_load_n(&comm->revoked, __ATOMIC_ACQUIRE))
        return;
    snprintf(why, sizeof why, "the communicator was revoked by %s%s%s%s",
             loom_comm_describe(comm, from), cause < 0 ? " (which saw: " : "",
             cause < 0 ? loom_result_string(cause) : "", cause < 0 ? ")" : "");
    revoke_local(comm, why);
}

LOOM_API loom_result_t loom_comm_revoke(loom_comm_t comm)
{
    if (!comm)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (__atomic_exchange_n(&comm->revoked, 1, __ATOMIC_ACQ_REL))
        return LOOM_SUCCESS; /* already: by this rank, or told by another */
    loom_result_t cause = loom_comm_error(comm);
    uint8_t msg[4];
    loom_put_le32(msg, (uint32_t)(int32_t)cause);
    /* every other rank learns it from this one: a rank that talks to no
     * one that failed still stops at once. Each rank starts with the ranks
     * after it: when several revoke at once (they often do), their notices
     * reach different ranks first rather than all rank 0 first. */
    int sent = 0, n = comm->nranks;
    for (int i = 1; comm->oob && i < n; i++) {
        int r = (comm->rank + i) % n;
        if (loom_oob_peer_error(comm->oob, r, NULL, 0) == LOOM_SUCCESS &&
            loom_oob_send(comm->oob, r, LOOM_OOB_TAG_REVOKE, msg, sizeof msg) == LOOM_SUCCESS)
            sent++;
    }
    LOOM_INFO(LOOM_SUB_INIT, "rank %d: revoked its communicator, told %d ranks", comm->rank,
              sent);
    revoke_local(comm, "the communicator was revoked by this rank (loom_comm_revoke)");
    return LOOM_SUCCESS;
}

/* Wait (bounded) until no call of comm runs or waits on this rank. */
static loom_result_t quiesce(struct loom_comm *comm, double timeout)
{
    double until = loom_now() + timeout;
    pthread_mutex_lock(&comm->lock);
    while (comm->busy || comm->head) {
        if (loom_now() >= until) {
            pthread_mutex_unlock(&comm->lock);
            loom_set_thread_error("loom_comm_shrink: rank %d: calls on the communicator "
                                  "still run after %g s (pass LOOM_SHRINK_ABORT to fail "
                                  "them)", comm->rank, timeout);
            return LOOM_ERROR_TIMEOUT;
        }
        struct timespec ts = loom_abstime_in(10000000);
        pthread_cond_timedwait(&comm->done_cv, &comm->lock, &ts);
    }
    pthread_mutex_unlock(&comm->lock);
    return LOOM_SUCCESS;
}

static loom_result_t shrink(struct loom_comm *comm, const loom_shrink_params_t *p,
                            struct loom_comm **out)
{
    int n = comm->nranks;
    double timeout = p->timeout > 0 ? p->timeout : comm->timeout;
    if (timeout <= 0)
        timeout = loom_config()->bootstrap_timeout;
    for (int i = 0; i < p->nexclude; i++)
        if (!p->exclude || p->exclude[i] < 0 || p->exclude[i] >= n) {
            loom_set_thread_error("loom_comm_shrink: exclude[%d] = %d is not a rank of "
                                  "the communicator (0..%d)", i,
                                  p->exclude ? p->exclude[i] : -1, n - 1);
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
    int was = __atomic_exchange_n(&comm->shrunk, 1, __ATOMIC_ACQ_REL);
    if (was) {
        /* after a failed shrink the ranks may have parted ways (some with a
         * new communicator): no second agreement could bring them together */
        if (was == 2)
            loom_set_thread_error("loom_comm_shrink: rank %d: an earlier shrink of this "
                                  "communicator failed; it cannot be shrunk again (create "
                                  "a new communicator)",
                                  comm->rank);
        else
            loom_set_thread_error("loom_comm_shrink: rank %d: this communicator was shrunk "
                                  "already (shrink the communicator it gave)",
                                  comm->rank);
        __atomic_store_n(&comm->shrunk, was, __ATOMIC_RELEASE);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (p->flags & LOOM_SHRINK_ABORT)
        revoke_local(comm, "the communicator is being shrunk (LOOM_SHRINK_ABORT)");
    uint8_t *suspect = calloc((size_t)n, 1), *exclude = calloc((size_t)n, 1),
            *failed = calloc((size_t)n, 1);
    int *members = calloc((size_t)n, sizeof *members);
    loom_result_t res = quiesce(comm, timeout);
    /* nothing agreed yet: the caller may try again (with LOOM_SHRINK_ABORT) */
    int retry = res < 0;
    if (res < 0)
        goto out;
    res = LOOM_ERROR_NO_MEMORY;
    if (!suspect || !exclude || !failed || !members)
        goto out;
    for (int i = 0; i < p->nexclude; i++)
        exclude[p->exclude[i]] = 1;
    /* hints for the coordinator, which checks them: whom this rank's
     * failure blames, and ranks its out-of-band service found gone */
    if (comm->blame >= 0 && comm->blame < n)
        suspect[comm->blame] = 1;
    if (comm->tx && comm->tx->blame > 0 && comm->tx->blame <= n)
        suspect[comm->tx->blame - 1] = 1;
    for (int r = 0; r < n; r++)
        if (loom_oob_peer_error(comm->oob, r, NULL, 0) < 0)
            suspect[r] = 1;
    struct loom_agree_params ap = {
        .struct_size = sizeof ap,
        .oob = comm->oob,
        .suspect = suspect,
        .exclude = exclude,
        .timeout = timeout,
        .describe = loom_comm_describe,
        .describe_ctx = comm,
    };
    struct loom_agree_stats st;
    char err[600] = "";
    res = loom_agree_failed(&ap, failed, &st, err, sizeof err);
    if (res < 0) {
        loom_set_thread_error("loom_comm_shrink: rank %d: %s", comm->rank, err);
        goto out;
    }
    int nm = 0, me = -1;
    for (int r = 0; r < n; r++)
        if (!failed[r]) {
            if (r == comm->rank)
                me = nm;
            members[nm++] = r;
        }
    char list[256];
    size_t off = 0;
    list[0] = 0;
    for (int r = 0; r < n && off < sizeof list; r++)
        if (failed[r])
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", off ? ", " : "",
                                    r);
    LOOM_INFO(LOOM_SUB_INIT, "rank %d: shrink: agreed in %.3f s (coordinator rank %d, %d "
              "taken over, %llu messages sent): ranks {%s} leave, %d stay", comm->rank,
              st.seconds, st.coordinator, st.takeovers, (unsigned long long)st.sent, list,
              nm);
    if (me < 0) {
        /* this rank was found dead by the others' services: it cannot join */
        loom_set_thread_error("loom_comm_shrink: rank %d: the others agreed that this rank "
                              "failed (its out-of-band service did not answer them)",
                              comm->rank);
        res = LOOM_ERROR_REMOTE;
        goto out;
    }
    /* the id: the same on every member, new for every shrink */
    uint64_t id = loom_fnv1a(comm->comm_id ? comm->comm_id : LOOM_FNV_INIT, "shrink", 6);
    id = loom_fnv1a(id, failed, (size_t)n);
    struct loom_comm *nc = NULL;
    res = loom_comm_sub(comm, members, nm, me, id, 0, 1, &nc);
    if (res < 0) {
        loom_set_thread_error("loom_comm_shrink: rank %d: the communicator of the %d "
                              "survivors: %s", comm->rank, nm, loom_thread_error());
        goto out;
    }
    /* the decision stays published while the new communicator lives, for a
     * rank that asks after this one's old communicator is destroyed */
    int *all = members; /* reuse: every rank of the old communicator */
    for (int r = 0; r < n; r++)
        all[r] = r;
    if (loom_oob_view(comm->oob, all, n, comm->rank, loom_oob_ns(comm->oob),
                      &nc->agree_oob) < 0)
        nc->agree_oob = NULL;
    *out = nc;
out:
    if (res < 0)
        __atomic_store_n(&comm->shrunk, retry ? 0 : 2, __ATOMIC_RELEASE);
    free(suspect);
    free(exclude);
    free(failed);
    free(members);
    return res;
}

LOOM_API loom_result_t loom_comm_shrink_ext(loom_comm_t comm, const loom_shrink_params_t *params,
                                            loom_comm_t *newcomm)
{
    if (!comm || !newcomm || !params) {
        loom_set_thread_error("loom_comm_shrink: comm, params and newcomm must not be NULL");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    *newcomm = NULL;
    if (params->struct_size < sizeof(size_t) + sizeof(int)) {
        loom_set_thread_error("loom_comm_shrink: params->struct_size %zu is too small "
                              "(set it to sizeof(loom_shrink_params_t))",
                              params->struct_size);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    /* fields past an older caller's struct_size take their defaults */
    loom_shrink_params_t p = {.struct_size = sizeof p};
    memcpy(&p, params, params->struct_size < sizeof p ? params->struct_size : sizeof p);
    if (p.flags & ~LOOM_SHRINK_ABORT) {
        loom_set_thread_error("loom_comm_shrink: unknown flags 0x%x", (unsigned)p.flags);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    loom_result_t res = shrink(comm, &p, newcomm);
    if (res < 0)
        loom_comm_set_error_sub(comm, LOOM_SUB_INIT, res, "%s", loom_thread_error());
    return res;
}

LOOM_API loom_result_t loom_comm_shrink(loom_comm_t comm, int flags, loom_comm_t *newcomm)
{
    loom_shrink_params_t p = {.struct_size = sizeof p, .flags = flags};
    return loom_comm_shrink_ext(comm, &p, newcomm);
}
