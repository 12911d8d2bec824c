/* test_comm.c - communicator behaviour beyond the collective matrix:
 * streams and events, hook streams with staged "device" buffers, split,
 * abort from another thread, a killed peer, bad init input, env:// and
 * rank-table joins, joins from a launcher's variables. Each case forks its
 * ranks and bounds its time. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../perf/coll_check.h"
#include "../support/harness.h"
#include "loom.h"

static int g_port;

static loom_comm_t join(int rank, int n)
{
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g_port);
    loom_comm_t comm = NULL;
    loom_result_t res = loom_comm_init_url(url, n, rank, &comm);
    if (res != LOOM_SUCCESS) {
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

/* ---- host stream: many async allreduces, events, synchronize ------------ */
static int rank_stream(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    loom_stream_t s;
    if (loom_stream_create_host(&s))
        return 10;
    enum { NB = 16, CNT = 50000 };
    float *bufs[NB];
    loom_event_t ev[NB];
    for (int b = 0; b < NB; b++) {
        bufs[b] = malloc(CNT * sizeof(float));
        for (int i = 0; i < CNT; i++)
            bufs[b][i] = (float)(rank + 1) * (float)(b + 1);
        loom_event_create(&ev[b]);
        if (loom_allreduce(bufs[b], bufs[b], CNT, LOOM_FLOAT32, LOOM_SUM, comm, s))
            return 11;
        loom_event_record(ev[b], s);
    }
    /* events complete in order and report success */
    for (int b = 0; b < NB; b++)
        if (loom_event_synchronize(ev[b]) != LOOM_SUCCESS)
            return 12;
    if (loom_event_query(ev[NB - 1]) != LOOM_SUCCESS)
        return 13;
    if (loom_stream_synchronize(s) != LOOM_SUCCESS)
        return 14;
    float want = (float)(n * (n + 1) / 2);
    for (int b = 0; b < NB; b++) {
        for (int i = 0; i < CNT; i++)
            if (bufs[b][i] != want * (float)(b + 1)) {
                fprintf(stderr, "rank %d buf %d [%d] = %g want %g\n", rank, b, i,
                        bufs[b][i], want * (b + 1));
                return 15;
            }
        free(bufs[b]);
        loom_event_destroy(ev[b]);
    }
    /* a blocking call after stream calls is ordered after them */
    int x = rank;
    if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_MAX, comm, NULL) || x != n - 1)
        return 16;
    loom_stream_destroy(s);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(host_stream_events)
{
    RUN(3, rank_stream, NULL, 60);
}
END_TEST

/* ---- hook stream with "device" buffers the host must stage ---------------- */
struct fake_dev {
    char *base;
    size_t size;
    int marks, waits, completes, to_host, to_dev;
};

static loom_result_t f_mark(void *u, void **mark)
{
    struct fake_dev *d = u;
    d->marks++;
    *mark = d;
    return LOOM_SUCCESS;
}
static loom_result_t f_wait(void *u, void *mark)
{
    return mark == u ? LOOM_SUCCESS : LOOM_ERROR_INTERNAL;
}
static loom_result_t f_add_wait(void *u, void **h)
{
    struct fake_dev *d = u;
    __atomic_add_fetch(&d->waits, 1, __ATOMIC_SEQ_CST);
    *h = d;
    return LOOM_SUCCESS;
}
static loom_result_t f_complete(void *u, void *h, loom_result_t st)
{
    struct fake_dev *d = u;
    __atomic_add_fetch(&d->completes, 1, __ATOMIC_SEQ_CST);
    return h == u && st == LOOM_SUCCESS ? LOOM_SUCCESS : LOOM_ERROR_INTERNAL;
}
static int f_isdev(void *u, const void *p)
{
    struct fake_dev *d = u;
    return (const char *)p >= d->base && (const char *)p < d->base + d->size;
}
static loom_result_t f_to_host(void *u, void *h, const void *dv, size_t n)
{
    struct fake_dev *d = u;
    __atomic_add_fetch(&d->to_host, 1, __ATOMIC_SEQ_CST);
    memcpy(h, dv, n);
    return LOOM_SUCCESS;
}
static loom_result_t f_to_dev(void *u, void *dv, const void *h, size_t n)
{
    struct fake_dev *d = u;
    __atomic_add_fetch(&d->to_dev, 1, __ATOMIC_SEQ_CST);
    memcpy(dv, h, n);
    return LOOM_SUCCESS;
}

