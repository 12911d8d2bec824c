/* tcp_frame.c - encode/decode the tcp transport's headers (see tcp_frame.h). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "auth.h"

#include "net/net.h"
#include "transport/tcp/tcp_frame.h"

void loom_tcp_frame_encode(const struct loom_tcp_frame *f, uint8_t *out)
{
    loom_put_le32(out + 0, f->magic);
    loom_put_le16(out + 4, f->version);
    loom_put_le16(out + 6, f->stripe);
    loom_put_le32(out + 8, f->tag);
    loom_put_le32(out + 12, f->desc);
    loom_put_le64(out + 16, f->comm_id);
    loom_put_le64(out + 24, f->seq);
    loom_put_le64(out + 32, f->len);
    loom_put_le64(out + 40, f->count);
}

void loom_tcp_frame_decode(const uint8_t *in, struct loom_tcp_frame *f)
{
    f->magic = loom_get_le32(in + 0);
    f->version = loom_get_le16(in + 4);
    f->stripe = loom_get_le16(in + 6);
    f->tag = loom_get_le32(in + 8);
    f->desc = loom_get_le32(in + 12);
    f->comm_id = loom_get_le64(in + 16);
    f->seq = loom_get_le64(in + 24);
    f->len = loom_get_le64(in + 32);
    f->count = loom_get_le64(in + 40);
}

void loom_tcp_hello_encode(const struct loom_tcp_hello *h, uint8_t *out)
{
    loom_put_le32(out + 0, h->magic);
    loom_put_le16(out + 4, h->version);
    loom_put_le16(out + 6, h->sock);
    loom_put_le32(out + 8, h->from);
    loom_put_le32(out + 12, h->to);
    loom_put_le64(out + 16, h->comm_id);
    loom_put_le64(out + 24, h->nonce);
}

void loom_tcp_hello_decode(const uint8_t *in, struct loom_tcp_hello *h)
{
    h->magic = loom_get_le32(in + 0);
    h->version = loom_get_le16(in + 4);
    h->sock = loom_get_le16(in + 6);
    h->from = loom_get_le32(in + 8);
    h->to = loom_get_le32(in + 12);
    h->comm_id = loom_get_le64(in + 16);
    h->nonce = loom_get_le64(in + 24);
}

/* ---------------------------------------------- connection authentication */

static const uint8_t tcp_zero_mac[LOOM_AUTH_MAC_LEN];

int loom_tcp_hello_check(const struct loom_tcp_hello_expect *e,
                         const uint8_t *msg, struct loom_tcp_hello *h, char *why,
                         size_t whylen)
{
    loom_tcp_hello_decode(msg, h);
    if (h->magic != LOOM_TCP_HELLO_MAGIC) {
        snprintf(why, whylen, "wrong magic 0x%08x (not a Loom peer)",
                 (unsigned)h->magic);
        return LOOM_TCP_HELLO_DROP;
    }
    if (h->version != LOOM_TCP_VERSION) {
        snprintf(why, whylen, "protocol version %u, expected %u", h->version,
                 LOOM_TCP_VERSION);
        return LOOM_TCP_HELLO_DROP;
    }
    /* The key before anything the hello claims. */
    const uint8_t *trailer = msg + LOOM_TCP_HELLO_LEN;
    int keyed = (loom_get_le32(trailer) & LOOM_AUTH_FLAG_KEYED) != 0;
    if (keyed != e->key->set) {
        snprintf(why, whylen, "job key does not match (%s)",
                 keyed ? "it has a job key, this rank has none"
                       : "it has no job key, this rank has one");
        return LOOM_TCP_HELLO_BAD_KEY;
    }
    if (e->key->set &&
        !loom_auth_verify(e->key, LOOM_TCP_AUTH_CTX, 'C', e->ca, trailer + 4, msg,
                          LOOM_TCP_HELLO_LEN, trailer + 4 + LOOM_AUTH_CHAL_LEN)) {
        snprintf(why, whylen, "job key does not match");
        return LOOM_TCP_HELLO_BAD_KEY;
    }
    if (h->comm_id != e->comm_id) {
        snprintf(why, whylen,
                 "communicator id 0x%016llx, expected 0x%016llx (another job?)",
                 (unsigned long long)h->comm_id, (unsigned long long)e->comm_id);
        return LOOM_TCP_HELLO_DROP;
    }
    if (h->to != (uint32_t)e->rank || h->nonce != e->nonce) {
        snprintf(why, whylen, "addressed to rank %u of another instance", h->to);
        return LOOM_TCP_HELLO_DROP;
    }
    if (h->from <= (uint32_t)e->rank || h->from >= (uint32_t)e->nranks) {
        snprintf(why, whylen, "claims to be rank %u, which connects the other "
                 "way or does not exist", h->from);
        return LOOM_TCP_HELLO_DROP;
    }
    if (h->sock >= e->nsocks) {
        snprintf(why, whylen, "socket index %u, only %d per peer", h->sock,
                 e->nsocks);
        return LOOM_TCP_HELLO_DROP;
    }
    return LOOM_TCP_HELLO_OK;
}

