/* fuzz_oob.c - libFuzzer target for the out-of-band service's codec
 * (bootstrap/oob_wire.h), which parses what anyone sends to a job's
 * listening port: any bytes as a preamble, a hello payload and a message
 * header. Invariants: no crash or overread (ASan); every refusal has a
 * reason; what decodes re-encodes to the same bytes (padding aside); a
 * header that decodes is bounded; a hello that matches is for this rank of
 * this job. */
#include "build_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "bootstrap/oob.h"
#include "bootstrap/oob_wire.h"
#include "net/handshake.h"

static void fail_if(int cond)
{
    if (cond)
        abort();
}

static void preamble(const uint8_t *data, size_t size)
{
    if (size < LOOM_OOB_PREAMBLE_LEN)
        return;
    uint8_t in[LOOM_OOB_PREAMBLE_LEN], out[LOOM_OOB_PREAMBLE_LEN];
    memcpy(in, data, sizeof in);
    struct loom_oob_pre p;
    char why[200] = "";
    loom_result_t res = loom_oob_pre_decode(in, &p, why, sizeof why);
    fail_if(res != LOOM_SUCCESS && res != LOOM_ERROR_PROTOCOL);
    fail_if(res < 0 && why[0] == '\0');
    if (res < 0)
        return;
    fail_if(p.version != LOOM_OOB_VERSION);
    loom_oob_pre_encode(&p, out);
    fail_if(memcmp(in, out, sizeof in) != 0);
}

static void hello(const uint8_t *data, size_t size)
{
    if (size < 9)
        return;
    /* exactly the payload's bytes, so ASan sees a read past them */
    size_t len = size - 9;
    uint8_t *in = malloc(len ? len : 1);
    fail_if(!in);
    memcpy(in, data + 9, len);
    struct loom_oob_hello h;
    char why[200] = "";
    loom_result_t res = loom_oob_hello_decode(in, len, &h, why, sizeof why);
    fail_if(res != LOOM_SUCCESS && res != LOOM_ERROR_PROTOCOL);
    fail_if(res < 0 && why[0] == '\0');
    if (res == LOOM_SUCCESS) {
        fail_if(len != LOOM_OOB_HELLO_LEN || h.from >= h.nranks);
        uint8_t out[LOOM_OOB_HELLO_LEN];
        loom_oob_hello_encode(&h, out);
        fail_if(memcmp(in, out, sizeof out) != 0);
        int rank = data[0] % 8, nranks = 1 + data[1] % 8;
        uint64_t job;
        memcpy(&job, data + 1, sizeof job);
        job &= 3; /* 0: not known yet */
        why[0] = '\0';
        int rc = loom_oob_hello_match(&h, rank, nranks, job, why, sizeof why);
        fail_if(rc != LOOM_HS_ACCEPT && rc != LOOM_HS_HOLD && rc != LOOM_HS_DROP);
        fail_if(rc == LOOM_HS_DROP && why[0] == '\0');
        fail_if(rc == LOOM_HS_ACCEPT &&
                (h.to != (uint32_t)rank || h.nranks != (uint32_t)nranks || h.job_id != job));
        fail_if(rc == LOOM_HS_HOLD && job != 0);
    }
    free(in);
}

static void header(const uint8_t *data, size_t size)
{
    if (size < LOOM_OOB_HDR_LEN)
        return;
    uint8_t in[LOOM_OOB_HDR_LEN], out[LOOM_OOB_HDR_LEN];
    memcpy(in, data, sizeof in);
    struct loom_oob_hdr h;
    char why[200] = "";
    loom_result_t res = loom_oob_hdr_decode(in, &h, why, sizeof why);
    fail_if(res != LOOM_SUCCESS && res != LOOM_ERROR_PROTOCOL);
    fail_if(res < 0 && why[0] == '\0');
    if (res < 0)
        return;
    fail_if(h.len > LOOM_OOB_MSG_MAX);
    fail_if(h.kind != LOOM_OOB_KIND_MSG && h.kind != LOOM_OOB_KIND_GET);
    loom_oob_hdr_encode(&h, out);
    /* padding (bytes 1-3, 12-15) is not read */
    memset(in + 1, 0, 3);
    memset(in + 12, 0, 4);
    fail_if(memcmp(in, out, sizeof in) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: preamble(data + 1, size - 1); break;
    case 1: hello(data + 1, size - 1); break;
    default: header(data + 1, size - 1); break;
    }
    return 0;
}
