/* test_stage.c - device buffers staged in pieces through host memory
 * (src/stream/stage.c), without a device: hook streams whose "device
 * memory" the CPU cannot touch (devmem.h: a load through such an address
 * faults, so a rank that reads a device buffer directly dies), copied by
 * the hooks either synchronously or asynchronously by a copy thread with
 * random delays. Every collective with device, host and mixed buffers,
 * in and out of place, cut into several pieces (LOOM_STAGE_CHUNK=4K);
 * the asynchronous pipeline's contract (a slot reused only after its copy
 * finished, the next piece copied in before this one's result is copied
 * out, one pool per stream); a failing copy; ranks that disagree about
 * where the buffers live. Each case forks its ranks and bounds its time. */
#define _GNU_SOURCE 1
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../perf/coll_check.h"
#include "../support/devmem.h"
#include "../support/harness.h"
#include "loom.h"
#include "../support/stage_one.h"

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

/* ---- a fake device: memory, and hooks that copy it ----------------------- */

#define NSLOTS_MAX 64
#define LOG_MAX 4096

struct copy_job {
    int slot, to_device;
    char *dst;
    const char *src;
    size_t dpitch, spitch, width, rows;
    struct copy_job *next;
};

struct fake_dev {
    struct devmem mem;
    int async;
    /* copy thread (async) */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    struct copy_job *head, *tail;
    int stop;
    int pending[NSLOTS_MAX];   /* copies queued or running per slot       */
    int acked[NSLOTS_MAX];     /* copy_query said finished since the last */
    int failed[NSLOTS_MAX];
    unsigned ncopies, fail_at; /* fail the fail_at-th copy (1-based; 0 none) */
    unsigned seed;
    /* what the hooks saw */
    int allocs, violations;
    char violation[256];
    struct { int to_device; size_t off; } log[LOG_MAX];
    int nlog;
    char err[256];
};

static void violate(struct fake_dev *d, const char *what)
{
    if (!d->violations++)
        snprintf(d->violation, sizeof d->violation, "%s", what);
}

static int f_isdev(void *u, const void *p)
{
    return devmem_contains(&((struct fake_dev *)u)->mem, p);
}

static void do_copy(struct fake_dev *d, int to_device, char *dst, size_t dpitch,
                    const char *src, size_t spitch, size_t width, size_t rows)
{
    if (to_device)
        dst = devmem_view(&d->mem, dst);
    else
        src = devmem_view(&d->mem, src);
    for (size_t i = 0; i < rows; i++)
        memcpy(dst + i * dpitch, src + i * spitch, width);
}

static loom_result_t f_to_host(void *u, void *h, const void *dv, size_t n)
{
    struct fake_dev *d = u;
    if (!f_isdev(d, dv))
        violate(d, "copy_to_host from memory that is not the device's");
    do_copy(d, 0, h, n, dv, n, n, 1);
    return LOOM_SUCCESS;
}

static loom_result_t f_to_dev(void *u, void *dv, const void *h, size_t n)
{
    struct fake_dev *d = u;
    if (!f_isdev(d, dv))
        violate(d, "copy_to_device into memory that is not the device's");
    do_copy(d, 1, dv, n, h, n, n, 1);
    return LOOM_SUCCESS;
}

static void *copier(void *arg)
{
    struct fake_dev *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->head && !d->stop)
            pthread_cond_wait(&d->cv, &d->lock);
        if (!d->head)
            break;
        struct copy_job *j = d->head;
        d->head = j->next;
        if (!d->head)
            d->tail = NULL;
        int fail = ++d->ncopies == d->fail_at;
        unsigned us = (unsigned)rand_r(&d->seed) % 300;
        pthread_mutex_unlock(&d->lock);
        struct timespec ts = {0, (long)us * 1000};
        nanosleep(&ts, NULL);
        if (!fail)
            do_copy(d, j->to_device, j->dst, j->dpitch, j->src, j->spitch, j->width,
                    j->rows);
        pthread_mutex_lock(&d->lock);
        if (fail)
            d->failed[j->slot] = 1;
        d->pending[j->slot]--;
        free(j);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static loom_result_t f_alloc(void *u, size_t bytes, void **host)
{
    struct fake_dev *d = u;
    d->allocs++;
    *host = malloc(bytes);
    return *host ? LOOM_SUCCESS : LOOM_ERROR_NO_MEMORY;
}

static loom_result_t f_free(void *u, void *host, size_t bytes)
{
    free(host);
    return LOOM_SUCCESS;
}

