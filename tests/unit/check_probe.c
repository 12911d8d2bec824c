/* check_probe.c - the probe's round-robin schedule (tools/probe.c) and
 * what its report derives from a matrix (tools/probe_stats.c).
 *
 * For every rank count 1..65 the schedule must pair every two ranks exactly
 * once, never pair a rank with itself, be symmetric within a round (so each
 * rank is in at most one pair per round), idle no rank for even counts and
 * exactly one per round for odd counts, and use n - 1 rounds (even) or n
 * rounds (odd). The summary is checked on a made-up 6-rank matrix of 3
 * servers whose numbers give known medians and slowest pairs. */
#include "build_config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "probe_internal.h"

#define MAX_N 65

START_TEST(test_round_count)
{
    ck_assert_int_eq(loom_probe_nrounds(0), 0);
    ck_assert_int_eq(loom_probe_nrounds(1), 0);
    ck_assert_int_eq(loom_probe_nrounds(2), 1);
    ck_assert_int_eq(loom_probe_nrounds(3), 3);
    ck_assert_int_eq(loom_probe_nrounds(4), 3);
    ck_assert_int_eq(loom_probe_nrounds(7), 7);
    ck_assert_int_eq(loom_probe_nrounds(8), 7);
}
END_TEST

START_TEST(test_every_pair_once)
{
    static int met[MAX_N][MAX_N];
    for (int n = 1; n <= MAX_N; n++) {
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                met[a][b] = 0;
        for (int k = 0; k < loom_probe_nrounds(n); k++) {
            int idle = 0;
            for (int r = 0; r < n; r++) {
                int p = loom_probe_peer(n, k, r);
                if (p < 0) {
                    idle++;
                    continue;
                }
                if (p >= n || p == r || loom_probe_peer(n, k, p) != r)
                    ck_abort_msg("n=%d round %d: rank %d -> %d -> %d", n, k, r,
                                 p, p < n ? loom_probe_peer(n, k, p) : -2);
                met[r][p]++;
            }
            if (idle != n % 2)
                ck_abort_msg("n=%d round %d: %d ranks idle, want %d", n, k,
                             idle, n % 2);
        }
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                if (met[a][b] != (a != b))
                    ck_abort_msg("n=%d: ranks %d and %d met %d times", n, a, b,
                                 met[a][b]);
    }
}
END_TEST

START_TEST(test_out_of_range)
{
    ck_assert_int_eq(loom_probe_peer(4, -1, 0), -1);
    ck_assert_int_eq(loom_probe_peer(4, 3, 0), -1);
    ck_assert_int_eq(loom_probe_peer(4, 0, 4), -1);
    ck_assert_int_eq(loom_probe_peer(4, 0, -1), -1);
    ck_assert_int_eq(loom_probe_peer(1, 0, 0), -1);
    /* n = 2: the one round pairs 0 and 1. */
    ck_assert_int_eq(loom_probe_peer(2, 0, 0), 1);
    ck_assert_int_eq(loom_probe_peer(2, 0, 1), 0);
}
END_TEST

START_TEST(test_rank_list)
{
    char buf[64];
    int a[] = {0, 1, 2, 3, 5, 7, 8};
    ck_assert_str_eq(probe_rank_list(a, 7, buf, sizeof buf), "0-3, 5, 7-8");
    ck_assert_str_eq(probe_rank_list(a, 1, buf, sizeof buf), "0");
    ck_assert_str_eq(probe_rank_list(a, 0, buf, sizeof buf), "");
}
END_TEST

/* 6 ranks, servers {0,1} {2,3} {4,5}. Within a server 20 GB/s (rank 2 -> 3
 * at 18), between servers 10 (1 <-> 2 at 4 one way); rank 5 cannot reach
 * rank 0 (refused), so the pair 0-5 is not measured. */
