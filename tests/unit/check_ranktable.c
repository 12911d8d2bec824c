/* check_ranktable.c - rank table loading, validation, getters and hash.
 *
 * The corpus in tests/data/ranktables/ is checked case by case: each file's
 * expected result and its exact list of (severity, path, message). */
#include "build_config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom.h"
#include "config.h"
#include "ranktable/ranktable_internal.h"

#include "../support/rt_corpus.h"

static const struct corpus_case corpus[] = {
    {"device-id-duplicate.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].device_id", "\"0\" is used twice on this server (also server_list[0].device[0])"},
    }},
    {"device-id-not-decimal.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].device_id", "\"0x1\" is not a decimal number"},
    }},
    {"device-ip-duplicate.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].device[1].device_ip", "\"192.168.1.1\" is used twice (also server_list[0].device[0].device_ip)"},
    }},
    {"device-ip-invalid.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[0].device_ip", "\"192.168.1.300\" is not an IPv4 or IPv6 address"},
    }},
    {"device-ip-list-bad.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[0].device_ip", "item 2, \"bogus\", is not an IPv4 or IPv6 address"},
        {E, "server_list[1].device[1].device_ip", "lists 1 address but server_list[0].device[0].device_ip lists 2; every device must list as many"},
    }},
    {"device-ip-missing-two-servers.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].device[0].device_ip", "required field is missing: the table has 2 servers, so every device needs a device_ip (or, to run on the hosts' NICs, give every server a host_ip and no device a device_ip)"},
    }},
    {"device-list-empty.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].device", "a server needs at least one device"},
    }},
    {"device-port-range.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[0].device_port", "\"0\" is not a port number (1..65535)"},
        {E, "server_list[0].device[1].device_port", "\"65536\" is not a port number (1..65535)"},
    }},
    {"file-duplicate-key.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "version", "appears more than once"},
    }},
    {"file-empty.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "is empty: not a rank table"},
    }},
    {"file-not-json.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "not valid JSON: syntax error at line 3, column 18"},
    }},
    {"file-not-utf8.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "not valid UTF-8 at line 3, column 19 (byte 0xff)"},
    }},
    {"file-nul-byte.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "contains a NUL byte at line 1, column 18"},
    }},
    {"file-too-deep.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "nesting deeper than 64 levels at line 1, column 85"},
    }},
    {"file-top-array.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "expected a JSON object at the top level, found an array"},
    }},
    {"file-trailing-comma.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "not valid JSON: syntax error at line 9, column 13 (a comma before ']': JSON allows none after the last item)"},
    }},
    {"file-trailing-garbage.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "not valid JSON: unexpected text after the end at line 1, column 18"},
    }},
    {"file-truncated.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "not valid JSON: syntax error at line 3, column 19"},
    }},
    {"file-whitespace.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "", "holds only white space: not a rank table"},
    }},
    {"group-list-errors.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "group_list[0].instance_count", "says 3 but instance_list has 2 instances"},
        {E, "group_list[0].device_count", "says 3 but instance_list has 2 devices"},
        {E, "group_count", "says 2 but group_list has 1 group"},
        {E, "group_list[0].instance_list[1].devices[0].device_ip", "\"192.168.1.1\" is used twice (also group_list[0].instance_list[0].devices[0].device_ip)"},
    }},
    {"group-list-device-fields.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "group_list[0].instance_list[0].devices[0].device_ip", "required field is missing"},
        {W, "group_list[0].instance_list[1].devices[0].devce_id", "unknown field (ignored): did you mean \"device_id\"?"},
        {E, "group_list[0].instance_list[1].devices[0].device_id", "required field is missing"},
    }},
    {"host-nic-duplicates.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].device_port", "port 30000 is used twice on this server (also server_list[0].device[0]): ranks that share an address need their own ports"},
        {E, "server_list[1].host_ip", "\"10.0.0.1\" is used twice (also server_list[0].host_ip): without device_ip a server's ranks use its host_ip, so servers need their own"},
    }},
    {"host-nic-host-ip-missing.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].host_ip", "required field is missing: no device has a device_ip, so every server needs a host_ip, the address its ranks share"},
    }},
    {"host-port-duplicate.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[2].host_port", "\"70000\" is not a port number (1..65535)"},
        {E, "server_list[0].device[1].host_port", "port 40000 is used twice on this server (also server_list[0].device[0]): ranks that share an address need their own ports"},
    }},
    {"host-ip-invalid.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].host_ip", "\"not-an-ip\" is not an IPv4 or IPv6 address"},
    }},
    {"many-errors.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "status", "must be \"completed\", found \"x\""},
        {E, "server_list[0].device[1].rank_id", "5 is out of range: the table has 4 ranks, so rank_id must be in 0..3"},
        {E, "server_list[1].device[0].rank_id", "\"0\" is used twice (also server_list[0].device[0])"},
        {E, "server_list", "rank 1 is missing: rank_id must run from 0 to 3 without gaps"},
        {E, "server_list", "rank 2 is missing: rank_id must run from 0 to 3 without gaps"},
    }},
    {"missing-device-id.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].device_id", "required field is missing"},
    }},
    {"missing-rank-id.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[0].rank_id", "required field is missing"},
    }},
    {"missing-server-count-1.0.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_count", "required field is missing"},
    }},
    {"missing-server-id.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].server_id", "required field is missing"},
    }},
    {"missing-status.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "status", "required field is missing"},
    }},
    {"missing-version.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "version", "required field is missing"},
    }},
    {"warn-no-endpoint-address.json", LOOM_SUCCESS, {
        {W, "server_list[0]", "no device gives an address and the server_id is not an IP address: the table's ranks all run on this host, over loopback and shared memory"},
    }},
    {"rank-id-duplicate.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].device[1].rank_id", "\"1\" is used twice (also server_list[0].device[1])"},
        {E, "server_list", "rank 3 is missing: rank_id must run from 0 to 3 without gaps"},
    }},
    {"rank-id-gap.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].device[1].rank_id", "7 is out of range: the table has 4 ranks, so rank_id must be in 0..3"},
        {E, "server_list", "rank 3 is missing: rank_id must run from 0 to 3 without gaps"},
    }},
    {"rank-id-interleaved.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].rank_id", "2 breaks this server's contiguous ranks (rank 0): rank 1, between them, belongs to server_list[1]"},
        {E, "server_list[1].device[1].rank_id", "3 breaks this server's contiguous ranks (rank 1): rank 2, between them, belongs to server_list[0]"},
    }},
    {"rank-id-interleaved-one.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[7].rank_id", "15 breaks this server's contiguous ranks (ranks 0..6): rank 7, between them, belongs to server_list[1]"},
    }},
    {"rank-id-negative.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].device[1].rank_id", "\"-3\" is not a decimal number"},
    }},
    {"rank-id-not-decimal.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].rank_id", "\"one\" is not a decimal number"},
    }},
    {"server-count-mismatch.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_count", "says 3 but server_list has 2 servers"},
    }},
    {"server-count-not-decimal.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_count", "\"two\" is not a decimal number"},
    }},
    {"server-id-duplicate.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1].server_id", "\"10.0.0.1\" is used twice (also server_list[0].server_id)"},
    }},
    {"server-list-empty.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list", "is empty: a table needs at least one server"},
    }},
    {"status-not-completed.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "status", "must be \"completed\", found \"running\""},
    }},
    {"superpod-duplicate-and-unknown.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "super_pod_list[1].super_pod_id", "\"0\" is used twice (also super_pod_list[0])"},
        {E, "super_pod_list[1].server_list[0].server_id", "\"10.0.0.9\" is not a server_id in server_list"},
    }},
    {"superpod-server-twice.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "super_pod_list[0].server_list[2].server_id", "\"10.0.0.1\" is listed twice (also super_pod_list[0].server_list[0])"},
    }},
    {"superpod-types.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "super_pod_list[0].super_pod_id", "required field is missing"},
        {E, "super_pod_list[0].server_list[0].server_id", "expected a string, found the number 1 (write \"1\")"},
    }},
    {"type-device-string.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device", "expected an array, found a string"},
    }},
    {"type-version-number.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "version", "expected a string, found the number 1.0 (write \"1.0\")"},
    }},
    {"type-rank-id-number.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].device[1].rank_id", "expected a string, found the number 1 (write \"1\")"},
    }},
    {"type-server-id-null.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].server_id", "expected a string, found null"},
    }},
    {"type-server-list-object.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list", "expected an array, found an object"},
    }},
    {"type-server-not-object.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[1]", "expected an object, found a string"},
    }},
    {"type-status-bool.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "status", "expected a string, found true"},
    }},
    {"type-two-numbers.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_count", "expected a string, found the number 2 (write \"2\")"},
        {E, "server_list[1].device[0].device_id", "expected a string, found the number 0 (write \"0\")"},
    }},
    {"v12-backup-and-host-port.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "server_list[0].host_port", "\"99999\" is not a port number (1..65535)"},
        {E, "server_list[0].device[0].backup_device_ip", "\"1.2.3\" is not an IPv4 or IPv6 address"},
        {E, "server_list[0].device[0].backup_device_port", "\"abc\" is not a port number (1..65535)"},
    }},
    {"valid-1.0-two-server-changed-ip.json", LOOM_SUCCESS, {
    }},
    {"valid-1.0-two-server-reordered.json", LOOM_SUCCESS, {
    }},
    {"valid-1.0-two-server.json", LOOM_SUCCESS, {
    }},
    {"valid-1.2-no-server-count.json", LOOM_SUCCESS, {
    }},
    {"valid-1.2-superpod.json", LOOM_SUCCESS, {
    }},
    {"valid-1.2-host-port.json", LOOM_SUCCESS, {
    }},
    {"valid-group-list.json", LOOM_SUCCESS, {
    }},
    {"valid-host-nic.json", LOOM_SUCCESS, {
    }},
    {"valid-one-server-no-address.json", LOOM_SUCCESS, {
        {W, "server_list[0].device[0].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[1].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[2].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[3].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[4].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[5].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[6].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[7].device_ip", "is empty: treated as absent"},
        {W, "server_list[0]", "no device gives an address and the server_id is not an IP address: the table's ranks all run on this host, over loopback and shared memory"},
    }},
    {"valid-seed-1p.json", LOOM_SUCCESS, {
    }},
    {"valid-device-port.json", LOOM_SUCCESS, {
    }},
    {"valid-host-ip.json", LOOM_SUCCESS, {
    }},
    {"valid-ip-list.json", LOOM_SUCCESS, {
    }},
    {"valid-ipv6.json", LOOM_SUCCESS, {
    }},
    {"version-2.0-rank-list.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_list[0].level_list[0]", "has no IPV4 or IPV6 address in rank_addr_list: Loom takes a rank's address from net_layer 0"},
        {E, "rank_list[1].level_list[0]", "has no IPV4 or IPV6 address in rank_addr_list: Loom takes a rank's address from net_layer 0"},
    }},
    {"version-unsupported.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {E, "rank_count", "required field is missing"},
        {E, "rank_list", "required field is missing"},
        {E, "server_list", "belongs to versions 1.0 and 1.2: a version \"2.0\" table lists its ranks in rank_list"},
        {W, "server_count", "unknown field (ignored)"},
    }},
    {"warn-1.2-field-in-1.0.json", LOOM_SUCCESS, {
        {W, "super_pod_list", "is a version 1.2 field; ignored in a 1.0 table"},
    }},
    {"warn-device-ip-empty-single.json", LOOM_SUCCESS, {
        {W, "server_list[0].device[0].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[1].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[2].device_ip", "is empty: treated as absent"},
        {W, "server_list[0].device[3].device_ip", "is empty: treated as absent"},
    }},
    {"near-miss-field.json", LOOM_ERROR_INVALID_RANKTABLE, {
        {W, "server_list[0].device[0].devcie_ip", "unknown field (ignored): did you mean \"device_ip\"?"},
        {E, "server_list[0].device[0].device_ip", "required field is missing: the table has 2 servers, so every device needs a device_ip (or, to run on the hosts' NICs, give every server a host_ip and no device a device_ip)"},
    }},
    {"warn-server-id-spaces.json", LOOM_SUCCESS, {
        {W, "server_list[0].server_id", "\" 10.0.0.1\" has leading or trailing spaces: server ids are compared byte for byte, and with spaces it is not an address"},
        {W, "server_list[1].server_id", "\"10.0.0.2 \" has leading or trailing spaces: server ids are compared byte for byte, and with spaces it is not an address"},
    }},
    {"warn-shared-device-port.json", LOOM_SUCCESS, {
        {W, "server_list[0].device[1].device_port", "port 16666 is also server_list[0].device[0].device_port: on a host that cannot use their device_ip both ranks would listen on 127.0.0.1:16666; give each device a host_port"},
    }},
    {"warn-unknown-fields.json", LOOM_SUCCESS, {
        {W, "comment", "unknown field (ignored)"},
        {W, "server_list[0].rack", "unknown field (ignored)"},
        {W, "server_list[1].device[0].temperature", "unknown field (ignored)"},
    }},
};
#define NCORPUS ((int)(sizeof corpus / sizeof corpus[0]))

