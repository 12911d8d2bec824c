/* ranks.c - the rank rules (rank_id exactly 0..N-1, the ranks of a server
 * contiguous in 1.x tables) and, for a valid table, the rank index. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"

struct rank_check {
    struct loom_ranktable *t;
    struct loom_diag *d;
    size_t n;          /* ranks = devices in the table */
    size_t *owner;     /* [n]: 1 + flat index of the device holding rank r */
    size_t *srv_of;    /* [flat]: server of each device */
    size_t *dev_of;    /* [flat]: index in that server */
};

static void rank_path(const struct loom_ranktable *t, size_t s, size_t i,
                      char *out)
{
    const struct loom_rt_device *dev = &t->servers[s].devices[i];
    if (dev->rank_path) {
        loom_rt_path(out, "%s", dev->rank_path);
        return;
    }
    loom_rt_device_path(t, s, i, out);
    strncat(out, ".rank_id", LOOM_RT_MAX_PATH - strlen(out) - 1);
}

/* Each rank held once and in range. */
static void check_owners(struct rank_check *k)
{
    struct loom_ranktable *t = k->t;
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    size_t flat = 0, n = k->n;
    for (size_t s = 0; s < t->nservers; s++) {
        for (size_t i = 0; i < t->servers[s].ndevices; i++, flat++) {
            struct loom_rt_device *dev = &t->servers[s].devices[i];
            k->srv_of[flat] = s, k->dev_of[flat] = i;
            if (dev->rank < 0)
                continue;
            rank_path(t, s, i, path);
            if ((size_t)dev->rank >= n) {
                loom_rt_error(k->d, path, "%d is out of range: the table has "
                                          "%zu rank%s, so rank_id must be in "
                                          "0..%zu",
                              dev->rank, n, n == 1 ? "" : "s", n - 1);
            } else if (k->owner[dev->rank]) {
                size_t o = k->owner[dev->rank] - 1;
                loom_rt_device_path(t, k->srv_of[o], k->dev_of[o], other);
                /* 2.0 writes rank_id as a number, 1.x as a string */
                loom_rt_error(k->d, path,
                              t->shape == LOOM_RT_SHAPE_RANK_LIST
                                  ? "%s is used twice (also %s)"
                                  : "\"%s\" is used twice (also %s)",
                              dev->rank_id_str, other);
            } else {
                k->owner[dev->rank] = flat + 1;
            }
        }
    }
}

/* The device that holds rank r, if any, as (server, index). */
static int held_by(const struct rank_check *k, long r, size_t *s, size_t *i)
{
    if (r < 0 || (size_t)r >= k->n || !k->owner[r])
        return 0;
    *s = k->srv_of[k->owner[r] - 1];
    *i = k->dev_of[k->owner[r] - 1];
    return 1;
}

/* A server's ranks form one run. When they do not, its longest run (the
 * first of equal ones) is taken as intended and every device outside it is
 * named, with a rank between that another server holds: with one wrong
 * rank_id, that is the device to fix. */
static void check_contiguous(struct rank_check *k, size_t s)
{
    struct loom_ranktable *t = k->t;
    const struct loom_rt_server *srv = &t->servers[s];
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    long lo = -1, hi = -1;
    size_t count = 0;
    for (size_t i = 0; i < srv->ndevices; i++) {
        size_t hs, hi_;
        long r = srv->devices[i].rank;
        if (!held_by(k, r, &hs, &hi_) || hs != s || hi_ != i)
            continue; /* out of range or a duplicate: reported already */
        lo = lo < 0 || r < lo ? r : lo;
        hi = r > hi ? r : hi;
        count++;
    }
    if (count == 0 || (size_t)(hi - lo + 1) == count)
        return;
    /* The longest run of this server's ranks within lo..hi. */
    long best_lo = lo, best_len = 0, run_lo = -1;
    for (long r = lo; r <= hi + 1; r++) {
        size_t hs, hi_;
        int mine = r <= hi && held_by(k, r, &hs, &hi_) && hs == s;
        if (mine && run_lo < 0)
            run_lo = r;
        if (!mine && run_lo >= 0) {
            if (r - run_lo > best_len)
                best_lo = run_lo, best_len = r - run_lo;
            run_lo = -1;
        }
    }
    long best_hi = best_lo + best_len - 1;
    for (size_t i = 0; i < srv->ndevices; i++) {
        size_t hs, hi_;
        long r = srv->devices[i].rank;
        if (!held_by(k, r, &hs, &hi_) || hs != s || hi_ != i ||
            (r >= best_lo && r <= best_hi))
            continue;
        /* The rank nearest the run, between it and r, that another
         * server holds. */
        long step = r > best_hi ? 1 : -1, between = -1;
        size_t os = 0, oi = 0;
        for (long q = step > 0 ? best_hi + 1 : best_lo - 1; q != r; q += step)
            if (held_by(k, q, &os, &oi) && os != s) {
                between = q;
                break;
            }
        rank_path(t, s, i, path);
        if (between < 0)
            continue; /* only gaps between: the missing ranks are named */
        loom_rt_server_path(t, os, other);
        char run[48];
        if (best_len == 1)
            snprintf(run, sizeof run, "rank %ld", best_lo);
        else
            snprintf(run, sizeof run, "ranks %ld..%ld", best_lo, best_hi);
        loom_rt_error(k->d, path, "%ld breaks this server's contiguous ranks "
                                  "(%s): rank %ld, between them, belongs to "
                                  "%s",
                      r, run, between, other);
    }
}