static loom_result_t f_copy_async(void *u, int slot, int to_device, void *dst,
                                  size_t dpitch, const void *src, size_t spitch,
                                  size_t width, size_t rows)
{
    struct fake_dev *d = u;
    const void *dev = to_device ? dst : src;
    if (slot < 0 || slot >= NSLOTS_MAX) {
        violate(d, "copy_async: slot out of range");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (!f_isdev(d, dev) || !f_isdev(d, (const char *)dev + (rows - 1) *
                                           (to_device ? dpitch : spitch) + width - 1))
        violate(d, "copy_async: the device side is not device memory");
    if (rows > 1 && ((to_device ? spitch : dpitch) != width))
        violate(d, "copy_async: the staging side is not packed");
    struct copy_job *j = calloc(1, sizeof *j);
    if (!j)
        return LOOM_ERROR_NO_MEMORY;
    *j = (struct copy_job){slot, to_device, dst, src, dpitch, spitch, width, rows, NULL};
    pthread_mutex_lock(&d->lock);
    if (!d->acked[slot])
        violate(d, "copy_async on a slot whose last copy was not seen finished");
    d->acked[slot] = 0;
    d->pending[slot]++;
    if (d->nlog < LOG_MAX) {
        d->log[d->nlog].to_device = to_device;
        d->log[d->nlog].off = (size_t)((const char *)dev - d->mem.dev);
        d->nlog++;
    }
    if (d->tail)
        d->tail->next = j;
    else
        d->head = j;
    d->tail = j;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->lock);
    return LOOM_SUCCESS;
}

static loom_result_t f_copy_query(void *u, int slot)
{
    struct fake_dev *d = u;
    pthread_mutex_lock(&d->lock);
    loom_result_t res = LOOM_SUCCESS;
    if (d->failed[slot]) {
        snprintf(d->err, sizeof d->err, "fake copy engine: copy into slot %d failed", slot);
        res = LOOM_ERROR_SYSTEM;
    } else if (d->pending[slot]) {
        res = LOOM_NOT_READY;
    } else {
        d->acked[slot] = 1;
    }
    pthread_mutex_unlock(&d->lock);
    return res;
}

static const char *f_last_error(void *u)
{
    return ((struct fake_dev *)u)->err;
}

static loom_result_t f_mark(void *u, void **mark)
{
    *mark = u;
    return LOOM_SUCCESS;
}
static loom_result_t f_query(void *u, void *mark)
{
    return mark == u ? LOOM_SUCCESS : LOOM_ERROR_INTERNAL;
}
static loom_result_t f_add_wait(void *u, void **h)
{
    *h = u;
    return LOOM_SUCCESS;
}
static loom_result_t f_complete(void *u, void *h, loom_result_t st)
{
    return h == u ? LOOM_SUCCESS : LOOM_ERROR_INTERNAL;
}

static int fake_open(struct fake_dev *d, int async, unsigned seed, loom_stream_t *s)
{
    memset(d, 0, sizeof *d);
    if (devmem_init(&d->mem, 64 << 20) < 0)
        return -1;
    d->async = async;
    d->seed = seed;
    for (int k = 0; k < NSLOTS_MAX; k++)
        d->acked[k] = 1;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cv, NULL);
    loom_stream_hooks h = {
        .struct_size = sizeof h, .name = async ? "fake-async" : "fake-sync",
        .mark_ready = f_mark, .query_ready = f_query, .add_wait = f_add_wait,
        .complete = f_complete, .is_device_ptr = f_isdev, .last_error = f_last_error,
    };
    if (async) {
        h.stage_alloc = f_alloc;
        h.stage_free = f_free;
        h.copy_async = f_copy_async;
        h.copy_query = f_copy_query;
        if (pthread_create(&d->thread, NULL, copier, d) != 0)
            return -1;
    } else {
        h.copy_to_host = f_to_host;
        h.copy_to_device = f_to_dev;
    }
    return loom_stream_create_hooks(&h, d, s) == LOOM_SUCCESS ? 0 : -1;
}

static void fake_close(struct fake_dev *d, loom_stream_t s)
{
    loom_stream_destroy(s);
    if (d->async) {
        pthread_mutex_lock(&d->lock);
        d->stop = 1;
        pthread_cond_signal(&d->cv);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
    }
    devmem_fini(&d->mem);
}

/* sc_mem over the fake device (host buffers from malloc) */
struct tmem {
    struct fake_dev *d;
    void *host[8];
    int nhost;
};
static void *tm_alloc(void *ctx, enum sc_place p, size_t bytes)
{
    struct tmem *m = ctx;
    if (p == SC_DEV)
        return devmem_alloc(&m->d->mem, bytes);
    if (m->nhost == 8)
        return NULL;
    return m->host[m->nhost++] = malloc(bytes);
}
static void *tm_view(void *ctx, enum sc_place p, void *ptr)
{
    struct tmem *m = ctx;
    return p == SC_DEV ? devmem_view(&m->d->mem, ptr) : ptr;
}
static void tm_release(void *ctx)
{
    struct tmem *m = ctx;
    devmem_reset(&m->d->mem);
    for (int i = 0; i < m->nhost; i++)
        free(m->host[i]);
    m->nhost = 0;
}

