/* check_algos.c - the rank arithmetic of the tree, halving-doubling and
 * Bruck algorithms (tree_math.h), without a network: trees are trees, every
 * send has the matching receive on its peer, every block ends up
 * everywhere. Also LOOM_ALGO parsing of the new names and the automatic
 * choice. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/ring_math.h"
#include "coll/tree_math.h"
#include "transport/transport.h"

START_TEST(tree_labels_invert)
{
    for (int n = 1; n <= 40; n++)
        for (int t = 0; t < 2; t++)
            for (int pos = 0; pos < n; pos++) {
                int x = loom_tree_label(pos, t, n);
                ck_assert_int_ge(x, 1);
                ck_assert_int_le(x, n);
                ck_assert_int_eq(loom_tree_pos(x, t, n), pos);
            }
    /* tree 1 is tree 0 shifted by one position */
    ck_assert_int_eq(loom_tree_label(0, 1, 5), 2);
    ck_assert_int_eq(loom_tree_label(4, 1, 5), 1);
}
END_TEST

START_TEST(btree_small_cases)
{
    int k[LOOM_BTREE_MAXKIDS];
    /* n = 1: the single node is the root, no children */
    ck_assert_int_eq(loom_btree_parent(1, 1), 0);
    ck_assert_int_eq(loom_btree_children(1, 1, k), 0);
    /* n = 2: 2 is the root, 1 its child */
    ck_assert_int_eq(loom_btree_parent(2, 2), 0);
    ck_assert_int_eq(loom_btree_parent(1, 2), 2);
    /* n = 5: 4 is the root with children 2 and 5; 2 has 1 and 3 */
    ck_assert_int_eq(loom_btree_parent(4, 5), 0);
    ck_assert_int_eq(loom_btree_children(4, 5, k), 2);
    ck_assert_int_eq(k[0], 2);
    ck_assert_int_eq(k[1], 5);
    ck_assert_int_eq(loom_btree_parent(5, 5), 4);
    ck_assert_int_eq(loom_btree_parent(3, 5), 2);
    ck_assert_int_eq(loom_btree_parent(1, 5), 2);
    /* n = 6: 6 hangs under 4, 5 under 6 */
    ck_assert_int_eq(loom_btree_parent(6, 6), 4);
    ck_assert_int_eq(loom_btree_parent(5, 6), 6);
    ck_assert_int_eq(loom_btree_children(6, 6, k), 1);
    ck_assert_int_eq(k[0], 5);
    /* n = 8 (a power of two): 4 is the root with 2, 6 and 8; 8 is a leaf */
    ck_assert_int_eq(loom_btree_root(8), 4);
    ck_assert_int_eq(loom_btree_parent(4, 8), 0);
    ck_assert_int_eq(loom_btree_parent(8, 8), 4);
    ck_assert_int_eq(loom_btree_children(4, 8, k), 3);
    ck_assert_int_eq(k[0], 2);
    ck_assert_int_eq(k[1], 6);
    ck_assert_int_eq(k[2], 8);
    ck_assert_int_eq(loom_btree_children(8, 8, k), 0);
    /* n = 4: 2 is the root with 1, 3 and 4 */
    ck_assert_int_eq(loom_btree_root(4), 2);
    ck_assert_int_eq(loom_btree_children(2, 4, k), 3);
    ck_assert_int_eq(k[2], 4);
    ck_assert_int_eq(loom_btree_parent(4, 4), 2);
}
END_TEST

/* Levels from x up to the root. */
static int btree_depth_of(int x, int n)
{
    int d = 0;
    while ((x = loom_btree_parent(x, n)) != 0 && d <= n)
        d++;
    return d;
}

