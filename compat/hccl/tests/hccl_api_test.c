/* hccl_api_test.c - one rank of a job written against HCCL's documented C
 * API only: it includes <hccl/hccl.h> and <hccl/hccl_types.h> and the C
 * library, nothing of Loom, and is built with nothing but the include
 * folder that `pkg-config --cflags loom-hccl` names.
 *
 * As HCCL's samples do, it takes the rank table from RANK_TABLE_FILE and
 * its rank from RANK_ID (RANK_SIZE, DEVICE_ID are checked by the library),
 * or, with -r FILE, joins through HcclGetRootInfo (rank 0 writes the root
 * info to FILE, the others read it) and HcclCommInitRootInfo.
 *
 * It runs every collective (allreduce and reduce for every type Loom
 * reduces and every op, reduce-scatter, allgather and broadcast, also of
 * types Loom only moves), send and recv around a ring, the rank and size
 * queries, barrier, the async
 * error query, the error strings, the errors for a type Loom does not
 * reduce and an unknown op, and destroy; each rank checks every element
 * against a reference it computes itself. Exit 0 and one line
 * "hccl_api_test rank R of N: ok (C checks)", else the first failure and
 * exit 1 (wrong data) or 2 (a call failed). */
#include <hccl/hccl.h>
#include <hccl/hccl_types.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint32_t g_rank, g_size;
static unsigned long g_checks;

#define CHECK(call)                                                           \
    do {                                                                      \
        HcclResult r_ = (call);                                               \
        if (r_ != HCCL_SUCCESS) {                                             \
            fprintf(stderr, "rank %u: %s failed: %s (%d), line %d\n", g_rank, \
                    #call, HcclGetErrorString(r_), (int)r_, __LINE__);        \
            exit(2);                                                          \
        }                                                                     \
    } while (0)

static void wrong(const char *what, HcclDataType dt, int op, uint64_t i,
                  double got, double want)
{
    fprintf(stderr, "rank %u: %s dtype %d op %d element %llu: got %g, want "
                    "%g\n",
            g_rank, what, (int)dt, op, (unsigned long long)i, got, want);
    exit(1);
}

/* ---- elements: every type as a double, exact for the small integers used */

static size_t type_size(HcclDataType dt)
{
    switch (dt) {
    case HCCL_DATA_TYPE_INT8: case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16: case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16: case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32: case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32: return 4;
    default: return 8;
    }
}

static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if ((x & 0x7fffffff) == 0)
        return sign;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (exp << 10) | ((x & 0x7fffff) >> 13));
}

static float from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff, x = sign;
    if (exp || mant)
        x |= ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void put(void *buf, HcclDataType dt, uint64_t i, double v)
{
    char *p = (char *)buf + i * type_size(dt);
    float f = (float)v;
    uint32_t u32;
    uint16_t u16;
    switch (dt) {
    case HCCL_DATA_TYPE_INT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case HCCL_DATA_TYPE_UINT8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case HCCL_DATA_TYPE_INT16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case HCCL_DATA_TYPE_UINT16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case HCCL_DATA_TYPE_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case HCCL_DATA_TYPE_UINT32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case HCCL_DATA_TYPE_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case HCCL_DATA_TYPE_UINT64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case HCCL_DATA_TYPE_FP32: memcpy(p, &f, 4); break;
    case HCCL_DATA_TYPE_FP64: memcpy(p, &v, 8); break;
    case HCCL_DATA_TYPE_FP16: u16 = to_half(f); memcpy(p, &u16, 2); break;
    case HCCL_DATA_TYPE_BFP16:
        memcpy(&u32, &f, 4);
        u16 = (uint16_t)(u32 >> 16);
        memcpy(p, &u16, 2);
        break;
    default: break;
    }
}

static double get(const void *buf, HcclDataType dt, uint64_t i)
{
    const char *p = (const char *)buf + i * type_size(dt);
    float f;
    uint32_t u32;
    uint16_t u16;
    switch (dt) {
    case HCCL_DATA_TYPE_INT8: { int8_t x; memcpy(&x, p, 1); return x; }
    case HCCL_DATA_TYPE_UINT8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case HCCL_DATA_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case HCCL_DATA_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case HCCL_DATA_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case HCCL_DATA_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case HCCL_DATA_TYPE_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case HCCL_DATA_TYPE_UINT64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case HCCL_DATA_TYPE_FP32: memcpy(&f, p, 4); return f;
    case HCCL_DATA_TYPE_FP64: { double d; memcpy(&d, p, 8); return d; }
    case HCCL_DATA_TYPE_FP16: memcpy(&u16, p, 2); return from_half(u16);
    case HCCL_DATA_TYPE_BFP16:
        memcpy(&u16, p, 2);
        u32 = (uint32_t)u16 << 16;
        memcpy(&f, &u32, 4);
        return f;
    default: return 0;
    }
}

