/* check_cuda.c - the CUDA stream adapter against a fake driver (no GPU):
 * ordering by stream memory operations and by the event fallback, a
 * buffer reused by producer kernel -> allreduce -> consumer kernel with
 * no host synchronisation, across the 32-bit wrap of the numbering; the
 * same with the fake's ordering broken on purpose, which must be noticed;
 * every collective on device, managed, pinned and host buffers through
 * the staging pipeline; an error injected into every driver call the
 * adapter makes (reported with the call's name, or harmless: never a hung
 * stream, never a silent wrong result); a failed copy on one rank; device
 * selection; and the real loader's "no CUDA driver". */
#define _GNU_SOURCE 1
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "cuda_model.h"
#include "harness.h"
#include "loom.h"
#include "loom_cuda.h"
#include "stage_one.h"

void loom_cuda_test_first_seq(uint32_t seq);

static int g_port;

static loom_comm_t join(int rank, int n)
{
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g_port);
    loom_comm_t comm = NULL;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s\n", rank, loom_get_error_string(NULL));
        exit(3);
    }
    return comm;
}

#define RUN(n, fn, arg, timeout)                                               \
    do {                                                                       \
        int st_[16];                                                           \
        g_port = harness_free_port();                                          \
        int rc_ = harness_run((n), (fn), (arg), (timeout), st_);               \
        for (int r_ = 0; rc_ && r_ < (n); r_++)                                \
            fprintf(stderr, "%s: rank %d exited with %d\n", __func__, r_,      \
                    st_[r_]);                                                  \
        ck_assert_msg(rc_ == 0, "a rank failed");                              \
    } while (0)

/* A rank's fake GPU, communicator and streams. */
struct rig {
    const struct loom_cuda_driver *d;
    loom_comm_t comm;
    CUstream cs;
    loom_stream_t ls;
    loom_cuda_sync_t sync;
};