START_TEST(btree_is_a_tree)
{
    for (int n = 1; n <= 100; n++) {
        int roots = 0, edges = 0, depth_bound = 0, maxdepth = 0;
        for (int m = 1; m < n; m *= 2)
            depth_bound++;
        for (int x = 1; x <= n; x++) {
            int p = loom_btree_parent(x, n), k[LOOM_BTREE_MAXKIDS];
            int nk = loom_btree_children(x, n, k);
            ck_assert_int_ge(nk, 0);
            ck_assert_int_le(nk, LOOM_BTREE_MAXKIDS);
            if (p == 0) {
                roots++;
                ck_assert_int_eq(x, loom_btree_root(n));
            } else {
                /* the parent names x as a child */
                int pk[LOOM_BTREE_MAXKIDS], found = 0;
                ck_assert_int_le(p, n);
                int npk = loom_btree_children(p, n, pk);
                for (int i = 0; i < npk; i++)
                    found += pk[i] == x;
                ck_assert_int_eq(found, 1);
            }
            /* a third child only at the root */
            if (nk == 3)
                ck_assert_int_eq(p, 0);
            for (int i = 0; i < nk; i++) {
                edges++;
                ck_assert_int_ge(k[i], 1);
                ck_assert_int_le(k[i], n);
                ck_assert_int_ne(k[i], x);
                if (i > 0)
                    ck_assert_int_lt(k[i - 1], k[i]);
                ck_assert_int_eq(loom_btree_parent(k[i], n), x);
            }
            /* odd labels are leaves */
            if (x % 2)
                ck_assert_int_eq(nk, 0);
            /* the root is reached, within log2(n) levels */
            int d = btree_depth_of(x, n);
            ck_assert_int_le(d, depth_bound);
            if (d > maxdepth)
                maxdepth = d;
        }
        ck_assert_int_eq(roots, 1);
        ck_assert_int_eq(edges, n - 1);
        /* a power of two gains a level: 4 ranks 1, 8 ranks 2, 16 ranks 3 */
        if (n >= 4 && (n & (n - 1)) == 0)
            ck_assert_int_eq(maxdepth, depth_bound - 1);
    }
}
END_TEST

START_TEST(double_tree_is_complementary)
{
    /* no position forwards data (has children) in both trees */
    for (int n = 2; n <= 100; n++)
        for (int pos = 0; pos < n; pos++) {
            int inner = 0;
            for (int t = 0; t < 2; t++) {
                int k[LOOM_BTREE_MAXKIDS];
                inner += loom_btree_children(loom_tree_label(pos, t, n), n, k) > 0;
            }
            ck_assert_int_le(inner, 1);
        }
}
END_TEST

START_TEST(fold_maps_ranks)
{
    for (int n = 1; n <= 40; n++) {
        int p = loom_pow2_floor(n);
        int seen[64] = {0};
        for (int r = 0; r < n; r++) {
            int v = loom_fold_vrank(r, n, p);
            if (v < 0) {
                /* folded out: even rank among the first 2(n-p), partner r+1 */
                ck_assert_int_lt(r, 2 * (n - p));
                ck_assert_int_eq(r % 2, 0);
                ck_assert_int_ge(loom_fold_vrank(r + 1, n, p), 0);
                continue;
            }
            ck_assert_int_lt(v, p);
            seen[v]++;
            ck_assert_int_eq(loom_fold_rank(v, n, p), r);
        }
        for (int v = 0; v < p; v++)
            ck_assert_int_eq(seen[v], 1);
    }
}
END_TEST

START_TEST(rhd_partners_agree)
{
    for (int p = 1; p <= 64; p *= 2) {
        int steps = 0;
        while ((1 << steps) < p)
            steps++;
        for (int v = 0; v < p; v++) {
            int lo, hi;
            for (int s = 0; s < steps; s++) {
                int mask = p >> (s + 1), pv = v ^ mask;
                int plo, phi, klo, khi, qlo, qhi;
                loom_rhd_range(v, p, s, &lo, &hi);
                loom_rhd_range(pv, p, s, &plo, &phi);
                /* both hold the same range before the step */
                ck_assert_int_eq(lo, plo);
                ck_assert_int_eq(hi, phi);
                loom_rhd_keep(v, mask, lo, hi, &klo, &khi);
                loom_rhd_keep(pv, mask, lo, hi, &qlo, &qhi);
                /* the halves split the range: what v sends is what pv keeps */
                ck_assert_int_eq(khi - klo, (hi - lo) / 2);
                ck_assert(klo == qhi || khi == qlo);
                ck_assert_int_eq(klo < qlo ? klo : qlo, lo);
                ck_assert_int_eq(khi > qhi ? khi : qhi, hi);
                /* the kept half is the next step's range */
                if (s + 1 < steps) {
                    int nlo, nhi;
                    loom_rhd_range(v, p, s + 1, &nlo, &nhi);
                    ck_assert_int_eq(nlo, klo);
                    ck_assert_int_eq(nhi, khi);
                } else {
                    /* after the last step v owns block v */
                    ck_assert_int_eq(klo, v);
                    ck_assert_int_eq(khi, v + 1);
                }
            }
        }
    }
}
END_TEST