static int rank_hooks(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    struct fake_dev d = {0};
    d.size = 1 << 20;
    d.base = calloc(1, d.size);
    loom_stream_hooks h = {
        .struct_size = sizeof h, .name = "fake", .mark_ready = f_mark,
        .wait_ready = f_wait, .add_wait = f_add_wait, .complete = f_complete,
        .is_device_ptr = f_isdev, .copy_to_host = f_to_host, .copy_to_device = f_to_dev,
    };
    loom_stream_t s;
    if (loom_stream_create_hooks(&h, &d, &s))
        return 10;
    int32_t *dv = (int32_t *)d.base;           /* device in place */
    int32_t *dsend = dv + 1000, *drecv = dv + 2000; /* device out of place */
    int32_t host[100];
    for (int i = 0; i < 100; i++)
        dv[i] = dsend[i] = host[i] = rank * 100 + i;
    if (loom_allreduce(dv, dv, 100, LOOM_INT32, LOOM_SUM, comm, s) ||
        loom_allreduce(dsend, drecv, 100, LOOM_INT32, LOOM_SUM, comm, s) ||
        loom_allgather(host, dv + 3000, 100, LOOM_INT32, comm, s))
        return 11;
    if (loom_stream_synchronize(s))
        return 12;
    for (int i = 0; i < 100; i++) {
        int32_t want = 100 * (n * (n - 1) / 2) + n * i;
        if (dv[i] != want || drecv[i] != want)
            return 13;
        for (int r = 0; r < n; r++)
            if (dv[3000 + r * 100 + i] != r * 100 + i)
                return 14;
    }
    if (d.marks != 3 || d.waits != 3 || d.completes != 3)
        return 15;
    /* in place: one copy each way; out of place: send in, recv out;
     * allgather from host into device: recv out only */
    if (d.to_host != 2 || d.to_dev != 3)
        return 16;
    loom_stream_destroy(s);
    free(d.base);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(hook_stream_staging)
{
    RUN(2, rank_hooks, NULL, 60);
}
END_TEST

/* ---- split --------------------------------------------------------------- */
static int rank_split(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    loom_comm_t sub = NULL;
    /* odd and even ranks, reverse order by key; rank 4 opts out */
    int color = rank == 4 ? LOOM_SPLIT_NOCOLOR : rank % 2;
    if (loom_comm_split(comm, color, -rank, &sub)) {
        fprintf(stderr, "split: %s\n", loom_get_error_string(comm));
        return 10;
    }
    if (rank == 4) {
        int64_t v = 1, sum = 0;
        if (sub != NULL)
            return 11;
        if (loom_allreduce(&v, &sum, 1, LOOM_INT64, LOOM_SUM, comm, NULL) || sum != n)
            return 16;
        loom_comm_destroy(comm);
        return 0;
    }
    int sr, ss;
    loom_comm_rank(sub, &sr);
    loom_comm_size(sub, &ss);
    int members = 0, above = 0;
    for (int r = 0; r < n; r++)
        if (r != 4 && r % 2 == rank % 2) {
            members++;
            if (r > rank)
                above++;
        }
    if (ss != members || sr != above)
        return 12;
    int64_t v = rank, sum = 0;
    if (loom_allreduce(&v, &sum, 1, LOOM_INT64, LOOM_SUM, sub, NULL))
        return 13;
    int64_t want = 0;
    for (int r = 0; r < n; r++)
        if (r != 4 && r % 2 == rank % 2)
            want += r;
    if (sum != want)
        return 14;
    /* parent still works */
    v = 1;
    if (loom_allreduce(&v, &sum, 1, LOOM_INT64, LOOM_SUM, comm, NULL) || sum != n)
        return 15;
    loom_comm_destroy(sub);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(split)
{
    RUN(5, rank_split, NULL, 60);
}
END_TEST

/* ---- abort from another thread -------------------------------------------- */
static void *aborter(void *arg)
{
    usleep(300000);
    loom_comm_abort(arg);
    return NULL;
}

static int rank_abort(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    if (rank == 1) {
        /* rank 1 never joins the second collective: rank 0 waits, then
         * its own thread aborts it */
        int x = 0;
        loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL);
        sleep(6);
        loom_comm_destroy(comm);
        return 0;
    }
    int x = 0;
    loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL);
    pthread_t t;
    pthread_create(&t, NULL, aborter, comm);
    double t0 = harness_now();
    loom_result_t res = loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL);
    double dt = harness_now() - t0;
    pthread_join(t, NULL);
    /* before rank 1 leaves (6 s), which would end the call another way */
    if (res != LOOM_ERROR_ABORTED || dt > 5) {
        fprintf(stderr, "abort: %s after %.2f s\n", loom_result_string(res), dt);
        return 10;
    }
    /* sticky: later calls fail at once */
    if (loom_barrier(comm, NULL) != LOOM_ERROR_ABORTED)
        return 11;
    loom_result_t async = LOOM_SUCCESS;
    if (loom_comm_get_async_error(comm, &async) != LOOM_SUCCESS ||
        async != LOOM_ERROR_ABORTED)
        return 12;
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(abort_from_thread)
{
    RUN(2, rank_abort, NULL, 30);
}
END_TEST

