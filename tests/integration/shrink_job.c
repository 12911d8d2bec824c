/* shrink_job.c - one rank of a job that trains through failures: it runs
 * allreduces in a loop; when one fails it revokes the communicator,
 * shrinks it to the live ranks and goes on, until `good` allreduces in a
 * row have succeeded on a shrunk communicator (test_shrink.sh kills ranks
 * by PID while it runs; perf/shrink_time.sh times it).
 *
 * Each rank's contribution depends on its rank in the first communicator,
 * so every rank checks each result against the sum it computes itself over
 * the members it learns (an allgather of their first ranks, which must be
 * ascending: ranks are renumbered in order). After a shrink they go on
 * from the latest step any of them reached.
 *
 * usage: shrink_job [-n count] [-g good] [-d delay] [-x] [-e rank] [-t secs]
 *   -n  int64 elements per allreduce (default 262144)
 *   -g  allreduces to succeed after the last shrink (default 100)
 *   -d  on a failure, print SHRINKING and wait this many seconds first
 *   -x  on a failure, never call shrink (sleep until killed)
 *   -e  no failure: after 5 allreduces, shrink excluding this rank
 *   -t  end (SIGALRM) after this many seconds whatever happens (default 120)
 * Lines on stdout: LOOP (after 3 good allreduces),
 * FAILED <unix time> <why>,
 * SHRINKING, SHRUNK <members> <unix time of the first call on the shrunk
 * communicator, checked> (...), GOOD <unix time> (the first good
 * allreduce of the loop after a shrink), DONE <members>; errors: ERROR <why>
 * (a failed shrink: then AGAIN <why>, what a second shrink says). */
#include <loom.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int64_t value(int first, long iter, uint64_t i)
{
    return ((int64_t)(first + 1) << 32) + iter * 131 + (int64_t)i;
}