static void reset_ports(void)
{
    unsetenv("LOOM_PORT_BASE");
    unsetenv("LOOM_PORT_OFFSET");
    loom_config_reset();
}

START_TEST(test_corpus)
{
    rt_corpus_check("tests/data/ranktables", &corpus[_i]);
}
END_TEST

/* One error with path "" whose message holds each of the strings. */
static void assert_file_error(const char *path, loom_result_t want,
                              const char *part1, const char *part2)
{
    loom_ranktable_t *t = NULL;
    loom_diag_t *diag = NULL;
    ck_assert_int_eq(loom_ranktable_load(path, &t, &diag), want);
    ck_assert_ptr_null(t);
    size_t n = 0;
    loom_diag_count(diag, &n);
    ck_assert_uint_eq(n, 1);
    loom_diag_severity_t sev;
    const char *p, *m;
    ck_assert_int_eq(loom_diag_get(diag, 0, &sev, &p, &m), LOOM_SUCCESS);
    ck_assert_int_eq(sev, LOOM_DIAG_ERROR);
    ck_assert_str_eq(p, "");
    ck_assert_msg(strstr(m, part1), "\"%s\" lacks \"%s\"", m, part1);
    if (part2)
        ck_assert_msg(strstr(m, part2), "\"%s\" lacks \"%s\"", m, part2);
    loom_diag_free(diag);
}

