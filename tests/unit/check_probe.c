/* check_probe.c - the probe's round-robin schedule (tools/probe.c).
 *
 * For every rank count 1..65 the schedule must pair every two ranks exactly
 * once, never pair a rank with itself, be symmetric within a round (so each
 * rank is in at most one pair per round), idle no rank for even counts and
 * exactly one per round for odd counts, and use n - 1 rounds (even) or n
 * rounds (odd). */
#include "build_config.h"

#include <check.h>
#include <stdlib.h>

#include "probe.h"

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

static Suite *probe_suite(void)
{
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, test_round_count);
    tcase_add_test(tc, test_every_pair_once);
    tcase_add_test(tc, test_out_of_range);
    suite_add_tcase(s, tc);
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
