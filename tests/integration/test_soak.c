/* test_soak.c - 4 ranks, 20,000 mixed collectives, every result checked,
 * and no growth in open descriptors or resident memory.
 *
 * Every rank draws the same sequence of calls from a shared seed: the kind
 * (allreduce, allgather, broadcast, reduce_scatter, reduce, barrier), the
 * dtype, the op, the root, in-place or not, and a size of 0..4 MiB (the
 * largest buffer of the call), mostly small: 90% log-uniform in 0..64 KiB,
 * 10% log-uniform in 64 KiB..4 MiB. One call in 8 goes through a host stream
 * and an event (polled with loom_event_query, then synchronized).
 *
 * Each rank records its open descriptors (entries of /proc/self/fd) and
 * VmRSS after call 1,000 and after the last call, each time after a
 * barrier and SOAK_SETTLE_S of rest (the out-of-band service closes an
 * outgoing socket idle for 1 s: one used at set-up may be open at call
 * 1,000 on a fast machine and closed by the end): descriptors must be
 * equal, and RSS may grow by at most SOAK_RSS_SLACK_KB. The buffers are
 * allocated and touched once before the first call, so what is measured is
 * the library's own memory: by call 1,000 every connection, chunk buffer and
 * queue slot it keeps has been made; what is left is malloc's arenas, which
 * the progress thread's and the caller's small per-call allocations can
 * fragment by a few pages (0.2..2.5 MiB seen here). 8 MiB over the 19,000
 * calls after the first measure is 440 bytes per call, or 4.4 KB per large
 * call (about 1,900 of them): any per-call leak of a header, a request or a
 * page of staging breaks it, while allocator noise stays well below it.
 *
 * usage: test_soak [OPS]   (default 20000; env LOOM_TEST_SOAK_OPS too)
 *        env LOOM_TEST_SOAK_SEED (default 20260101) */
#include "build_config.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../perf/coll_check.h"
#include "../support/harness.h"
#include "loom.h"

#define SOAK_RANKS 4
#define SOAK_MAX_BYTES (4u << 20)
#define SOAK_SMALL_BYTES (64u << 10)
#define SOAK_WARM_OPS 1000
#define SOAK_RSS_SLACK_KB (8 * 1024)
#define SOAK_SLACK 64 /* guard bytes past each output */
#define SOAK_SETTLE_S 2 /* more than the OOB service's idle close (1 s) */

struct soak_cfg {
    int port;
    uint64_t ops;
    uint64_t seed;
};

struct soak_call {
    int kind; /* 0 allreduce 1 allgather 2 broadcast 3 reduce_scatter 4 reduce 5 barrier */
    loom_dtype_t t;
    loom_redop_t op;
    uint64_t count;
    int root, inplace, stream;
};

static const char *const soak_kinds[] = {"allreduce", "allgather", "broadcast",
                                         "reduce_scatter", "reduce", "barrier"};

/* Call i, the same on every rank. */
static struct soak_call soak_draw(uint64_t seed, uint64_t i, int n)
{
    uint64_t x = cc_mix(seed ^ cc_mix(i));
    uint64_t y = cc_mix(x);
    struct soak_call c;
    c.kind = (int)(x % 6);
    c.t = (loom_dtype_t)((x >> 8) % LOOM_DTYPE_COUNT);
    c.op = (loom_redop_t)((x >> 16) % LOOM_REDOP_COUNT);
    c.root = (int)((x >> 24) % (uint64_t)n);
    c.inplace = (int)((x >> 32) & 1);
    c.stream = ((x >> 33) & 7) == 0;
    /* bytes: log-uniform below 64 KiB (90%), else 64 KiB..4 MiB */
    double u = (double)(y >> 11) / 9007199254740992.0; /* [0,1) */
    int large = (int)((y & 0xffff) % 100) < 10;
    double lo = large ? SOAK_SMALL_BYTES : 1, hi = large ? SOAK_MAX_BYTES : SOAK_SMALL_BYTES;
    uint64_t bytes = (uint64_t)(lo * pow(hi / lo, u));
    if (!large && (y & 0xff0000) == 0)
        bytes = 0; /* 1 in 256: an empty call */
    size_t es = loom_dtype_size(c.t);
    /* allgather and reduce_scatter: bytes is the n-block buffer */
    uint64_t per = (c.kind == 1 || c.kind == 3) ? es * (uint64_t)n : es;
    c.count = bytes / per;
    return c;
}

struct soak_usage {
    long fds;
    long rss_kb;
};

static struct soak_usage soak_measure(void)
{
    struct soak_usage u = {0, -1};
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                u.fds++;
        closedir(d);
    }
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "VmRSS:", 6) == 0)
                u.rss_kb = strtol(line + 6, NULL, 10);
        fclose(f);
    }
    return u;
}

struct soak_rank {
    loom_comm_t comm;
    loom_stream_t stream;
    int rank, n;
    char *a, *b;
    size_t cap;
    int fails;
};