static int rig_open(struct rig *g, int rank, int n, loom_cuda_sync_t want)
{
    g->d = cuda_model_install();
    g->comm = join(rank, n);
    int dev;
    if (loom_cuda_set_device(g->comm, &dev) != LOOM_SUCCESS || dev != rank) {
        fprintf(stderr, "rank %d: loom_cuda_set_device: %s\n", rank, loom_cuda_error_string());
        return -1;
    }
    if (g->d->stream_create(&g->cs, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return -1;
    loom_cuda_options_t o = {.struct_size = sizeof o, .sync = want};
    if (loom_stream_create_cuda_ex(g->cs, &o, &g->ls, &g->sync) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: loom_stream_create_cuda_ex: %s\n", rank,
                loom_cuda_error_string());
        return -1;
    }
    return 0;
}

static void rig_close(struct rig *g)
{
    loom_stream_destroy(g->ls);
    g->d->stream_destroy(g->cs);
    loom_comm_destroy(g->comm);
}

/* ---- ordering: producer kernel -> allreduce -> consumer kernel ------------ */

enum { ORD_COUNT = 3000, ORD_ITERS = 14 };

static uint32_t ord_value(int rank, int it, uint64_t i)
{
    return (uint32_t)(rank + 1) * 1000003u + (uint32_t)it * 7919u + (uint32_t)i;
}

struct kern {
    void *buf;          /* device, managed or pinned */
    int rank, it;
    uint32_t *out;      /* consumer: where the result goes */
};

static void k_produce(void *a)
{
    struct kern *k = a;
    uint32_t *v = cuda_model_view(k->buf);
    for (uint64_t i = 0; i < ORD_COUNT; i++)
        v[i] = ord_value(k->rank, k->it, i);
}

static void k_consume(void *a)
{
    struct kern *k = a;
    memcpy(k->out, cuda_model_view(k->buf), ORD_COUNT * sizeof(uint32_t));
}

enum { ORD_OK = 0, ORD_WRONG = 20 };

struct ord_arg {
    loom_cuda_sync_t sync;
    int broken;         /* 1: ignore waits, 2: write at enqueue */
};

/* One buffer per kind of memory, reused by every iteration: a producer
 * that ran early, an op that started early or a consumer that did not
 * wait would show in the results. Returns ORD_WRONG when a result is
 * wrong, ORD_OK when all are right, another code on any other failure. */
static int rank_ordering(int rank, int n, void *arg)
{
    const struct ord_arg *oa = arg;
    cuda_model.memops_refused = oa->sync == LOOM_CUDA_SYNC_EVENTS;
    cuda_model.ignore_waits = oa->broken == 1;
    cuda_model.write_at_enqueue = oa->broken == 2;
    loom_cuda_test_first_seq(0xfffffffau); /* the numbering wraps during the run */
    struct rig g;
    if (rig_open(&g, rank, n, LOOM_CUDA_SYNC_AUTO) < 0)
        return 10;
    if (g.sync != oa->sync) {
        fprintf(stderr, "rank %d: ordering by %d, expected %d\n", rank, g.sync, oa->sync);
        return 11;
    }
    size_t bytes = ORD_COUNT * sizeof(uint32_t);
    void *bufs[3] = {cuda_model_malloc(bytes), cuda_model_malloc_managed(bytes),
                     cuda_model_malloc_pinned(bytes)};
    static uint32_t out[ORD_ITERS][ORD_COUNT];
    static struct kern kp[ORD_ITERS], kc[ORD_ITERS];
    double slowest_call = 0;
    for (int it = 0; it < ORD_ITERS; it++) {
        /* broken ordering: not the pinned buffer, which Loom's thread reads
         * directly and a misplaced kernel would race with (ThreadSanitizer
         * would report that race, though it is the point of the run) */
        void *buf = bufs[it % (oa->broken ? 2 : 3)];
        kp[it] = (struct kern){.buf = buf, .rank = rank, .it = it};
        kc[it] = (struct kern){.buf = buf, .out = out[it]};
        /* the first producer is slow: the call must return long before */
        unsigned delay = it == 0 ? 50000 : oa->broken ? 2000 : (unsigned)(it * 331 % 1500);
        if (cuda_model_launch(g.cs, k_produce, &kp[it], delay) != CUDA_SUCCESS)
            return 12;
        double t0 = harness_now();
        loom_result_t res = loom_allreduce(buf, buf, ORD_COUNT, LOOM_UINT32, LOOM_SUM,
                                           g.comm, g.ls);
        double dt = harness_now() - t0;
        slowest_call = dt > slowest_call ? dt : slowest_call;
        if (res != LOOM_SUCCESS) {
            fprintf(stderr, "rank %d: allreduce %d: %s\n", rank, it,
                    loom_get_error_string(g.comm));
            return 13;
        }
        if (cuda_model_launch(g.cs, k_consume, &kc[it], 0) != CUDA_SUCCESS)
            return 14;
    }
    if (cuda_model_stream_wait(g.cs, 30) != 0)
        return 15;
    if (loom_stream_synchronize(g.ls) != LOOM_SUCCESS)
        return 16;
    int wrong = 0;
    for (int it = 0; it < ORD_ITERS; it++)
        for (uint64_t i = 0; i < ORD_COUNT; i++) {
            uint32_t want = 0;
            for (int r = 0; r < n; r++)
                want += ord_value(r, it, i);
            if (out[it][i] != want) {
                if (!oa->broken && wrong < 3)
                    fprintf(stderr, "rank %d: iteration %d element %llu: %u, expected %u\n",
                            rank, it, (unsigned long long)i, out[it][i], want);
                wrong++;
            }
        }
    if (!oa->broken && slowest_call > 0.025) {
        fprintf(stderr, "rank %d: an enqueue took %.1f ms: it waited for the GPU\n", rank,
                slowest_call * 1e3);
        return 17;
    }
    cuda_model_free_pinned(bufs[2]);
    rig_close(&g);
    return wrong ? ORD_WRONG : ORD_OK;
}

START_TEST(ordering_memops)
{
    struct ord_arg a = {LOOM_CUDA_SYNC_MEMOPS, 0};
    RUN(2, rank_ordering, &a, 60);
}
END_TEST

START_TEST(ordering_events)
{
    struct ord_arg a = {LOOM_CUDA_SYNC_EVENTS, 0};
    RUN(2, rank_ordering, &a, 60);
}
END_TEST

/* The test above must fail when the ordering is broken: a stream that
 * does not wait for the op, or an op that starts before its inputs. */
static void expect_wrong(struct ord_arg *a)
{
    int st[2];
    g_port = harness_free_port();
    harness_run(2, rank_ordering, a, 60, st);
    for (int r = 0; r < 2; r++)
        ck_assert_msg(st[r] == ORD_WRONG, "rank %d exited with %d, expected %d (wrong results "
                      "noticed)", r, st[r], ORD_WRONG);
}

START_TEST(broken_ordering_noticed)
{
    struct ord_arg a = {LOOM_CUDA_SYNC_MEMOPS, 1};
    expect_wrong(&a);
    a.broken = 2;
    expect_wrong(&a);
    a = (struct ord_arg){LOOM_CUDA_SYNC_EVENTS, 1};
    expect_wrong(&a);
}
END_TEST

/* ---- staging: every collective, every kind of memory ---------------------- */

static void *fm_alloc(void *ctx, enum sc_place p, size_t bytes)
{
    switch (p) {
    case SC_DEV: return cuda_model_malloc(bytes);
    case SC_MANAGED: return cuda_model_malloc_managed(bytes);
    case SC_PINNED: {
        void **held = ctx;
        for (int i = 0; i < 8; i++)
            if (!held[i])
                return held[i] = cuda_model_malloc_pinned(bytes);
        return NULL;
    }
    default: {
        void **held = (void **)ctx + 8;
        for (int i = 0; i < 8; i++)
            if (!held[i])
                return held[i] = malloc(bytes);
        return NULL;
    }
    }
}
static void *fm_view(void *ctx, enum sc_place p, void *ptr)
{
    return cuda_model_view(ptr);
}
static void fm_release(void *ctx)
{
    void **held = ctx;
    for (int i = 0; i < 8; i++) {
        if (held[i])
            cuda_model_free_pinned(held[i]);
        free(held[8 + i]);
        held[i] = held[8 + i] = NULL;
    }
    cuda_model_reset_memory();
}

static int rank_staging(int rank, int n, void *arg)
{
    const loom_cuda_sync_t *want = arg;
    cuda_model.ndevices = 4;
    cuda_model.memops_refused = *want == LOOM_CUDA_SYNC_EVENTS;
    struct rig g;
    if (rig_open(&g, rank, n, *want) < 0)
        return 10;
    void *held[16] = {0};
    struct sc_mem m = {held, fm_alloc, fm_view, fm_release};
    static const struct { enum sc_place sp, rp; int inplace; } places[] = {
        {SC_DEV, SC_DEV, 0},     {SC_DEV, SC_DEV, 1},      {SC_MANAGED, SC_DEV, 0},
        {SC_DEV, SC_PINNED, 0},  {SC_PINNED, SC_MANAGED, 0}, {SC_HOST, SC_DEV, 0},
        {SC_PINNED, SC_PINNED, 0}, {SC_HOST, SC_HOST, 1}};
    static const loom_dtype_t types[] = {LOOM_INT32, LOOM_FLOAT16, LOOM_BFLOAT16, LOOM_FLOAT32};
    /* LOOM_STAGE_CHUNK=4K: 1 and 3 pieces (elementwise), 9 (blocked) */
    static const uint64_t counts[] = {1, 2500};
    uint64_t seed = 3;
    for (int k = 0; k < SC_NKINDS; k++)
        for (size_t p = 0; p < sizeof places / sizeof places[0]; p++)
            for (size_t c = 0; c < 2; c++) {
                loom_dtype_t t = types[seed % 4];
                loom_redop_t op = (k == SC_ALLGATHER || k == SC_BROADCAST) ? LOOM_SUM
                                                                          : sc_ops[seed % 5];
                sc_one(g.comm, g.ls, rank, n, k, t, op, counts[c], places[p].inplace,
                       places[p].sp, places[p].rp, seed++, &m);
            }
    struct cuda_model_stats st = cuda_model_stats();
    int rc = sc_fails ? 11 : 0;
    if (st.pageable_copies || st.bad_addresses) {
        fprintf(stderr, "rank %d: %u async copies of unpinned memory, %u out of bounds\n",
                rank, st.pageable_copies, st.bad_addresses);
        rc = 12;
    }
    /* the stream's two words, and the staging pool once */
    if (st.host_registers != 2) {
        fprintf(stderr, "rank %d: %u cuMemHostRegister calls, expected 2\n", rank,
                st.host_registers);
        rc = 13;
    }
    rig_close(&g);
    return rc;
}

START_TEST(staging_memops)
{
    loom_cuda_sync_t s = LOOM_CUDA_SYNC_MEMOPS;
    RUN(3, rank_staging, &s, 60);
}
END_TEST

START_TEST(staging_events)
{
    loom_cuda_sync_t s = LOOM_CUDA_SYNC_EVENTS;
    RUN(2, rank_staging, &s, 60);
}
END_TEST

/* ---- an error in every driver call ---------------------------------------- */

/* One run of a small workload on a fresh 1-rank communicator and Loom
 * stream: create, producer, staged allreduce (device, 3 pieces), consumer,
 * allreduce on pinned memory, synchronize, destroy. *reported gets the
 * error messages seen; returns 1 when the results are right. */
static int inject_run(CUstream cs, loom_cuda_sync_t want, char *reported, size_t len,
                      int *stream_hung)
{
    reported[0] = 0;
    *stream_hung = 0;
    g_port = harness_free_port();
    loom_comm_t comm = join(0, 1);
    static uint32_t out[ORD_COUNT];
    static struct kern kp, kc;
    size_t bytes = ORD_COUNT * sizeof(uint32_t);
    void *buf = cuda_model_malloc(bytes);
    uint32_t *pinned = cuda_model_malloc_pinned(bytes);
    memset(out, 0, sizeof out);
    kp = (struct kern){.buf = buf, .rank = 0, .it = 1};
    kc = (struct kern){.buf = buf, .out = out};
    for (uint64_t i = 0; i < ORD_COUNT; i++)
        pinned[i] = (uint32_t)i;
    int ok = 0;
    loom_stream_t ls;
    loom_cuda_options_t o = {.struct_size = sizeof o, .sync = want};
    loom_result_t res = loom_stream_create_cuda_ex(cs, &o, &ls, NULL);
    if (res != LOOM_SUCCESS) {
        snprintf(reported, len, "create: %s", loom_cuda_error_string());
    } else {
        cuda_model_launch(cs, k_produce, &kp, 300);
        res = loom_allreduce(buf, buf, ORD_COUNT, LOOM_UINT32, LOOM_SUM, comm, ls);
        if (res != LOOM_SUCCESS)
            snprintf(reported, len, "enqueue: %s", loom_get_error_string(comm));
        cuda_model_launch(cs, k_consume, &kc, 0);
        loom_result_t res2 = loom_allreduce(pinned, pinned, ORD_COUNT, LOOM_UINT32, LOOM_MAX,
                                            comm, ls);
        if (res2 != LOOM_SUCCESS && !reported[0])
            snprintf(reported, len, "enqueue 2: %s", loom_get_error_string(comm));
        if (cuda_model_stream_wait(cs, 10) < 0)
            *stream_hung = 1;
        res = loom_stream_synchronize(ls);
        if (res != LOOM_SUCCESS && !reported[0])
            snprintf(reported, len, "synchronize: %s", loom_get_error_string(comm));
        loom_stream_destroy(ls);
        ok = 1;
        for (uint64_t i = 0; i < ORD_COUNT && ok; i++)
            ok = out[i] == ord_value(0, 1, i) && pinned[i] == (uint32_t)i;
    }
    cuda_model_free_pinned(pinned);
    cuda_model_reset_memory();
    loom_comm_destroy(comm);
    return ok;
}

static void inject_all(loom_cuda_sync_t want)
{
    cuda_model.memops_refused = want == LOOM_CUDA_SYNC_EVENTS;
    cuda_model.max_delay_us = 20;
    const struct loom_cuda_driver *d = cuda_model_install();
    int dev;
    g_port = harness_free_port();
    loom_comm_t c0 = join(0, 1);
    ck_assert_int_eq(loom_cuda_set_device(c0, &dev), LOOM_SUCCESS);
    loom_comm_destroy(c0);
    CUstream cs; /* the application's stream, used by every run */
    ck_assert_int_eq(d->stream_create(&cs, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    /* a clean run: right results, and how often it calls each entry */
    unsigned before[64], calls[64];
    for (int e = 0; e < cuda_model_nentries; e++)
        before[e] = cuda_model_calls(cuda_model_entry_names[e]);
    char msg[1200];
    int hung;
    ck_assert_msg(inject_run(cs, want, msg, sizeof msg, &hung) && !msg[0] && !hung,
                  "clean run: %s", msg);
    for (int e = 0; e < cuda_model_nentries; e++)
        calls[e] = cuda_model_calls(cuda_model_entry_names[e]) - before[e];
    int tried = 0;
    for (int e = 0; e < cuda_model_nentries; e++) {
        const char *name = cuda_model_entry_names[e];
        if (!calls[e] || strcmp(name, "cuGetErrorName") == 0 ||
            strcmp(name, "cuGetErrorString") == 0)
            continue;
        /* the first call, one in the middle and the last of the run */
        unsigned nth[3] = {1, calls[e] / 2 + 1, calls[e]};
        for (int k = 0; k < 3; k++) {
            if (k && nth[k] == nth[k - 1])
                continue;
            cuda_model_fail(name, nth[k], CUDA_ERROR_LAUNCH_FAILED);
            int right = inject_run(cs, want, msg, sizeof msg, &hung);
            cuda_model_fail(name, 0, CUDA_SUCCESS);
            tried++;
            ck_assert_msg(!hung, "%s #%u failed: the CUDA stream stayed blocked (%s)", name,
                          nth[k], msg);
            /* an error is reported, naming the call and CUDA's error; or
             * the failure was one the adapter can live with (results right) */
            if (msg[0])
                ck_assert_msg(strstr(msg, name) && strstr(msg, "CUDA_ERROR_LAUNCH_FAILED"),
                              "%s #%u failed: the message does not name it: %s", name,
                              nth[k], msg);
            else
                ck_assert_msg(right, "%s #%u failed: no error, wrong results", name, nth[k]);
        }
    }
    fprintf(stderr, "error injection (%s): %d runs, each with one failing driver call\n",
            want == LOOM_CUDA_SYNC_EVENTS ? "events" : "memops", tried);
    ck_assert_int_gt(tried, 20);
}

START_TEST(error_in_every_call_memops)
{
    inject_all(LOOM_CUDA_SYNC_MEMOPS);
}
END_TEST

START_TEST(error_in_every_call_events)
{
    inject_all(LOOM_CUDA_SYNC_EVENTS);
}
END_TEST

/* ---- a failed copy on one rank ------------------------------------------ */

/* Rank 0's third copy fails with a sticky error: both ranks' calls fail
 * and say why, neither rank's CUDA stream stays blocked, and later calls
 * on the communicators return the error at once. */
static int rank_copy_fails(int rank, int n, void *arg)
{
    struct rig g;
    if (rig_open(&g, rank, n, LOOM_CUDA_SYNC_AUTO) < 0)
        return 10;
    size_t bytes = 4 * ORD_COUNT * sizeof(uint32_t);
    void *buf = cuda_model_malloc(bytes);
    if (rank == 0)
        cuda_model_fail_copy(3, CUDA_ERROR_ILLEGAL_ADDRESS);
    if (loom_allreduce(buf, buf, 4 * ORD_COUNT, LOOM_UINT32, LOOM_SUM, g.comm, g.ls))
        return 11;
    int w = cuda_model_stream_wait(g.cs, 20);
    if (w < 0 || (rank == 1 && w != 0))
        return 12; /* blocked, or rank 1's healthy stream has an error */
    loom_result_t res = loom_stream_synchronize(g.ls);
    const char *msg = loom_get_error_string(g.comm);
    if (res == LOOM_SUCCESS)
        return 13;
    if (rank == 0 && !strstr(msg, "CUDA_ERROR_ILLEGAL_ADDRESS")) {
        fprintf(stderr, "rank 0: %s\n", msg);
        return 14;
    }
    double t0 = harness_now();
    if (loom_allreduce(buf, buf, 16, LOOM_UINT32, LOOM_SUM, g.comm, g.ls) == LOOM_SUCCESS ||
        harness_now() - t0 > 1)
        return 15;
    rig_close(&g);
    return 0;
}

START_TEST(failed_copy_releases_both_ranks)
{
    RUN(2, rank_copy_fails, NULL, 60);
}
END_TEST

/* ---- creation ------------------------------------------------------------- */

START_TEST(events_when_memops_refused)
{
    cuda_model.memops_refused = 1;
    const struct loom_cuda_driver *d = cuda_model_install();
    /* the default stream needs a current context */
    loom_stream_t ls;
    ck_assert_int_ne(loom_stream_create_cuda(NULL, &ls), LOOM_SUCCESS);
    ck_assert_ptr_nonnull(strstr(loom_cuda_error_string(), "no current CUDA context"));
    CUcontext ctx;
    ck_assert_int_eq(d->primary_ctx_retain(&ctx, 0), CUDA_SUCCESS);
    ck_assert_int_eq(d->ctx_set_current(ctx), CUDA_SUCCESS);
    loom_cuda_sync_t chosen = LOOM_CUDA_SYNC_AUTO;
    ck_assert_int_eq(loom_stream_create_cuda_ex(NULL, NULL, &ls, &chosen), LOOM_SUCCESS);
    ck_assert_int_eq(chosen, LOOM_CUDA_SYNC_EVENTS);
    loom_stream_destroy(ls);
    loom_cuda_options_t o = {.struct_size = sizeof o, .sync = LOOM_CUDA_SYNC_MEMOPS};
    ck_assert_int_eq(loom_stream_create_cuda_ex(NULL, &o, &ls, NULL), LOOM_ERROR_NOT_SUPPORTED);
    const char *m = loom_cuda_error_string();
    ck_assert_msg(strstr(m, "cuStreamWriteValue32: CUDA_ERROR_NOT_SUPPORTED"), "%s", m);
    o.struct_size = 3;
    ck_assert_int_eq(loom_stream_create_cuda_ex(NULL, &o, &ls, NULL),
                     LOOM_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* ---- devices: LOOM_CUDA_DEVICE, the rank table's device_id ------------- */

static int rank_table_device(int rank, int n, void *arg)
{
    const char *table = arg;
    cuda_model_install();
    loom_comm_t c;
    if (loom_comm_init_ranktable(table, rank, &c) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(NULL));
        return 10;
    }
    int dev = -1, want = getenv("LOOM_CUDA_DEVICE") ? atoi(getenv("LOOM_CUDA_DEVICE"))
                                                    : 1 - rank;
    if (loom_cuda_set_device(c, &dev) != LOOM_SUCCESS || dev != want) {
        fprintf(stderr, "rank %d: device %d, expected %d (%s)\n", rank, dev, want,
                loom_cuda_error_string());
        return 11;
    }
    loom_comm_destroy(c);
    return 0;
}

START_TEST(device_from_table_or_env)
{
    /* rank 0 on device 1, rank 1 on device 0 */
    char table[] = "/tmp/loom-cuda-table-XXXXXX";
    int fd = mkstemp(table);
    ck_assert_int_ge(fd, 0);
    const char *json =
        "{\"version\": \"1.0\", \"server_count\": \"1\", \"status\": \"completed\","
        " \"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": ["
        "{\"device_id\": \"1\", \"rank_id\": \"0\"},"
        "{\"device_id\": \"0\", \"rank_id\": \"1\"}]}]}";
    ck_assert_int_eq(write(fd, json, strlen(json)), (int)strlen(json));
    close(fd);
    char pb[16];
    snprintf(pb, sizeof pb, "%d", harness_free_port());
    setenv("LOOM_PORT_BASE", pb, 1);
    ck_assert_int_eq(harness_run(2, rank_table_device, table, 30, NULL), 0);
    /* LOOM_CUDA_DEVICE overrides the table; several ranks share a device */
    setenv("LOOM_CUDA_DEVICE", "0", 1);
    snprintf(pb, sizeof pb, "%d", harness_free_port());
    setenv("LOOM_PORT_BASE", pb, 1);
    ck_assert_int_eq(harness_run(2, rank_table_device, table, 30, NULL), 0);
    unlink(table);
}
END_TEST

START_TEST(device_out_of_range_named)
{
    setenv("LOOM_CUDA_DEVICE", "5", 1);
    cuda_model_install();
    g_port = harness_free_port();
    loom_comm_t c = join(0, 1);
    int dev;
    ck_assert_int_eq(loom_cuda_set_device(c, &dev), LOOM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(loom_cuda_error_string(), "set LOOM_CUDA_DEVICE"));
    loom_comm_destroy(c);
}
END_TEST

/* ---- the real loader ------------------------------------------------------ */

START_TEST(no_driver_is_an_error)
{
    struct loom_cuda_driver d;
    ck_assert_int_eq(loom_cuda_driver_open("libloom-no-such-cuda.so.1", &d),
                     LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(loom_cuda_error_string(), "no CUDA driver: cannot load"));
    /* this host's libcuda.so.1, if any: available, or a reason */
    const char *why = NULL;
    loom_result_t res = loom_cuda_available(&why);
    if (res != LOOM_SUCCESS) {
        ck_assert_int_eq(res, LOOM_ERROR_NOT_SUPPORTED);
        ck_assert_msg(strncmp(why, "no CUDA", 7) == 0 || strstr(why, "CUDA driver"), "%s", why);
        loom_stream_t ls;
        ck_assert_int_eq(loom_stream_create_cuda((struct CUstream_st *)0x1234, &ls),
                         LOOM_ERROR_NOT_SUPPORTED);
    }
    /* the toolkit's stub library loads, and cuInit says it is a stub */
    if (access(LOOM_TEST_CUDA_STUB, R_OK) == 0) {
        ck_assert_int_eq(loom_cuda_driver_open(LOOM_TEST_CUDA_STUB, &d), LOOM_SUCCESS);
        CUresult rc = d.init(0);
        ck_assert_int_ne(rc, CUDA_SUCCESS);
        loom_cuda_fail(&d, rc, "cuInit");
        ck_assert_msg(strstr(loom_cuda_error_string(), "cuInit: CUDA_ERROR_"), "%s",
                      loom_cuda_error_string());
    }
}
END_TEST

int main(void)
{
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "20", 0);
    setenv("LOOM_STAGE_CHUNK", "4K", 1);
    Suite *su = suite_create("cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, no_driver_is_an_error);
    tcase_add_test(tc, events_when_memops_refused);
    tcase_add_test(tc, ordering_memops);
    tcase_add_test(tc, ordering_events);
    tcase_add_test(tc, broken_ordering_noticed);
    tcase_add_test(tc, staging_memops);
    tcase_add_test(tc, staging_events);
    tcase_add_test(tc, error_in_every_call_memops);
    tcase_add_test(tc, error_in_every_call_events);
    tcase_add_test(tc, failed_copy_releases_both_ranks);
    tcase_add_test(tc, device_from_table_or_env);
    tcase_add_test(tc, device_out_of_range_named);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
