/* handshake.c - the signed hello of every Loom socket (handshake.h). */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "loom.h"
#include "auth.h"
#include "util.h"
#include "wire.h"
#include "net/handshake.h"
#include "net/net.h"

enum {
    HS_C_CHAL_IN,
    HS_C_HELLO_OUT,
    HS_C_PROOF_IN,
    HS_C_REASON_HEAD_IN,
    HS_C_REASON_IN,
    HS_A_CHAL_OUT,
    HS_A_HEAD_IN,
    HS_A_REST_IN,
    HS_A_CHECK,
    HS_A_PROOF_OUT,
    HS_A_REFUSE_OUT,
    HS_DONE,
    HS_FAILED
};

static const uint8_t zero_mac[LOOM_AUTH_MAC_LEN];

static uint16_t key_flag(const struct loom_auth_key *key)
{
    return key->set ? LOOM_AUTH_FLAG_KEYED : 0;
}

/* "it has a job key, this side has none" and the reverse. */
static loom_result_t key_flag_check(int theirs, const struct loom_auth_key *key, char *why,
                                    size_t whylen)
{
    if (theirs == key->set)
        return LOOM_SUCCESS;
    snprintf(why, whylen, "job key does not match (%s)",
             theirs ? "it has a job key, this side has none"
                    : "it has no job key, this side has one");
    return LOOM_ERROR_MISMATCH;
}

/* ---- pure codecs --------------------------------------------------------- */

void loom_hs_chal_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                       const uint8_t ca[LOOM_AUTH_CHAL_LEN], uint8_t out[LOOM_AUTH_MSG_LEN])
{
    loom_auth_msg_encode(out, p->chal_magic, p->version, key_flag(key), ca);
}