START_TEST(test_missing_file)
{
    assert_file_error("/nonexistent/loom/rt.json", LOOM_ERROR_IO,
                      "cannot open \"/nonexistent/loom/rt.json\"",
                      "No such file or directory");
}
END_TEST

START_TEST(test_directory)
{
    char dir[] = "/tmp/loom-rt-dirXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    assert_file_error(dir, LOOM_ERROR_IO, "is a directory", NULL);
    rmdir(dir);
}
END_TEST

START_TEST(test_not_a_directory)
{
    char path[PATH_MAX];
    data_path(path, sizeof path, "tests/data/ranktables",
              "valid-1.0-two-server.json/x");
    assert_file_error(path, LOOM_ERROR_IO, "cannot open", "Not a directory");
}
END_TEST

START_TEST(test_unreadable)
{
    char path[] = "/tmp/loom-rt-noreadXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{}", 2), 2);
    close(fd);
    ck_assert_int_eq(chmod(path, 0), 0);
    if (geteuid() == 0 || access(path, R_OK) == 0) {
        /* root reads anything: the mode cannot make it fail here. */
        unlink(path);
        return;
    }
    assert_file_error(path, LOOM_ERROR_IO, "cannot open", "Permission denied");
    unlink(path);
}
END_TEST

START_TEST(test_too_large)
{
    char path[] = "/tmp/loom-rt-bigXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    /* Sparse: costs no disk. */
    ck_assert_int_eq(ftruncate(fd, 64 * 1024 * 1024 + 1), 0);
    close(fd);
    assert_file_error(path, LOOM_ERROR_IO, "more than the 64 MiB", NULL);
    unlink(path);
}
END_TEST