/* ---- a killed peer is named -------------------------------------------- */
static int rank_killed(int rank, int n, void *arg)
{
    setenv("LOOM_TIMEOUT", "20", 1);
    loom_comm_t comm = join(rank, n);
    float *buf = calloc(1 << 20, sizeof(float));
    if (rank == 2) {
        loom_allreduce(buf, buf, 1 << 20, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
        raise(SIGKILL);
    }
    loom_result_t res = LOOM_SUCCESS;
    double t0 = harness_now();
    for (int i = 0; i < 1000 && res == LOOM_SUCCESS; i++)
        res = loom_allreduce(buf, buf, 1 << 20, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    double dt = harness_now() - t0;
    const char *msg = loom_get_error_string(comm);
    if (res != LOOM_ERROR_REMOTE || dt > 10 || !strstr(msg, "rank ")) {
        fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, loom_result_string(res),
                dt, msg);
        return 10;
    }
    fprintf(stderr, "rank %d saw after %.3f s: %s\n", rank, dt, msg);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(killed_peer_is_named)
{
    int st[4];
    g_port = harness_free_port();
    harness_run(4, rank_killed, NULL, 40, st);
    ck_assert_int_eq(st[2], 128 + SIGKILL);
    ck_assert_int_eq(st[0], 0);
    ck_assert_int_eq(st[1], 0);
    ck_assert_int_eq(st[3], 0);
}
END_TEST

/* ---- init errors ------------------------------------------------------------ */
START_TEST(init_errors)
{
    loom_comm_t c;
    ck_assert_int_eq(loom_comm_init_url("udp://x:1", 2, 0, &c), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(NULL), "tcp://host:port or env://"));
    ck_assert_int_eq(loom_comm_init_url("tcp://127.0.0.1:80", 2, 5, &c),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(NULL), "rank 5 is not in 0..1"));
    ck_assert_int_eq(loom_comm_init_ranktable("/nonexistent/table.json", 0, &c), LOOM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(NULL), "/nonexistent/table.json"));
    unsetenv("LOOM_RANK_TABLE");
    unsetenv("RANK_TABLE_FILE");
    ck_assert_int_eq(loom_comm_init_env(&c), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_get_error_string(NULL), "LOOM_RANK_TABLE"));
}
END_TEST

/* A caller that knows the job's size is told at once when the table has
 * another: both numbers in the message, no wait for ranks that never come. */
START_TEST(table_size_checked)
{
    char table[256];
    snprintf(table, sizeof table, "%s/etc/ranktables/single-4.json",
             getenv("LOOM_SRCDIR") ? getenv("LOOM_SRCDIR") : ".");
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "600", 1);
    loom_comm_t c = NULL;
    loom_comm_opts_t o = {.struct_size = sizeof o, .nranks = 2};
    ck_assert_int_eq(loom_comm_init_ranktable_opts(table, 0, &o, &c),
                     LOOM_ERROR_INVALID_ARGUMENT);
    const char *msg = loom_get_error_string(NULL);
    ck_assert_msg(strstr(msg, "has 4 ranks but the job has 2 (the caller's world size)"),
                  "%s", msg);
    ck_assert_ptr_null(c);
    unsetenv("LOOM_BOOTSTRAP_TIMEOUT");
}
END_TEST

/* A unique id made toward a rendezvous host carries this host's address on
 * the route to it: toward 127.0.0.1 (directly or through MASTER_ADDR) the
 * job stays on loopback. Wire address at byte 16: family 4, port, IPv4. */
static void uid_is_loopback(const loom_unique_id_t *id)
{
    const unsigned char *w = (const unsigned char *)id->internal + 16;
    ck_assert_int_eq(w[0], 4);
    ck_assert_msg(w[4] == 127, "the id's address is %u.%u.%u.%u", w[4], w[5], w[6], w[7]);
}

START_TEST(unique_id_toward_rendezvous)
{
    loom_unique_id_t id;
    ck_assert_int_eq(loom_get_unique_id_toward("127.0.0.1", &id), LOOM_SUCCESS);
    uid_is_loopback(&id);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    ck_assert_int_eq(loom_get_unique_id(&id), LOOM_SUCCESS);
    unsetenv("MASTER_ADDR");
    uid_is_loopback(&id);
}
END_TEST

/* A missing rank is named by rank 0 when the bootstrap timeout expires. */
static int rank_missing(int rank, int n, void *arg)
{
    const char *table = arg;
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "2", 1);
    if (rank == 1)
        return 0; /* never joins */
    loom_comm_t c;
    loom_result_t res = loom_comm_init_ranktable(table, rank, &c);
    const char *msg = loom_get_error_string(NULL);
    if (res != LOOM_ERROR_TIMEOUT || (rank == 0 && !strstr(msg, "rank 1"))) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, loom_result_string(res), msg);
        return 10;
    }
    return 0;
}

START_TEST(missing_rank_named)
{
    char table[256];
    snprintf(table, sizeof table, "%s/etc/ranktables/single-4.json",
             getenv("LOOM_SRCDIR") ? getenv("LOOM_SRCDIR") : ".");
    char pb[16];
    snprintf(pb, sizeof pb, "%d", harness_free_port());
    setenv("LOOM_PORT_BASE", pb, 1);
    ck_assert_int_eq(harness_run(4, rank_missing, table, 30, NULL), 0);
}
END_TEST