/* Magic and version of a 40-byte auth message the connector reads. */
static loom_result_t msg_head_check(const struct loom_hs_proto *p, const struct loom_auth_msg *m,
                                    uint32_t magic, const char *what, char *why, size_t whylen)
{
    if (m->magic != magic) {
        snprintf(why, whylen,
                 "not a Loom %s socket (sent magic 0x%08x where its %s "
                 "was expected)",
                 p->name, (unsigned)m->magic, what);
        return LOOM_ERROR_PROTOCOL;
    }
    if (m->version != p->version) {
        snprintf(why, whylen, "speaks %s protocol version %u, this side %u", p->name, m->version,
                 p->version);
        return LOOM_ERROR_PROTOCOL;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_hs_chal_check(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                 const uint8_t in[LOOM_AUTH_MSG_LEN],
                                 uint8_t ca[LOOM_AUTH_CHAL_LEN], char *why, size_t whylen)
{
    struct loom_auth_msg m;
    loom_auth_msg_decode(in, &m);
    loom_result_t res = msg_head_check(p, &m, p->chal_magic, "challenge", why, whylen);
    if (res < 0)
        return res;
    res = key_flag_check((m.flags & LOOM_AUTH_FLAG_KEYED) != 0, key, why, whylen);
    if (res < 0)
        return res;
    memcpy(ca, m.body, LOOM_AUTH_CHAL_LEN);
    return LOOM_SUCCESS;
}

loom_result_t loom_hs_head_check(const struct loom_hs_proto *p, const uint8_t in[LOOM_HS_HEAD_LEN],
                                 size_t *need, char *why, size_t whylen)
{
    uint32_t magic = loom_get_le32(in), len = loom_get_le32(in + 8);
    uint16_t version = loom_get_le16(in + 4);
    if (magic != p->hello_magic) {
        snprintf(why, whylen, "not a Loom %s socket (hello magic 0x%08x)", p->name,
                 (unsigned)magic);
        return LOOM_ERROR_PROTOCOL;
    }
    if (version != p->version) {
        snprintf(why, whylen, "speaks %s protocol version %u, this side %u", p->name, version,
                 p->version);
        return LOOM_ERROR_PROTOCOL;
    }
    uint32_t max = p->payload_max < LOOM_HS_PAYLOAD_MAX ? p->payload_max : LOOM_HS_PAYLOAD_MAX;
    if (len > max) {
        snprintf(why, whylen, "%s hello of %u bytes exceeds the limit of %u", p->name,
                 (unsigned)len, (unsigned)max);
        return LOOM_ERROR_PROTOCOL;
    }
    *need = LOOM_HS_HEAD_LEN + (size_t)len + LOOM_HS_TRAILER_LEN;
    return LOOM_SUCCESS;
}

loom_result_t loom_hs_hello_verify(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                   const uint8_t ca[LOOM_AUTH_CHAL_LEN], const uint8_t *msg,
                                   size_t len, char *why, size_t whylen)
{
    if (len < LOOM_HS_HEAD_LEN + LOOM_HS_TRAILER_LEN ||
        len != LOOM_HS_HEAD_LEN + (size_t)loom_get_le32(msg + 8) + LOOM_HS_TRAILER_LEN) {
        snprintf(why, whylen, "%s hello of %zu bytes does not match its length field", p->name,
                 len);
        return LOOM_ERROR_PROTOCOL;
    }
    loom_result_t res = key_flag_check((loom_get_le16(msg + 6) & LOOM_AUTH_FLAG_KEYED) != 0, key,
                                       why, whylen);
    if (res < 0)
        return res;
    size_t hlen = len - LOOM_HS_TRAILER_LEN;
    const uint8_t *cc = msg + hlen, *mac = cc + LOOM_AUTH_CHAL_LEN;
    if (key->set && !loom_auth_verify(key, p->ctx, 'C', ca, cc, msg, hlen, mac)) {
        snprintf(why, whylen, "job key does not match (another job, or another key)");
        return LOOM_ERROR_MISMATCH;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_hs_hello_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                 const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                                 const uint8_t cc[LOOM_AUTH_CHAL_LEN], const void *payload,
                                 size_t len, uint8_t *out)
{
    loom_put_le32(out, p->hello_magic);
    loom_put_le16(out + 4, p->version);
    loom_put_le16(out + 6, key_flag(key));
    loom_put_le32(out + 8, (uint32_t)len);
    if (len)
        memcpy(out + LOOM_HS_HEAD_LEN, payload, len);
    size_t hlen = LOOM_HS_HEAD_LEN + len;
    memcpy(out + hlen, cc, LOOM_AUTH_CHAL_LEN);
    uint8_t *mac = out + hlen + LOOM_AUTH_CHAL_LEN;
    memcpy(mac, zero_mac, LOOM_AUTH_MAC_LEN);
    if (!key->set)
        return LOOM_SUCCESS;
    return loom_auth_mac(key, p->ctx, 'C', ca, cc, out, hlen, mac);
}

loom_result_t loom_hs_proof_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                                 const uint8_t ca[LOOM_AUTH_CHAL_LEN], const uint8_t *msg,
                                 size_t len, uint8_t out[LOOM_AUTH_MSG_LEN])
{
    uint8_t mac[LOOM_AUTH_MAC_LEN];
    memcpy(mac, zero_mac, sizeof mac);
    if (key->set) {
        size_t hlen = len - LOOM_HS_TRAILER_LEN;
        loom_result_t res = loom_auth_mac(key, p->ctx, 'A', msg + hlen, ca, msg, hlen, mac);
        if (res < 0)
            return res;
    }
    loom_auth_msg_encode(out, p->proof_magic, p->version, key_flag(key), mac);
    return LOOM_SUCCESS;
}

size_t loom_hs_refusal_make(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                            loom_result_t code, const char *reason, uint8_t *out)
{
    loom_auth_msg_encode(out, p->proof_magic, p->version,
                         (uint16_t)(key_flag(key) | LOOM_HS_FLAG_REFUSED), zero_mac);
    size_t n = strlen(reason);
    if (n > LOOM_HS_REASON_MAX)
        n = LOOM_HS_REASON_MAX;
    loom_put_le16(out + LOOM_AUTH_MSG_LEN, (uint16_t)(code < 0 ? -code : 0));
    loom_put_le16(out + LOOM_AUTH_MSG_LEN + 2, (uint16_t)n);
    memcpy(out + LOOM_AUTH_MSG_LEN + 4, reason, n);
    return LOOM_AUTH_MSG_LEN + 4 + n;
}

int loom_hs_proof_check(const struct loom_hs_proto *p, const struct loom_auth_key *key,
                        const uint8_t in[LOOM_AUTH_MSG_LEN], const uint8_t ca[LOOM_AUTH_CHAL_LEN],
                        const uint8_t cc[LOOM_AUTH_CHAL_LEN], const uint8_t *msg, size_t len,
                        char *why, size_t whylen)
{
    struct loom_auth_msg m;
    loom_auth_msg_decode(in, &m);
    loom_result_t res = msg_head_check(p, &m, p->proof_magic, "proof", why, whylen);
    if (res < 0)
        return res;
    if (m.flags & LOOM_HS_FLAG_REFUSED)
        return LOOM_HS_REFUSED;
    res = key_flag_check((m.flags & LOOM_AUTH_FLAG_KEYED) != 0, key, why, whylen);
    if (res < 0)
        return res;
    if (len < LOOM_HS_TRAILER_LEN)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (key->set &&
        !loom_auth_verify(key, p->ctx, 'A', cc, ca, msg, len - LOOM_HS_TRAILER_LEN, m.body)) {
        snprintf(why, whylen, "could not prove the job key (the keys differ)");
        return LOOM_ERROR_MISMATCH;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_hs_reason_head(const uint8_t in[4], size_t *n)
{
    unsigned code = loom_get_le16(in);
    *n = loom_get_le16(in + 2);
    if (*n > LOOM_HS_REASON_MAX)
        *n = LOOM_HS_REASON_MAX;
    if (code == 0 || code > -(int)LOOM_ERROR_REVOKED)
        return LOOM_ERROR_PROTOCOL;
    return -(loom_result_t)code;
}

void loom_hs_reason_text(const uint8_t *in, size_t n, char *out, size_t outlen)
{
    if (!outlen)
        return;
    size_t i = 0;
    for (; i < n && i + 1 < outlen; i++)
        out[i] = (in[i] >= 0x20 && in[i] < 0x7f) ? (char)in[i] : '?';
    out[i] = '\0';
}

/* ---- the state machine --------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int fail(struct loom_hs *hs, loom_result_t code,
                                                      const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int n = snprintf(hs->err, sizeof hs->err, "%s handshake with %s: ", hs->proto->name, hs->peer);
    hs->why_off = n > 0 && (size_t)n < sizeof hs->err ? (size_t)n : 0;
    snprintf(hs->err + hs->why_off, sizeof hs->err - hs->why_off, "%s", what);
    hs->state = HS_FAILED;
    hs->code = code;
    hs->events = 0;
    return code;
}

static const char *waiting_for(int state)
{
    switch (state) {
    case HS_C_CHAL_IN: return "its challenge";
    case HS_C_HELLO_OUT: return "room to send the hello";
    case HS_C_PROOF_IN: return "its proof of the job key";
    case HS_C_REASON_HEAD_IN:
    case HS_C_REASON_IN: return "the reason of its refusal";
    case HS_A_CHAL_OUT: return "room to send the challenge";
    case HS_A_HEAD_IN:
    case HS_A_REST_IN: return "its hello";
    case HS_A_CHECK: return "this side to know whether to accept its hello";
    default: return "room to send the proof";
    }
}

static void init_common(struct loom_hs *hs, const struct loom_hs_proto *proto,
                        const struct loom_auth_key *key, int fd, const char *peer, double timeout)
{
    memset(hs, 0, sizeof *hs);
    hs->proto = proto;
    hs->key = key;
    hs->fd = fd;
    hs->started = loom_now();
    hs->deadline = hs->started + timeout;
    if (peer) {
        snprintf(hs->peer, sizeof hs->peer, "%s", peer);
    } else {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
            loom_net_format((struct sockaddr *)&ss, hs->peer, sizeof hs->peer);
        else
            snprintf(hs->peer, sizeof hs->peer, "an unconnected socket");
    }
}

loom_result_t loom_hs_connect(struct loom_hs *hs, const struct loom_hs_proto *proto,
                              const struct loom_auth_key *key, int fd, const char *peer,
                              const void *payload, size_t len, double timeout)
{
    init_common(hs, proto, key, fd, peer, timeout);
    if (len > proto->payload_max || len > LOOM_HS_PAYLOAD_MAX)
        return fail(hs, LOOM_ERROR_INVALID_ARGUMENT,
                    "payload of %zu bytes exceeds "
                    "the limit of %u",
                    len, (unsigned)proto->payload_max);
    hs->msg_len = LOOM_HS_HEAD_LEN + len + LOOM_HS_TRAILER_LEN;
    hs->msg = malloc(hs->msg_len);
    if (!hs->msg)
        return fail(hs, LOOM_ERROR_NO_MEMORY, "out of memory");
    if (len)
        memcpy(hs->msg + LOOM_HS_HEAD_LEN, payload, len);
    loom_put_le32(hs->msg + 8, (uint32_t)len);
    hs->state = HS_C_CHAL_IN;
    hs->io_len = LOOM_AUTH_MSG_LEN;
    hs->events = POLLIN;
    return LOOM_SUCCESS;
}

loom_result_t loom_hs_accept(struct loom_hs *hs, const struct loom_hs_proto *proto,
                             const struct loom_auth_key *key, int fd, const char *peer, void *arg,
                             double timeout)
{
    init_common(hs, proto, key, fd, peer, timeout);
    hs->accept = 1;
    hs->arg = arg;
    if (loom_auth_challenge(hs->ca) < 0)
        return fail(hs, LOOM_ERROR_SYSTEM, "no randomness for a challenge");
    loom_hs_chal_make(proto, key, hs->ca, hs->io);
    hs->state = HS_A_CHAL_OUT;
    hs->io_len = LOOM_AUTH_MSG_LEN;
    hs->events = POLLOUT;
    return LOOM_SUCCESS;
}

/* Send the hello (connector) or io, from done to io_len: 1 all sent, 0
 * would block, <0 failed. */
static int send_some(struct loom_hs *hs)
{
    const uint8_t *out = hs->state == HS_C_HELLO_OUT ? hs->msg : hs->io;
    while (hs->done < hs->io_len) {
        ssize_t n = send(hs->fd, out + hs->done, hs->io_len - hs->done, MSG_NOSIGNAL);
        if (n > 0) {
            hs->done += (size_t)n;
            hs->sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            hs->events = POLLOUT;
            return 0;
        }
        int e = errno;
        return fail(hs, (e == EPIPE || e == ECONNRESET) ? LOOM_ERROR_REMOTE : LOOM_ERROR_SYSTEM,
                    "could not send (%s), waiting for %s", strerror(e), waiting_for(hs->state));
    }
    hs->done = 0;
    return 1;
}

/* Read into buf[done..want]: 1 complete, 0 would block, <0 failed. */
static int recv_some(struct loom_hs *hs, uint8_t *buf, size_t want)
{
    while (hs->done < want) {
        ssize_t n = recv(hs->fd, buf + hs->done, want - hs->done, 0);
        if (n > 0) {
            hs->done += (size_t)n;
            hs->received += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            hs->events = POLLIN;
            return 0;
        }
        if (n == 0)
            return fail(hs, LOOM_ERROR_REMOTE,
                        "closed the connection while this side "
                        "waited for %s (%zu of %zu bytes)",
                        waiting_for(hs->state), hs->done, want);
        int e = errno;
        return fail(hs, e == ECONNRESET ? LOOM_ERROR_REMOTE : LOOM_ERROR_SYSTEM,
                    "%s while this side waited for %s", strerror(e), waiting_for(hs->state));
    }
    hs->done = 0;
    return 1;
}

static int step_accept(struct loom_hs *hs);

/* Accept side: the hello is refused; send why, then fail with code. */
static int refuse(struct loom_hs *hs, loom_result_t code, const char *why)
{
    hs->code = code;
    int n = snprintf(hs->err, sizeof hs->err,
                     "%s handshake with %s: refused its hello: ", hs->proto->name, hs->peer);
    hs->why_off = n > 0 && (size_t)n < sizeof hs->err ? (size_t)n : 0;
    snprintf(hs->err + hs->why_off, sizeof hs->err - hs->why_off, "%s", why);
    hs->io_len = loom_hs_refusal_make(hs->proto, hs->key, code, why, hs->io);
    hs->done = 0;
    hs->state = HS_A_REFUSE_OUT;
    return step_accept(hs);
}

static int step_accept(struct loom_hs *hs)
{
    char why[300] = "";
    int rc;
    switch (hs->state) {
    case HS_A_CHAL_OUT:
        if ((rc = send_some(hs)) <= 0)
            return rc;
        hs->state = HS_A_HEAD_IN;
        hs->io_len = LOOM_HS_HEAD_LEN;
        /* fall through */
    case HS_A_HEAD_IN: {
        if ((rc = recv_some(hs, hs->io, LOOM_HS_HEAD_LEN)) <= 0)
            return rc;
        size_t need = 0;
        loom_result_t res = loom_hs_head_check(hs->proto, hs->io, &need, why, sizeof why);
        if (res < 0) {
            /* speak only to a Loom peer of this protocol */
            if (loom_get_le32(hs->io) != hs->proto->hello_magic)
                return fail(hs, res, "%s", why);
            return refuse(hs, res, why);
        }
        hs->msg = malloc(need);
        if (!hs->msg)
            return fail(hs, LOOM_ERROR_NO_MEMORY, "out of memory for its hello");
        memcpy(hs->msg, hs->io, LOOM_HS_HEAD_LEN);
        hs->msg_len = need;
        hs->done = LOOM_HS_HEAD_LEN;
        hs->state = HS_A_REST_IN;
    }
        /* fall through */
    case HS_A_REST_IN: {
        if ((rc = recv_some(hs, hs->msg, hs->msg_len)) <= 0)
            return rc;
        loom_result_t res = loom_hs_hello_verify(hs->proto, hs->key, hs->ca, hs->msg, hs->msg_len,
                                                 why, sizeof why);
        if (res < 0)
            return refuse(hs, res, why);
        hs->state = HS_A_CHECK;
    }
        /* fall through */
    case HS_A_CHECK: {
        size_t len;
        const uint8_t *payload = loom_hs_payload(hs, &len);
        rc = hs->proto->check ? hs->proto->check(hs->arg, payload, len, why, sizeof why)
                              : LOOM_HS_ACCEPT;
        if (rc == LOOM_HS_HOLD) {
            hs->events = 0;
            return LOOM_HS_AGAIN;
        }
        if (rc == LOOM_HS_DROP)
            return fail(hs, LOOM_ERROR_PROTOCOL, "dropped: %s", why);
        if (rc < 0)
            return refuse(hs, rc, why);
        if (loom_hs_proof_make(hs->proto, hs->key, hs->ca, hs->msg, hs->msg_len, hs->io) < 0)
            return fail(hs, LOOM_ERROR_INTERNAL, "could not compute the proof");
        hs->io_len = LOOM_AUTH_MSG_LEN;
        hs->done = 0;
        hs->state = HS_A_PROOF_OUT;
    }
        /* fall through */
    case HS_A_PROOF_OUT:
        if ((rc = send_some(hs)) <= 0)
            return rc;
        hs->state = HS_DONE;
        hs->events = 0;
        return LOOM_HS_DONE;
    case HS_A_REFUSE_OUT: {
        char err[sizeof hs->err];
        memcpy(err, hs->err, sizeof err);
        size_t why_off = hs->why_off;
        loom_result_t code = hs->code;
        if ((rc = send_some(hs)) == 0)
            return rc;
        /* sent or not, the refusal is what failed */
        memcpy(hs->err, err, sizeof err);
        hs->why_off = why_off;
        hs->state = HS_FAILED;
        hs->code = code;
        hs->events = 0;
        return code;
    }
    }
    return fail(hs, LOOM_ERROR_INTERNAL, "stepped in state %d", hs->state);
}

static int step_connect(struct loom_hs *hs)
{
    char why[300] = "";
    int rc;
    switch (hs->state) {
    case HS_C_CHAL_IN: {
        if ((rc = recv_some(hs, hs->io, LOOM_AUTH_MSG_LEN)) <= 0)
            return rc;
        loom_result_t res = loom_hs_chal_check(hs->proto, hs->key, hs->io, hs->ca, why, sizeof why);
        if (res < 0)
            return fail(hs, res, "%s", why);
        size_t len = loom_get_le32(hs->msg + 8);
        if (loom_auth_challenge(hs->cc) < 0 ||
            loom_hs_hello_make(hs->proto, hs->key, hs->ca, hs->cc, hs->msg + LOOM_HS_HEAD_LEN, len,
                               hs->msg) < 0)
            return fail(hs, LOOM_ERROR_INTERNAL, "could not sign the hello");
        hs->io_len = hs->msg_len;
        hs->state = HS_C_HELLO_OUT;
    }
        /* fall through */
    case HS_C_HELLO_OUT:
        if ((rc = send_some(hs)) <= 0)
            return rc;
        hs->state = HS_C_PROOF_IN;
        hs->io_len = LOOM_AUTH_MSG_LEN;
        /* fall through */
    case HS_C_PROOF_IN:
        if ((rc = recv_some(hs, hs->io, LOOM_AUTH_MSG_LEN)) <= 0)
            return rc;
        rc = loom_hs_proof_check(hs->proto, hs->key, hs->io, hs->ca, hs->cc, hs->msg, hs->msg_len,
                                 why, sizeof why);
        if (rc < 0)
            return fail(hs, rc, "%s", why);
        if (rc == LOOM_SUCCESS) {
            hs->state = HS_DONE;
            hs->events = 0;
            return LOOM_HS_DONE;
        }
        hs->state = HS_C_REASON_HEAD_IN;
        hs->io_len = 4;
        /* fall through */
    case HS_C_REASON_HEAD_IN:
        if ((rc = recv_some(hs, hs->io, 4)) <= 0)
            return rc;
        hs->code = loom_hs_reason_head(hs->io, &hs->io_len);
        hs->state = HS_C_REASON_IN;
        /* fall through */
    case HS_C_REASON_IN: {
        if (hs->io_len && (rc = recv_some(hs, hs->io + 4, hs->io_len)) <= 0)
            return rc;
        char text[LOOM_HS_REASON_MAX + 1];
        loom_hs_reason_text(hs->io + 4, hs->io_len, text, sizeof text);
        fail(hs, hs->code, "it refused this side's hello: %s", text);
        hs->why_off += strlen("it refused this side's hello: ");
        return hs->code;
    }
    }
    return fail(hs, LOOM_ERROR_INTERNAL, "stepped in state %d", hs->state);
}

int loom_hs_step(struct loom_hs *hs)
{
    if (hs->state == HS_DONE)
        return LOOM_HS_DONE;
    if (hs->state == HS_FAILED)
        return hs->code;
    int rc = hs->accept ? step_accept(hs) : step_connect(hs);
    if (rc == LOOM_HS_AGAIN && loom_now() >= hs->deadline) {
        size_t want = hs->msg && (hs->state == HS_A_REST_IN) ? hs->msg_len : hs->io_len;
        return fail(hs, LOOM_ERROR_TIMEOUT,
                    "timed out after %.1f s waiting for %s "
                    "(%zu of %zu bytes)",
                    hs->deadline - hs->started, waiting_for(hs->state), hs->done, want);
    }
    return rc;
}

loom_result_t loom_hs_run(struct loom_hs *hs, int wake_fd)
{
    for (;;) {
        int rc = loom_hs_step(hs);
        if (rc == LOOM_HS_DONE)
            return LOOM_SUCCESS;
        if (rc < 0)
            return rc;
        double left = hs->deadline - loom_now();
        struct pollfd pf[2] = {{.fd = hs->events ? hs->fd : -1, .events = hs->events},
                               {.fd = wake_fd, .events = POLLIN}};
        int ms = left > 0 ? (int)(left * 1000.0) + 1 : 0;
        if (!hs->events && ms > 10)
            ms = 10; /* held by the payload check: ask it again soon */
        int n = poll(pf, 2, ms);
        if (n < 0 && errno != EINTR)
            return fail(hs, LOOM_ERROR_SYSTEM, "poll: %s", strerror(errno));
        if (n > 0 && (pf[1].revents & POLLIN))
            return fail(hs, LOOM_ERROR_ABORTED, "aborted while waiting for %s",
                        waiting_for(hs->state));
    }
}

const char *loom_hs_why(const struct loom_hs *hs)
{
    return hs->err + (hs->why_off < sizeof hs->err ? hs->why_off : 0);
}

const char *loom_hs_blame(const struct loom_hs *hs, char *buf, size_t len)
{
    if (hs->code == LOOM_ERROR_MISMATCH && !hs->accept)
        snprintf(buf, len,
                 "rejected this rank's job key: %s (LOOM_JOB_KEY / "
                 "LOOM_JOB_KEY_FILE must be the same on every rank)",
                 loom_hs_why(hs));
    else
        snprintf(buf, len, "failed the %s handshake: %s", hs->proto->name, loom_hs_why(hs));
    return buf;
}

int loom_hs_hello_sent(const struct loom_hs *hs)
{
    return !hs->accept && (hs->state == HS_C_PROOF_IN || hs->state == HS_C_REASON_HEAD_IN ||
                           hs->state == HS_C_REASON_IN || hs->state == HS_DONE);
}

const uint8_t *loom_hs_payload(const struct loom_hs *hs, size_t *len)
{
    if (!hs->msg || hs->msg_len < LOOM_HS_HEAD_LEN + LOOM_HS_TRAILER_LEN) {
        *len = 0;
        return NULL;
    }
    *len = hs->msg_len - LOOM_HS_HEAD_LEN - LOOM_HS_TRAILER_LEN;
    return hs->msg + LOOM_HS_HEAD_LEN;
}

void loom_hs_free(struct loom_hs *hs)
{
    free(hs->msg);
    hs->msg = NULL;
    hs->msg_len = 0;
}