START_TEST(test_parse_string)
{
    static const char text[] =
        "{\"version\":\"1.0\",\"server_count\":\"1\",\"status\":\"completed\","
        "\"server_list\":[{\"server_id\":\"127.0.0.1\",\"device\":["
        "{\"device_id\":\"1\",\"rank_id\":\"1\"},"
        "{\"device_id\":\"0\",\"rank_id\":\"0\"}]}]}";
    loom_ranktable_t *t = NULL;
    loom_diag_t *diag = NULL;
    reset_ports();
    ck_assert_int_eq(loom_ranktable_parse(text, strlen(text), "inline", &t,
                                          &diag),
                     LOOM_SUCCESS);
    size_t n = 99;
    loom_diag_count(diag, &n);
    ck_assert_uint_eq(n, 0);
    loom_rank_info_t ri;
    /* Rank 0 is the server's second device; local ranks follow rank order. */
    ck_assert_int_eq(loom_ranktable_rank_info(t, 0, &ri), LOOM_SUCCESS);
    ck_assert_int_eq(ri.device_id, 0);
    ck_assert_int_eq(ri.local_rank, 0);
    ck_assert_int_eq(ri.port, 29600);
    ck_assert_int_eq(loom_ranktable_rank_info(t, 1, &ri), LOOM_SUCCESS);
    ck_assert_int_eq(ri.device_id, 1);
    ck_assert_int_eq(ri.local_rank, 1);
    ck_assert_int_eq(ri.local_size, 2);
    ck_assert_str_eq(ri.address, "127.0.0.1");
    loom_diag_free(diag);
    loom_ranktable_free(t);

    /* A prefix of the same text is not JSON; diag may be NULL. */
    t = (loom_ranktable_t *)&n;
    ck_assert_int_eq(loom_ranktable_parse(text, 20, NULL, &t, NULL),
                     LOOM_ERROR_INVALID_RANKTABLE);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(loom_ranktable_parse("", 0, "e", &t, &diag),
                     LOOM_ERROR_INVALID_RANKTABLE);
    const char *m;
    ck_assert_int_eq(loom_diag_get(diag, 0, NULL, NULL, &m), LOOM_SUCCESS);
    ck_assert_str_eq(m, "is empty: not a rank table");
    ck_assert_int_eq(loom_diag_get(diag, 1, NULL, NULL, &m),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_diag_free(diag);
    ck_assert_int_eq(loom_ranktable_parse(text, strlen(text), NULL, NULL, NULL),
                     LOOM_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_getters_two_server)
{
    reset_ports();
    loom_ranktable_t *t = load_ok("etc/ranktables", "two-server.json");
    const char *v;
    int n;
    ck_assert_int_eq(loom_ranktable_version(t, &v), LOOM_SUCCESS);
    ck_assert_str_eq(v, "1.0");
    ck_assert_int_eq(loom_ranktable_nranks(t, &n), LOOM_SUCCESS);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(loom_ranktable_nservers(t, &n), LOOM_SUCCESS);
    ck_assert_int_eq(n, 2);

    static const char *const addr[4] = {"127.0.2.1", "127.0.2.2", "127.0.3.1",
                                        "127.0.3.2"};
    static const char *const server[4] = {"127.0.0.2", "127.0.0.2",
                                          "127.0.0.3", "127.0.0.3"};
    for (int r = 0; r < 4; r++) {
        loom_rank_info_t ri;
        ck_assert_int_eq(loom_ranktable_rank_info(t, r, &ri), LOOM_SUCCESS);
        ck_assert_int_eq(ri.rank, r);
        ck_assert_int_eq(ri.server_index, r / 2);
        ck_assert_str_eq(ri.server_id, server[r]);
        ck_assert_int_eq(ri.device_id, r % 2);
        ck_assert_str_eq(ri.address, addr[r]);
        ck_assert_int_eq(ri.port, 29600 + r % 2);
        ck_assert_int_eq(ri.local_rank, r % 2);
        ck_assert_int_eq(ri.local_size, 2);
    }
    loom_rank_info_t ri;
    ck_assert_int_eq(loom_ranktable_rank_info(t, 4, &ri),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_ranktable_rank_info(t, -1, &ri),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_ranktable_rank_info(NULL, 0, &ri),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_ranktable_free(t);
}
END_TEST

START_TEST(test_endpoint_env)
{
    setenv("LOOM_PORT_BASE", "31000", 1);
    setenv("LOOM_PORT_OFFSET", "7", 1);
    loom_config_reset();
    loom_ranktable_t *t = load_ok("etc/ranktables", "single-8.json");
    for (int r = 0; r < 8; r++) {
        loom_rank_info_t ri;
        ck_assert_int_eq(loom_ranktable_rank_info(t, r, &ri), LOOM_SUCCESS);
        ck_assert_str_eq(ri.address, "127.0.0.1");
        ck_assert_int_eq(ri.port, 31000 + r + 7);
        ck_assert_int_eq(ri.local_rank, r);
        ck_assert_int_eq(ri.local_size, 8);
    }
    /* device_port wins over the base. */
    loom_ranktable_t *p = load_ok("tests/data/ranktables",
                                  "valid-device-port.json");
    loom_rank_info_t ri;
    ck_assert_int_eq(loom_ranktable_rank_info(p, 0, &ri), LOOM_SUCCESS);
    ck_assert_int_eq(ri.port, 30000);
    ck_assert_str_eq(ri.address, "192.168.1.1");
    ck_assert_int_eq(loom_ranktable_rank_info(p, 1, &ri), LOOM_SUCCESS);
    ck_assert_int_eq(ri.port, 31000 + 1 + 7);
    loom_ranktable_free(p);
    loom_ranktable_free(t);
    reset_ports();
}
END_TEST

START_TEST(test_endpoint_fallbacks)
{
    reset_ports();
    loom_rank_info_t ri;
    /* host_ip when there is no device_ip and server_id is a name. */
    loom_ranktable_t *t = load_ok("tests/data/ranktables", "valid-host-ip.json");
    ck_assert_int_eq(loom_ranktable_rank_info(t, 1, &ri), LOOM_SUCCESS);
    ck_assert_str_eq(ri.server_id, "node-a");
    ck_assert_str_eq(ri.address, "127.0.0.1");
    ck_assert_int_eq(ri.port, 29601);
    loom_ranktable_free(t);
    /* The first address of a device_ip list. */
    t = load_ok("tests/data/ranktables", "valid-ip-list.json");
    ck_assert_int_eq(loom_ranktable_rank_info(t, 3, &ri), LOOM_SUCCESS);
    ck_assert_str_eq(ri.address, "192.168.2.2");
    loom_ranktable_free(t);
    /* IPv6 device_ip. */
    t = load_ok("tests/data/ranktables", "valid-ipv6.json");
    ck_assert_int_eq(loom_ranktable_rank_info(t, 2, &ri), LOOM_SUCCESS);
    ck_assert_str_eq(ri.address, "fe80::1");
    loom_ranktable_free(t);
}
END_TEST

START_TEST(test_server_ranks)
{
    loom_ranktable_t *t = load_ok("etc/ranktables", "superpod-1.2.json");
    int ranks[4] = {-1, -1, -1, -1}, count = 0;
    ck_assert_int_eq(loom_ranktable_server_ranks(t, 1, ranks, 4, &count),
                     LOOM_SUCCESS);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(ranks[0], 2);
    ck_assert_int_eq(ranks[1], 3);
    ck_assert_int_eq(ranks[2], -1);
    /* max bounds what is written, not the count. */
    int one[1] = {-1};
    ck_assert_int_eq(loom_ranktable_server_ranks(t, 0, one, 1, &count),
                     LOOM_SUCCESS);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(one[0], 0);
    ck_assert_int_eq(loom_ranktable_server_ranks(t, 0, NULL, 0, &count),
                     LOOM_SUCCESS);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(loom_ranktable_server_ranks(t, 2, ranks, 4, &count),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_ranktable_server_ranks(t, -1, ranks, 4, &count),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_ranktable_server_ranks(t, 0, NULL, 2, &count),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_ranktable_free(t);
}
END_TEST

static uint64_t hash_of(const char *dir, const char *file)
{
    uint64_t h = 0;
    loom_ranktable_t *t = load_ok(dir, file);
    ck_assert_int_eq(loom_ranktable_hash(t, &h), LOOM_SUCCESS);
    loom_ranktable_free(t);
    return h;
}

START_TEST(test_hash)
{
    const char *d = "tests/data/ranktables";
    uint64_t a = hash_of(d, "valid-1.0-two-server.json");
    uint64_t again = hash_of(d, "valid-1.0-two-server.json");
    uint64_t reordered = hash_of(d, "valid-1.0-two-server-reordered.json");
    uint64_t changed = hash_of(d, "valid-1.0-two-server-changed-ip.json");
    uint64_t port = hash_of(d, "valid-device-port.json");
    uint64_t v12 = hash_of(d, "valid-1.2-superpod.json");
    ck_assert_uint_eq(a, again);
    ck_assert_uint_eq(a, reordered);
    ck_assert_uint_ne(a, changed);
    ck_assert_uint_ne(a, port);
    ck_assert_uint_ne(a, v12);
    ck_assert_uint_ne(hash_of("etc/ranktables", "single-4.json"),
                      hash_of("etc/ranktables", "single-8.json"));
    uint64_t h;
    ck_assert_int_eq(loom_ranktable_hash(NULL, &h), LOOM_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_examples_valid)
{
    static const char *const files[] = {"single-1.json", "single-4.json",
                                        "single-8.json", "two-server.json",
                                        "superpod-1.2.json"};
    static const int nranks[] = {1, 4, 8, 4, 4};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[PATH_MAX];
        loom_ranktable_t *t = NULL;
        loom_diag_t *diag = NULL;
        data_path(path, sizeof path, "etc/ranktables", files[i]);
        ck_assert_int_eq(loom_ranktable_load(path, &t, &diag), LOOM_SUCCESS);
        size_t n = 99;
        loom_diag_count(diag, &n);
        ck_assert_msg(n == 0, "%s has %zu warnings", files[i], n);
        int r;
        loom_ranktable_nranks(t, &r);
        ck_assert_int_eq(r, nranks[i]);
        loom_diag_free(diag);
        loom_ranktable_free(t);
    }
}
END_TEST

START_TEST(test_group_list_order)
{
    reset_ports();
    /* Servers in server_id order, devices in device_id order, ranks in that
     * order (as HCCL numbers a group_list), whatever the file's order. */
    loom_ranktable_t *t = load_ok("tests/data/ranktables", "valid-group-list.json");
    const char *v;
    int n;
    ck_assert_int_eq(loom_ranktable_version(t, &v), LOOM_SUCCESS);
    ck_assert_str_eq(v, "group_list");
    ck_assert_int_eq(loom_ranktable_nranks(t, &n), LOOM_SUCCESS);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(loom_ranktable_nservers(t, &n), LOOM_SUCCESS);
    ck_assert_int_eq(n, 2);
    static const char *const server[5] = {"10.0.0.1", "10.0.0.1", "10.0.0.1",
                                          "10.0.0.2", "10.0.0.2"};
    static const char *const addr[5] = {"192.168.1.1", "192.168.1.2",
                                        "192.168.1.3", "192.168.2.1",
                                        "192.168.2.2"};
    static const int device[5] = {0, 1, 2, 0, 1};
    for (int r = 0; r < 5; r++) {
        loom_rank_info_t ri;
        ck_assert_int_eq(loom_ranktable_rank_info(t, r, &ri), LOOM_SUCCESS);
        ck_assert_str_eq(ri.server_id, server[r]);
        ck_assert_str_eq(ri.address, addr[r]);
        ck_assert_int_eq(ri.device_id, device[r]);
        ck_assert_int_eq(ri.local_size, r < 3 ? 3 : 2);
    }
    loom_ranktable_free(t);
}
END_TEST

START_TEST(test_rank_addrs)
{
    reset_ports();
    loom_rank_addrs_t a = {.struct_size = sizeof a};
    loom_rank_info_t ri;
    /* Host-NIC: no device address; the ranks of a server share its host_ip
     * and differ by port. */
    loom_ranktable_t *t = load_ok("tests/data/ranktables", "valid-host-nic.json");
    ck_assert_int_eq(loom_ranktable_rank_addrs(t, 3, &a), LOOM_SUCCESS);
    ck_assert_ptr_null(a.device_address);
    ck_assert_str_eq(a.host_address, "10.0.0.2");
    ck_assert_int_eq(a.host_port, 29601);
    ck_assert_int_eq(loom_ranktable_rank_info(t, 3, &ri), LOOM_SUCCESS);
    ck_assert_str_eq(ri.address, "10.0.0.2");
    ck_assert_int_eq(ri.port, 29601);
    loom_ranktable_free(t);
    /* 1.2 host_port is the port of the host address. */
    t = load_ok("tests/data/ranktables", "valid-1.2-host-port.json");
    ck_assert_int_eq(loom_ranktable_rank_addrs(t, 1, &a), LOOM_SUCCESS);
    ck_assert_str_eq(a.host_address, "10.0.0.1");
    ck_assert_int_eq(a.host_port, 40001);
    ck_assert_int_eq(a.device_port, 29601);
    ck_assert_int_eq(loom_ranktable_rank_info(t, 1, &ri), LOOM_SUCCESS);
    ck_assert_int_eq(ri.port, 40001);
    loom_ranktable_free(t);
    /* Both addresses. */
    t = load_ok("etc/ranktables", "two-server.json");
    ck_assert_int_eq(loom_ranktable_rank_addrs(t, 1, &a), LOOM_SUCCESS);
    ck_assert_str_eq(a.device_address, "127.0.2.2");
    ck_assert_int_eq(a.device_port, 29601);
    ck_assert_str_eq(a.host_address, "127.0.0.2");
    ck_assert_int_eq(a.host_port, 29601);
    /* A struct of an unknown (smaller) size, a bad rank. */
    loom_rank_addrs_t small = {.struct_size = sizeof(size_t)};
    ck_assert_int_eq(loom_ranktable_rank_addrs(t, 0, &small),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_ranktable_rank_addrs(t, 4, &a),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_ranktable_free(t);
}
END_TEST

/* Two addresses of the documentation ranges that this host does not own
 * (a test machine may own one of them). */
static void foreign_pair(char a[16], char b[16])
{
    static const char *const nets[] = {"203.0.113.", "198.51.100.", "192.0.2."};
    for (size_t n = 0; n < 3; n++) {
        snprintf(a, 16, "%s1", nets[n]);
        snprintf(b, 16, "%s2", nets[n]);
        if (loom_rt_addr_usable(a) != 0 && loom_rt_addr_usable(b) != 0)
            return;
    }
    ck_abort_msg("this host owns an address in each documentation range");
}

/* A two-server Ascend-style table: device_ip this host does not own,
 * host_ip loopback addresses that it does. */
static loom_ranktable_t *ascend_table(char dev0[16], char dev1[16])
{
    char text[1024];
    foreign_pair(dev0, dev1);
    snprintf(text, sizeof text,
             "{\"version\":\"1.0\",\"server_count\":\"2\",\"status\":\"completed\","
             "\"server_list\":["
             "{\"server_id\":\"s0\",\"host_ip\":\"127.0.0.1\",\"device\":["
             "{\"device_id\":\"0\",\"device_ip\":\"%s\",\"rank_id\":\"0\"}]},"
             "{\"server_id\":\"s1\",\"host_ip\":\"127.0.0.2\",\"device\":["
             "{\"device_id\":\"0\",\"device_ip\":\"%s\",\"rank_id\":\"1\"}]}]}",
             dev0, dev1);
    loom_ranktable_t *t = NULL;
    ck_assert_int_eq(loom_ranktable_parse(text, strlen(text), "ascend", &t,
                                          NULL),
                     LOOM_SUCCESS);
    return t;
}

START_TEST(test_endpoint_choice)
{
    reset_ports();
    char dev0[16], dev1[16], want[128];
    loom_ranktable_t *t = ascend_table(dev0, dev1);
    struct loom_rt_endpoint ep;
    char err[512];
    ck_assert_int_eq(loom_rt_addr_mode_parse("auto"), LOOM_RT_ADDR_AUTO);
    ck_assert_int_eq(loom_rt_addr_mode_parse(""), LOOM_RT_ADDR_AUTO);
    ck_assert_int_eq(loom_rt_addr_mode_parse("device"), LOOM_RT_ADDR_DEVICE);
    ck_assert_int_eq(loom_rt_addr_mode_parse("host"), LOOM_RT_ADDR_HOST);
    ck_assert_int_eq(loom_rt_addr_mode_parse("nic"), -1);
    ck_assert_int_eq(loom_rt_addr_usable("127.0.0.1"), 0);
    ck_assert_int_eq(loom_rt_addr_usable("not-an-ip"), EINVAL);

    /* auto: the device address is not this host's, so the host's. */
    ck_assert_int_eq(loom_rt_endpoint_local(t, 1, LOOM_RT_ADDR_AUTO, &ep, err,
                                            sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, "127.0.0.2");
    ck_assert_str_eq(ep.field, "host_ip");
    ck_assert_int_eq(ep.port, 29600);
    /* device: an error that names the address, the errno text, the fix. */
    ck_assert_int_eq(loom_rt_endpoint_local(t, 1, LOOM_RT_ADDR_DEVICE, &ep,
                                            err, sizeof err),
                     LOOM_ERROR_SYSTEM);
    snprintf(want, sizeof want, "device_ip %s: Cannot assign requested address",
             dev1);
    ck_assert_msg(strstr(err, want), "%s", err);
    ck_assert_msg(strstr(err, "LOOM_ADDRESS=auto or host"), "%s", err);
    ck_assert_msg(strstr(err, "127.0.0.2"), "%s", err);
    /* host. */
    ck_assert_int_eq(loom_rt_endpoint_local(t, 0, LOOM_RT_ADDR_HOST, &ep, err,
                                            sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, "127.0.0.1");
    /* The rendezvous every rank agrees on: the host address under auto,
     * the device address under device, whatever this host owns. */
    ck_assert_int_eq(loom_rt_endpoint_agreed(t, 0, LOOM_RT_ADDR_AUTO, &ep,
                                             err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, "127.0.0.1");
    ck_assert_int_eq(loom_rt_endpoint_agreed(t, 0, LOOM_RT_ADDR_DEVICE, &ep,
                                             err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, dev0);
    loom_ranktable_free(t);

    /* Loopback devices this host owns: auto takes the device address. */
    t = load_ok("etc/ranktables", "two-server.json");
    ck_assert_int_eq(loom_rt_endpoint_local(t, 2, LOOM_RT_ADDR_AUTO, &ep, err,
                                            sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, "127.0.3.1");
    ck_assert_str_eq(ep.field, "device_ip");
    loom_ranktable_free(t);

    /* Host-NIC: device mode has nothing to take. */
    t = load_ok("tests/data/ranktables", "valid-host-nic.json");
    ck_assert_int_eq(loom_rt_endpoint_agreed(t, 0, LOOM_RT_ADDR_DEVICE, &ep,
                                             err, sizeof err),
                     LOOM_ERROR_CONFIG);
    ck_assert_msg(strstr(err, "has no device_ip"), "%s", err);
    ck_assert_int_eq(loom_rt_endpoint_agreed(t, 5, LOOM_RT_ADDR_AUTO, &ep,
                                             err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(ep.address, "10.0.0.3");
    ck_assert_int_eq(ep.port, 29601);
    /* No host owns 10.0.0.3 here: neither address is usable. */
    if (loom_rt_addr_usable("10.0.0.3") != 0) {
        ck_assert_int_eq(loom_rt_endpoint_local(t, 5, LOOM_RT_ADDR_AUTO, &ep,
                                                err, sizeof err),
                         LOOM_ERROR_SYSTEM);
        ck_assert_msg(strstr(err, "host_ip 10.0.0.3: Cannot assign"), "%s", err);
        ck_assert_msg(strstr(err, "run rank 5 on server 10.0.0.3"), "%s", err);
    }
    loom_ranktable_free(t);
}
END_TEST

static Suite *ranktable_suite(void)
{
    Suite *s = suite_create("ranktable");
    TCase *tc = tcase_create("corpus");
    tcase_add_loop_test(tc, test_corpus, 0, NCORPUS);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_directory);
    tcase_add_test(tc, test_not_a_directory);
    tcase_add_test(tc, test_unreadable);
    tcase_add_test(tc, test_too_large);
    tcase_add_test(tc, test_parse_string);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    tcase_add_test(tc, test_getters_two_server);
    tcase_add_test(tc, test_endpoint_env);
    tcase_add_test(tc, test_endpoint_fallbacks);
    tcase_add_test(tc, test_server_ranks);
    tcase_add_test(tc, test_hash);
    tcase_add_test(tc, test_examples_valid);
    tcase_add_test(tc, test_group_list_order);
    tcase_add_test(tc, test_rank_addrs);
    tcase_add_test(tc, test_endpoint_choice);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ranktable_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