int loom_tcp_hello_sign(const struct loom_auth_key *key, const uint8_t *ca,
                        const uint8_t *cc, const uint8_t *hello,
                        uint8_t *trailer)
{
    loom_put_le32(trailer, key->set ? LOOM_AUTH_FLAG_KEYED : 0);
    memcpy(trailer + 4, cc, LOOM_AUTH_CHAL_LEN);
    uint8_t *mac = trailer + 4 + LOOM_AUTH_CHAL_LEN;
    memcpy(mac, tcp_zero_mac, LOOM_AUTH_MAC_LEN);
    if (!key->set)
        return LOOM_SUCCESS;
    return loom_auth_mac(key, LOOM_TCP_AUTH_CTX, 'C', ca, cc, hello,
                         LOOM_TCP_HELLO_LEN, mac);
}

int loom_tcp_chal_check(const uint8_t *in, uint8_t *ca, char *why,
                        size_t whylen)
{
    struct loom_auth_msg m;
    loom_auth_msg_decode(in, &m);
    if (m.magic != LOOM_TCP_CHAL_MAGIC || m.version != LOOM_TCP_AUTH_VERSION) {
        snprintf(why, whylen, "sent magic 0x%08x version %u, not a Loom "
                 "challenge", (unsigned)m.magic, m.version);
        return LOOM_TCP_HELLO_DROP;
    }
    memcpy(ca, m.body, LOOM_AUTH_CHAL_LEN);
    return LOOM_TCP_HELLO_OK;
}

int loom_tcp_proof_make(const struct loom_auth_key *key, int refused,
                        const uint8_t *signed_hello, const uint8_t *ca,
                        uint8_t *out)
{
    uint8_t mac[LOOM_AUTH_MAC_LEN];
    memcpy(mac, tcp_zero_mac, sizeof mac);
    if (key->set && !refused) {
        int res = loom_auth_mac(key, LOOM_TCP_AUTH_CTX, 'A',
                                signed_hello + LOOM_TCP_HELLO_LEN + 4, ca,
                                signed_hello, LOOM_TCP_HELLO_LEN, mac);
        if (res < 0)
            return res;
    }
    uint16_t flags = (uint16_t)((key->set ? LOOM_AUTH_FLAG_KEYED : 0) |
                                (refused ? LOOM_TCP_PROOF_REFUSED : 0));
    loom_auth_msg_encode(out, LOOM_TCP_PROOF_MAGIC, LOOM_TCP_AUTH_VERSION, flags,
                         mac);
    return LOOM_SUCCESS;
}

int loom_tcp_proof_check(const struct loom_auth_key *key, const uint8_t *in,
                         const uint8_t *ca, const uint8_t *cc,
                         const uint8_t *hello, char *why, size_t whylen)
{
    struct loom_auth_msg m;
    loom_auth_msg_decode(in, &m);
    if (m.magic != LOOM_TCP_PROOF_MAGIC || m.version != LOOM_TCP_AUTH_VERSION) {
        snprintf(why, whylen, "sent magic 0x%08x version %u where its key proof "
                 "was expected", (unsigned)m.magic, m.version);
        return LOOM_TCP_HELLO_DROP;
    }
    if (m.flags & LOOM_TCP_PROOF_REFUSED) {
        snprintf(why, whylen, "rejected this rank's job key (LOOM_JOB_KEY / "
                 "LOOM_JOB_KEY_FILE must be the same on every rank)");
        return LOOM_TCP_HELLO_BAD_KEY;
    }
    int keyed = (m.flags & LOOM_AUTH_FLAG_KEYED) != 0;
    if (keyed != key->set) {
        snprintf(why, whylen, "job key does not match (%s)",
                 keyed ? "it has a job key, this rank has none"
                       : "it has no job key, this rank has one");
        return LOOM_TCP_HELLO_BAD_KEY;
    }
    if (key->set && !loom_auth_verify(key, LOOM_TCP_AUTH_CTX, 'A', cc, ca, hello,
                                      LOOM_TCP_HELLO_LEN, m.body)) {
        snprintf(why, whylen, "could not prove the job key (the keys differ)");
        return LOOM_TCP_HELLO_BAD_KEY;
    }
    return LOOM_TCP_HELLO_OK;
}