static int is_unsigned(HcclDataType dt)
{
    return dt == HCCL_DATA_TYPE_UINT8 || dt == HCCL_DATA_TYPE_UINT16 ||
           dt == HCCL_DATA_TYPE_UINT32 || dt == HCCL_DATA_TYPE_UINT64;
}

/* Rank r's element i for op (small, so every result is exact even in int8
 * and fp16 with 8 ranks: sums <= 48, products <= 256). */
static double value(HcclDataType dt, HcclReduceOp op, uint32_t r, uint64_t i,
                    uint64_t salt)
{
    uint64_t k = r * 7u + i * 3u + salt;
    switch (op) {
    case HCCL_REDUCE_SUM: return (double)(k % 6) + (is_unsigned(dt) ? 0 : -2);
    case HCCL_REDUCE_PROD: return (double)(1 + (k % 5 == 0));
    default: return (double)(k % 9) - (is_unsigned(dt) ? 0 : 4);
    }
}

static double reference(HcclDataType dt, HcclReduceOp op, uint64_t i,
                        uint64_t salt)
{
    double acc = value(dt, op, 0, i, salt);
    for (uint32_t r = 1; r < g_size; r++) {
        double v = value(dt, op, r, i, salt);
        switch (op) {
        case HCCL_REDUCE_SUM: acc += v; break;
        case HCCL_REDUCE_PROD: acc *= v; break;
        case HCCL_REDUCE_MAX: acc = v > acc ? v : acc; break;
        default: acc = v < acc ? v : acc; break;
        }
    }
    return acc;
}

static const HcclDataType reduce_types[] = {
    HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_INT32,
    HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP32,
    HCCL_DATA_TYPE_FP64, HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_UINT16,
};
#define NREDUCE_TYPES (sizeof reduce_types / sizeof reduce_types[0])
static const HcclReduceOp ops[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD,
                                   HCCL_REDUCE_MAX, HCCL_REDUCE_MIN};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "rank %u: out of memory\n", g_rank);
        exit(2);
    }
    return p;
}

/* ---- the collectives ------------------------------------------------------ */

static void test_allreduce(HcclComm comm, uint64_t count, int in_place)
{
    for (size_t t = 0; t < NREDUCE_TYPES; t++) {
        HcclDataType dt = reduce_types[t];
        for (size_t o = 0; o < 4; o++) {
            char *in = xmalloc(count * 8), *out = xmalloc(count * 8);
            uint64_t salt = t * 4 + o;
            for (uint64_t i = 0; i < count; i++)
                put(in, dt, i, value(dt, ops[o], g_rank, i, salt));
            CHECK(HcclAllReduce(in, in_place ? in : out, count, dt, ops[o],
                                comm, NULL));
            for (uint64_t i = 0; i < count; i++) {
                double got = get(in_place ? in : out, dt, i);
                double want = reference(dt, ops[o], i, salt);
                if (got != want)
                    wrong("HcclAllReduce", dt, (int)ops[o], i, got, want);
                g_checks++;
            }
            free(in);
            free(out);
        }
    }
}

static void test_reduce(HcclComm comm, uint64_t count)
{
    for (size_t t = 0; t < NREDUCE_TYPES; t++) {
        HcclDataType dt = reduce_types[t];
        HcclReduceOp op = ops[t % 4];
        uint32_t root = (uint32_t)(t % g_size);
        char *in = xmalloc(count * 8), *out = xmalloc(count * 8);
        for (uint64_t i = 0; i < count; i++)
            put(in, dt, i, value(dt, op, g_rank, i, 100 + t));
        CHECK(HcclReduce(in, out, count, dt, op, root, comm, NULL));
        for (uint64_t i = 0; g_rank == root && i < count; i++) {
            double got = get(out, dt, i), want = reference(dt, op, i, 100 + t);
            if (got != want)
                wrong("HcclReduce", dt, (int)op, i, got, want);
            g_checks++;
        }
        free(in);
        free(out);
    }
}

