/* fuzz_net_handshake.c - libFuzzer target for the handshake every Loom socket
 * opens with (net/handshake.h): any bytes as the peer's side, through the
 * pure decoders and through each side's state machine over a socketpair.
 * Invariants: no crash or overread (ASan); every failure is a documented
 * result with a message; a received payload is within the bound; with a key,
 * bytes nobody signed never complete a handshake. */
#include "build_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "auth.h"
#include "net/handshake.h"
#include "net/net.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

static int check_payload(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen)
{
    (void)arg;
    if (len && payload[0] == 'r') {
        snprintf(why, whylen, "refused by the fuzzer");
        return LOOM_ERROR_MISMATCH;
    }
    if (len && payload[0] == 'd') {
        snprintf(why, whylen, "dropped by the fuzzer");
        return LOOM_HS_DROP;
    }
    return LOOM_HS_ACCEPT;
}

static const struct loom_hs_proto proto = {.name = "fuzz",
                                           .ctx = "fuzz",
                                           .chal_magic = 0x4c484346u,
                                           .hello_magic = 0x4c454846u,
                                           .proof_magic = 0x46525046u,
                                           .version = 1,
                                           .payload_max = 256,
                                           .check = check_payload};

static struct loom_auth_key key, none;

static int documented(int rc)
{
    return rc == LOOM_ERROR_PROTOCOL || rc == LOOM_ERROR_MISMATCH || rc == LOOM_ERROR_REMOTE ||
           rc == LOOM_ERROR_TIMEOUT || rc == LOOM_ERROR_SYSTEM ||
           (rc <= LOOM_ERROR_INVALID_ARGUMENT && rc >= LOOM_ERROR_REVOKED);
}

static void decoders(const uint8_t *data, size_t size, const struct loom_auth_key *k)
{
    char why[300] = "";
    uint8_t ca[LOOM_AUTH_CHAL_LEN] = {7};
    uint8_t cc[LOOM_AUTH_CHAL_LEN] = {9};
    if (size >= LOOM_AUTH_MSG_LEN) {
        uint8_t got[LOOM_AUTH_CHAL_LEN];
        loom_result_t res = loom_hs_chal_check(&proto, k, data, got, why, sizeof why);
        fail_if(res < 0 && why[0] == '\0');
    }
    if (size < LOOM_HS_HEAD_LEN)
        return;
    size_t need = 0;
    why[0] = '\0';
    loom_result_t res = loom_hs_head_check(&proto, data, &need, why, sizeof why);
    fail_if(res < 0 && why[0] == '\0');
    if (res < 0 || size < need)
        return;
    fail_if(need > LOOM_HS_HEAD_LEN + proto.payload_max + LOOM_HS_TRAILER_LEN);
    /* exactly need bytes, so ASan sees a read past them */
    uint8_t *msg = malloc(need);
    fail_if(!msg);
    memcpy(msg, data, need);
    why[0] = '\0';
    res = loom_hs_hello_verify(&proto, k, ca, msg, need, why, sizeof why);
    fail_if(res < 0 && why[0] == '\0');
    if (k->set) {
        /* only what was signed with the key passes */
        uint8_t *real = malloc(need);
        fail_if(!real);
        fail_if(loom_hs_hello_make(&proto, k, ca, msg + need - LOOM_HS_TRAILER_LEN,
                                   msg + LOOM_HS_HEAD_LEN,
                                   need - LOOM_HS_HEAD_LEN - LOOM_HS_TRAILER_LEN, real) < 0);
        int same = memcmp(real, msg, 4) == 0 && memcmp(real + 8, msg + 8, need - 8) == 0 &&
                   (loom_get_le16(msg + 6) & LOOM_AUTH_FLAG_KEYED) &&
                   loom_get_le16(msg + 4) == proto.version;
        fail_if((res == LOOM_SUCCESS) != same);
        free(real);
    }
    /* the rest as the proof for this hello */
    if (size >= need + LOOM_AUTH_MSG_LEN + 4) {
        why[0] = '\0';
        int rc = loom_hs_proof_check(&proto, k, data + need, ca, cc, msg, need, why, sizeof why);
        fail_if(rc < 0 && why[0] == '\0');
        if (rc == LOOM_HS_REFUSED) {
            size_t n;
            res = loom_hs_reason_head(data + need + LOOM_AUTH_MSG_LEN, &n);
            fail_if(res >= 0 || n > LOOM_HS_REASON_MAX);
            char text[LOOM_HS_REASON_MAX + 1];
            size_t have = size - need - LOOM_AUTH_MSG_LEN - 4;
            loom_hs_reason_text(data + need + LOOM_AUTH_MSG_LEN + 4, n < have ? n : have, text,
                                sizeof text);
        }
    }
    free(msg);
}

/* One side's state machine with data as everything the peer sends. */
static void machine(const uint8_t *data, size_t size, const struct loom_auth_key *k, int accept)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return;
    loom_net_set_nonblock(sv[0]);
    loom_net_set_nonblock(sv[1]);
    if (size && write(sv[0], data, size) != (ssize_t)size) {
        close(sv[0]);
        close(sv[1]);
        return;
    }
    shutdown(sv[0], SHUT_WR);
    struct loom_hs hs;
    loom_result_t res = accept ? loom_hs_accept(&hs, &proto, k, sv[1], "the fuzzer", NULL, 5.0)
                               : loom_hs_connect(&hs, &proto, k, sv[1], "the fuzzer", "p", 1, 5.0);
    fail_if(res != LOOM_SUCCESS);
    int rc = LOOM_HS_AGAIN;
    for (int i = 0; i < 16 && rc == LOOM_HS_AGAIN; i++)
        rc = loom_hs_step(&hs);
    if (rc < 0)
        fail_if(!documented(rc) || hs.err[0] == '\0');
    if (rc == LOOM_HS_DONE && accept) {
        size_t len;
        loom_hs_payload(&hs, &len);
        fail_if(len > proto.payload_max);
        fail_if(k->set); /* the fuzzer cannot sign with a challenge it never saw */
    }
    if (rc == LOOM_HS_DONE && !accept)
        fail_if(k->set); /* nor prove the key for a challenge it never saw */
    loom_hs_free(&hs);
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!key.set)
        loom_auth_key_set(&key, "fuzz-job-key", 12);
    if (size < 1)
        return 0;
    const struct loom_auth_key *k = (data[0] & 4) ? &key : &none;
    switch (data[0] % 3) {
    case 0: decoders(data + 1, size - 1, k); break;
    case 1: machine(data + 1, size - 1, k, 1); break;
    default: machine(data + 1, size - 1, k, 0); break;
    }
    return 0;
}
