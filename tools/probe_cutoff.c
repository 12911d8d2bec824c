/* probe_cutoff.c - a rank that could not reach rank 0 within the join
 * timeout. Rank 0 will report it as not joined and knows which ranks reach
 * it, but not what it reaches; so this rank sweeps on its own and prints
 * that itself, then keeps its listener open while the others sweep (rank 0
 * starts their sweep when its own join timeout ends, about when this one's
 * did), so that they find it listening. */
#include "build_config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "base/util.h"
#include "probe.h"
#include "probe_internal.h"

/* How long after its own sweep a cut-off rank stays: the others' sweep
 * begins when rank 0's join timeout ends (about when this rank's did, up
 * to the launch skew) and lasts a connect timeout at most. */
static double linger(const struct probe *p)
{
    return 2 * p->o.timeout + 5.0;
}

int probe_cutoff(struct probe *p, const char *why)
{
    const char *me = p->server_name[p->server_of[p->rank]];
    printf("probe of %s: rank %d (server %s, %s) is cut off: it could not reach "
           "rank 0 (%s) within %g s: %s\n", p->o.file, p->rank, me,
           p->ep_str[p->rank], p->ep_str[0], p->join_timeout, why);
    fflush(stdout);
    char err[256] = "";
    if (probe_sweep(p, err, sizeof err) < 0) {
        fprintf(stderr, "loom-ranktable probe: rank %d: %s\n", p->rank, err);
        return EXIT_UNREACHABLE;
    }
    int *ok = malloc((size_t)p->n * sizeof *ok), nok = 0, nbad = 0;
    if (!ok)
        return EXIT_UNREACHABLE;
    for (int r = 0; r < p->n; r++)
        if (r != p->rank && p->myreach[r] == PROBE_R_OK)
            ok[nok++] = r;
    char list[2048], buf[128];
    printf("rank %d reaches %d of %d other ranks%s%s\n", p->rank, nok, p->n - 1,
           nok ? ": " : "", nok ? probe_rank_list(ok, nok, list, sizeof list) : "");
    for (int r = 0; r < p->n; r++) {
        if (r == p->rank || p->myreach[r] == PROBE_R_OK)
            continue;
        if (++nbad <= 100)
            printf("unreachable: rank %d (%s) -> rank %d (server %s, %s): %s\n", p->rank,
                   p->ep_str[p->rank], r, p->server_name[p->server_of[r]], p->ep_str[r],
                   probe_reach_text(p->myreach[r], p->o.timeout, buf, sizeof buf));
    }
    if (nbad > 100)
        printf("... and %d more\n", nbad - 100);
    printf("result: rank %d did not join; it reaches %d of %d other ranks\n", p->rank,
           nok, p->n - 1);
    fflush(stdout);
    free(ok);
    double until = loom_now() + linger(p);
    while (p->lfd >= 0) {
        double left = until - loom_now();
        if (left <= 0)
            break;
        struct pollfd pf = {.fd = p->lfd, .events = POLLIN};
        if (poll(&pf, 1, (int)(left * 1000) + 1) > 0)
            probe_drain(p);
    }
    return EXIT_UNREACHABLE;
}