/* ---- every collective, every placement, several pieces ------------------- */

struct kinds_arg {
    int async;
};

static int rank_kinds(int rank, int n, void *arg)
{
    const struct kinds_arg *ka = arg;
    loom_comm_t comm = join(rank, n);
    struct fake_dev d;
    loom_stream_t s;
    if (fake_open(&d, ka->async, 7u + (unsigned)rank, &s) < 0)
        return 10;
    struct tmem tm = {.d = &d};
    struct sc_mem m = {&tm, tm_alloc, tm_view, tm_release};
    static const struct { enum sc_place sp, rp; int inplace; } places[] = {
        {SC_DEV, SC_DEV, 0}, {SC_DEV, SC_DEV, 1}, {SC_DEV, SC_HOST, 0}, {SC_HOST, SC_DEV, 0}};
    static const loom_dtype_t types[] = {LOOM_INT32, LOOM_BFLOAT16};
    /* LOOM_STAGE_CHUNK=4K: one piece, a piece boundary, several pieces
     * (int32 elementwise: 1024 per piece; blocked over 3 ranks: 341) */
    static const uint64_t counts[] = {1, 1024, 5003};
    uint64_t seed = 1;
    for (int k = 0; k < SC_NKINDS; k++)
        for (size_t p = 0; p < sizeof places / sizeof places[0]; p++)
            for (size_t t = 0; t < 2; t++)
                for (size_t c = 0; c < 3; c++) {
                    loom_redop_t op = (k == SC_ALLGATHER || k == SC_BROADCAST) ? LOOM_SUM
                                      : sc_ops[seed % 4];
                    sc_one(comm, s, rank, n, k, types[t], op, counts[c], places[p].inplace,
                           places[p].sp, places[p].rp, seed++, &m);
                }
    int rc = sc_fails ? 11 : 0;
    if (d.violations) {
        fprintf(stderr, "rank %d: %d hook contract violations, first: %s\n", rank,
                d.violations, d.violation);
        rc = 12;
    }
    if (ka->async && d.allocs != 1) {
        fprintf(stderr, "rank %d: staging memory allocated %d times, not once\n", rank,
                d.allocs);
        rc = 13;
    }
    fake_close(&d, s);
    loom_comm_destroy(comm);
    return rc;
}

START_TEST(sync_copies_all_kinds)
{
    struct kinds_arg a = {0};
    RUN(3, rank_kinds, &a, 60);
}
END_TEST

START_TEST(async_copies_all_kinds)
{
    struct kinds_arg a = {1};
    RUN(3, rank_kinds, &a, 60);
}
END_TEST

/* ---- the pipeline's order ---------------------------------------------- */

/* One in-place allreduce of 12 pieces: piece i+1's copy in must be started
 * before piece i's copy out (it runs while piece i is on the network). */
