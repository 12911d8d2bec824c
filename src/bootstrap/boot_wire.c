/* boot_wire.c - bootstrap message codecs and checks (see boot_wire.h). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "auth.h"
#include "bootstrap/boot_wire.h"
#include "net/net.h"

static const uint8_t zero_mac[LOOM_AUTH_MAC_LEN];

void loom_boot_hello_encode(const struct loom_boot_hello *h, uint8_t *out)
{
    loom_put_le32(out, h->magic);
    loom_put_le16(out + 4, h->version);
    loom_put_le16(out + 6, h->flags);
    loom_put_le32(out + 8, h->rank);
    loom_put_le32(out + 12, h->nranks);
    loom_put_le64(out + 16, h->table_hash);
    loom_put_le32(out + 24, h->ep_len);
}

void loom_boot_hello_decode(const uint8_t *in, struct loom_boot_hello *h)
{
    h->magic = loom_get_le32(in);
    h->version = loom_get_le16(in + 4);
    h->flags = loom_get_le16(in + 6);
    h->rank = loom_get_le32(in + 8);
    h->nranks = loom_get_le32(in + 12);
    h->table_hash = loom_get_le64(in + 16);
    h->ep_len = loom_get_le32(in + 24);
}

int loom_boot_hello_head_check(const uint8_t *in, size_t ep_max, size_t *need,
                               char *why, size_t whylen)
{
    struct loom_boot_hello h;
    loom_boot_hello_decode(in, &h);
    if (h.magic != LOOM_BOOT_HELLO_MAGIC) {
        snprintf(why, whylen, "not a Loom bootstrap hello (magic 0x%08x)",
                 (unsigned)h.magic);
        return LOOM_BOOT_DROP;
    }
    if (h.version != LOOM_BOOT_VERSION) {
        snprintf(why, whylen, "bootstrap protocol version %u, expected %u",
                 h.version, LOOM_BOOT_VERSION);
        return LOOM_BOOT_DROP;
    }
    if (h.ep_len > ep_max) {
        snprintf(why, whylen, "endpoint of %u bytes exceeds the limit of %zu",
                 h.ep_len, ep_max);
        return LOOM_BOOT_TOO_LONG;
    }
    *need = LOOM_BOOT_HELLO_LEN + (size_t)h.ep_len + LOOM_BOOT_AUTH_LEN;
    return LOOM_BOOT_OK;
}

int loom_boot_hello_auth_check(const struct loom_auth_key *key,
                               const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                               const uint8_t *msg, size_t len, char *why,
                               size_t whylen)
{
    if (len < LOOM_BOOT_HELLO_LEN + LOOM_BOOT_AUTH_LEN) {
        snprintf(why, whylen, "hello of %zu bytes is truncated", len);
        return LOOM_BOOT_DROP;
    }
    int keyed = (loom_get_le16(msg + 6) & LOOM_AUTH_FLAG_KEYED) != 0;
    if (keyed != key->set) {
        snprintf(why, whylen, "job key does not match (%s)",
                 keyed ? "it has a job key, rank 0 has none"
                       : "it has no job key, rank 0 has one");
        return LOOM_BOOT_BAD_KEY;
    }
    size_t hlen = len - LOOM_BOOT_AUTH_LEN;
    const uint8_t *cc = msg + hlen, *mac = cc + LOOM_AUTH_CHAL_LEN;
    if (key->set &&
        !loom_auth_verify(key, LOOM_BOOT_CTX, 'C', ca, cc, msg, hlen, mac)) {
        snprintf(why, whylen, "job key does not match");
        return LOOM_BOOT_BAD_KEY;
    }
    return LOOM_BOOT_OK;
}

int loom_boot_chal_check(const uint8_t in[LOOM_AUTH_MSG_LEN],
                         uint8_t ca[LOOM_AUTH_CHAL_LEN], char *why,
                         size_t whylen)
{
    struct loom_auth_msg m;
    loom_auth_msg_decode(in, &m);
    if (m.magic != LOOM_BOOT_CHAL_MAGIC || m.version != LOOM_BOOT_VERSION) {
        snprintf(why, whylen, "is not a Loom rank 0 of this version (sent magic "
                 "0x%08x version %u)", (unsigned)m.magic, m.version);
        return LOOM_BOOT_DROP;
    }
    memcpy(ca, m.body, LOOM_AUTH_CHAL_LEN);
    return LOOM_BOOT_OK;
}

int loom_boot_proof_check(const struct loom_auth_key *key,
                          const uint8_t in[LOOM_AUTH_MSG_LEN],
                          const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                          const uint8_t cc[LOOM_AUTH_CHAL_LEN],
                          const uint8_t *msg, size_t msglen, char *why,
                          size_t whylen)
{
    struct loom_auth_msg m;
    loom_auth_msg_decode(in, &m);
    if (m.magic != LOOM_BOOT_PROOF_MAGIC || m.version != LOOM_BOOT_VERSION) {
        snprintf(why, whylen, "sent magic 0x%08x version %u where its proof was "
                 "expected", (unsigned)m.magic, m.version);
        return LOOM_BOOT_DROP;
    }
    int keyed = (m.flags & LOOM_AUTH_FLAG_KEYED) != 0;
    if (keyed != key->set) {
        snprintf(why, whylen, "job key does not match (%s)",
                 keyed ? "rank 0 has a job key, this rank has none"
                       : "rank 0 has no job key, this rank has one");
        return LOOM_BOOT_BAD_KEY;
    }
    if (key->set &&
        !loom_auth_verify(key, LOOM_BOOT_CTX, 'A', cc, ca, msg, msglen, m.body)) {
        snprintf(why, whylen, "could not prove the job key (the keys differ)");
        return LOOM_BOOT_BAD_KEY;
    }
    return LOOM_BOOT_OK;
}

loom_result_t loom_boot_hello_sign(const struct loom_auth_key *key,
                                   const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t cc[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t *msg, size_t msglen,
                                   uint8_t trailer[LOOM_BOOT_AUTH_LEN])
{
    memcpy(trailer, cc, LOOM_AUTH_CHAL_LEN);
    if (!key->set) {
        memcpy(trailer + LOOM_AUTH_CHAL_LEN, zero_mac, LOOM_AUTH_MAC_LEN);
        return LOOM_SUCCESS;
    }
    return loom_auth_mac(key, LOOM_BOOT_CTX, 'C', ca, cc, msg, msglen,
                         trailer + LOOM_AUTH_CHAL_LEN);
}

loom_result_t loom_boot_proof_make(const struct loom_auth_key *key,
                                   const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t cc[LOOM_AUTH_CHAL_LEN],
                                   const uint8_t *msg, size_t msglen,
                                   uint8_t out[LOOM_AUTH_MSG_LEN])
{
    uint8_t mac[LOOM_AUTH_MAC_LEN];
    memcpy(mac, zero_mac, sizeof mac);
    if (key->set) {
        loom_result_t res =
            loom_auth_mac(key, LOOM_BOOT_CTX, 'A', cc, ca, msg, msglen, mac);
        if (res < 0)
            return res;
    }
    loom_auth_msg_encode(out, LOOM_BOOT_PROOF_MAGIC, LOOM_BOOT_VERSION,
                         key->set ? LOOM_AUTH_FLAG_KEYED : 0, mac);
    return LOOM_SUCCESS;
}
