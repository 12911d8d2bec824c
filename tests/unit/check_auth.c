/* check_auth.c - the job key helper: HMAC-SHA256 against known vectors, the
 * proof layout, constant-time compare, key loading from the environment and
 * from a file (missing, empty, too long, world-readable), and the bootstrap
 * hello (boot_wire.h, under the handshake's checks) on good and tampered
 * messages. */
#include "build_config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom.h"
#include "auth.h"
#include "config.h"
#include "wire.h"
#include "bootstrap/boot_wire.h"

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* Expected values were produced with OpenSSL's command line, e.g.
 *   printf 'The quick brown fox jumps over the lazy dog' |
 *       openssl dgst -sha256 -hmac key                                     */
START_TEST(test_hmac_vectors)
{
    uint8_t mac[LOOM_AUTH_MAC_LEN];
    char h[2 * LOOM_AUTH_MAC_LEN + 1];
    const char *fox = "The quick brown fox jumps over the lazy dog";
    ck_assert_int_eq(loom_auth_hmac_sha256("key", 3, fox, strlen(fox), mac),
                     LOOM_SUCCESS);
    hex(mac, sizeof mac, h);
    ck_assert_str_eq(h, "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
    /* printf '' | openssl dgst -sha256 -hmac '' */
    ck_assert_int_eq(loom_auth_hmac_sha256("", 0, "", 0, mac), LOOM_SUCCESS);
    hex(mac, sizeof mac, h);
    ck_assert_str_eq(h, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
    /* printf 'loom' | openssl dgst -sha256 -hmac 'secret-job-key' */
    ck_assert_int_eq(loom_auth_hmac_sha256("secret-job-key", 14, "loom", 4, mac),
                     LOOM_SUCCESS);
    hex(mac, sizeof mac, h);
    ck_assert_str_eq(h, "80500ee88c8b17eebd86aa4076699c1ae2e7636546b6725fc9166c574002c0c0");
}
END_TEST

/* { printf 'loom-v1bootC'; 32 bytes of 0x01; 32 bytes of 0x02;
 *   printf 'hello'; } | openssl dgst -sha256 -hmac 'secret-job-key'        */
START_TEST(test_proof_layout)
{
    struct loom_auth_key key;
    ck_assert_int_eq(loom_auth_key_set(&key, "secret-job-key", 14), LOOM_SUCCESS);
    ck_assert_int_eq(key.set, 1);
    uint8_t c1[LOOM_AUTH_CHAL_LEN], c2[LOOM_AUTH_CHAL_LEN], mac[LOOM_AUTH_MAC_LEN];
    memset(c1, 1, sizeof c1);
    memset(c2, 2, sizeof c2);
    ck_assert_int_eq(loom_auth_mac(&key, "boot", 'C', c1, c2, "hello", 5, mac),
                     LOOM_SUCCESS);
    char h[2 * LOOM_AUTH_MAC_LEN + 1];
    hex(mac, sizeof mac, h);
    ck_assert_str_eq(h, "755a222239b3fbc267bff7b84754d3f6e0d2d5fe55acae5ea2bf30b7e2402975");
    ck_assert_int_eq(loom_auth_verify(&key, "boot", 'C', c1, c2, "hello", 5, mac), 1);
    /* Each input matters: role, context, challenge order, message, key. */
    ck_assert_int_eq(loom_auth_verify(&key, "boot", 'A', c1, c2, "hello", 5, mac), 0);
    ck_assert_int_eq(loom_auth_verify(&key, "tcp", 'C', c1, c2, "hello", 5, mac), 0);
    ck_assert_int_eq(loom_auth_verify(&key, "boot", 'C', c2, c1, "hello", 5, mac), 0);
    ck_assert_int_eq(loom_auth_verify(&key, "boot", 'C', c1, c2, "hellp", 5, mac), 0);
    struct loom_auth_key other;
    loom_auth_key_set(&other, "secret-job-kez", 14);
    ck_assert_int_eq(loom_auth_verify(&other, "boot", 'C', c1, c2, "hello", 5, mac), 0);
    /* No key: no proof can be made or verified. */
    struct loom_auth_key none;
    loom_auth_key_set(&none, NULL, 0);
    ck_assert_int_eq(none.set, 0);
    ck_assert_int_eq(loom_auth_mac(&none, "boot", 'C', c1, c2, "hello", 5, mac),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_auth_key_set(&none, c1, LOOM_AUTH_KEY_MAX + 1),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_auth_key_clear(&key);
    ck_assert_int_eq(key.set, 0);
    ck_assert_uint_eq(key.len, 0);
    ck_assert_int_eq(key.bytes[0], 0);
}
END_TEST

START_TEST(test_equal_and_challenge)
{
    uint8_t a[32], b[32];
    memset(a, 7, sizeof a);
    memset(b, 7, sizeof b);
    ck_assert_int_eq(loom_auth_equal(a, b, sizeof a), 1);
    b[31] ^= 1;
    ck_assert_int_eq(loom_auth_equal(a, b, sizeof a), 0);
    b[31] ^= 1;
    b[0] ^= 0x80;
    ck_assert_int_eq(loom_auth_equal(a, b, sizeof a), 0);
    ck_assert_int_eq(loom_auth_equal(a, b, 0), 1);
    /* Two challenges differ (2^-256 chance of a false failure). */
    ck_assert_int_eq(loom_auth_challenge(a), LOOM_SUCCESS);
    ck_assert_int_eq(loom_auth_challenge(b), LOOM_SUCCESS);
    ck_assert_int_eq(loom_auth_equal(a, b, sizeof a), 0);
}
END_TEST

static char *write_key_file(const char *text, size_t len, mode_t mode)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/loom-key-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    ck_assert_int_eq(chmod(path, mode), 0);
    return path;
}

START_TEST(test_key_file)
{
    struct loom_auth_key key;
    char err[512] = "";
    char *path = write_key_file("s3cret\n", 7, 0600);
    ck_assert_int_eq(loom_auth_key_from_file(path, &key, err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_int_eq(key.set, 1);
    ck_assert_uint_eq(key.len, 6);
    ck_assert_mem_eq(key.bytes, "s3cret", 6);
    ck_assert_int_eq(key.world_readable, 0);
    unlink(path);

    path = write_key_file("dos\r\n", 5, 0644);
    ck_assert_int_eq(loom_auth_key_from_file(path, &key, err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_uint_eq(key.len, 3);
    ck_assert_mem_eq(key.bytes, "dos", 3);
    ck_assert_int_eq(key.world_readable, 1);
    unlink(path);

    /* Only one trailing newline goes; inner bytes are kept as they are. */
    path = write_key_file("a\nb\n\n", 5, 0400);
    ck_assert_int_eq(loom_auth_key_from_file(path, &key, err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_uint_eq(key.len, 4);
    ck_assert_mem_eq(key.bytes, "a\nb\n", 4);
    unlink(path);

    path = write_key_file("\n", 1, 0600);
    ck_assert_int_eq(loom_auth_key_from_file(path, &key, err, sizeof err),
                     LOOM_ERROR_CONFIG);
    char want[256];
    snprintf(want, sizeof want, "job key file %s is empty", path);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(key.set, 0);
    unlink(path);

    char big[LOOM_AUTH_KEY_MAX + 1];
    memset(big, 'k', sizeof big);
    path = write_key_file(big, sizeof big, 0600);
    ck_assert_int_eq(loom_auth_key_from_file(path, &key, err, sizeof err),
                     LOOM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "holds more than 1024 bytes"));
    unlink(path);
    /* Exactly the limit fits. */
    path = write_key_file(big, LOOM_AUTH_KEY_MAX, 0600);
    ck_assert_int_eq(loom_auth_key_from_file(path, &key, err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_uint_eq(key.len, LOOM_AUTH_KEY_MAX);
    unlink(path);

    ck_assert_int_eq(loom_auth_key_from_file("/nonexistent/loom.key", &key, err,
                                             sizeof err),
                     LOOM_ERROR_IO);
    ck_assert_str_eq(err, "job key file /nonexistent/loom.key: No such file or "
                          "directory");
    ck_assert_int_eq(loom_auth_key_from_file("/tmp", &key, err, sizeof err),
                     LOOM_ERROR_IO);
    ck_assert_str_eq(err, "job key file /tmp: not a regular file");
}
END_TEST

START_TEST(test_key_from_config)
{
    struct loom_auth_key key;
    char err[512] = "";
    unsetenv("LOOM_JOB_KEY");
    unsetenv("LOOM_JOB_KEY_FILE");
    setenv("LOOM_CONF_FILE", "/nonexistent/loom.conf", 1);
    loom_config_reset();
    ck_assert_int_eq(loom_auth_key_from_config(&key, err, sizeof err), LOOM_SUCCESS);
    ck_assert_int_eq(key.set, 0);

    char *path = write_key_file("from-file", 9, 0600);
    setenv("LOOM_JOB_KEY_FILE", path, 1);
    loom_config_reset();
    ck_assert_int_eq(loom_auth_key_from_config(&key, err, sizeof err), LOOM_SUCCESS);
    ck_assert_uint_eq(key.len, 9);
    ck_assert_mem_eq(key.bytes, "from-file", 9);

    /* LOOM_JOB_KEY wins over the file. */
    setenv("LOOM_JOB_KEY", "from-env", 1);
    loom_config_reset();
    ck_assert_int_eq(loom_auth_key_from_config(&key, err, sizeof err), LOOM_SUCCESS);
    ck_assert_uint_eq(key.len, 8);
    ck_assert_mem_eq(key.bytes, "from-env", 8);
    unlink(path);

    unsetenv("LOOM_JOB_KEY");
    loom_config_reset();
    ck_assert_int_eq(loom_auth_key_from_config(&key, err, sizeof err),
                     LOOM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(err, path));

    /* The key is never printed by loom-info -c. */
    setenv("LOOM_JOB_KEY", "do-not-print-me", 1);
    loom_config_reset();
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    ck_assert_ptr_nonnull(f);
    loom_config_print(f);
    fclose(f);
    ck_assert_ptr_null(strstr(buf, "do-not-print-me"));
    ck_assert_ptr_nonnull(strstr(buf, "(set, hidden)"));
    free(buf);
}
END_TEST

/* A signed bootstrap hello as a rank would send it (the handshake's hello
 * under the bootstrap's protocol). */
static size_t make_hello(const struct loom_auth_key *key, const uint8_t *ca,
                         const uint8_t *cc, uint8_t *out)
{
    struct loom_boot_hello h = {.rank = 1,
                                .nranks = 2,
                                .table_hash = 0x1234,
                                .entry = (const uint8_t *)"ep-1",
                                .entry_len = 5};
    uint8_t payload[LOOM_BOOT_HELLO_LEN + 5];
    loom_boot_hello_encode(&h, payload);
    ck_assert_int_eq(loom_hs_hello_make(&loom_boot_hs, key, ca, cc, payload, sizeof payload, out),
                     LOOM_SUCCESS);
    return LOOM_HS_HEAD_LEN + sizeof payload + LOOM_HS_TRAILER_LEN;
}

START_TEST(test_boot_wire)
{
    struct loom_auth_key key, other, none;
    loom_auth_key_set(&key, "k1", 2);
    loom_auth_key_set(&other, "k2", 2);
    loom_auth_key_set(&none, NULL, 0);
    uint8_t ca[32], cc[32], msg[256], proof[LOOM_AUTH_MSG_LEN];
    memset(ca, 0xa5, sizeof ca);
    memset(cc, 0x5a, sizeof cc);
    char why[300];
    const struct loom_hs_proto *bp = &loom_boot_hs;
    size_t len = make_hello(&key, ca, cc, msg), need = 0;
    ck_assert_int_eq(loom_hs_head_check(bp, msg, &need, why, sizeof why), LOOM_SUCCESS);
    ck_assert_uint_eq(need, len);
    ck_assert_int_eq(loom_hs_hello_verify(bp, &key, ca, msg, len, why, sizeof why), LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_hello_verify(bp, &other, ca, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    ck_assert_str_eq(why, "job key does not match (another job, or another key)");
    ck_assert_int_eq(loom_hs_hello_verify(bp, &none, ca, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    ck_assert_str_eq(why, "job key does not match (it has a job key, this side has none)");
    /* A replayed hello under a fresh challenge fails. */
    uint8_t ca2[32];
    memset(ca2, 0xa6, sizeof ca2);
    ck_assert_int_eq(loom_hs_hello_verify(bp, &key, ca2, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    /* Tampering with the table hash breaks the mac. */
    msg[LOOM_HS_HEAD_LEN + 8] ^= 1;
    ck_assert_int_eq(loom_hs_hello_verify(bp, &key, ca, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    msg[LOOM_HS_HEAD_LEN + 8] ^= 1;
    /* Root's proof verifies on the rank with the same key only. */
    ck_assert_int_eq(loom_hs_proof_make(bp, &key, ca, msg, len, proof), LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_proof_check(bp, &key, proof, ca, cc, msg, len, why, sizeof why),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_proof_check(bp, &other, proof, ca, cc, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    ck_assert_int_eq(loom_hs_proof_check(bp, &none, proof, ca, cc, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    ck_assert_str_eq(why, "job key does not match (it has a job key, this side has none)");
    /* No key on either side: the exchange still runs, with no mac. */
    len = make_hello(&none, ca, cc, msg);
    ck_assert_int_eq(loom_hs_hello_verify(bp, &none, ca, msg, len, why, sizeof why), LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_hello_verify(bp, &key, ca, msg, len, why, sizeof why),
                     LOOM_ERROR_MISMATCH);
    ck_assert_str_eq(why, "job key does not match (it has no job key, this side has one)");
    /* The payload: its fields and entry; too short is refused. */
    struct loom_boot_hello h;
    ck_assert_int_eq(loom_boot_hello_decode(msg + LOOM_HS_HEAD_LEN, LOOM_BOOT_HELLO_LEN + 5, &h,
                                            why, sizeof why),
                     0);
    ck_assert_uint_eq(h.rank, 1);
    ck_assert_uint_eq(h.nranks, 2);
    ck_assert_uint_eq(h.table_hash, 0x1234);
    ck_assert_uint_eq(h.entry_len, 5);
    ck_assert_str_eq((const char *)h.entry, "ep-1");
    ck_assert_int_eq(loom_boot_hello_decode(msg + LOOM_HS_HEAD_LEN, 15, &h, why, sizeof why), -1);
    ck_assert_str_eq(why, "a bootstrap hello of 15 bytes, at least 16 expected");
    /* Head checks: oversized hello, wrong version, wrong magic. */
    loom_put_le32(msg + 8, LOOM_BOOT_HELLO_LEN + LOOM_BOOT_ENTRY_MAX + 1);
    ck_assert_int_eq(loom_hs_head_check(bp, msg, &need, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "bootstrap hello of 1041 bytes exceeds the limit of 1040");
    msg[4] = 1;
    ck_assert_int_eq(loom_hs_head_check(bp, msg, &need, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "speaks bootstrap protocol version 1, this side 4");
    memcpy(msg, "GET ", 4);
    ck_assert_int_eq(loom_hs_head_check(bp, msg, &need, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "not a Loom bootstrap socket (hello magic 0x20544547)");
    /* The challenge message round-trips. */
    uint8_t chal[LOOM_AUTH_MSG_LEN], got[32];
    loom_hs_chal_make(bp, &key, ca, chal);
    ck_assert_int_eq(loom_hs_chal_check(bp, &key, chal, got, why, sizeof why), LOOM_SUCCESS);
    ck_assert_mem_eq(got, ca, 32);
    chal[0] ^= 1;
    ck_assert_int_eq(loom_hs_chal_check(bp, &key, chal, got, why, sizeof why), LOOM_ERROR_PROTOCOL);
}
END_TEST

static Suite *auth_suite(void)
{
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("auth");
    tcase_add_test(tc, test_hmac_vectors);
    tcase_add_test(tc, test_proof_layout);
    tcase_add_test(tc, test_equal_and_challenge);
    tcase_add_test(tc, test_key_file);
    tcase_add_test(tc, test_key_from_config);
    tcase_add_test(tc, test_boot_wire);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(auth_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