/* Ranks join through env:// (MASTER_ADDR/PORT, WORLD_SIZE, RANK). */
static int rank_env(int rank, int n, void *arg)
{
    char v[32];
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(v, sizeof v, "%d", g_port);
    setenv("MASTER_PORT", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("RANK", v, 1);
    loom_comm_t c;
    if (loom_comm_init_url("env://", -1, -1, &c)) {
        fprintf(stderr, "env://: %s\n", loom_get_error_string(NULL));
        return 10;
    }
    uint8_t b = (uint8_t)(rank == 1 ? 42 : 0);
    loom_result_t res = loom_broadcast(&b, 1, LOOM_UINT8, 1, c, NULL);
    if (res || b != 42) {
        fprintf(stderr, "rank %d: broadcast from rank 1: %s, got %u: %s\n", rank,
                loom_result_string(res), b, loom_get_error_string(c));
        return 11;
    }
    loom_comm_destroy(c);
    return 0;
}

START_TEST(env_url)
{
    RUN(3, rank_env, NULL, 30);
}
END_TEST

/* Launcher variables off, so each case sets only its own. */
static void clear_launch_env(void)
{
    static const char *const vars[] = {
        "LOOM_RANK_TABLE", "RANK_TABLE_FILE", "LOOM_RANK", "LOOM_NRANKS", "RANK_ID",
        "RANK_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
        "SLURM_NTASKS", "MASTER_ADDR", "MASTER_PORT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

/* After a join: checks the rank, the size and a broadcast. */
static int launched_check(loom_result_t res, loom_comm_t c, int rank, int n,
                          const char *what)
{
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, loom_get_error_string(NULL));
        return 10;
    }
    int r = -1, size = -1;
    loom_comm_rank(c, &r);
    loom_comm_size(c, &size);
    uint8_t b = (uint8_t)(rank == n - 1 ? 42 : 0);
    if (r != rank || size != n || loom_broadcast(&b, 1, LOOM_UINT8, n - 1, c, NULL) ||
        b != 42) {
        fprintf(stderr, "rank %d: %s: rank %d size %d byte %d\n", rank, what, r, size, b);
        return 11;
    }
    loom_comm_destroy(c);
    return 0;
}

/* No rank table, MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK set:
 * loom_comm_init_env is env://. */
static int rank_env_fallback(int rank, int n, void *arg)
{
    (void)arg;
    char v[32];
    clear_launch_env();
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(v, sizeof v, "%d", g_port);
    setenv("MASTER_PORT", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("RANK", v, 1);
    loom_comm_t c = NULL;
    loom_result_t res = loom_comm_init_env(&c);
    return launched_check(res, c, rank, n, "init_env");
}

START_TEST(env_fallback_without_table)
{
    RUN(3, rank_env_fallback, NULL, 30);
}
END_TEST

/* tcp:// with nranks and rank -1: Open MPI's variables give them. */
static int rank_url_launcher(int rank, int n, void *arg)
{
    (void)arg;
    char v[32], url[64];
    clear_launch_env();
    snprintf(v, sizeof v, "%d", n);
    setenv("OMPI_COMM_WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("OMPI_COMM_WORLD_RANK", v, 1);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g_port);
    loom_comm_t c = NULL;
    loom_result_t res = loom_comm_init_url(url, -1, -1, &c);
    return launched_check(res, c, rank, n, "init_url -1 -1");
}

START_TEST(url_rank_from_launcher)
{
    RUN(3, rank_url_launcher, NULL, 30);
}
END_TEST

/* What -1 without a launcher, or a rank without its size, says. */
START_TEST(url_launcher_errors)
{
    loom_comm_t c;
    clear_launch_env();
    ck_assert_int_eq(loom_comm_init_url("tcp://127.0.0.1:80", -1, -1, &c),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(loom_get_error_string(NULL), "rank -1 and no launcher gives "
                                                      "one: set RANK and WORLD_SIZE"),
                  "%s", loom_get_error_string(NULL));
    setenv("RANK", "1", 1);
    ck_assert_int_eq(loom_comm_init_url("tcp://127.0.0.1:80", -1, -1, &c),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(loom_get_error_string(NULL),
                         "nranks -1 and RANK gives rank 1 but WORLD_SIZE is not set"),
                  "%s", loom_get_error_string(NULL));
    setenv("WORLD_SIZE", "1", 1);
    ck_assert_int_eq(loom_comm_init_url("tcp://127.0.0.1:80", -1, -1, &c),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(loom_get_error_string(NULL), "RANK=1 is not below WORLD_SIZE=1"),
                  "%s", loom_get_error_string(NULL));
    /* no table and no MASTER_ADDR: init_env names both ways */
    ck_assert_int_eq(loom_comm_init_env(&c), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(loom_get_error_string(NULL), "LOOM_RANK_TABLE") &&
                      strstr(loom_get_error_string(NULL), "MASTER_ADDR and MASTER_PORT"),
                  "%s", loom_get_error_string(NULL));
}
END_TEST

/* Unique-id rendezvous: rank 0 makes the id and hands it over (here a
 * shared page, as a framework's store would); every rank joins with it and
 * checks an allreduce, its local rank and size. An id with a bad magic is
 * refused by name. */
struct uid_share {
    atomic_int ready;
    loom_unique_id_t id;
};

static int rank_uid(int rank, int n, void *arg)
{
    struct uid_share *sh = arg;
    if (rank == 0) {
        if (loom_get_unique_id(&sh->id) != LOOM_SUCCESS)
            return 10;
        atomic_store(&sh->ready, 1);
    } else {
        double until = harness_now() + 20;
        while (!atomic_load(&sh->ready) && harness_now() < until)
            usleep(1000);
    }
    loom_comm_t c = NULL;
    if (loom_comm_init_rank(&c, n, &sh->id, rank) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(NULL));
        return 11;
    }
    int x = rank + 1, lr = -1, ls = -1;
    if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, c, NULL) || x != n * (n + 1) / 2)
        return 12;
    if (loom_comm_local_rank(c, &lr) || loom_comm_local_size(c, &ls) || lr != rank ||
        ls != n)
        return 13;
    loom_comm_destroy(c);
    loom_unique_id_t bad;
    memset(&bad, 0x5a, sizeof bad);
    if (loom_comm_init_rank(&c, n, &bad, rank) != LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(NULL), "unique id"))
        return 14;
    return 0;
}

