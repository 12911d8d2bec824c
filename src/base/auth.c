/* auth.c - job key loading and HMAC-SHA256 proofs (see auth.h). */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "config.h"
#include "auth.h"
#include "wire.h"

#define AUTH_LABEL "loom-v1"

loom_result_t loom_auth_key_set(struct loom_auth_key *key, const void *bytes,
                                size_t len)
{
    loom_auth_key_clear(key);
    if (len > LOOM_AUTH_KEY_MAX)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (len)
        memcpy(key->bytes, bytes, len);
    key->len = len;
    key->set = len > 0;
    return LOOM_SUCCESS;
}

void loom_auth_key_clear(struct loom_auth_key *key)
{
    OPENSSL_cleanse(key, sizeof *key);
    key->set = 0;
    key->len = 0;
    key->world_readable = 0;
}

loom_result_t loom_auth_key_from_file(const char *path, struct loom_auth_key *key,
                                      char *err, size_t errlen)
{
    loom_auth_key_clear(key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "job key file %s: %s", path, strerror(errno));
        return LOOM_ERROR_IO;
    }
    struct stat st;
    int bad = fstat(fd, &st) < 0 ? errno : 0;
    if (bad || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "job key file %s: %s", path,
                 bad ? strerror(bad) : "not a regular file");
        close(fd);
        return LOOM_ERROR_IO;
    }
    /* One byte more than the limit, to tell "too long" from "just fits". */
    uint8_t buf[LOOM_AUTH_KEY_MAX + 2];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "job key file %s: %s", path, strerror(errno));
            close(fd);
            OPENSSL_cleanse(buf, sizeof buf);
            return LOOM_ERROR_IO;
        }
        if (n == 0 || (len += (size_t)n) == sizeof buf)
            break;
    }
    close(fd);
    if (len && buf[len - 1] == '\n')
        len--;
    if (len && buf[len - 1] == '\r')
        len--;
    loom_result_t res = LOOM_SUCCESS;
    if (len == 0) {
        snprintf(err, errlen, "job key file %s is empty", path);
        res = LOOM_ERROR_CONFIG;
    } else if (len > LOOM_AUTH_KEY_MAX) {
        snprintf(err, errlen, "job key file %s holds more than %d bytes", path,
                 LOOM_AUTH_KEY_MAX);
        res = LOOM_ERROR_CONFIG;
    } else {
        loom_auth_key_set(key, buf, len);
        if (st.st_mode & (S_IROTH | S_IWOTH)) {
            key->world_readable = 1;
            LOOM_WARN(LOOM_SUB_CONFIG, "job key file %s can be read by every user "
                      "(mode %04o): chmod 600 it", path,
                      (unsigned)(st.st_mode & 07777));
        }
    }
    OPENSSL_cleanse(buf, sizeof buf);
    return res;
}

loom_result_t loom_auth_key_from_config(struct loom_auth_key *key, char *err,
                                        size_t errlen)
{
    const struct loom_config *cfg = loom_config();
    loom_auth_key_clear(key);
    if (cfg->job_key[0]) {
        if (cfg->job_key_file[0])
            LOOM_WARN(LOOM_SUB_CONFIG, "both LOOM_JOB_KEY and LOOM_JOB_KEY_FILE "
                      "are set: using LOOM_JOB_KEY");
        return loom_auth_key_set(key, cfg->job_key, strlen(cfg->job_key));
    }
    if (cfg->job_key_file[0])
        return loom_auth_key_from_file(cfg->job_key_file, key, err, errlen);
    return LOOM_SUCCESS;
}

loom_result_t loom_auth_challenge(uint8_t chal[LOOM_AUTH_CHAL_LEN])
{
    size_t got = 0;
    while (got < LOOM_AUTH_CHAL_LEN) {
        ssize_t n = getrandom(chal + got, LOOM_AUTH_CHAL_LEN - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return LOOM_ERROR_SYSTEM;
        got += (size_t)n;
    }
    return LOOM_SUCCESS;
}

/* HMAC-SHA256 over the concatenation of n parts. */
static loom_result_t hmac_parts(const void *key, size_t keylen,
                                const void *const *part, const size_t *plen,
                                int n, uint8_t out[LOOM_AUTH_MAC_LEN])
{
    loom_result_t res = LOOM_ERROR_INTERNAL;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end()};
    /* An empty key is legal HMAC; EVP wants a non-NULL pointer for it. */
    static const uint8_t nokey[1];
    size_t outlen = 0;
    if (!ctx || !EVP_MAC_init(ctx, keylen ? key : nokey, keylen, params))
        goto out;
    for (int i = 0; i < n; i++)
        if (plen[i] && !EVP_MAC_update(ctx, part[i], plen[i]))
            goto out;
    if (EVP_MAC_final(ctx, out, &outlen, LOOM_AUTH_MAC_LEN) &&
        outlen == LOOM_AUTH_MAC_LEN)
        res = LOOM_SUCCESS;
out:
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return res;
}

loom_result_t loom_auth_hmac_sha256(const void *key, size_t keylen,
                                    const void *data, size_t len,
                                    uint8_t out[LOOM_AUTH_MAC_LEN])
{
    const void *part[] = {data};
    size_t plen[] = {len};
    return hmac_parts(key, keylen, part, plen, 1, out);
}

loom_result_t loom_auth_mac(const struct loom_auth_key *key, const char *ctx,
                            char role, const uint8_t c1[LOOM_AUTH_CHAL_LEN],
                            const uint8_t c2[LOOM_AUTH_CHAL_LEN],
                            const void *hello, size_t hello_len,
                            uint8_t out[LOOM_AUTH_MAC_LEN])
{
    if (!key->set)
        return LOOM_ERROR_INVALID_ARGUMENT;
    const void *part[] = {AUTH_LABEL, ctx, &role, c1, c2, hello};
    size_t plen[] = {strlen(AUTH_LABEL), strlen(ctx), 1, LOOM_AUTH_CHAL_LEN,
                     LOOM_AUTH_CHAL_LEN, hello_len};
    return hmac_parts(key->bytes, key->len, part, plen, 6, out);
}

int loom_auth_verify(const struct loom_auth_key *key, const char *ctx, char role,
                     const uint8_t c1[LOOM_AUTH_CHAL_LEN],
                     const uint8_t c2[LOOM_AUTH_CHAL_LEN], const void *hello,
                     size_t hello_len, const uint8_t mac[LOOM_AUTH_MAC_LEN])
{
    uint8_t want[LOOM_AUTH_MAC_LEN];
    if (loom_auth_mac(key, ctx, role, c1, c2, hello, hello_len, want) < 0)
        return 0;
    int ok = loom_auth_equal(want, mac, sizeof want);
    OPENSSL_cleanse(want, sizeof want);
    return ok;
}

int loom_auth_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}

void loom_auth_msg_encode(uint8_t out[LOOM_AUTH_MSG_LEN], uint32_t magic,
                          uint16_t version, uint16_t flags,
                          const uint8_t body[LOOM_AUTH_CHAL_LEN])
{
    loom_put_le32(out, magic);
    loom_put_le16(out + 4, version);
    loom_put_le16(out + 6, flags);
    memcpy(out + 8, body, LOOM_AUTH_CHAL_LEN);
}

void loom_auth_msg_decode(const uint8_t in[LOOM_AUTH_MSG_LEN],
                          struct loom_auth_msg *m)
{
    m->magic = loom_get_le32(in);
    m->version = loom_get_le16(in + 4);
    m->flags = loom_get_le16(in + 6);
    memcpy(m->body, in + 8, LOOM_AUTH_CHAL_LEN);
}
