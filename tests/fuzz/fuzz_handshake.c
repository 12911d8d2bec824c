/* fuzz_handshake.c - libFuzzer target: any bytes as the peer's side of the
 * connection handshakes, through the pure parse/verify functions (no
 * sockets): the bootstrap hello as rank 0 reads it (head check, then key
 * check), the root's challenge and proof as a rank reads them, and the tcp
 * hello's payload. Invariants: no crash or overread
 * (ASan), results are one of the documented values, every refusal has a
 * reason, forged bytes never pass a key check, and a hello signed with the
 * right key always passes it. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "auth.h"
#include "bootstrap/boot_wire.h"
#include "net/handshake.h"
#include "net/net.h"
#include "transport/tcp/tcp_frame.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

static struct loom_auth_key key, none;
static const uint8_t ca[LOOM_AUTH_CHAL_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t cc[LOOM_AUTH_CHAL_LEN] = {9, 10, 11, 12};

static void why_ok(int rc, const char *why)
{
    fail_if(rc != 0 && why[0] == '\0');
}

/* Whether in is the acceptor's valid proof for hello: same magic and
 * version and mac as the real one, the key flag set (other flag bits are
 * ignored, but for tcp the refusal bit must be clear). */
static int proof_is(const struct loom_auth_key *k, const uint8_t *in,
                    const uint8_t *a, const uint8_t *c, const uint8_t *hello,
                    size_t hlen, int tcp)
{
    uint8_t real[LOOM_AUTH_MSG_LEN];
    (void)tcp;
    loom_boot_proof_make(k, a, c, hello, hlen, real);
    uint16_t flags = loom_get_le16(in + 6);
    return memcmp(real, in, 6) == 0 && (flags & LOOM_AUTH_FLAG_KEYED) &&
           memcmp(real + 8, in + 8, LOOM_AUTH_CHAL_LEN) == 0;
}

/* Bootstrap: rank 0's view of a hello. */
static void boot_root(const uint8_t *data, size_t size)
{
    if (size < LOOM_BOOT_HELLO_LEN)
        return;
    char why[300] = "";
    size_t need = 0;
    int rc = loom_boot_hello_head_check(data, 64, &need, why, sizeof why);
    fail_if(rc != LOOM_BOOT_OK && rc != LOOM_BOOT_DROP && rc != LOOM_BOOT_TOO_LONG);
    why_ok(rc, why);
    if (rc != LOOM_BOOT_OK)
        return;
    fail_if(need < LOOM_BOOT_HELLO_LEN + LOOM_BOOT_AUTH_LEN ||
            need > LOOM_BOOT_HELLO_LEN + 64 + LOOM_BOOT_AUTH_LEN);
    if (size < need)
        return;
    /* A copy of exactly need bytes, so ASan sees any read past it. */
    uint8_t *msg = malloc(need);
    fail_if(!msg);
    memcpy(msg, data, need);
    why[0] = '\0';
    rc = loom_boot_hello_auth_check(&key, ca, msg, need, why, sizeof why);
    fail_if(rc != LOOM_BOOT_OK && rc != LOOM_BOOT_BAD_KEY);
    why_ok(rc, why);
    /* Forging a 32-byte HMAC is out of reach: only a signed input passes. */
    uint8_t trailer[LOOM_BOOT_AUTH_LEN];
    size_t hlen = need - LOOM_BOOT_AUTH_LEN;
    loom_boot_hello_sign(&key, ca, msg + hlen, msg, hlen, trailer);
    int signed_ok = memcmp(trailer, msg + hlen, sizeof trailer) == 0 &&
                    (loom_get_le16(msg + 6) & LOOM_AUTH_FLAG_KEYED);
    fail_if((rc == LOOM_BOOT_OK) != signed_ok);
    /* Signed properly, it passes; without a key, only the flag counts. */
    loom_put_le16(msg + 6, LOOM_AUTH_FLAG_KEYED);
    loom_boot_hello_sign(&key, ca, msg + hlen, msg, hlen, msg + hlen);
    fail_if(loom_boot_hello_auth_check(&key, ca, msg, need, why, sizeof why) !=
            LOOM_BOOT_OK);
    fail_if(loom_boot_hello_auth_check(&none, ca, msg, need, why, sizeof why) !=
            LOOM_BOOT_BAD_KEY);
    /* The root's proof for it verifies on the rank. */
    uint8_t proof[LOOM_AUTH_MSG_LEN];
    fail_if(loom_boot_proof_make(&key, ca, msg + hlen, msg, hlen, proof) < 0);
    fail_if(loom_boot_proof_check(&key, proof, ca, msg + hlen, msg, hlen, why,
                                  sizeof why) != LOOM_BOOT_OK);
    free(msg);
}

/* Bootstrap: a rank's view of the root's challenge and proof. */
static void boot_peer(const uint8_t *data, size_t size)
{
    if (size < LOOM_AUTH_MSG_LEN)
        return;
    char why[300] = "";
    uint8_t got[LOOM_AUTH_CHAL_LEN];
    int rc = loom_boot_chal_check(data, got, why, sizeof why);
    fail_if(rc != LOOM_BOOT_OK && rc != LOOM_BOOT_DROP);
    why_ok(rc, why);
    const uint8_t *hello = data + LOOM_AUTH_MSG_LEN;
    size_t hlen = size - LOOM_AUTH_MSG_LEN;
    why[0] = '\0';
    rc = loom_boot_proof_check(&key, data, ca, cc, hello, hlen, why, sizeof why);
    fail_if(rc != LOOM_BOOT_OK && rc != LOOM_BOOT_DROP && rc != LOOM_BOOT_BAD_KEY);
    why_ok(rc, why);
    fail_if((rc == LOOM_BOOT_OK) != proof_is(&key, data, ca, cc, hello, hlen, 0));
    why[0] = '\0';
    rc = loom_boot_proof_check(&none, data, ca, cc, hello, hlen, why, sizeof why);
    why_ok(rc, why);
}

/* tcp: the acceptor's check of a hello's payload (the key is the
 * handshake's: fuzz_net_handshake). */
static void tcp_side(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    size_t len = size - 2 < 64 ? size - 2 : 64;
    uint8_t *msg = malloc(len ? len : 1);
    fail_if(!msg);
    memcpy(msg, data + 2, len);
    struct loom_tcp_hello_expect e = {.rank = data[0] & 7, .nranks = 8,
                                      .nsocks = 1 + (data[1] & 3),
                                      .comm_id = len >= 16 ? loom_get_le64(msg + 8) : 0};
    struct loom_tcp_hello h;
    char why[300] = "";
    int rc = loom_tcp_hello_check(&e, msg, len, &h, why, sizeof why);
    fail_if(rc != LOOM_HS_ACCEPT && rc != LOOM_HS_DROP);
    why_ok(rc, why);
    if (rc == LOOM_HS_ACCEPT) {
        fail_if(len != LOOM_TCP_HELLO_LEN);
        fail_if(h.from <= (uint32_t)e.rank || h.from >= 8 || h.to != (uint32_t)e.rank ||
                h.sock >= (uint32_t)e.nsocks);
        uint8_t again[LOOM_TCP_HELLO_LEN];
        loom_tcp_hello_encode(&h, again);
        fail_if(memcmp(again, msg, sizeof again) != 0);
    }
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!key.set)
        loom_auth_key_set(&key, "fuzz-job-key", 12);
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0:
        boot_root(data + 1, size - 1);
        break;
    case 1:
        boot_peer(data + 1, size - 1);
        break;
    default:
        tcp_side(data + 1, size - 1);
        break;
    }
    return 0;
}