START_TEST(unique_id)
{
    struct uid_share *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    atomic_init(&sh->ready, 0);
    RUN(3, rank_uid, sh, 30);
    munmap(sh, sizeof *sh);
}
END_TEST

/* loom_comm_opts_t: a framework's timeout bounds the rendezvous and each
 * call; the user's LOOM_BOOTSTRAP_TIMEOUT wins over it; a rank table of
 * another size than the caller's fails at once. arg: the case. */
struct opts_case {
    struct uid_share sh;
    int which; /* 0: missing rank; 1: late rank; 2: variable wins; 3: table size */
    char table[256];
};

static int rank_opts(int rank, int n, void *arg)
{
    struct opts_case *oc = arg;
    loom_comm_opts_t o = {.struct_size = sizeof o, .timeout = 2};
    unsetenv("LOOM_BOOTSTRAP_TIMEOUT"); /* main's: a variable the user set wins */
    unsetenv("LOOM_TIMEOUT");
    if (oc->which == 2) {
        o.timeout = 600;
        setenv("LOOM_BOOTSTRAP_TIMEOUT", "2", 1);
    }
    if (oc->which == 3) {
        o.nranks = 2;
        loom_comm_t c = NULL;
        double t0 = harness_now();
        loom_result_t res = loom_comm_init_ranktable_opts(oc->table, rank, &o, &c);
        const char *msg = loom_get_error_string(NULL);
        if (res != LOOM_ERROR_INVALID_ARGUMENT || harness_now() - t0 > 5 ||
            !strstr(msg, "has 4 ranks but the job has 2")) {
            fprintf(stderr, "rank %d: %s: %s\n", rank, loom_result_string(res), msg);
            return 10;
        }
        return 0;
    }
    if (rank == 0) {
        if (loom_get_unique_id(&oc->sh.id) != LOOM_SUCCESS)
            return 10;
        atomic_store(&oc->sh.ready, 1);
    } else {
        double until = harness_now() + 20;
        while (!atomic_load(&oc->sh.ready) && harness_now() < until)
            usleep(1000);
    }
    if (oc->which != 1 && rank == n - 1)
        return 0; /* never joins */
    loom_comm_t c = NULL;
    double t0 = harness_now();
    loom_result_t res = loom_comm_init_rank_opts(&c, n, &oc->sh.id, rank, &o);
    double dt = harness_now() - t0;
    if (oc->which != 1) {
        if (res != LOOM_ERROR_TIMEOUT || dt > 10) {
            fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, loom_result_string(res),
                    dt, loom_get_error_string(NULL));
            return 11;
        }
        return 0;
    }
    if (res != LOOM_SUCCESS)
        return 12;
    int x = 1;
    if (rank == 1) {
        sleep(8); /* late to the barrier */
        loom_comm_abort(c);
        loom_comm_destroy(c);
        return 0;
    }
    t0 = harness_now();
    res = loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, c, NULL);
    dt = harness_now() - t0;
    if (res != LOOM_ERROR_TIMEOUT || dt > 7) {
        fprintf(stderr, "rank 0: %s after %.1f s: %s\n", loom_result_string(res), dt,
                loom_get_error_string(c));
        return 13;
    }
    loom_comm_destroy(c);
    return 0;
}

