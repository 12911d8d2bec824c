/* test_p2p.c - point-to-point calls that the posting order must not
 * deadlock, and tagged messages (loom_send_tagged / loom_recv_tagged:
 * FIFO per source and tag, any source, any tag, sizes that differ), on
 * real processes over loopback. Each rank checks what it received against
 * a reference it computes itself (coll_check.h).
 *
 * usage: test_p2p [CASE...]  (default: every case at 2, 3 and 4 ranks, on
 * each transport of LOOM_TEST_TRANSPORTS, default "tcp"; a transport that
 * cannot run here is skipped, saying so) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../perf/coll_check.h"
#include "../support/harness.h"
#include "loom.h"
#include "../support/rank_util.h"

/* the seed of message k from rank src to rank dst */
static uint64_t msg_seed(int src, int dst, int k)
{
    return 7000u + (uint64_t)src * 64u + (uint64_t)dst + (uint64_t)k * 4096u;
}

static int wrong(const void *buf, loom_dtype_t t, uint64_t seed, int r, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        if (!cc_check_copy(buf, i, t, seed, r, i))
            return (int)i + 1;
    return 0;
}

/* ---- receives posted before sends, on a stream --------------------------- */
/* Every rank receives from each peer, then sends to it, all on one stream
 * (torch's batch_isend_irecv on torch 2.x: separate calls, receive first).
 * The messages are large enough that a send completes only once its
 * receive is posted, so a receive that waited for the send queued behind
 * it on the same rank would never end. */
static int rank_recv_first(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_stream_t st;
    OK(loom_stream_create_host(&st));
    static const uint64_t counts[] = {1, 1000, 1 << 20};
    for (int k = 0; k < 3; k++) {
        uint64_t c = counts[k];
        float *s = xmalloc((size_t)n * c * 4), *r = xmalloc((size_t)n * c * 4);
        for (int p = 0; p < n; p++)
            cc_fill(s + (size_t)p * c, LOOM_FLOAT32, LOOM_SUM, msg_seed(rank, p, k), rank, 0, c);
        for (int p = 0; p < n; p++) {
            if (p == rank)
                continue;
            OK(loom_recv(r + (size_t)p * c, c, LOOM_FLOAT32, p, comm, st));
            OK(loom_send(s + (size_t)p * c, c, LOOM_FLOAT32, p, comm, st));
        }
        OK(loom_stream_synchronize(st));
        for (int p = 0; p < n; p++) {
            int bad = p == rank
                          ? 0
                          : wrong(r + (size_t)p * c, LOOM_FLOAT32, msg_seed(p, rank, k), p, c);
            if (bad)
                FAIL("%llu floats from rank %d: element %d wrong", (unsigned long long)c, p,
                     bad - 1);
        }
        free(s);
        free(r);
    }
    /* and a collective queued behind them still runs after them */
    int x = rank + 1;
    uint64_t c = 1 << 18;
    float *s = xmalloc(c * 4), *r = xmalloc(c * 4);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    cc_fill(s, LOOM_FLOAT32, LOOM_SUM, msg_seed(rank, right, 9), rank, 0, c);
    OK(loom_recv(r, c, LOOM_FLOAT32, left, comm, st));
    OK(loom_send(s, c, LOOM_FLOAT32, right, comm, st));
    OK(loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, st));
    OK(loom_stream_synchronize(st));
    if (wrong(r, LOOM_FLOAT32, msg_seed(left, rank, 9), left, c))
        FAIL("ring before the allreduce wrong");
    if (x != n * (n + 1) / 2)
        FAIL("allreduce after the ring: %d", x);
    free(s);
    free(r);
    OK(loom_stream_destroy(st));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- the progress thread woken after a waiter ran the queue -------------- */
/* A ring exchange on a stream. In even rounds the receive is waited for by
 * a waiter that runs queued calls itself (loom_request_wait), while another
 * thread queues the send a moment later: the waiter's set of sends and
 * receives takes that send, which may have woken the progress thread
 * first. In odd rounds the waiter only sleeps (loom_request_wait_timeout,
 * as a binding waits), so the progress thread must run the calls: it must
 * not have gone back to sleep unwakeable. */
struct wake_send {
    loom_comm_t comm;
    loom_stream_t st;
    int *out, right;
    loom_result_t res;
};

static void *late_send(void *arg)
{
    struct wake_send *w = arg;
    usleep(200);
    w->res = loom_send(w->out, 1, LOOM_INT32, w->right, w->comm, w->st);
    return NULL;
}

