/* check_p2p.c - the matching of tagged messages (coll/tagged.c) on one
 * rank sending to itself, without peers: FIFO per tag, receives in another
 * order than the sends, any tag, a size that differs (named), and the
 * arguments that are refused. The multi-rank cases (any source, posting
 * order) are tests/integration/test_p2p.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "net/net.h"

static loom_comm_t one_rank(void)
{
    int port = loom_net_pick_port_base(1);
    ck_assert_int_ne(port, 0);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    loom_comm_t comm = NULL;
    ck_assert_msg(loom_comm_init_url(url, 1, 0, &comm) == LOOM_SUCCESS, "init: %s",
                  loom_get_error_string(NULL));
    return comm;
}

START_TEST(tags_fifo_and_reordered)
{
    loom_comm_t comm = one_rank();
    enum { K = 6 };
    static const int tags[K] = {4, 9, 4, 0, 9, 4};
    int32_t s[K][33], r[33];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < 33; i++)
            s[k][i] = k * 1000 + i;
        ck_assert_int_eq(loom_send_tagged(s[k], 33, LOOM_INT32, 0, tags[k], comm, NULL),
                         LOOM_SUCCESS);
    }
    /* tag 9 first, then 0, then 4's three: each tag's in the order sent */
    static const int want[K] = {1, 4, 3, 0, 2, 5};
    for (int j = 0; j < K; j++) {
        int k = want[j], from = -5;
        memset(r, 0, sizeof r);
        ck_assert_int_eq(loom_recv_tagged(r, 33, LOOM_INT32, 0, tags[k], &from, comm, NULL),
                         LOOM_SUCCESS);
        ck_assert_int_eq(from, 0);
        for (int i = 0; i < 33; i++)
            ck_assert_int_eq(r[i], k * 1000 + i);
    }
    loom_comm_destroy(comm);
}
END_TEST

START_TEST(any_tag_takes_the_earliest)
{
    loom_comm_t comm = one_rank();
    double a = 1.5, b = 2.5, c = 0;
    ck_assert_int_eq(loom_send_tagged(&a, 1, LOOM_FLOAT64, 0, 7, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_send_tagged(&b, 1, LOOM_FLOAT64, 0, 3, comm, NULL), LOOM_SUCCESS);
    int from = -5;
    ck_assert_int_eq(
        loom_recv_tagged(&c, 1, LOOM_FLOAT64, LOOM_ANY_SOURCE, LOOM_ANY_TAG, &from, comm, NULL),
        LOOM_SUCCESS);
    ck_assert(c == 1.5);
    ck_assert_int_eq(from, 0);
    ck_assert_int_eq(loom_recv_tagged(&c, 1, LOOM_FLOAT64, 0, LOOM_ANY_TAG, NULL, comm, NULL),
                     LOOM_SUCCESS);
    ck_assert(c == 2.5);
    loom_comm_destroy(comm);
}
END_TEST

START_TEST(tagged_in_a_group)
{
    /* a receive before its send in one group, and a zero-length message */
    loom_comm_t comm = one_rank();
    int16_t s[5] = {1, 2, 3, 4, 5}, r[5] = {0};
    ck_assert_int_eq(loom_group_start(), LOOM_SUCCESS);
    ck_assert_int_eq(loom_recv_tagged(r, 5, LOOM_INT16, 0, 2, NULL, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_recv_tagged(NULL, 0, LOOM_INT16, 0, 1, NULL, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_send_tagged(NULL, 0, LOOM_INT16, 0, 1, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_send_tagged(s, 5, LOOM_INT16, 0, 2, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_group_end(), LOOM_SUCCESS);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(r[i], s[i]);
    loom_comm_destroy(comm);
}
END_TEST

START_TEST(size_that_differs_is_named)
{
    loom_comm_t comm = one_rank();
    float v[8] = {0};
    ck_assert_int_eq(loom_send_tagged(v, 8, LOOM_FLOAT32, 0, 11, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_recv_tagged(v, 4, LOOM_INT32, 0, 11, NULL, comm, NULL),
                     LOOM_ERROR_MISMATCH);
    const char *m = loom_get_error_string(comm);
    ck_assert_msg(strstr(m, "recv(int32, 4, from rank 0, tag 11)") &&
                      strstr(m, "send(float32, 8, to rank 0, tag 11)"),
                  "%s", m);
    loom_comm_destroy(comm);
}
END_TEST

START_TEST(bad_arguments_are_named)
{
    loom_comm_t comm = one_rank();
    float v = 0;
    ck_assert_int_eq(loom_send_tagged(&v, 1, LOOM_FLOAT32, 0, -1, comm, NULL),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(comm), "tag -1 is negative"));
    ck_assert_int_eq(loom_recv_tagged(&v, 1, LOOM_FLOAT32, 1, 0, NULL, comm, NULL),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(comm), "peer 1"));
    ck_assert_int_eq(loom_recv_tagged(&v, 1, LOOM_FLOAT32, 0, -3, NULL, comm, NULL),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(comm), "LOOM_ANY_TAG"));
    ck_assert_int_eq(loom_recv_tagged(NULL, 3, LOOM_FLOAT32, 0, 0, NULL, comm, NULL),
                     LOOM_ERROR_INVALID_ARGUMENT);
    /* argument errors leave the communicator usable */
    ck_assert_int_eq(loom_send_tagged(&v, 1, LOOM_FLOAT32, 0, 0, comm, NULL), LOOM_SUCCESS);
    ck_assert_int_eq(loom_recv_tagged(&v, 1, LOOM_FLOAT32, 0, 0, NULL, comm, NULL), LOOM_SUCCESS);
    loom_comm_destroy(comm);
}
END_TEST

static Suite *p2p_suite(void)
{
    Suite *s = suite_create("p2p");
    TCase *tc = tcase_create("tagged");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tags_fifo_and_reordered);
    tcase_add_test(tc, any_tag_takes_the_earliest);
    tcase_add_test(tc, tagged_in_a_group);
    tcase_add_test(tc, size_that_differs_is_named);
    tcase_add_test(tc, bad_arguments_are_named);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(p2p_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