/* soak_measure once every rank is here and idle sockets have closed */
static struct soak_usage soak_settled(struct soak_rank *s)
{
    if (loom_barrier(s->comm, NULL) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: barrier before measuring: %s\n", s->rank,
                loom_get_error_string(s->comm));
        s->fails++;
    }
    sleep(SOAK_SETTLE_S);
    return soak_measure();
}

static void soak_fail(struct soak_rank *s, uint64_t i, const struct soak_call *c,
                      const char *what)
{
    if (s->fails++ < 10)
        fprintf(stderr, "rank %d: call %" PRIu64 " %s %s %s count %" PRIu64 " root %d%s%s: %s\n",
                s->rank, i, soak_kinds[c->kind], loom_dtype_name(c->t),
                loom_redop_name(c->op), c->count, c->root, c->inplace ? " in-place" : "",
                c->stream ? " on a stream" : "", what);
}

/* Issues the call, on the stream when c->stream, and waits for it. */
static loom_result_t soak_issue(struct soak_rank *s, const struct soak_call *c, void *in,
                                void *out)
{
    loom_stream_t st = c->stream ? s->stream : NULL;
    loom_result_t res;
    switch (c->kind) {
    case 0: res = loom_allreduce(in, out, c->count, c->t, c->op, s->comm, st); break;
    case 1: res = loom_allgather(in, out, c->count, c->t, s->comm, st); break;
    case 2: res = loom_broadcast(out, c->count, c->t, c->root, s->comm, st); break;
    case 3: res = loom_reduce_scatter(in, out, c->count, c->t, c->op, s->comm, st); break;
    case 4: res = loom_reduce(in, out, c->count, c->t, c->op, c->root, s->comm, st); break;
    default: res = loom_barrier(s->comm, st); break;
    }
    if (res != LOOM_SUCCESS || !st)
        return res;
    loom_event_t ev;
    res = loom_event_create(&ev);
    if (res != LOOM_SUCCESS)
        return res;
    res = loom_event_record(ev, st);
    /* poll a while (the op may or may not be done), then block */
    for (int k = 0; res == LOOM_SUCCESS && k < 3; k++) {
        res = loom_event_query(ev);
        if (res == LOOM_NOT_READY)
            res = LOOM_SUCCESS;
        else
            break;
    }
    if (res == LOOM_SUCCESS)
        res = loom_event_synchronize(ev);
    loom_result_t d = loom_event_destroy(ev);
    if (res == LOOM_SUCCESS)
        res = loom_stream_synchronize(st);
    return res != LOOM_SUCCESS ? res : d;
}

/* One call: fill, issue, check. */
static void soak_one(struct soak_rank *s, uint64_t i, const struct soak_call *c, uint64_t seed)
{
    int n = s->n, r = s->rank;
    size_t es = loom_dtype_size(c->t);
    size_t block = (size_t)c->count * es;
    char *in = s->a, *out = s->b;
    size_t outb = block; /* bytes the call writes to out */
    switch (c->kind) {
    case 0: case 4:
        cc_fill(in, c->t, c->op, seed, r, 0, c->count);
        if (c->inplace)
            out = in;
        break;
    case 1:
        outb = block * (size_t)n;
        if (c->inplace)
            in = out + (size_t)r * block;
        cc_fill(in, c->t, LOOM_SUM, seed, r, 0, c->count);
        break;
    case 2:
        out = in;
        if (r == c->root)
            cc_fill(out, c->t, LOOM_SUM, seed, r, 0, c->count);
        else
            memset(out, 0x5a, block);
        break;
    case 3:
        cc_fill(in, c->t, c->op, seed, r, 0, c->count * (uint64_t)n);
        if (c->inplace)
            out = in + (size_t)r * block;
        break;
    default:
        outb = 0;
        break;
    }
    if (c->kind == 4 && r != c->root && !c->inplace)
        out = NULL;
    /* out-of-place outputs get guard bytes (in place, past the output is input) */
    int guarded = out && !c->inplace && c->kind != 2 && c->kind != 5;
    if (guarded)
        memset(out + outb, 0xa5, SOAK_SLACK);
    loom_result_t res = soak_issue(s, c, in, out);
    if (res != LOOM_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s", loom_result_string(res),
                 loom_get_error_string(s->comm));
        soak_fail(s, i, c, msg);
        return;
    }
    uint64_t bad = UINT64_MAX;
    switch (c->kind) {
    case 0: case 4:
        if (c->kind == 4 && r != c->root)
            break;
        for (uint64_t k = 0; k < c->count && bad == UINT64_MAX; k++)
            if (!cc_check_reduced(out, k, c->t, c->op, seed, n, k))
                bad = k;
        break;
    case 1:
        for (int q = 0; q < n && bad == UINT64_MAX; q++)
            for (uint64_t k = 0; k < c->count; k++)
                if (!cc_check_copy(out, (uint64_t)q * c->count + k, c->t, seed, q, k)) {
                    bad = (uint64_t)q * c->count + k;
                    break;
                }
        break;
    case 2:
        for (uint64_t k = 0; k < c->count && bad == UINT64_MAX; k++)
            if (!cc_check_copy(out, k, c->t, seed, c->root, k))
                bad = k;
        break;
    case 3:
        for (uint64_t k = 0; k < c->count && bad == UINT64_MAX; k++)
            if (!cc_check_reduced(out, k, c->t, c->op, seed, n, (uint64_t)r * c->count + k))
                bad = k;
        break;
    default:
        break;
    }
    if (bad != UINT64_MAX) {
        char msg[64];
        snprintf(msg, sizeof msg, "element %" PRIu64 " wrong", bad);
        soak_fail(s, i, c, msg);
    }
    if (guarded)
        for (size_t k = 0; k < SOAK_SLACK; k++)
            if ((unsigned char)out[outb + k] != 0xa5) {
                soak_fail(s, i, c, "wrote past the end of the output");
                break;
            }
}