START_TEST(bruck_schedule_gathers_everything)
{
    for (int n = 1; n <= 40; n++) {
        unsigned char *have = calloc((size_t)n * n, 1);
        ck_assert_ptr_nonnull(have);
        for (int r = 0; r < n; r++)
            have[r * n + r] = 1;
        for (int dist = 1; dist < n; dist *= 2) {
            int cnt = loom_bruck_count(n, dist);
            ck_assert_int_ge(cnt, 1);
            unsigned char *next = malloc((size_t)n * n);
            ck_assert_ptr_nonnull(next);
            memcpy(next, have, (size_t)n * n);
            for (int r = 0; r < n; r++) {
                int to = loom_bruck_send_peer(r, n, dist);
                int from = loom_bruck_recv_peer(r, n, dist);
                /* the peer r sends to receives from r, and vice versa */
                ck_assert_int_eq(loom_bruck_recv_peer(to, n, dist), r);
                ck_assert_int_eq(loom_bruck_send_peer(from, n, dist), r);
                /* r sends blocks r..r+cnt-1: it has them, and the receiver
                 * expects exactly that run (it starts at to + dist = r) */
                ck_assert_int_eq((to + dist) % n, r);
                int s0, s1;
                loom_wrap_split(r, cnt, n, &s0, &s1);
                ck_assert_int_eq(s0 + s1, cnt);
                ck_assert_int_ge(s0, 1);
                ck_assert_int_le(r + s0, n);
                for (int j = 0; j < cnt; j++) {
                    int b = (r + j) % n;
                    ck_assert_int_eq(have[r * n + b], 1);
                    /* each block arrives once */
                    ck_assert_int_eq(have[to * n + b], 0);
                    next[to * n + b] = 1;
                }
            }
            memcpy(have, next, (size_t)n * n);
            free(next);
        }
        for (int i = 0; i < n * n; i++)
            ck_assert_int_eq(have[i], 1);
        free(have);
    }
}
END_TEST

START_TEST(wrap_split_pieces)
{
    int a, b;
    loom_wrap_split(3, 2, 5, &a, &b);
    ck_assert_int_eq(a, 2);
    ck_assert_int_eq(b, 0);
    loom_wrap_split(4, 3, 5, &a, &b);
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 2);
}
END_TEST

START_TEST(parse_new_names)
{
    enum loom_algo a[LOOM_OP_KIND_COUNT];
    char err[256];
    ck_assert_int_eq(loom_algo_parse("allreduce=tree,broadcast=ring", a, err, sizeof err), 0);
    ck_assert_int_eq(a[LOOM_OP_ALLREDUCE], LOOM_ALGO_TREE);
    ck_assert_int_eq(a[LOOM_OP_BROADCAST], LOOM_ALGO_CHAIN);
    ck_assert_int_eq(a[LOOM_OP_ALLGATHER], LOOM_ALGO_AUTO);
    ck_assert_int_eq(loom_algo_parse("rhd", a, err, sizeof err), 0);
    ck_assert_int_eq(a[LOOM_OP_ALLREDUCE], LOOM_ALGO_RHD);
    ck_assert_int_eq(a[LOOM_OP_ALLGATHER], LOOM_ALGO_AUTO);
    ck_assert_int_eq(loom_algo_parse("bruck,scatter_allgather", a, err, sizeof err), 0);
    ck_assert_int_eq(a[LOOM_OP_ALLGATHER], LOOM_ALGO_BRUCK);
    ck_assert_int_eq(a[LOOM_OP_BROADCAST], LOOM_ALGO_SCATTER_ALLGATHER);
    ck_assert_int_eq(a[LOOM_OP_ALLREDUCE], LOOM_ALGO_AUTO);
    ck_assert_int_eq(loom_algo_parse("TREE", a, err, sizeof err), 0);
    ck_assert_int_eq(a[LOOM_OP_ALLREDUCE], LOOM_ALGO_TREE);
    ck_assert_int_eq(loom_algo_parse("allgather=tree", a, err, sizeof err), -1);
    ck_assert_str_eq(err, "LOOM_ALGO: 'tree' is not an algorithm for allgather");
    ck_assert_int_eq(loom_algo_parse("allreduce=bruck", a, err, sizeof err), -1);
    ck_assert_str_eq(err, "LOOM_ALGO: 'bruck' is not an algorithm for allreduce");
    ck_assert_int_eq(loom_algo_parse("reduce_scatter=rhd", a, err, sizeof err), -1);
    ck_assert_str_eq(loom_algo_name(LOOM_ALGO_SCATTER_ALLGATHER), "scatter_allgather");
    ck_assert_str_eq(loom_algo_name(LOOM_ALGO_COUNT), "unknown");
}
END_TEST