static void test_reduce_scatter(HcclComm comm, uint64_t recv_count)
{
    for (size_t t = 0; t < NREDUCE_TYPES; t++) {
        HcclDataType dt = reduce_types[t];
        HcclReduceOp op = ops[(t + 1) % 4];
        uint64_t total = recv_count * g_size;
        char *in = xmalloc(total * 8), *out = xmalloc(recv_count * 8);
        for (uint64_t i = 0; i < total; i++)
            put(in, dt, i, value(dt, op, g_rank, i, 200 + t));
        CHECK(HcclReduceScatter(in, out, recv_count, dt, op, comm, NULL));
        for (uint64_t i = 0; i < recv_count; i++) {
            uint64_t at = g_rank * recv_count + i;
            double got = get(out, dt, i), want = reference(dt, op, at, 200 + t);
            if (got != want)
                wrong("HcclReduceScatter", dt, (int)op, i, got, want);
            g_checks++;
        }
        free(in);
        free(out);
    }
}

/* Element i of rank r's block in the data-movement tests. */
static double moved(HcclDataType dt, uint32_t r, uint64_t i)
{
    return (double)((r * 131 + i * 17) % (is_unsigned(dt) ? 250 : 120));
}

static const HcclDataType move_types[] = {
    HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_INT16,
    HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_FP64, HCCL_DATA_TYPE_BFP16,
};
#define NMOVE_TYPES (sizeof move_types / sizeof move_types[0])

static void test_allgather(HcclComm comm, uint64_t count)
{
    for (size_t t = 0; t < NMOVE_TYPES; t++) {
        HcclDataType dt = move_types[t];
        char *in = xmalloc(count * 8), *out = xmalloc(count * g_size * 8);
        for (uint64_t i = 0; i < count; i++)
            put(in, dt, i, moved(dt, g_rank, i));
        CHECK(HcclAllGather(in, out, count, dt, comm, NULL));
        for (uint32_t r = 0; r < g_size; r++)
            for (uint64_t i = 0; i < count; i++) {
                double got = get(out, dt, r * count + i), want = moved(dt, r, i);
                if (got != want)
                    wrong("HcclAllGather", dt, -1, r * count + i, got, want);
                g_checks++;
            }
        free(in);
        free(out);
    }
}

static void test_broadcast(HcclComm comm, uint64_t count)
{
    for (uint32_t root = 0; root < g_size; root++) {
        HcclDataType dt = move_types[root % NMOVE_TYPES];
        char *buf = xmalloc(count * 8);
        for (uint64_t i = 0; i < count; i++)
            put(buf, dt, i, g_rank == root ? moved(dt, root, i) : 99);
        CHECK(HcclBroadcast(buf, count, dt, root, comm, NULL));
        for (uint64_t i = 0; i < count; i++) {
            double got = get(buf, dt, i), want = moved(dt, root, i);
            if (got != want)
                wrong("HcclBroadcast", dt, -1, i, got, want);
            g_checks++;
        }
        free(buf);
    }
}

/* A ring exchange: each rank sends its block to rank+1 and receives rank-1's.
 * Blocking calls, so even ranks send first and odd ranks receive first
 * (with an odd size rank 0 and the last rank both send first: the last
 * rank's send waits for rank 0's receive, which follows rank 0's send to
 * rank 1, an odd rank that receives first). */
static void test_send_recv(HcclComm comm, uint64_t count)
{
    if (g_size < 2)
        return;
    uint32_t next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    for (size_t t = 0; t < 3; t++) {
        HcclDataType dt = move_types[t * 2 + 1 < NMOVE_TYPES ? t * 2 + 1 : 0];
        char *out = xmalloc(count * 8), *in = xmalloc(count * 8);
        for (uint64_t i = 0; i < count; i++) {
            put(out, dt, i, moved(dt, g_rank, i + t));
            put(in, dt, i, 99);
        }
        if (g_rank % 2 == 0) {
            CHECK(HcclSend(out, count, dt, next, comm, NULL));
            CHECK(HcclRecv(in, count, dt, prev, comm, NULL));
        } else {
            CHECK(HcclRecv(in, count, dt, prev, comm, NULL));
            CHECK(HcclSend(out, count, dt, next, comm, NULL));
        }
        for (uint64_t i = 0; i < count; i++) {
            double got = get(in, dt, i), want = moved(dt, prev, i + t);
            if (got != want)
                wrong("HcclRecv", dt, -1, i, got, want);
            g_checks++;
        }
        free(in);
        free(out);
    }
}

/* Errors that need no peer: every rank gets them alike, and the
 * communicator stays usable. */