START_TEST(opts_timeout_and_size)
{
    struct opts_case *oc = mmap(NULL, sizeof *oc, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(oc, MAP_FAILED);
    oc->which = _i;
    snprintf(oc->table, sizeof oc->table, "%s/etc/ranktables/single-4.json",
             getenv("LOOM_SRCDIR") ? getenv("LOOM_SRCDIR") : ".");
    atomic_init(&oc->sh.ready, 0);
    RUN(oc->which == 3 ? 2 : oc->which == 1 ? 2 : 3, rank_opts, oc, 40);
    munmap(oc, sizeof *oc);
}
END_TEST

/* Argument errors are reported, not sticky. */
static int rank_args(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    int x = 1;
    if (loom_allreduce(&x, &x, 1, (loom_dtype_t)77, LOOM_SUM, comm, NULL) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "dtype 77"))
        return 10;
    if (loom_broadcast(&x, 1, LOOM_INT32, n, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "root"))
        return 11;
    if (loom_allreduce(NULL, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL) !=
        LOOM_ERROR_INVALID_ARGUMENT)
        return 12;
    if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL) || x != n)
        return 13;
    /* the message is the last failed call's: a call that succeeded clears it */
    if (loom_get_error_string(comm)[0]) {
        fprintf(stderr, "rank %d: after a call that succeeded: \"%s\"\n", rank,
                loom_get_error_string(comm));
        return 15;
    }
    /* argument errors do not break the communicator */
    loom_result_t async = LOOM_ERROR_INTERNAL;
    if (loom_comm_get_async_error(comm, &async) != LOOM_SUCCESS ||
        async != LOOM_SUCCESS ||
        loom_comm_get_async_error(NULL, &async) != LOOM_ERROR_INVALID_ARGUMENT ||
        loom_comm_get_async_error(comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT)
        return 14;
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(argument_errors)
{
    RUN(2, rank_args, NULL, 30);
}
END_TEST

/* ---- what a communicator runs on, through the public queries ----------- */
static int rank_info(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_comm_info_t info = {.struct_size = sizeof info};
    if (loom_comm_get_info(comm, &info) != LOOM_SUCCESS)
        return 10;
    /* this rank joined over loopback: its endpoint is there, on one host */
    if (!info.transport || !*info.transport || !info.transport_detail ||
        strcmp(info.address, "127.0.0.1") != 0 || info.nhosts != 1 || info.chunk_size == 0) {
        fprintf(stderr, "rank %d: info %s / %s / %s / %d hosts / chunk %zu\n", rank,
                info.transport ? info.transport : "-",
                info.transport_detail ? info.transport_detail : "-", info.address, info.nhosts,
                info.chunk_size);
        return 11;
    }
    /* the transport is one this build has */
    const char *features = "";
    loom_get_features(&features);
    if (!strstr(features, info.transport))
        return 12;
    /* an older, shorter struct: the fields past it stay as they were */
    loom_comm_info_t old = {.struct_size = offsetof(loom_comm_info_t, transport_detail),
                            .address = "untouched"};
    if (loom_comm_get_info(comm, &old) != LOOM_SUCCESS ||
        strcmp(old.transport, info.transport) != 0 || strcmp(old.address, "untouched") != 0 ||
        old.struct_size != offsetof(loom_comm_info_t, transport_detail))
        return 13;
    loom_comm_info_t tiny = {.struct_size = 1};
    if (loom_comm_get_info(comm, &tiny) != LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "struct_size 1"))
        return 14;
    /* the algorithm for a call: a name LOOM_ALGO takes, the same on every
     * rank (checked through an allgather of its first letters) */
    const char *algo = NULL;
    if (loom_comm_algo(comm, "allreduce", 1000, LOOM_FLOAT32, LOOM_SUM, &algo) != LOOM_SUCCESS ||
        !algo || !*algo)
        return 15;
    char mine[8] = {0}, all[8 * 16];
    strncpy(mine, algo, sizeof mine - 1);
    if (loom_allgather(mine, all, sizeof mine, LOOM_UINT8, comm, NULL) != LOOM_SUCCESS)
        return 16;
    for (int r = 0; r < n; r++)
        if (memcmp(all + 8 * r, mine, sizeof mine) != 0)
            return 17;
    if (loom_comm_algo(comm, "nosuch", 1, LOOM_FLOAT32, LOOM_SUM, &algo) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "'nosuch' is not a collective"))
        return 18;
    if (loom_comm_algo(comm, "send", 1, LOOM_FLOAT32, LOOM_SUM, &algo) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        loom_comm_algo(comm, "allreduce", 1, (loom_dtype_t)99, LOOM_SUM, &algo) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "dtype 99"))
        return 19;
    /* argument errors leave the communicator working */
    int x = 1;
    if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL) != LOOM_SUCCESS || x != n)
        return 20;
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(info_queries)
{
    RUN(2, rank_info, NULL, 30);
}
END_TEST

