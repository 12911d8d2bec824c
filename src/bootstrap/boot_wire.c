/* boot_wire.c - bootstrap message codecs and checks (see boot_wire.h). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "bootstrap/boot_wire.h"
#include "net/net.h"

const struct loom_hs_proto loom_boot_hs = LOOM_HS_PROTO(
    "bootstrap", LOOM_BOOT_CTX, LOOM_BOOT_CHAL_MAGIC, LOOM_BOOT_HELLO_MAGIC, LOOM_BOOT_PROOF_MAGIC,
    LOOM_BOOT_VERSION, LOOM_BOOT_HELLO_LEN + LOOM_BOOT_ENTRY_MAX, NULL);

void loom_boot_hello_encode(const struct loom_boot_hello *h, uint8_t *out)
{
    loom_put_le32(out, h->rank);
    loom_put_le32(out + 4, h->nranks);
    loom_put_le64(out + 8, h->table_hash);
    if (h->entry_len)
        memcpy(out + LOOM_BOOT_HELLO_LEN, h->entry, h->entry_len);
}

int loom_boot_hello_decode(const uint8_t *in, size_t len, struct loom_boot_hello *h, char *why,
                           size_t whylen)
{
    if (len < LOOM_BOOT_HELLO_LEN) {
        snprintf(why, whylen, "a bootstrap hello of %zu bytes, at least %d expected", len,
                 LOOM_BOOT_HELLO_LEN);
        return -1;
    }
    h->rank = loom_get_le32(in);
    h->nranks = loom_get_le32(in + 4);
    h->table_hash = loom_get_le64(in + 8);
    h->entry = in + LOOM_BOOT_HELLO_LEN;
    h->entry_len = len - LOOM_BOOT_HELLO_LEN;
    return 0;
}