static void test_errors(HcclComm comm)
{
    int32_t s[16] = {1, 2, 3, 4}, r[16];
    HcclResult res = HcclAllReduce(s, r, 4, HCCL_DATA_TYPE_INT128,
                                   HCCL_REDUCE_SUM, comm, NULL);
    if (res != HCCL_E_NOT_SUPPORT) {
        fprintf(stderr, "rank %u: allreduce of int128 gave %d, want "
                        "HCCL_E_NOT_SUPPORT\n", g_rank, (int)res);
        exit(1);
    }
    res = HcclAllReduce(s, r, 4, HCCL_DATA_TYPE_INT32, (HcclReduceOp)7, comm,
                        NULL);
    if (res != HCCL_E_PARA) {
        fprintf(stderr, "rank %u: op 7 gave %d, want HCCL_E_PARA\n", g_rank,
                (int)res);
        exit(1);
    }
    HcclResult async = HCCL_E_RESERVED;
    CHECK(HcclGetCommAsyncError(comm, &async));
    if (async != HCCL_SUCCESS) {
        fprintf(stderr, "rank %u: async error %d after argument errors\n",
                g_rank, (int)async);
        exit(1);
    }
    const char *msg = HcclGetErrorString(HCCL_E_PARA);
    if (!msg || !*msg || !HcclGetErrorString((HcclResult)9999)) {
        fprintf(stderr, "rank %u: HcclGetErrorString gave nothing\n", g_rank);
        exit(1);
    }
    g_checks += 4;
}

/* ---- joining ---------------------------------------------------------------- */

static uint32_t env_u32(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "hccl_api_test: set %s\n", name);
        exit(2);
    }
    return (uint32_t)strtoul(v, NULL, 10);
}

static HcclComm join_root_info(const char *file, uint32_t rank, uint32_t size)
{
    HcclRootInfo info;
    if (rank == 0) {
        char tmp[4096];
        CHECK(HcclGetRootInfo(&info));
        snprintf(tmp, sizeof tmp, "%s.tmp", file);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&info, sizeof info, 1, f) != 1 || fclose(f) != 0 ||
            rename(tmp, file) != 0) {
            perror(file);
            exit(2);
        }
    } else {
        /* HCCL samples broadcast it with MPI; here a file, 30 s at most. */
        int got = 0;
        for (int tries = 0; tries < 3000 && !got; tries++) {
            FILE *f = fopen(file, "rb");
            if (f) {
                got = fread(&info, sizeof info, 1, f) == 1;
                fclose(f);
            }
            if (!got) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        if (!got) {
            fprintf(stderr, "rank %u: no root info in %s after 30 s\n", rank,
                    file);
            exit(2);
        }
    }
    HcclComm comm = NULL;
    CHECK(HcclCommInitRootInfo(size, &info, rank, &comm));
    return comm;
}

int main(int argc, char **argv)
{
    const char *root_file = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "r:")) != -1) {
        if (opt == 'r') {
            root_file = optarg;
        } else {
            fprintf(stderr, "usage: hccl_api_test [-r ROOT_INFO_FILE]\n");
            return 2;
        }
    }
    uint32_t rank = env_u32("RANK_ID");
    g_rank = rank;
    HcclComm comm = NULL;
    if (root_file) {
        comm = join_root_info(root_file, rank, env_u32("RANK_SIZE"));
    } else {
        HcclCommConfig config;
        HcclCommConfigInit(&config);
        config.hcclDeterministic = 1;
        snprintf(config.hcclCommName, sizeof config.hcclCommName, "world");
        CHECK(HcclCommInitClusterInfoConfig(getenv("RANK_TABLE_FILE"), rank,
                                            &config, &comm));
    }
    uint32_t id = 99, size = 0;
    CHECK(HcclGetRankId(comm, &id));
    CHECK(HcclGetRankSize(comm, &size));
    g_size = size;
    if (id != rank || size != env_u32("RANK_SIZE") || size == 0) {
        fprintf(stderr, "rank %u: HcclGetRankId %u, HcclGetRankSize %u\n",
                rank, id, size);
        return 1;
    }

    static const uint64_t counts[] = {1, 4099};
    for (size_t c = 0; c < 2; c++) {
        test_allreduce(comm, counts[c], 0);
        test_reduce(comm, counts[c]);
        test_reduce_scatter(comm, counts[c] == 1 ? 1 : 1031);
        test_allgather(comm, counts[c] == 1 ? 1 : 2053);
        test_broadcast(comm, counts[c]);
        test_send_recv(comm, counts[c] == 1 ? 1 : 3001);
    }
    test_allreduce(comm, 777, 1); /* in place */
    test_errors(comm);
    CHECK(HcclBarrier(comm, NULL));
    HcclResult async = HCCL_E_RESERVED;
    CHECK(HcclGetCommAsyncError(comm, &async));
    if (async != HCCL_SUCCESS) {
        fprintf(stderr, "rank %u: async error %d\n", rank, (int)async);
        return 1;
    }
    CHECK(HcclCommDestroy(comm));
    printf("hccl_api_test rank %u of %u: ok (%lu checks)\n", rank, size,
           g_checks);
    return 0;
}