/* ---- ranks in different calls are told, with both calls named ----------- */
static int rank_mismatch(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    float buf[1024] = {0}, out[2048];
    loom_result_t res;
    if (rank == 0)
        res = loom_allreduce(buf, buf, 1024, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    else
        res = loom_allgather(buf, out, 256, LOOM_FLOAT32, comm, NULL);
    const char *msg = loom_get_error_string(comm);
    if (res != LOOM_ERROR_MISMATCH ||
        !strstr(msg, "allreduce(float32, 1024, sum) #1") ||
        !strstr(msg, "allgather(float32, 256) #1") ||
        !strstr(msg, rank == 0 ? "rank 0 called allreduce" : "rank 1 called allgather")) {
        fprintf(stderr, "rank %d: %s: %s\n", rank, loom_result_string(res), msg);
        return 10;
    }
    /* sticky, and what loom_comm_get_async_error reports */
    if (loom_barrier(comm, NULL) != LOOM_ERROR_MISMATCH)
        return 11;
    loom_result_t async = LOOM_SUCCESS;
    if (loom_comm_get_async_error(comm, &async) != LOOM_SUCCESS ||
        async != LOOM_ERROR_MISMATCH)
        return 12;
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(mismatched_calls_named)
{
    RUN(2, rank_mismatch, NULL, 30);
}
END_TEST

/* Over the network (no shared memory), whatever the transport checks:
 *   0: tcp reads the peer's call from its frame header;
 *   1: a transport that cannot check calls (tcp told to behave so): the
 *      core's envelope ahead of each message names the peer's call;
 *   2: no message ever arrives (each rank waits to receive from the other):
 *      the waiting rank asks its peer out of band which call it is in.
 * Every rank fails within seconds with both calls named. */
static int g_net_case;

static int rank_mismatch_net(int rank, int n, void *arg)
{
    (void)arg;
    setenv("LOOM_SHM", "0", 1);
    if (g_net_case == 1)
        setenv("LOOM_TEST_TCP_NO_FINGERPRINT", "1", 1);
    loom_comm_t comm = join(rank, n);
    float buf[1024] = {0}, out[2048];
    loom_result_t res;
    const char *mine, *theirs;
    double t0 = harness_now();
    if (g_net_case == 0) {
        res = rank == 0 ? loom_allreduce(buf, buf, 1024, LOOM_FLOAT32, LOOM_SUM, comm, NULL)
                        : loom_allgather(buf, out, 256, LOOM_FLOAT32, comm, NULL);
        mine = rank == 0 ? "allreduce(float32, 1024, sum) #1" : "allgather(float32, 256) #1";
        theirs = rank == 0 ? "allgather(float32, 256) #1" : "allreduce(float32, 1024, sum) #1";
    } else if (g_net_case == 1) {
        res = rank == 0 ? loom_allreduce(buf, buf, 256, LOOM_FLOAT32, LOOM_SUM, comm, NULL)
                        : loom_broadcast(buf, 256, LOOM_FLOAT32, 0, comm, NULL);
        mine = rank == 0 ? "allreduce(float32, 256, sum) #1"
                         : "broadcast(float32, 256, root 0) #1";
        theirs = rank == 0 ? "broadcast(float32, 256, root 0) #1"
                           : "allreduce(float32, 256, sum) #1";
    } else {
        res = loom_broadcast(buf, 256, LOOM_FLOAT32, 1 - rank, comm, NULL);
        mine = rank == 0 ? "broadcast(float32, 256, root 1) #1"
                         : "broadcast(float32, 256, root 0) #1";
        theirs = rank == 0 ? "broadcast(float32, 256, root 0) #1"
                           : "broadcast(float32, 256, root 1) #1";
    }
    double dt = harness_now() - t0;
    const char *msg = loom_get_error_string(comm);
    if (res != LOOM_ERROR_MISMATCH || dt > 6 || !strstr(msg, mine) || !strstr(msg, theirs)) {
        fprintf(stderr, "case %d rank %d after %.1f s: %s: %s\n", g_net_case, rank, dt,
                loom_result_string(res), msg);
        return 10;
    }
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(mismatched_calls_named_network)
{
    g_net_case = _i;
    RUN(2, rank_mismatch_net, NULL, 30);
}
END_TEST

/* ---- a rank that dies between calls is noticed by ranks in a barrier ----
 * Rank 3 leaves only once the others have returned from the first call: a
 * rank can finish a collective while another still waits in it, and a peer
 * that vanishes then fails that call (rightly: the communicator is broken),
 * which is not what this test is about. arg: a harness_counter_new(). */
static int rank_dies_idle(int rank, int n, void *arg)
{
    atomic_int *done_first = arg;
    setenv("LOOM_TIMEOUT", "60", 1);
    loom_comm_t comm = join(rank, n);
    int x = 1;
    if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL) || x != n)
        return 10;
    if (rank == 3) {
        if (!harness_counter_wait(done_first, n - 1, 10)) {
            fprintf(stderr, "rank 3: the others did not finish call #1 in 10 s\n");
            return 12;
        }
        _exit(0); /* leaves without loom_comm_destroy: no goodbye */
    }
    atomic_fetch_add(done_first, 1);
    usleep(200000);
    double t0 = harness_now();
    loom_result_t res = loom_barrier(comm, NULL);
    double dt = harness_now() - t0;
    const char *msg = loom_get_error_string(comm);
    if (res >= 0 || dt > 5 || !strstr(msg, "rank 3")) {
        fprintf(stderr, "rank %d: %s after %.1f s: %s\n", rank, loom_result_string(res),
                dt, msg);
        return 11;
    }
    fprintf(stderr, "rank %d (%.2f s): %s\n", rank, dt, msg);
    loom_comm_destroy(comm);
    return 0;
}

START_TEST(death_between_calls_noticed)
{
    atomic_int *done_first = harness_counter_new();
    ck_assert_ptr_nonnull(done_first);
    RUN(4, rank_dies_idle, done_first, 30);
    harness_counter_free(done_first);
}
END_TEST

/* ---- an orderly end: ranks leave at different times, nobody errs ------- */
static int rank_orderly(int rank, int n, void *arg)
{
    loom_comm_t comm = join(rank, n);
    int x = rank;
    for (int i = 0; i < 50; i++)
        if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_MAX, comm, NULL))
            return 10;
    /* rank 0 leaves at once; the others keep a sub-communicator going */
    loom_comm_t sub = NULL;
    if (loom_comm_split(comm, rank == 0 ? LOOM_SPLIT_NOCOLOR : 1, rank, &sub))
        return 11;
    loom_comm_destroy(comm);
    if (rank == 0)
        return 0;
    usleep(100000);
    for (int i = 0; i < 50; i++)
        if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_MAX, sub, NULL)) {
            fprintf(stderr, "rank %d: %s\n", rank, loom_get_error_string(sub));
            return 12;
        }
    loom_comm_destroy(sub);
    return 0;
}