static int rank_order(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    struct fake_dev d;
    loom_stream_t s;
    if (fake_open(&d, 1, 99u + (unsigned)rank, &s) < 0)
        return 10;
    enum { PER = 1024, NP = 12 };
    int32_t *buf = devmem_alloc(&d.mem, NP * PER * sizeof(int32_t));
    int32_t *v = devmem_view(&d.mem, buf);
    for (int i = 0; i < NP * PER; i++)
        v[i] = rank + i;
    if (loom_allreduce(buf, buf, NP * PER, LOOM_INT32, LOOM_SUM, comm, s) ||
        loom_stream_synchronize(s))
        return 11;
    for (int i = 0; i < NP * PER; i++)
        if (v[i] != n * (n - 1) / 2 + n * i) {
            fprintf(stderr, "rank %d: element %d = %d\n", rank, i, v[i]);
            return 12;
        }
    int in_at[NP], out_at[NP];
    for (int i = 0; i < NP; i++)
        in_at[i] = out_at[i] = -1;
    for (int e = 0; e < d.nlog; e++) {
        int piece = (int)(d.log[e].off / (PER * sizeof(int32_t)));
        if (piece >= NP)
            return 13;
        int *at = d.log[e].to_device ? &out_at[piece] : &in_at[piece];
        if (*at >= 0)
            return 14; /* a piece copied twice */
        *at = e;
    }
    for (int i = 0; i < NP; i++) {
        if (in_at[i] < 0 || out_at[i] < 0 || in_at[i] > out_at[i]) {
            fprintf(stderr, "rank %d: piece %d copied in at %d, out at %d\n", rank, i,
                    in_at[i], out_at[i]);
            return 15;
        }
        if (i + 1 < NP && in_at[i + 1] > out_at[i]) {
            fprintf(stderr, "rank %d: piece %d copied in (copy #%d) after piece %d was "
                    "copied out (#%d): no overlap\n", rank, i + 1, in_at[i + 1], i,
                    out_at[i]);
            return 16;
        }
    }
    if (d.violations) {
        fprintf(stderr, "rank %d: %s\n", rank, d.violation);
        return 17;
    }
    fake_close(&d, s);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(async_pipeline_order)
{
    RUN(2, rank_order, NULL, 30);
}
END_TEST

/* ---- a copy that fails --------------------------------------------------- */

/* Rank 0's 5th copy fails: both ranks' calls fail (neither hangs), rank 0's
 * message names the hook's error, the stream is released, later calls on
 * the communicator return the error at once. */
static int rank_copy_fails(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    struct fake_dev d;
    loom_stream_t s;
    if (fake_open(&d, 1, 5u, &s) < 0)
        return 10;
    if (rank == 0)
        d.fail_at = 5;
    enum { COUNT = 8 * 1024 };
    int32_t *buf = devmem_alloc(&d.mem, COUNT * sizeof(int32_t));
    loom_result_t res = loom_allreduce(buf, buf, COUNT, LOOM_INT32, LOOM_SUM, comm, s);
    if (res != LOOM_SUCCESS)
        return 11;
    res = loom_stream_synchronize(s);
    if (res == LOOM_SUCCESS)
        return 12;
    const char *msg = loom_get_error_string(comm);
    if (rank == 0 && !strstr(msg, "fake copy engine: copy into slot")) {
        fprintf(stderr, "rank 0: message does not name the copy's error: %s\n", msg);
        return 13;
    }
    if (loom_allreduce(buf, buf, COUNT, LOOM_INT32, LOOM_SUM, comm, s) == LOOM_SUCCESS)
        return 14;
    fake_close(&d, s);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(async_copy_fails)
{
    RUN(2, rank_copy_fails, NULL, 30);
}
END_TEST

/* ---- ranks that disagree about where the buffers are -------------------- */

/* Rank 0 passes device memory (the call runs as pieces), rank 1 host
 * memory (one call): both fail, none hangs, and a message names the two
 * ranks' calls. */
static int rank_mixed(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    struct fake_dev d;
    loom_stream_t s;
    if (fake_open(&d, 1, 3u, &s) < 0)
        return 10;
    enum { COUNT = 4 * 1024 };
    int32_t *buf = rank == 0 ? devmem_alloc(&d.mem, COUNT * sizeof(int32_t))
                             : calloc(COUNT, sizeof(int32_t));
    loom_result_t res = loom_allreduce(buf, buf, COUNT, LOOM_INT32, LOOM_SUM, comm, s);
    if (res == LOOM_SUCCESS)
        res = loom_stream_synchronize(s);
    if (res == LOOM_SUCCESS)
        return 11;
    const char *msg = loom_get_error_string(comm);
    fprintf(stderr, "rank %d: %s: %s\n", rank, loom_result_string(res), msg);
    if (res == LOOM_ERROR_MISMATCH && !strstr(msg, "allreduce(int32, 1024"))
        return 12;
    if (rank == 1)
        free(buf);
    fake_close(&d, s);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(mixed_placement_fails)
{
    RUN(2, rank_mixed, NULL, 30);
}
END_TEST

/* ---- hooks that do not go together -------------------------------------- */

START_TEST(partial_async_hooks_refused)
{
    loom_stream_hooks h = {.struct_size = sizeof h, .name = "half",
                           .is_device_ptr = f_isdev, .copy_async = f_copy_async};
    loom_stream_t s = NULL;
    ck_assert_int_eq(loom_stream_create_hooks(&h, NULL, &s), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(NULL), "come together"));
    /* an adapter built against the older, smaller struct still works */
    h = (loom_stream_hooks){.struct_size = offsetof(loom_stream_hooks, query_ready),
                            .name = "old", .copy_async = f_copy_async};
    ck_assert_int_eq(loom_stream_create_hooks(&h, NULL, &s), LOOM_SUCCESS);
    loom_stream_destroy(s);
}
END_TEST

int main(void)
{
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "20", 0);
    setenv("LOOM_STAGE_CHUNK", "4K", 1);
    setenv("LOOM_STAGE_SLOTS", "3", 1);
    Suite *su = suite_create("stage");
    TCase *tc = tcase_create("stage");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, partial_async_hooks_refused);
    tcase_add_test(tc, sync_copies_all_kinds);
    tcase_add_test(tc, async_copies_all_kinds);
    tcase_add_test(tc, async_pipeline_order);
    tcase_add_test(tc, async_copy_fails);
    tcase_add_test(tc, mixed_placement_fails);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
