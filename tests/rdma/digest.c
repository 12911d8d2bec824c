/* digest.c - one rank of a job that prints a digest of every result, so
 * that two runs over different transports can be compared bit for bit
 * (tests/rdma/cases.sh: tcp against the transport under test).
 *
 * Inputs are random floats (and integers) from a seed, so that results
 * depend on the order of reduction: two runs agree bit for bit only when
 * they ran the same algorithm with the same chunking (force LOOM_ALGO and
 * LOOM_CHUNK_SIZE) and the transports moved every byte unchanged. Joins
 * through loom_comm_init_env (LOOM_RANK_TABLE / LOOM_RANK, or a launcher).
 *
 *   digest [-s SEED] [-c COUNT,COUNT,...]
 * prints on stdout, one line per call:
 *   DIGEST rank=R call=N kind=K dtype=T op=O|- count=C fnv=XXXXXXXXXXXXXXXX
 * and exits 0; on an error: "ERROR rank=R call=N: <message>" on stderr and
 * exit 2. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t fnv(const void *p, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h ^= ((const uint8_t *)p)[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Element i of rank r's input: a float in [-1, 1) with all its bits
 * random-ish (order-sensitive sums), or raw bits for integers. */
static void fill(void *buf, loom_dtype_t t, uint64_t count, uint64_t seed, int r)
{
    for (uint64_t i = 0; i < count; i++) {
        uint64_t x = mix(seed * 1000003ull + (uint64_t)r * 0x100000001b3ull + i);
        double d = (double)(x >> 11) * 0x1.0p-52 - 1.0;
        switch (t) {
        case LOOM_FLOAT32: ((float *)buf)[i] = (float)d; break;
        case LOOM_FLOAT64: ((double *)buf)[i] = d; break;
        case LOOM_BFLOAT16: {
            float f = (float)d;
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
            break;
        }
        default: ((uint64_t *)buf)[i] = x; break;
        }
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    uint64_t counts[16] = {1, 1000, 65537, 1048573, 4194301};
    int ncounts = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            ncounts = 0;
            for (char *s = strtok(argv[++i], ","); s && ncounts < 16; s = strtok(NULL, ","))
                counts[ncounts++] = strtoull(s, NULL, 10);
        } else {
            fprintf(stderr, "usage: %s [-s SEED] [-c COUNT,...]\n", argv[0]);
            return 1;
        }
    }
    loom_comm_t comm;
    loom_result_t res = loom_comm_init_env(&comm);
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "ERROR rank=? call=0: %s\n", loom_get_error_string(NULL));
        return 2;
    }
    int rank, n;
    loom_comm_rank(comm, &rank);
    loom_comm_size(comm, &n);
    const loom_dtype_t types[] = {LOOM_FLOAT32, LOOM_BFLOAT16, LOOM_FLOAT64, LOOM_UINT64};
    const char *tnames[] = {"f32", "bf16", "f64", "u64"};
    int call = 0;
    for (int ci = 0; ci < ncounts; ci++)
        for (int ti = 0; ti < 4; ti++) {
            uint64_t count = counts[ci];
            size_t esz = loom_dtype_size(types[ti]);
            uint8_t *in = malloc(count * esz * (size_t)n + 1);
            uint8_t *out = malloc(count * esz * (size_t)n + 1);
            if (!in || !out) {
                fprintf(stderr, "ERROR rank=%d call=%d: out of memory\n", rank, call);
                return 2;
            }
            for (int kind = 0; kind < 4; kind++) {
                const char *kname = "allreduce";
                size_t outbytes = count * esz;
                fill(in, types[ti], count * (size_t)n, seed + (uint64_t)call, rank);
                call++;
                switch (kind) {
                case 0:
                    res = loom_allreduce(in, out, count, types[ti], LOOM_SUM, comm, NULL);
                    break;
                case 1:
                    kname = "allgather";
                    outbytes = count * esz * (size_t)n;
                    res = loom_allgather(in, out, count, types[ti], comm, NULL);
                    break;
                case 2:
                    kname = "broadcast";
                    memcpy(out, in, count * esz);
                    res = loom_broadcast(out, count, types[ti], (call % n), comm, NULL);
                    break;
                default:
                    kname = "reduce_scatter";
                    res = loom_reduce_scatter(in, out, count, types[ti], LOOM_SUM, comm, NULL);
                    break;
                }
                if (res != LOOM_SUCCESS) {
                    fprintf(stderr, "ERROR rank=%d call=%d: %s\n", rank, call,
                            loom_get_error_string(comm));
                    return 2;
                }
                printf("DIGEST rank=%d call=%d kind=%s dtype=%s op=%s count=%" PRIu64
                       " fnv=%016" PRIx64 "\n", rank, call, kname, tnames[ti],
                       kind == 0 || kind == 3 ? "sum" : "-", count, fnv(out, outbytes));
            }
            free(in);
            free(out);
        }
    loom_comm_destroy(comm);
    return 0;
}