START_TEST(orderly_exit_is_quiet)
{
    RUN(3, rank_orderly, NULL, 30);
}
END_TEST

/* ---- a peer that stops calling: stall warning, timeout naming it, and the
 * flight recorder written on timeout and on SIGUSR1 --------------------- */
static char trace_dir[64];

static int rank_stall(int rank, int n, void *arg)
{
    char logf[128];
    snprintf(logf, sizeof logf, "%s/log-%d.txt", trace_dir, rank);
    setenv("LOOM_TIMEOUT", "3", 1);
    setenv("LOOM_STALL_WARN", "1", 1);
    setenv("LOOM_TRACE_DIR", trace_dir, 1);
    setenv("LOOM_DEBUG_FILE", logf, 1);
    loom_comm_t comm = join(rank, n);
    int x = 1;
    if (loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL))
        return 10;
    if (rank == 1) {
        raise(SIGUSR1); /* a dump with reason "signal" */
        sleep(6);       /* never makes the second call */
        return 0;
    }
    double t0 = harness_now();
    loom_result_t res = loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL);
    double dt = harness_now() - t0;
    const char *msg = loom_get_error_string(comm);
    if (res != LOOM_ERROR_TIMEOUT || dt < 2.5 || dt > 6 || !strstr(msg, "rank 1") ||
        !strstr(msg, "allreduce(int32, 1, sum) #2")) {
        fprintf(stderr, "rank 0: %s after %.1f s: %s\n", loom_result_string(res), dt, msg);
        return 11;
    }
    loom_comm_destroy(comm);
    return 0;
}

static int file_has(const char *path_glob_dir, const char *prefix, const char *needle)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -l -- '%s' %s/%s* >/dev/null 2>&1", needle,
             path_glob_dir, prefix);
    return system(cmd) == 0;
}

START_TEST(stall_timeout_and_flight_recorder)
{
    snprintf(trace_dir, sizeof trace_dir, "/tmp/loom-trace-test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(trace_dir));
    RUN(2, rank_stall, NULL, 30);
    /* the waiting rank warned about the stall before the timeout */
    ck_assert_msg(file_has(trace_dir, "log-0", "no progress for"), "no stall warning");
    ck_assert_msg(file_has(trace_dir, "log-0", "LOOM_STALL_WARN"), "no stall warning");
    /* dumps: rank 0 on its timeout, rank 1 on SIGUSR1 */
    ck_assert_msg(file_has(trace_dir, "loom-trace-", "\"reason\":\"timeout\""),
                  "no timeout dump");
    ck_assert_msg(file_has(trace_dir, "loom-trace-", "\"reason\":\"signal\""),
                  "no signal dump");
    ck_assert_msg(file_has(trace_dir, "loom-trace-", "\"call\":\"allreduce(int32, 1, sum) #2\",\"state\":\"failed\""),
                  "the timed-out call is not in the dump");
    /* it ran until LOOM_TIMEOUT (3 s), stamped in ms to the tick the file names */
    ck_assert_msg(
        file_has(trace_dir, "loom-trace-",
                 "sum) #2\",\"state\":\"failed\".*\"wait_ms\":0,\"run_ms\":[23][0-9][0-9][0-9]}"),
        "the timed-out call's times are not in the dump");
    ck_assert_msg(file_has(trace_dir, "loom-trace-", "\"tick_ms\":[0-9]"), "no tick in the dump");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", trace_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "20", 0);
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("comm");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, host_stream_events);
    tcase_add_test(tc, hook_stream_staging);
    tcase_add_test(tc, split);
    tcase_add_test(tc, abort_from_thread);
    tcase_add_test(tc, killed_peer_is_named);
    tcase_add_test(tc, init_errors);
    tcase_add_test(tc, missing_rank_named);
    tcase_add_test(tc, env_url);
    tcase_add_test(tc, env_fallback_without_table);
    tcase_add_test(tc, url_rank_from_launcher);
    tcase_add_test(tc, url_launcher_errors);
    tcase_add_test(tc, unique_id);
    tcase_add_test(tc, unique_id_toward_rendezvous);
    tcase_add_test(tc, table_size_checked);
    tcase_add_loop_test(tc, opts_timeout_and_size, 0, 4);
    tcase_add_test(tc, argument_errors);
    tcase_add_test(tc, info_queries);
    tcase_add_test(tc, mismatched_calls_named);
    tcase_add_loop_test(tc, mismatched_calls_named_network, 0, 3);
    tcase_add_test(tc, death_between_calls_noticed);
    tcase_add_test(tc, orderly_exit_is_quiet);
    tcase_add_test(tc, stall_timeout_and_flight_recorder);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
