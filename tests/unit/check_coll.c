/* check_coll.c - the algorithms' rank arithmetic, without a network: every
 * send has a matching receive on the peer, and results land where they
 * should. Also LOOM_ALGO parsing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/ring_math.h"

START_TEST(ring_steps_match_neighbours)
{
    for (int n = 1; n <= 17; n++)
        for (int pos = 0; pos < n; pos++)
            for (int t = 0; t < 2 * (n - 1); t++) {
                int left = loom_mod(pos - 1, n);
                ck_assert_int_eq(loom_ring_recv_seg(pos, t, n),
                                 loom_ring_send_seg(left, t, n));
                /* what arrives at t is what leaves at t+1 */
                if (t + 1 < 2 * (n - 1))
                    ck_assert_int_eq(loom_ring_recv_seg(pos, t, n),
                                     loom_ring_send_seg(pos, t + 1, n));
            }
}
END_TEST

START_TEST(ring_reduce_scatter_owns_own_segment)
{
    for (int n = 2; n <= 16; n++)
        for (int pos = 0; pos < n; pos++) {
            /* count contributions per segment during the reduce-scatter:
             * segment j gets one contribution per step it is received at a
             * position, plus the position's own */
            ck_assert_int_eq(loom_ring_recv_seg(pos, n - 2, n), pos);
            /* the allgather steps deliver every other segment exactly once */
            int *seen = calloc((size_t)n, sizeof *seen);
            seen[pos] = 1;
            for (int t = n - 1; t < 2 * (n - 1); t++)
                seen[loom_ring_recv_seg(pos, t, n)]++;
            for (int j = 0; j < n; j++)
                ck_assert_int_eq(seen[j], 1);
            free(seen);
        }
}
END_TEST

START_TEST(ring_partition)
{
    uint64_t counts[] = {0, 1, 7, 8, 9, 1000003};
    for (int n = 1; n <= 9; n++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            uint64_t next = 0;
            for (int j = 0; j < n; j++) {
                uint64_t off, len;
                loom_ring_part(counts[k], n, j, &off, &len);
                ck_assert_uint_eq(off, next);
                ck_assert(len == counts[k] / n || len == counts[k] / n + 1);
                next = off + len;
            }
            ck_assert_uint_eq(next, counts[k]);
        }
    ck_assert_uint_eq(loom_nchunks(0, 4), 0);
    ck_assert_uint_eq(loom_nchunks(4, 4), 1);
    ck_assert_uint_eq(loom_nchunks(5, 4), 2);
}
END_TEST

START_TEST(binomial_tree_is_a_tree)
{
    for (int n = 1; n <= 33; n++) {
        /* children of v as binomial.c sends them: v + k for k below v's
         * lowest set bit; each must name v as parent, and every node but 0
         * has exactly one parent that sends to it */
        int *got = calloc((size_t)n, sizeof *got);
        for (int v = 0; v < n; v++) {
            int low = v ? (v & -v) : 1 << 30;
            for (int k = 1; k < n; k <<= 1)
                if (k < low && v + k < n) {
                    ck_assert_int_eq(loom_binomial_parent(v + k), v);
                    got[v + k]++;
                }
        }
        ck_assert_int_eq(loom_binomial_parent(0), -1);
        for (int v = 1; v < n; v++)
            ck_assert_int_eq(got[v], 1);
        free(got);
    }
}
END_TEST

START_TEST(pow2_floor)
{
    ck_assert_int_eq(loom_pow2_floor(1), 1);
    ck_assert_int_eq(loom_pow2_floor(2), 2);
    ck_assert_int_eq(loom_pow2_floor(3), 2);
    ck_assert_int_eq(loom_pow2_floor(8), 8);
    ck_assert_int_eq(loom_pow2_floor(9), 8);
    ck_assert_int_eq(loom_mod(-1, 5), 4);
    ck_assert_int_eq(loom_mod(-11, 5), 4);
}
END_TEST

START_TEST(algo_parse)
{
    enum loom_algo a[LOOM_OP_KIND_COUNT];
    char err[256];
    ck_assert_int_eq(loom_algo_parse("", a, err, sizeof err), 0);
    for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
        ck_assert_int_eq(a[k], LOOM_ALGO_AUTO);
    ck_assert_int_eq(loom_algo_parse("ring", a, err, sizeof err), 0);
    ck_assert_int_eq(a[LOOM_OP_ALLREDUCE], LOOM_ALGO_RING);
    ck_assert_int_eq(a[LOOM_OP_ALLGATHER], LOOM_ALGO_RING);
    ck_assert_int_eq(a[LOOM_OP_BROADCAST], LOOM_ALGO_AUTO);
    ck_assert_int_eq(loom_algo_parse("allreduce=rd,broadcast=chain", a, err, sizeof err), 0);
    ck_assert_int_eq(a[LOOM_OP_ALLREDUCE], LOOM_ALGO_RD);
    ck_assert_int_eq(a[LOOM_OP_BROADCAST], LOOM_ALGO_CHAIN);
    ck_assert_int_eq(loom_algo_parse("allreduce=chain", a, err, sizeof err), -1);
    ck_assert_str_eq(err, "LOOM_ALGO: 'chain' is not an algorithm for allreduce");
    ck_assert_int_eq(loom_algo_parse("bogus", a, err, sizeof err), -1);
    ck_assert_str_eq(err, "LOOM_ALGO: unknown algorithm 'bogus' in 'bogus'");
    ck_assert_int_eq(loom_algo_parse("allscatter=ring", a, err, sizeof err), -1);
    ck_assert_str_eq(err, "LOOM_ALGO: unknown collective 'allscatter' in 'allscatter=ring'");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coll");
    TCase *tc = tcase_create("math");
    tcase_add_test(tc, ring_steps_match_neighbours);
    tcase_add_test(tc, ring_reduce_scatter_owns_own_segment);
    tcase_add_test(tc, ring_partition);
    tcase_add_test(tc, binomial_tree_is_a_tree);
    tcase_add_test(tc, pow2_floor);
    tcase_add_test(tc, algo_parse);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
