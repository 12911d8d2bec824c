/* check_ranktable_v2.c - version 2.0 (rank_list) rank tables: the corpus in
 * tests/data/ranktables/v2/ case by case (result and the exact list of
 * severity, JSON path and message), then what a valid table gives: servers
 * from net_layer 0 instances, addresses, ports, local ranks, the hash and
 * the endpoint every rank agrees on. */
#include "build_config.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "config.h"
#include "ranktable/ranktable_internal.h"

#include "../support/rt_corpus.h"

static const struct corpus_case corpus[] = {
    {"addr-bad.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[0].level_list[0].rank_addr_list[0].addr", "\"10.11.0.300\" is not an IPv4 address"},
        {E, "rank_list[1].level_list[0].rank_addr_list[0].addr_type", "\"IPX\" is not an address type (IPV4, IPV6 or EID)"},
        {E, "rank_list[2].level_list[0].rank_addr_list[0].addr", "is empty"},
    }},
    {"eid-only.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[0].level_list[0].rank_addr_list[0].addr_type", "is \"EID\": a UB endpoint id, which TCP hosts cannot use; Loom needs an IPV4 or IPV6 address in net_layer 0's rank_addr_list"},
        {E, "rank_list[1].level_list[0].rank_addr_list[0].addr_type", "is \"EID\": a UB endpoint id, which TCP hosts cannot use; Loom needs an IPV4 or IPV6 address in net_layer 0's rank_addr_list"},
    }},
    {"endpoint-clash.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[1].host_port", "10.14.0.1 port 60001 is also rank_list[0]'s: ranks that share an address need their own ports"},
        {E, "rank_list[3].device_id", "10.14.0.2 port LOOM_PORT_BASE + 0 is also rank_list[2]'s: ranks that share an address need their own device_id or a host_port each"},
    }},
    {"levels-bad.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[0].level_list[0].net_layer", "is 1: level_list starts at net_layer 0"},
        {E, "rank_list[1].level_list[1].net_layer", "is 0 after net_layer 0: levels go in ascending net_layer order"},
        {E, "rank_list[2].level_list", "is empty: a rank needs its net_layer 0 level, which gives its address"},
        {E, "rank_list[3].level_list[1].net_layer", "9 is out of range (0..7)"},
    }},
    {"local-id-bad.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[2].device_id", "65 is out of range (0..64)"},
        {E, "rank_list[2].local_id", "65 is out of range (0..64)"},
        {E, "rank_list[1].local_id", "0 is used twice in net_layer 0 instance \"h\" (also rank_list[0])"},
    }},
    {"missing-fields.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_count", "required field is missing"},
        {E, "rank_list[0].local_id", "required field is missing"},
        {E, "rank_list[1].level_list[0].net_instance_id", "required field is missing"},
        {E, "rank_list[2].level_list[0].rank_addr_list[0].addr", "required field is missing"},
    }},
    {"ports-bad.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[0].device_port", "70000 is not a port number (1..65535)"},
        {E, "rank_list[0].level_list[0].rank_addr_list[0].ports[0]", "\"0-1\" is not a port name: \"die/port\" such as \"0/1\", or \"d2h\""},
        {E, "rank_list[0].level_list[0].rank_addr_list[1].ports[0]", "\"1/0\" is bound twice in this net_layer (also rank_list[0].level_list[0].rank_addr_list[0].ports[1]): a port maps to one address"},
        {E, "rank_list[1].host_port", "0 is not a port number (1..65535)"},
        {E, "rank_list[1].level_list[0].rank_addr_list[0].ports[0]", "expected a string such as \"0/1\" (die/port), found a number"},
    }},
    {"rank-count-mismatch.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_count", "says 3 but rank_list has 2 ranks"},
    }},
    {"rank-id-duplicate-and-range.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[3].rank_id", "-1 is out of range: rank_id counts from 0"},
        {E, "rank_list[1].rank_id", "0 is used twice (also rank_list[0])"},
        {E, "rank_list[2].rank_id", "5 is out of range: the table has 4 ranks, so rank_id must be in 0..3"},
    }},
    {"rank-id-gap.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[2].rank_id", "2 is used twice (also rank_list[1])"},
        {E, "rank_list", "rank 1 is missing: rank_id must run from 0 to 2 without gaps"},
    }},
    {"rank-list-empty.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_count", "0 is out of range (1..65536)"},
        {E, "rank_list", "is empty: a table needs at least one rank"},
    }},
    {"type-strings-for-integers.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_count", "expected an integer, found the string \"2\" (write 2)"},
        {E, "rank_list[0].device_id", "expected an integer, found the number 0.5"},
        {E, "rank_list[0].local_id", "expected an integer, found true"},
        {E, "rank_list[1].rank_id", "expected an integer, found the string \"1\" (write 1)"},
        {E, "rank_list[1].level_list[0].net_layer", "expected an integer, found the string \"0\" (write 0)"},
    }},
    {"valid-interleaved.json", LOOM_SUCCESS, {
    }},
    {"valid-pod-over-hosts.json", LOOM_SUCCESS, {
    }},
    {"valid-two-server.json", LOOM_SUCCESS, {
    }},
    {"version-and-status.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "version", "is \"1.0\", but rank_list tables are version \"2.0\""},
        {E, "status", "must be \"completed\", found \"initializing\""},
    }},
    {"warn-eid-beside-ipv4.json", LOOM_SUCCESS, {
        {W, "rank_list[0].level_list[0].rank_addr_list[0].addr_type", "is \"EID\", which TCP hosts cannot use: ignored (the rank uses 10.3.0.1)"},
        {W, "rank_list[1].replaced_local_id", "unknown field (ignored)"},
        {W, "rank_list[1].level_list[0].net_type", "\"CLOS\": HCCL takes only TOPO_FILE_DESC at net_layer 0 (Loom does not use it)"},
    }},
};
#define NCORPUS ((int)(sizeof corpus / sizeof corpus[0]))