START_TEST(auto_choice_serves_and_scales)
{
    size_t sizes[] = {0, 8, 4096, 65536, 1 << 20, (size_t)1 << 26};
    /* the kinds of the table (those after barrier run outside it) */
    for (int k = 0; k <= LOOM_OP_BARRIER; k++)
        for (int n = 1; n <= 64; n++)
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
                enum loom_algo a = loom_coll_auto("tcp", (enum loom_op_kind)k, sizes[i], n);
                ck_assert_msg(loom_algo_serves(a, (enum loom_op_kind)k),
                              "%s for %d: %s", loom_algo_name(a), k, loom_algo_name(a));
            }
    /* latency-optimised for tiny messages, the ring for huge ones */
    for (int n = 2; n <= 16; n++) {
        ck_assert_int_ne(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 8, n), LOOM_ALGO_RING);
        ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, (size_t)1 << 28, n),
                         LOOM_ALGO_RING);
        /* broadcast: the chain while it is at most one hop deeper than the
         * binomial tree (n - 1 <= ceil(log2 n) + 1: up to 5 ranks) */
        enum loom_algo small = n <= 5 ? LOOM_ALGO_CHAIN : LOOM_ALGO_BINOMIAL;
        ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_BROADCAST, 8, n), small);
        ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_BROADCAST, 16 << 10, n), small);
        ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_BROADCAST, (16 << 10) + 1, n),
                         LOOM_ALGO_CHAIN);
        ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLGATHER, 8, n), LOOM_ALGO_BRUCK);
        ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLGATHER, (size_t)1 << 26, n),
                         LOOM_ALGO_RING);
        /* bands grow with the size: once the ring is chosen it stays */
        int ring = 0;
        for (size_t b = 1; b <= (size_t)1 << 30; b *= 2) {
            enum loom_algo a = loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, b, n);
            ck_assert_msg(!ring || a == LOOM_ALGO_RING, "%d ranks: %s at %zu bytes after the ring",
                          n, loom_algo_name(a), b);
            ring |= a == LOOM_ALGO_RING;
        }
    }
    /* the crossovers measured (docs/perf.md, "Algorithm selection") */
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 128 << 10, 2), LOOM_ALGO_RD);
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 512 << 10, 2), LOOM_ALGO_RING);
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 32 << 10, 8), LOOM_ALGO_RD);
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 128 << 10, 8), LOOM_ALGO_RHD);
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 512 << 10, 8), LOOM_ALGO_RHD);
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 2 << 20, 8), LOOM_ALGO_RING);
    ck_assert_int_eq(loom_coll_auto("tcp", LOOM_OP_ALLREDUCE, 64 << 10, 6), LOOM_ALGO_RD);
}
END_TEST

/* Selection is keyed by transport: each built transport, and none (one
 * rank), gets a table; tcp's is the one measured and serves the others,
 * which choose exactly as tcp does until they have their own. */
START_TEST(auto_choice_keyed_by_transport)
{
    ck_assert_str_eq(loom_coll_tuned_on("tcp"), "tcp");
    ck_assert_str_eq(loom_coll_tuned_on(NULL), "tcp");
    const char *names[LOOM_TRANSPORT_SLOTS + 2] = {"ofi", "verbs"};
    int nn = 2;
    for (int i = 0; i < LOOM_TRANSPORT_SLOTS; i++)
        if (loom_transports[i])
            names[nn++] = loom_transports[i]->name;
    size_t sizes[] = {0, 8, 4096, 32 << 10, 65536, 128 << 10, 512 << 10, 1 << 20, (size_t)1 << 26};
    for (int t = 0; t < nn; t++) {
        ck_assert_str_eq(loom_coll_tuned_on(names[t]), "tcp");
        for (int k = 0; k <= LOOM_OP_BARRIER; k++)
            for (int n = 1; n <= 64; n++)
                for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
                    ck_assert_int_eq(loom_coll_auto(names[t], (enum loom_op_kind)k, sizes[i], n),
                                     loom_coll_auto("tcp", (enum loom_op_kind)k, sizes[i], n));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("algos");
    TCase *tc = tcase_create("math");
    tcase_add_test(tc, tree_labels_invert);
    tcase_add_test(tc, btree_small_cases);
    tcase_add_test(tc, btree_is_a_tree);
    tcase_add_test(tc, double_tree_is_complementary);
    tcase_add_test(tc, fold_maps_ranks);
    tcase_add_test(tc, rhd_partners_agree);
    tcase_add_test(tc, bruck_schedule_gathers_everything);
    tcase_add_test(tc, wrap_split_pieces);
    tcase_add_test(tc, parse_new_names);
    tcase_add_test(tc, auto_choice_serves_and_scales);
    tcase_add_test(tc, auto_choice_keyed_by_transport);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