int main(int argc, char **argv)
{
    uint64_t count = 262144;
    long good = 100;
    double delay = 0;
    int never = 0, exclude = -1, opt;
    unsigned limit = 120;
    while ((opt = getopt(argc, argv, "n:g:d:xe:t:")) != -1) {
        switch (opt) {
        case 'n': count = strtoull(optarg, NULL, 10); break;
        case 'g': good = atol(optarg); break;
        case 'd': delay = atof(optarg); break;
        case 'x': never = 1; break;
        case 'e': exclude = atoi(optarg); break;
        case 't': limit = (unsigned)atoi(optarg); break;
        default: fprintf(stderr, "usage: see shrink_job.c\n"); return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(limit); /* bounded whatever happens: the default action ends it */
    loom_comm_t comm;
    if (loom_comm_init_env(&comm) != LOOM_SUCCESS) {
        printf("ERROR init: %s\n", loom_get_error_string(NULL));
        return 2;
    }
    int me, n;
    loom_comm_rank(comm, &me);
    loom_comm_size(comm, &n);
    int first = me;                    /* rank in the first communicator */
    int *members = malloc(sizeof *members * (size_t)n);
    int nm = n;
    for (int i = 0; i < n; i++)
        members[i] = i;
    int64_t *buf = malloc(count * sizeof *buf);
    int shrinks = 0;
    long ok = 0, iter = 0;
    char list[512];
    for (;;) {
        for (uint64_t i = 0; i < count; i++)
            buf[i] = value(first, iter, i);
        loom_result_t res = loom_allreduce(buf, buf, count, LOOM_INT64, LOOM_SUM, comm, NULL);
        if (res == LOOM_SUCCESS) {
            for (uint64_t i = 0; i < count; i++) {
                int64_t want = 0;
                for (int m = 0; m < nm; m++)
                    want += value(members[m], iter, i);
                if (buf[i] != want) {
                    printf("ERROR allreduce %ld element %llu: %lld, want %lld\n", iter,
                           (unsigned long long)i, (long long)buf[i], (long long)want);
                    return 1;
                }
            }
            if (ok == 0 && shrinks > 0)
                printf("GOOD %.6f\n", wall());
            ok++;
            iter++;
            if (ok == 3 && shrinks == 0)
                printf("LOOP\n");
            if (shrinks > 0 && ok >= good)
                break;
            if (exclude < 0 || shrinks > 0 || ok < 5)
                continue;
        } else {
            printf("FAILED %.6f %s: %s\n", wall(), loom_result_string(res),
                   loom_get_error_string(comm));
            loom_comm_revoke(comm);
            if (never) {
                for (;;)
                    sleep(1);
            }
        }
        if (delay > 0) {
            printf("SHRINKING\n");
            usleep((useconds_t)(delay * 1e6));
        }
        loom_comm_t nc;
        loom_shrink_params_t sp = {.struct_size = sizeof sp, .flags = LOOM_SHRINK_ABORT};
        if (exclude >= 0 && res == LOOM_SUCCESS) {
            sp.flags = LOOM_SHRINK_DEFAULT;
            sp.exclude = &exclude;
            sp.nexclude = 1;
            if (first == exclude) { /* an excluded rank does not take part */
                loom_comm_destroy(comm);
                printf("DONE excluded\n");
                free(buf);
                free(members);
                return 0;
            }
        }
        double t_shrink = wall();
        res = loom_comm_shrink_ext(comm, &sp, &nc);
        if (res != LOOM_SUCCESS) {
            printf("ERROR shrink: %s: %s\n", loom_result_string(res),
                   loom_get_error_string(NULL));
            /* a second try is refused at once, saying why */
            res = loom_comm_shrink_ext(comm, &sp, &nc);
            printf("AGAIN %s: %s\n", loom_result_string(res), loom_get_error_string(NULL));
            loom_comm_destroy(comm);
            free(buf);
            free(members);
            return 3;
        }
        double t_destroy = wall();
        loom_comm_destroy(comm);
        double t_new = wall();
        comm = nc;
        shrinks++;
        /* who is left, by first rank: ascending, this rank among them */
        loom_comm_size(comm, &nm);
        int newme;
        loom_comm_rank(comm, &newme);
        /* the first call: the step to go on from (a failed call may have
         * completed on some ranks and not on others: they redo the latest
         * one), then who is left, by first rank: ascending, this rank
         * among them; the first result is checked against them */
        int64_t step = iter, f[2] = {first, iter};
        int64_t *all = malloc(sizeof *all * 2 * (size_t)nm);
        res = loom_allreduce(&step, &step, 1, LOOM_INT64, LOOM_MAX, comm, NULL);
        double t_end = wall();
        if (res == LOOM_SUCCESS)
            res = loom_allgather(f, all, 2, LOOM_INT64, comm, NULL);
        if (res != LOOM_SUCCESS) {
            printf("FAILED %.6f %s: %s\n", wall(), loom_result_string(res),
                   loom_get_error_string(comm));
            free(all);
            ok = 0;
            loom_comm_revoke(comm);
            continue; /* a rank died after the decision: shrink again */
        }
        size_t off = 0;
        int64_t want = 0;
        for (int m = 0; m < nm; m++) {
            if ((m > 0 && all[2 * m] <= all[2 * m - 2]) || (m == newme && all[2 * m] != first)) {
                printf("ERROR members out of order or this rank misplaced at %d\n", m);
                return 1;
            }
            members[m] = (int)all[2 * m];
            if (all[2 * m + 1] > want)
                want = all[2 * m + 1];
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", m ? "," : "",
                                    members[m]);
        }
        if (step != want) {
            printf("ERROR the first allreduce (max) gave %lld, want %lld\n", (long long)step,
                   (long long)want);
            return 1;
        }
        iter = (long)step;
        free(all);
        printf("SHRUNK %s %.6f (shrink %.3f s, old destroyed %.3f s, first call %.3f s)\n",
               list, t_end, t_destroy - t_shrink, t_new - t_destroy, t_end - t_new);
        ok = 0;
    }
    printf("DONE %s shrinks=%d\n", list, shrinks);
    loom_comm_destroy(comm);
    free(buf);
    free(members);
    return 0;
}