static loom_ranktable_t *parse_ok(const char *json)
{
    loom_ranktable_t *t = NULL;
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_ranktable_parse(json, strlen(json), "inline",
                                             &t, &diag);
    if (res != LOOM_SUCCESS) {
        const char *p = "", *m = "";
        loom_diag_get(diag, 0, NULL, &p, &m);
        ck_abort_msg("inline table: %s: %s: %s", loom_result_string(res), p, m);
    }
    loom_diag_free(diag);
    return t;
}

static void set_ports(const char *base)
{
    if (base)
        setenv("LOOM_PORT_BASE", base, 1);
    else
        unsetenv("LOOM_PORT_BASE");
    unsetenv("LOOM_PORT_OFFSET");
    loom_config_reset();
}

START_TEST(test_corpus)
{
    rt_corpus_check("tests/data/ranktables/v2", &corpus[_i]);
}
END_TEST

/* Servers are the net_layer 0 instances; a rank's address is its IPv4
 * address there, its port host_port. */
START_TEST(test_two_server)
{
    set_ports("20000");
    loom_ranktable_t *t = load_ok("tests/data/ranktables/v2",
                                  "valid-two-server.json");
    const char *version = NULL;
    int n = 0, ns = 0;
    loom_ranktable_version(t, &version);
    loom_ranktable_nranks(t, &n);
    loom_ranktable_nservers(t, &ns);
    ck_assert_str_eq(version, "2.0");
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(ns, 2);
    static const char *const server[] = {"host-a", "host-a", "host-b", "host-b"};
    static const char *const addr[] = {"10.1.0.1", "10.1.0.1", "10.1.0.2",
                                       "10.1.0.2"};
    for (int r = 0; r < 4; r++) {
        loom_rank_info_t ri;
        ck_assert_int_eq(loom_ranktable_rank_info(t, r, &ri), LOOM_SUCCESS);
        ck_assert_int_eq(ri.server_index, r / 2);
        ck_assert_str_eq(ri.server_id, server[r]);
        ck_assert_int_eq(ri.device_id, r % 2);
        ck_assert_str_eq(ri.address, addr[r]);
        ck_assert_int_eq(ri.port, 60001 + r % 2);
        ck_assert_int_eq(ri.local_rank, r % 2);
        ck_assert_int_eq(ri.local_size, 2);
        loom_rank_addrs_t a = {.struct_size = sizeof a};
        ck_assert_int_eq(loom_ranktable_rank_addrs(t, r, &a), LOOM_SUCCESS);
        ck_assert_ptr_null(a.device_address);
        ck_assert_str_eq(a.host_address, addr[r]);
        ck_assert_int_eq(a.host_port, 60001 + r % 2);
    }
    /* the rendezvous every rank agrees on: rank 0's address and port */
    struct loom_rt_endpoint ep;
    char err[256] = "";
    ck_assert_int_eq(loom_rt_endpoint_agreed(t, 0, LOOM_RT_ADDR_AUTO, &ep, err,
                                             sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, "10.1.0.1");
    ck_assert_int_eq(ep.port, 60001);
    ck_assert_str_eq(ep.field, "rank_addr_list");
    loom_ranktable_free(t);
    set_ports(NULL);
}
END_TEST

/* A server's ranks need not be adjacent nor listed in order: local ranks
 * follow rank order; ports without host_port come from device_port, else
 * LOOM_PORT_BASE + device_id. */
START_TEST(test_interleaved)
{
    set_ports("20000");
    loom_ranktable_t *t = load_ok("tests/data/ranktables/v2",
                                  "valid-interleaved.json");
    int servers[4], local[4], port[4];
    for (int r = 0; r < 4; r++) {
        loom_rank_info_t ri;
        ck_assert_int_eq(loom_ranktable_rank_info(t, r, &ri), LOOM_SUCCESS);
        servers[r] = ri.server_index, local[r] = ri.local_rank,
        port[r] = ri.port;
        ck_assert_str_eq(ri.address, r % 2 ? "fd00::2" : "fd00::1");
    }
    /* h0 holds ranks 0 and 2 and has the lowest rank: server 0 */
    ck_assert_int_eq(servers[0], 0);
    ck_assert_int_eq(servers[2], 0);
    ck_assert_int_eq(servers[1], 1);
    ck_assert_int_eq(servers[3], 1);
    ck_assert_int_eq(local[0], 0);
    ck_assert_int_eq(local[2], 1);
    ck_assert_int_eq(local[1], 0);
    ck_assert_int_eq(local[3], 1);
    ck_assert_int_eq(port[0], 20000);
    ck_assert_int_eq(port[2], 20001);
    ck_assert_int_eq(port[3], 16667);
    int ranks[4], cnt = 0;
    ck_assert_int_eq(loom_ranktable_server_ranks(t, 0, ranks, 4, &cnt),
                     LOOM_SUCCESS);
    ck_assert_int_eq(cnt, 2);
    ck_assert_int_eq(ranks[0], 0);
    ck_assert_int_eq(ranks[1], 2);
    loom_ranktable_free(t);
    set_ports(NULL);
}
END_TEST

/* One layer-0 instance over two hosts: one "server", device_id repeats. */
START_TEST(test_pod_over_hosts)
{
    loom_ranktable_t *t = load_ok("tests/data/ranktables/v2",
                                  "valid-pod-over-hosts.json");
    int ns = 0;
    loom_ranktable_nservers(t, &ns);
    ck_assert_int_eq(ns, 1);
    loom_rank_info_t ri;
    loom_ranktable_rank_info(t, 0, &ri);
    ck_assert_str_eq(ri.address, "10.4.0.10"); /* the first IPv4 entry */
    loom_ranktable_rank_info(t, 3, &ri);
    ck_assert_str_eq(ri.address, "10.4.1.28");
    ck_assert_int_eq(ri.local_rank, 3);
    loom_ranktable_free(t);
}
END_TEST

#define RANK(r, dev, addr)                                                   \
    "{\"rank_id\": " #r ", \"device_id\": " #dev ", \"local_id\": " #dev     \
    ", \"level_list\": [{\"net_layer\": 0, \"net_instance_id\": \"h\", "      \
    "\"net_type\": \"TOPO_FILE_DESC\", \"rank_addr_list\": [{\"addr_type\": " \
    "\"IPV4\", \"addr\": \"" addr "\", \"ports\": [\"0/0\"]}]}]}"

/* The hash covers the addresses and ignores spacing and key order. */
START_TEST(test_hash)
{
    static const char a[] = "{\"version\": \"2.0\", \"rank_count\": 2, "
                            "\"rank_list\": [" RANK(0, 0, "10.0.0.1") ", "
                            RANK(1, 1, "10.0.0.1") "]}";
    static const char b[] = "{\"rank_list\": [" RANK(0, 0, "10.0.0.1") ","
                            RANK(1, 1, "10.0.0.1") "],\n\"rank_count\":2,"
                            "\"version\":\"2.0\"}";
    static const char c[] = "{\"version\": \"2.0\", \"rank_count\": 2, "
                            "\"rank_list\": [" RANK(0, 0, "10.0.0.1") ", "
                            RANK(1, 1, "10.0.0.2") "]}";
    loom_ranktable_t *ta = parse_ok(a), *tb = parse_ok(b), *tc = parse_ok(c);
    uint64_t ha, hb, hc;
    loom_ranktable_hash(ta, &ha);
    loom_ranktable_hash(tb, &hb);
    loom_ranktable_hash(tc, &hc);
    ck_assert_uint_eq(ha, hb);
    ck_assert_uint_ne(ha, hc);
    loom_ranktable_free(ta);
    loom_ranktable_free(tb);
    loom_ranktable_free(tc);
}
END_TEST

/* The shipped loopback table: two servers of two ranks. */
START_TEST(test_example)
{
    loom_ranktable_t *t = load_ok("etc/ranktables", "two-server-2.0.json");
    int n = 0, ns = 0;
    loom_ranktable_nranks(t, &n);
    loom_ranktable_nservers(t, &ns);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(ns, 2);
    loom_ranktable_free(t);
}
END_TEST

static Suite *v2_suite(void)
{
    Suite *s = suite_create("ranktable_v2");
    TCase *tc = tcase_create("corpus");
    tcase_add_loop_test(tc, test_corpus, 0, NCORPUS);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    tcase_add_test(tc, test_two_server);
    tcase_add_test(tc, test_interleaved);
    tcase_add_test(tc, test_pod_over_hosts);
    tcase_add_test(tc, test_hash);
    tcase_add_test(tc, test_example);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(v2_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