void loom_rt_check_ranks(struct loom_ranktable *t, struct loom_diag *d,
                         size_t ndevices, int *nomem)
{
    size_t n = ndevices;
    if (n == 0 || n > (size_t)1 << 30)
        return;
    /* A server whose device list could not be read hides how many ranks
     * there are: range and gap messages would only mislead. */
    for (size_t s = 0; s < t->nservers; s++)
        if (!t->servers[s].have_devices)
            return;
    struct rank_check k = {
        .t = t,
        .d = d,
        .n = n,
        .owner = calloc(n, sizeof(size_t)),
        .srv_of = calloc(n, sizeof(size_t)),
        .dev_of = calloc(n, sizeof(size_t)),
    };
    if (!k.owner || !k.srv_of || !k.dev_of) {
        *nomem = 1;
        goto out;
    }
    check_owners(&k);
    /* With every rank_id decoded, a gap means a duplicate or an out-of-range
     * rank took its place: name each missing rank. When some rank_id was
     * malformed (already reported) the gaps say nothing new. */
    size_t undecoded = 0;
    for (size_t s = 0; s < t->nservers; s++)
        for (size_t i = 0; i < t->servers[s].ndevices; i++)
            undecoded += t->servers[s].devices[i].rank < 0;
    for (size_t r = 0; r < n && !undecoded; r++)
        if (!k.owner[r])
            loom_rt_error(d, t->shape == LOOM_RT_SHAPE_GROUP_LIST ? "group_list"
                             : t->shape == LOOM_RT_SHAPE_RANK_LIST ? "rank_list"
                                                                   : "server_list",
                          "rank %zu is missing: rank_id must run from 0 to "
                          "%zu without gaps",
                          r, n - 1);
    /* HCCL asks 2.0 tables only to keep a server's ranks together. */
    for (size_t s = 0; s < t->nservers && t->shape != LOOM_RT_SHAPE_RANK_LIST;
         s++)
        check_contiguous(&k, s);
out:
    free(k.owner);
    free(k.srv_of);
    free(k.dev_of);
}

int loom_rt_build_index(struct loom_ranktable *t)
{
    size_t n = 0;
    for (size_t s = 0; s < t->nservers; s++)
        n += t->servers[s].ndevices;
    t->by_rank = calloc(n, sizeof *t->by_rank);
    t->server_of_rank = calloc(n, sizeof *t->server_of_rank);
    t->local_rank = calloc(n, sizeof *t->local_rank);
    /* a server's ranks in rank order; 2.0 servers need not be contiguous */
    int *next = calloc(t->nservers ? t->nservers : 1, sizeof *next);
    if (!t->by_rank || !t->server_of_rank || !t->local_rank || !next) {
        free(next);
        return -1;
    }
    for (size_t s = 0; s < t->nservers; s++) {
        for (size_t i = 0; i < t->servers[s].ndevices; i++) {
            struct loom_rt_device *dev = &t->servers[s].devices[i];
            t->by_rank[dev->rank] = dev;
            t->server_of_rank[dev->rank] = (int)s;
        }
    }
    for (size_t r = 0; r < n; r++)
        t->local_rank[r] = next[t->server_of_rank[r]]++;
    free(next);
    t->nranks = (int)n;
    return 0;
}