static int soak_rank_main(int rank, int n, void *arg)
{
    const struct soak_cfg *cfg = arg;
    struct soak_rank s = {.rank = rank, .n = n};
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", cfg->port);
    loom_result_t res = loom_comm_init_url(url, n, rank, &s.comm);
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, loom_result_string(res),
                loom_get_error_string(NULL));
        return 1;
    }
    res = loom_stream_create_host(&s.stream);
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: stream: %s\n", rank, loom_result_string(res));
        return 1;
    }
    /* touched once now, so RSS later measures the library, not these */
    s.cap = SOAK_MAX_BYTES + SOAK_SLACK;
    s.a = malloc(s.cap);
    s.b = malloc(s.cap);
    if (!s.a || !s.b) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        return 1;
    }
    memset(s.a, 0, s.cap);
    memset(s.b, 0, s.cap);
    struct soak_usage warm = {0, 0}, last;
    uint64_t bytes = 0;
    double t0 = harness_now();
    for (uint64_t i = 0; i < cfg->ops && s.fails < 10; i++) {
        struct soak_call c = soak_draw(cfg->seed, i, n);
        soak_one(&s, i, &c, cfg->seed + i);
        bytes += c.count * loom_dtype_size(c.t);
        if (i + 1 == SOAK_WARM_OPS)
            warm = soak_settled(&s);
    }
    double secs = harness_now() - t0 - (cfg->ops >= SOAK_WARM_OPS ? SOAK_SETTLE_S : 0);
    last = soak_settled(&s);
    if (cfg->ops >= 2 * SOAK_WARM_OPS && s.fails == 0) {
        if (last.fds != warm.fds) {
            fprintf(stderr, "rank %d: open descriptors %ld after call %d, %ld after call %"
                    PRIu64 "\n", rank, warm.fds, SOAK_WARM_OPS, last.fds, cfg->ops);
            s.fails++;
        }
        if (warm.rss_kb < 0 || last.rss_kb - warm.rss_kb > SOAK_RSS_SLACK_KB) {
            fprintf(stderr, "rank %d: VmRSS %ld kB after call %d, %ld kB after call %" PRIu64
                    " (more than %d kB growth)\n", rank, warm.rss_kb, SOAK_WARM_OPS,
                    last.rss_kb, cfg->ops, SOAK_RSS_SLACK_KB);
            s.fails++;
        }
    }
    printf("rank %d: %" PRIu64 " calls, %.1f MB, %.1f s; fds %ld -> %ld; VmRSS %ld -> %ld kB"
           "%s\n", rank, cfg->ops, (double)bytes / 1e6, secs, warm.fds, last.fds,
           warm.rss_kb, last.rss_kb, s.fails ? " FAILED" : "");
    loom_stream_destroy(s.stream);
    res = loom_comm_destroy(s.comm);
    if (res != LOOM_SUCCESS && s.fails == 0) {
        fprintf(stderr, "rank %d: destroy: %s\n", rank, loom_result_string(res));
        s.fails++;
    }
    free(s.a);
    free(s.b);
    return s.fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct soak_cfg cfg = {.ops = 20000, .seed = 20260101};
    const char *e = getenv("LOOM_TEST_SOAK_OPS");
    if (argc > 1)
        e = argv[1];
    if (e)
        cfg.ops = strtoull(e, NULL, 10);
    if ((e = getenv("LOOM_TEST_SOAK_SEED")) != NULL)
        cfg.seed = strtoull(e, NULL, 10);
    setenv("LOOM_BOOTSTRAP_TIMEOUT", "30", 0);
    setenv("LOOM_TIMEOUT", "60", 0);
    /* small chunks so that mid-size calls take the multi-chunk paths too */
    setenv("LOOM_CHUNK_SIZE", "64K", 0);
    cfg.port = harness_free_port();
    int status[SOAK_RANKS];
    int failed = harness_run(SOAK_RANKS, soak_rank_main, &cfg, 600, status);
    for (int r = 0; r < SOAK_RANKS; r++)
        if (status[r] != 0)
            fprintf(stderr, "soak: rank %d exit status %d\n", r, status[r]);
    printf("soak: %d ranks, %" PRIu64 " calls, seed %" PRIu64 ": %s\n", SOAK_RANKS, cfg.ops,
           cfg.seed, failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