static struct probe *made_up(void)
{
    static struct probe p;
    static char *names[3] = {"a", "b", "c"};
    static int server_of[6] = {0, 0, 1, 1, 2, 2};
    static struct probe_link links[36];
    memset(&p, 0, sizeof p);
    memset(links, 0, sizeof links);
    p.n = 6;
    p.nservers = 3;
    p.server_name = names;
    p.server_of = server_of;
    p.links = links;
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            struct probe_link *l = PROBE_LINK(&p, a, b);
            if (a == b)
                continue;
            int same = server_of[a] == server_of[b];
            *l = (struct probe_link){.state = PROBE_MEASURED, .reach = PROBE_R_OK,
                                     .lat_us = same ? 5 : 15, .bw_gbps = same ? 20 : 10};
        }
    PROBE_LINK(&p, 2, 3)->bw_gbps = 18;
    PROBE_LINK(&p, 1, 2)->bw_gbps = 4;
    *PROBE_LINK(&p, 5, 0) = (struct probe_link){.state = PROBE_FAILED,
                                                .reach = PROBE_R_REFUSED};
    *PROBE_LINK(&p, 0, 5) = (struct probe_link){.state = PROBE_CONNECTED,
                                                .reach = PROBE_R_OK};
    return &p;
}

START_TEST(test_pair_states)
{
    struct probe *p = made_up();
    char buf[128];
    ck_assert(probe_pair_ok(p, 0, 1));
    ck_assert(!probe_pair_ok(p, 0, 5));
    ck_assert(probe_pair_failed(p, 0, 5) && probe_pair_failed(p, 5, 0));
    ck_assert(!probe_pair_failed(p, 1, 2));
    ck_assert_str_eq(probe_fail_text(p, 5, 0, buf, sizeof buf),
                     "connect: connection refused");
    ck_assert(probe_link_bw(p, 1, 2) == 4.0 && probe_link_bw(p, 2, 1) == 4.0);
    /* 14 measured pairs: 3 within at 20, 18, 20; 11 between at 10 but one at 4 */
    ck_assert(probe_median_bw(p) == 10.0);
}
END_TEST

START_TEST(test_groups)
{
    struct probe *p = made_up();
    int ng = 0;
    struct probe_group *g = probe_groups(p, &ng);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(ng, 6); /* 3 servers, 3 server pairs */
    int seen = 0;
    for (int k = 0; k < ng; k++) {
        const struct probe_group *x = &g[k];
        ck_assert_int_le(x->a, x->b);
        if (x->a == 1 && x->b == 1) { /* b: pair 2-3, slower way 18 */
            ck_assert_int_eq(x->links, 1);
            ck_assert(x->bw_med == 18.0 && x->bw_min == 18.0 && x->lat_med == 5.0);
            ck_assert(x->slow_from == 2 && x->slow_to == 3);
            seen |= 1;
        }
        if (x->a == 0 && x->b == 1) { /* a-b: 4 pairs, 1-2 at 4 */
            ck_assert_int_eq(x->links, 4);
            ck_assert_int_eq(x->measured, 4);
            ck_assert(x->bw_med == 10.0 && x->bw_min == 4.0);
            ck_assert(x->slow_from == 1 && x->slow_to == 2);
            seen |= 2;
        }
        if (x->a == 0 && x->b == 2) { /* a-c: 0-5 failed */
            ck_assert_int_eq(x->links, 4);
            ck_assert_int_eq(x->failed, 1);
            ck_assert_int_eq(x->measured, 3);
            seen |= 4;
        }
    }
    ck_assert_int_eq(seen, 7);
    free(g);
    struct probe_class intra, inter;
    probe_class_medians(p, &intra, &inter);
    ck_assert_int_eq(intra.links, 3);
    ck_assert_int_eq(inter.links, 12);
    ck_assert_int_eq(inter.failed, 1);
    ck_assert(intra.bw_med == 20.0 && inter.bw_med == 10.0 && inter.lat_med == 15.0);
}
END_TEST

static Suite *probe_suite(void)
{
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, test_round_count);
    tcase_add_test(tc, test_every_pair_once);
    tcase_add_test(tc, test_out_of_range);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("stats");
    tcase_add_test(ts, test_rank_list);
    tcase_add_test(ts, test_pair_states);
    tcase_add_test(ts, test_groups);
    suite_add_tcase(s, ts);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(probe_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