static int rank_wake(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_stream_t st;
    OK(loom_stream_create_host(&st));
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    for (int k = 0; k < 300; k++) {
        int out = rank * 1000 + k, in = -1;
        loom_request_t req;
        OK(loom_recv(&in, 1, LOOM_INT32, left, comm, st));
        if (k % 2 == 0) {
            struct wake_send w = {.comm = comm, .st = st, .out = &out, .right = right};
            pthread_t t;
            OK(loom_request_create(st, NULL, NULL, &req));
            if (pthread_create(&t, NULL, late_send, &w) != 0)
                FAIL("pthread_create");
            OK(loom_request_wait(req));
            pthread_join(t, NULL);
            OK(w.res);
            loom_request_free(req);
            OK(loom_stream_synchronize(st));
        } else {
            OK(loom_send(&out, 1, LOOM_INT32, right, comm, st));
            OK(loom_request_create(st, NULL, NULL, &req));
            loom_result_t res = loom_request_wait_timeout(req, 20000);
            loom_request_free(req);
            if (res == LOOM_NOT_READY)
                FAIL("exchange %d not done after 20 s: the progress thread slept", k);
            OK(res);
        }
        if (in != left * 1000 + k)
            FAIL("exchange %d: got %d from rank %d", k, in, left);
    }
    OK(loom_stream_destroy(st));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- tags: FIFO per (source, tag), received in another order ------------- */
static int rank_tags(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    enum { K = 4 };
    static const int tags[K] = {0, 5, 5, 1 << 30}; /* tag 5 twice: FIFO */
    static const uint64_t counts[K] = {10, 0, 3000, 100000};
    /* every rank sends its K messages to each rank (itself included) ... */
    double *s[K];
    for (int k = 0; k < K; k++) {
        s[k] = xmalloc(counts[k] * 8 * (size_t)n);
        for (int p = 0; p < n; p++) {
            cc_fill(s[k] + (size_t)p * counts[k], LOOM_FLOAT64, LOOM_SUM, msg_seed(rank, p, k),
                    rank, 0, counts[k]);
            OK(loom_send_tagged(s[k] + (size_t)p * counts[k], counts[k], LOOM_FLOAT64, p, tags[k],
                                comm, NULL));
        }
    }
    /* ... and receives them, blocking, last tag first: tag 5's two in the
     * order they were sent */
    static const int order[K] = {3, 1, 2, 0};
    for (int p = 0; p < n; p++) {
        int src = (rank + p) % n;
        for (int j = 0; j < K; j++) {
            int k = order[j];
            double *r = xmalloc(counts[k] * 8);
            int from = -1;
            OK(loom_recv_tagged(r, counts[k], LOOM_FLOAT64, src, tags[k], &from, comm, NULL));
            if (from != src)
                FAIL("tag %d from rank %d: source says %d", tags[k], src, from);
            int bad = wrong(r, LOOM_FLOAT64, msg_seed(src, rank, k), src, counts[k]);
            if (bad)
                FAIL("tag %d (message %d) from rank %d: element %d wrong", tags[k], k, src,
                     bad - 1);
            free(r);
        }
    }
    for (int k = 0; k < K; k++)
        free(s[k]);
    /* a message longer than one piece of the out-of-band service, to the
     * right, received from the left on a stream */
    enum { BIG = 5 << 20 }; /* floats: 20 MiB */
    float *bs = xmalloc((size_t)BIG * 4), *br = xmalloc((size_t)BIG * 4);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    cc_fill(bs, LOOM_FLOAT32, LOOM_SUM, msg_seed(rank, right, 8), rank, 0, BIG);
    loom_stream_t st;
    OK(loom_stream_create_host(&st));
    OK(loom_recv_tagged(br, BIG, LOOM_FLOAT32, left, 8, NULL, comm, st));
    OK(loom_send_tagged(bs, BIG, LOOM_FLOAT32, right, 8, comm, st));
    OK(loom_stream_synchronize(st));
    OK(loom_stream_destroy(st));
    int bad = wrong(br, LOOM_FLOAT32, msg_seed(left, rank, 8), left, BIG);
    if (bad)
        FAIL("20 MiB tagged message from rank %d: element %d wrong", left, bad - 1);
    free(bs);
    free(br);
    /* untagged messages and collectives keep their order beside them */
    int x = rank + 1;
    OK(loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL));
    if (x != n * (n + 1) / 2)
        FAIL("allreduce after tagged messages: %d", x);
    /* bad tags are refused, naming the tag */
    float v = 0;
    if (loom_send_tagged(&v, 1, LOOM_FLOAT32, 0, -2, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "tag -2"))
        FAIL("negative tag: %s", loom_get_error_string(comm));
    if (loom_send_tagged(&v, 1, LOOM_FLOAT32, LOOM_ANY_SOURCE, 1, comm, NULL) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "peer -1"))
        FAIL("send to any source: %s", loom_get_error_string(comm));
    if (loom_recv(&v, 1, LOOM_FLOAT32, LOOM_ANY_SOURCE, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT)
        FAIL("untagged receive from any source accepted");
    OK(loom_barrier(comm, NULL));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- any source, any tag ------------------------------------------------ */
/* Each rank in turn receives 2 messages from every other rank (torch's
 * recv with no src): from any source with tag 3, then from any source and
 * any tag, on a stream; each message says who sent it. */
static int rank_any_source(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_stream_t st;
    OK(loom_stream_create_host(&st));
    enum { C = 257 };
    for (int root = 0; root < n; root++) {
        if (rank != root) {
            int32_t a[C], b[C];
            cc_fill(a, LOOM_INT32, LOOM_SUM, msg_seed(rank, root, 1), rank, 0, C);
            cc_fill(b, LOOM_INT32, LOOM_SUM, msg_seed(rank, root, 2), rank, 0, C);
            OK(loom_send_tagged(a, C, LOOM_INT32, root, 3, comm, NULL));
            OK(loom_send_tagged(b, C, LOOM_INT32, root, 4, comm, NULL));
        } else {
            int m = 2 * (n - 1);
            int32_t *r = xmalloc((size_t)m * C * 4);
            int *from = xmalloc((size_t)m * sizeof *from);
            for (int i = 0; i < n - 1; i++)
                OK(loom_recv_tagged(r + (size_t)i * C, C, LOOM_INT32, LOOM_ANY_SOURCE, 3, &from[i],
                                    comm, st));
            for (int i = n - 1; i < m; i++)
                OK(loom_recv_tagged(r + (size_t)i * C, C, LOOM_INT32, LOOM_ANY_SOURCE, LOOM_ANY_TAG,
                                    &from[i], comm, st));
            OK(loom_stream_synchronize(st));
            int seen[2][16] = {{0}};
            for (int i = 0; i < m; i++) {
                int f = from[i];
                if (f < 0 || f >= n || f == rank)
                    FAIL("message %d: source %d", i, f);
                /* the first n-1 are tag 3's; the others the tag 4 ones */
                int k = i < n - 1 ? 1 : 2;
                if (wrong(r + (size_t)i * C, LOOM_INT32, msg_seed(f, rank, k), f, C))
                    FAIL("message %d from rank %d (tag %d): wrong", i, f, k + 2);
                seen[k - 1][f]++;
            }
            for (int f = 0; f < n; f++)
                if (f != rank && (seen[0][f] != 1 || seen[1][f] != 1))
                    FAIL("rank %d's messages seen %d and %d times", f, seen[0][f], seen[1][f]);
            free(r);
            free(from);
        }
        OK(loom_barrier(comm, NULL));
    }
    OK(loom_stream_destroy(st));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- a tagged receive that expects another size -------------------------- */
static int rank_tag_mismatch(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    float v[12] = {0};
    if (rank == 1)
        OK(loom_send_tagged(v, 10, LOOM_FLOAT32, 0, 3, comm, NULL));
    if (rank == 0) {
        loom_result_t r = loom_recv_tagged(v, 12, LOOM_FLOAT32, 1, 3, NULL, comm, NULL);
        const char *msg = loom_get_error_string(comm);
        if (r != LOOM_ERROR_MISMATCH || !strstr(msg, "recv(float32, 12, from rank 1, tag 3)") ||
            !strstr(msg, "send(float32, 10, to rank 0, tag 3)"))
            FAIL("mismatch: %s: %s", loom_result_string(r), msg);
    }
    loom_comm_destroy(comm);
    return 0;
}

struct tcase {
    const char *name;
    harness_fn fn;
};

static const struct tcase cases[] = {
    {"recv_first", rank_recv_first},
    {"wake", rank_wake},
    {"tags", rank_tags},
    {"any_source", rank_any_source},
    {"tag_mismatch", rank_tag_mismatch},
};

/* Whether transport t can run here: a 2-rank barrier on it. */
static int probe_rank(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_result_t r = loom_barrier(comm, NULL);
    loom_comm_destroy(comm);
    return r == LOOM_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *list = getenv("LOOM_TEST_TRANSPORTS");
    char transports[256];
    snprintf(transports, sizeof transports, "%s", list && *list ? list : "tcp");
    int failed = 0;
    static const int sizes[] = {2, 3, 4};
    for (char *save = NULL, *t = strtok_r(transports, " ,", &save); t;
         t = strtok_r(NULL, " ,", &save)) {
        setenv("LOOM_TRANSPORT", t, 1);
        g_port = harness_free_port();
        if (harness_run(2, probe_rank, NULL, 60, NULL)) {
            printf("skip transport %s: it cannot run here\n", t);
            continue;
        }
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int want = argc < 2;
            for (int a = 1; a < argc; a++)
                want |= strcmp(argv[a], cases[c].name) == 0;
            if (!want)
                continue;
            for (int i = 0; i < 3; i++) {
                int st[16];
                g_port = harness_free_port();
                double t0 = harness_now();
                int rc = harness_run(sizes[i], cases[c].fn, NULL, 90, st);
                printf("%s %s %s %d ranks (%.1f s)\n", rc ? "FAIL" : "ok  ", t, cases[c].name,
                       sizes[i], harness_now() - t0);
                for (int r = 0; rc && r < sizes[i]; r++)
                    fprintf(stderr, "%s: rank %d exited with %d\n", cases[c].name, r, st[r]);
                failed |= rc;
            }
        }
    }
    return failed ? 1 : 0;
}
