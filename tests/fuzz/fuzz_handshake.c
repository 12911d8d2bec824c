/* fuzz_handshake.c - libFuzzer target: any bytes as the payload of a
 * handshake's hello once its key checked out (the handshake itself, key
 * checks included, is fuzz_net_handshake's): the bootstrap hello as rank 0
 * decodes it and the tcp hello as its acceptor checks it. Invariants: no
 * crash or overread (ASan), results are one of the documented values, every
 * refusal has a reason, and what is taken encodes back to the same bytes. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "bootstrap/boot_wire.h"
#include "net/handshake.h"
#include "net/net.h"
#include "transport/tcp/tcp_frame.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

static void why_ok(int rc, const char *why)
{
    fail_if(rc != 0 && why[0] == '\0');
}

/* A copy of exactly len bytes, so ASan sees any read past it. */
static uint8_t *copy(const uint8_t *data, size_t len)
{
    uint8_t *msg = malloc(len ? len : 1);
    fail_if(!msg);
    memcpy(msg, data, len);
    return msg;
}

/* Bootstrap: rank 0's view of a hello's payload. */
static void boot_root(const uint8_t *data, size_t size)
{
    size_t len = size < LOOM_BOOT_HELLO_LEN + 64 ? size : LOOM_BOOT_HELLO_LEN + 64;
    uint8_t *msg = copy(data, len);
    struct loom_boot_hello h;
    char why[300] = "";
    int rc = loom_boot_hello_decode(msg, len, &h, why, sizeof why);
    fail_if(rc != 0 && rc != -1);
    why_ok(rc, why);
    fail_if((rc == 0) != (len >= LOOM_BOOT_HELLO_LEN));
    if (rc == 0) {
        fail_if(h.entry != msg + LOOM_BOOT_HELLO_LEN || h.entry_len != len - LOOM_BOOT_HELLO_LEN);
        uint8_t *again = malloc(len);
        fail_if(!again);
        loom_boot_hello_encode(&h, again);
        fail_if(memcmp(again, msg, len) != 0);
        free(again);
    }
    free(msg);
}

/* tcp: the acceptor's check of a hello's payload. */
static void tcp_side(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    size_t len = size - 2 < 64 ? size - 2 : 64;
    uint8_t *msg = copy(data + 2, len);
    struct loom_tcp_hello_expect e = {.rank = data[0] & 7,
                                      .nranks = 8,
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
    if (size < 1)
        return 0;
    if (data[0] & 1)
        tcp_side(data + 1, size - 1);
    else
        boot_root(data + 1, size - 1);
    return 0;
}
