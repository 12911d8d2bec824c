/* test_group.c - point-to-point, alltoall, gather, scatter, groups (batched
 * sends and receives, coalesced allreduces), scaled sums, float32
 * accumulation and requests, on real processes over loopback. Each rank
 * checks its own results against references it computes itself
 * (coll_check.h), and failures are checked for their messages.
 *
 * usage: test_group [CASE...]  (default: every case at 2, 3 and 4 ranks) */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../perf/coll_check.h"
#include "../support/harness.h"
#include "loom.h"
#include "../support/rank_util.h"

/* element i of the message from rank src to rank dst in exchange number k */
static uint64_t msg_seed(int src, int dst, int k)
{
    return 1000u + (uint64_t)src * 64u + (uint64_t)dst + (uint64_t)k * 4096u;
}

static int check_copy(const void *buf, loom_dtype_t t, uint64_t seed, int r,
                      uint64_t first, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        if (!cc_check_copy(buf, i, t, seed, r, first + i))
            return (int)i + 1;
    return 0;
}

static const loom_dtype_t dtypes[] = {LOOM_INT8, LOOM_FLOAT32, LOOM_BFLOAT16,
                                      LOOM_INT64, LOOM_FLOAT64};
#define NDT (int)(sizeof dtypes / sizeof dtypes[0])

/* ---- a ring of sends and receives in a group, and lone blocking ones ----- */
static int rank_sendrecv(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    static const uint64_t counts[] = {0, 1, 100, 300007};
    int right = (rank + 1) % n, left = (rank - 1 + n) % n;
    for (int k = 0; k < 4 * NDT; k++) {
        loom_dtype_t t = dtypes[k % NDT];
        uint64_t c = counts[k / NDT];
        size_t es = loom_dtype_size(t);
        char *s = xmalloc(c * es), *r = xmalloc(c * es);
        cc_fill(s, t, LOOM_SUM, msg_seed(rank, right, k), rank, 0, c);
        OK(loom_group_start());
        OK(loom_recv(r, c, t, left, comm, NULL));
        OK(loom_send(s, c, t, right, comm, NULL));
        OK(loom_group_end());
        int bad = check_copy(r, t, msg_seed(left, rank, k), left, 0, c);
        if (bad)
            FAIL("ring %s x %llu: element %d wrong", loom_dtype_name(t),
                 (unsigned long long)c, bad - 1);
        free(s);
        free(r);
    }
    /* lone blocking calls between 0 and 1 only: the others' collective
     * numbers must not move (the allreduce below would then disagree) */
    float v[64];
    for (int rep = 0; rep < 3; rep++) {
        if (rank == 0) {
            for (int i = 0; i < 64; i++)
                v[i] = (float)(i * rep);
            OK(loom_send(v, 64, LOOM_FLOAT32, 1, comm, NULL));
        } else if (rank == 1) {
            OK(loom_recv(v, 64, LOOM_FLOAT32, 0, comm, NULL));
            for (int i = 0; i < 64; i++)
                if (v[i] != (float)(i * rep))
                    FAIL("lone recv %d: [%d] = %g", rep, i, v[i]);
        }
    }
    int x = rank + 1;
    OK(loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL));
    if (x != n * (n + 1) / 2)
        FAIL("allreduce after p2p: %d", x);
    /* self send and receive, with an exchange with every peer: an alltoall
     * made of point-to-point calls (torch's batch_isend_irecv) */
    enum { C = 1000 };
    int32_t *sb = xmalloc((size_t)n * C * 4), *rb = xmalloc((size_t)n * C * 4);
    for (int p = 0; p < n; p++)
        cc_fill(sb + (size_t)p * C, LOOM_INT32, LOOM_SUM, msg_seed(rank, p, 99), rank, 0, C);
    OK(loom_group_start());
    for (int p = 0; p < n; p++) {
        OK(loom_send(sb + (size_t)p * C, C, LOOM_INT32, p, comm, NULL));
        OK(loom_recv(rb + (size_t)p * C, C, LOOM_INT32, p, comm, NULL));
    }
    OK(loom_group_end());
    for (int p = 0; p < n; p++)
        if (check_copy(rb + (size_t)p * C, LOOM_INT32, msg_seed(p, rank, 99), p, 0, C))
            FAIL("batched exchange from %d wrong", p);
    /* a send to itself outside a group has nothing to meet */
    if (loom_send(v, 1, LOOM_FLOAT32, rank, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "inside a group"))
        FAIL("lone self send: %s", loom_get_error_string(comm));
    if (loom_send(v, 1, LOOM_FLOAT32, n, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "peer"))
        FAIL("bad peer accepted");
    OK(loom_barrier(comm, NULL));
    free(sb);
    free(rb);
    loom_comm_destroy(comm);
    return 0;
}

/* ---- a send and a receive that disagree are named, on both ranks -------- */
static int rank_p2p_mismatch(int rank, int n, void *arg)
{
    int dtype_case = *(int *)arg;
    loom_comm_t comm = join(rank, n);
    float buf[16] = {0};
    loom_result_t res = LOOM_SUCCESS;
    /* one good message first, so the bad one is #2 */
    if (rank == 0)
        OK(loom_send(buf, 4, LOOM_FLOAT32, 1, comm, NULL));
    else if (rank == 1)
        OK(loom_recv(buf, 4, LOOM_FLOAT32, 0, comm, NULL));
    if (rank == 0)
        res = loom_send(buf, 10, LOOM_FLOAT32, 1, comm, NULL);
    else if (rank == 1)
        res = loom_recv(buf, dtype_case ? 10 : 12, dtype_case ? LOOM_INT32 : LOOM_FLOAT32,
                        0, comm, NULL);
    if (rank > 1) {
        loom_comm_destroy(comm);
        return 0;
    }
    /* the sender's data may have left before the receiver objected: then
     * its next call fails, with the receiver's view of the two calls */
    if (rank == 0 && res == LOOM_SUCCESS)
        res = loom_recv(buf, 1, LOOM_FLOAT32, 1, comm, NULL);
    const char *msg = loom_get_error_string(comm);
    const char *send = "send(float32, 10, to rank 1) #2";
    const char *recv = dtype_case ? "recv(int32, 10, from rank 0) #2"
                                  : "recv(float32, 12, from rank 0) #2";
    if (res != LOOM_ERROR_MISMATCH || !strstr(msg, "point-to-point calls differ") ||
        !strstr(msg, send) || !strstr(msg, recv) ||
        !strstr(msg, rank == 0 ? "rank 0 called send" : "rank 1 called recv"))
        FAIL("%s: %s (wanted %s and %s)", loom_result_string(res), msg, send, recv);
    loom_comm_destroy(comm);
    return 0;
}

/* ---- alltoall, gather, scatter ------------------------------------------ */
static int rank_a2a(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    static const uint64_t counts[] = {0, 1, 7, 100003};
    for (int k = 0; k < 4 * NDT; k++) {
        loom_dtype_t t = dtypes[k % NDT];
        uint64_t c = counts[k / NDT];
        size_t es = loom_dtype_size(t), blk = c * es;
        char *s = xmalloc((size_t)n * blk), *r = xmalloc((size_t)n * blk);
        for (int inplace = 0; inplace < 2; inplace++) {
            /* block p of rank q's send: seed(q, p) */
            for (int p = 0; p < n; p++)
                cc_fill(s + (size_t)p * blk, t, LOOM_SUM, msg_seed(rank, p, k), rank, 0, c);
            char *out = inplace ? s : r;
            OK(loom_alltoall(s, out, c, t, comm, NULL));
            for (int p = 0; p < n; p++)
                if (check_copy(out + (size_t)p * blk, t, msg_seed(p, rank, k), p, 0, c))
                    FAIL("alltoall %s x %llu%s: block %d wrong", loom_dtype_name(t),
                         (unsigned long long)c, inplace ? " in place" : "", p);
        }
        for (int root = 0; root < n; root++) {
            /* gather: rank q sends its seed(q) block; in place on the root
             * when its block already sits at its place */
            int inplace = (k + root) & 1;
            char *mine = rank == root && inplace ? r + (size_t)root * blk : s;
            cc_fill(mine, t, LOOM_SUM, msg_seed(rank, root, k + 7), rank, 0, c);
            OK(loom_gather(mine, rank == root ? r : NULL, c, t, root, comm, NULL));
            if (rank == root)
                for (int p = 0; p < n; p++)
                    if (check_copy(r + (size_t)p * blk, t, msg_seed(p, root, k + 7), p, 0, c))
                        FAIL("gather %s x %llu root %d: block %d wrong",
                             loom_dtype_name(t), (unsigned long long)c, root, p);
            /* scatter: the root's block p is seed(root -> p) */
            if (rank == root)
                for (int p = 0; p < n; p++)
                    cc_fill(s + (size_t)p * blk, t, LOOM_SUM, msg_seed(root, p, k + 9), root,
                            0, c);
            char *into = rank == root && inplace ? s + (size_t)root * blk : r;
            OK(loom_scatter(rank == root ? s : NULL, into, c, t, root, comm, NULL));
            if (check_copy(into, t, msg_seed(root, rank, k + 9), root, 0, c))
                FAIL("scatter %s x %llu root %d wrong", loom_dtype_name(t),
                     (unsigned long long)c, root);
        }
        free(s);
        free(r);
    }
    /* bad roots are argument errors, not sticky */
    if (loom_gather(counts, NULL, 1, LOOM_INT64, n, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT)
        FAIL("gather with root %d accepted", n);
    OK(loom_barrier(comm, NULL));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- alltoallv ----------------------------------------------------------- */

/* Elements rank src sends rank dst in round k: uneven, zero for some pairs
 * (a rank's block to itself included, in some rounds). */
static uint64_t a2av_count(int src, int dst, int k)
{
    static const uint64_t c[] = {0, 3, 1, 0, 70001, 5, 2};
    return c[(unsigned)(src * 3 + dst * 5 + k) % 7];
}

static int rank_a2av(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_stream_t st;
    OK(loom_stream_create_host(&st));
    static const loom_dtype_t types[] = {LOOM_INT16, LOOM_FLOAT32, LOOM_UINT16, LOOM_FLOAT64,
                                         LOOM_INT8};
    uint64_t *sc = xmalloc(4 * (size_t)n * sizeof *sc);
    uint64_t *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    uint64_t *keep = xmalloc(2 * (size_t)n * sizeof *keep);
    for (int k = 0; k < 10; k++) {
        loom_dtype_t t = types[k % 5];
        size_t es = loom_dtype_size(t);
        int inplace = k % 3 == 2, on_stream = k % 2;
        /* sends in reverse rank order with gaps; receives packed, or (in
         * place) at the same places as the sends with room for both */
        uint64_t so = 0, ro = 0;
        for (int p = n - 1; p >= 0; p--) {
            sc[p] = a2av_count(rank, p, k);
            sd[p] = so;
            so += sc[p] + 1;
        }
        for (int p = 0; p < n; p++) {
            rc[p] = a2av_count(p, rank, k);
            rd[p] = inplace ? so + ro : ro;
            ro += rc[p];
        }
        size_t bytes = (size_t)(so + ro) * es;
        char *s = xmalloc(bytes), *r = inplace ? s : xmalloc(bytes);
        for (int p = 0; p < n; p++)
            cc_fill(s + sd[p] * es, t, LOOM_SUM, msg_seed(rank, p, k), rank, 0, sc[p]);
        memcpy(keep, rc, 2 * (size_t)n * sizeof *keep); /* rc and rd */
        OK(loom_alltoallv(s, sc, sd, r, rc, rd, t, comm, on_stream ? st : NULL));
        if (on_stream) {
            /* the counts were copied at the call */
            memset(sc, 0xff, 4 * (size_t)n * sizeof *sc);
            OK(loom_stream_synchronize(st));
        }
        for (int p = 0; p < n; p++)
            if (check_copy(r + keep[n + p] * es, t, msg_seed(p, rank, k), p, 0, keep[p]))
                FAIL("alltoallv %s round %d%s%s: block from rank %d (%llu) wrong",
                     loom_dtype_name(t), k, inplace ? " in place" : "",
                     on_stream ? " on a stream" : "", p, (unsigned long long)keep[p]);
        if (!inplace)
            free(r);
        free(s);
    }
    /* argument errors name what was wrong and leave comm usable */
    for (int p = 0; p < n; p++)
        sc[p] = rc[p] = sd[p] = rd[p] = 0;
    if (loom_alltoallv(NULL, NULL, sd, NULL, rc, rd, LOOM_INT32, comm, NULL) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "sendcounts is NULL"))
        FAIL("alltoallv with NULL sendcounts: %s", loom_get_error_string(comm));
    sc[rank] = 2;
    int32_t buf[4];
    if (loom_alltoallv(buf, sc, sd, buf + 2, rc, rd, LOOM_INT32, comm, NULL) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "sends itself 2"))
        FAIL("alltoallv sending itself 2, receiving 0: %s", loom_get_error_string(comm));
    sc[rank] = 1;
    if (loom_alltoallv(NULL, sc, sd, buf, rc, rd, LOOM_INT32, comm, NULL) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "sendbuf is NULL"))
        FAIL("alltoallv with NULL sendbuf: %s", loom_get_error_string(comm));
    sc[rank] = 0;
    OK(loom_group_start());
    loom_result_t gres = loom_alltoallv(buf, sc, sd, buf, rc, rd, LOOM_INT32, comm, NULL);
    loom_result_t eres = loom_group_end(); /* a group with a bad call runs nothing */
    if (gres != LOOM_ERROR_INVALID_ARGUMENT || eres != LOOM_ERROR_INVALID_ARGUMENT)
        FAIL("alltoallv inside a group: %s, group end %s", loom_result_string(gres),
             loom_result_string(eres));
    OK(loom_barrier(comm, NULL));
    /* counts that disagree: rank 0 expects one more element from rank 1 than
     * rank 1 sends. Rank 0 names both counts; nobody hangs. */
    if (n >= 2) {
        int32_t sbuf[8] = {0}, rbuf[8];
        for (int p = 0; p < n; p++) {
            sc[p] = rc[p] = 1;
            sd[p] = rd[p] = (uint64_t)p % 8;
        }
        if (rank == 0)
            rc[1] = 2;
        loom_result_t res = loom_alltoallv(sbuf, sc, sd, rbuf, rc, rd, LOOM_INT32, comm, NULL);
        const char *msg = loom_get_error_string(comm);
        if (rank == 0 && (res != LOOM_ERROR_MISMATCH || !strstr(msg, "2 from rank 1") ||
                          !strstr(msg, "alltoallv(int32, 1 to this rank)")))
            FAIL("alltoallv counts that differ: %s: %s", loom_result_string(res), msg);
        if (rank == 0)
            printf("alltoallv mismatch, rank 0: %s\n", msg);
    }
    free(sc);
    free(keep);
    OK(loom_stream_destroy(st));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- groups of collectives: coalesced allreduces, mixed kinds ----------- */
static int rank_coalesce(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    /* counts that pack (small), run alone (large), and cross the pack limit */
    enum { K = 40 };
    uint64_t cnt[K];
    for (int i = 0; i < K; i++)
        cnt[i] = i == 7 ? 300000 : i == 20 ? 0 : (uint64_t)(1 + (i * 977) % 3000);
    for (int variant = 0; variant < 4; variant++) {
        loom_dtype_t t = variant == 1 ? LOOM_INT32 : variant == 2 ? LOOM_BFLOAT16
                                                                  : LOOM_FLOAT32;
        loom_redop_t op = variant == 3 ? LOOM_MAX : LOOM_SUM;
        size_t es = loom_dtype_size(t);
        /* variant 0: one flat buffer cut in slices (adjacent: merged with no
         * copy); the others: separate buffers, half of them in place */
        uint64_t total = 0;
        for (int i = 0; i < K; i++)
            total += cnt[i];
        char *flat_s = xmalloc(total * es), *flat_r = xmalloc(total * es);
        char *s[K], *r[K];
        uint64_t off = 0;
        for (int i = 0; i < K; i++) {
            if (variant == 0) {
                s[i] = flat_s + off * es;
                r[i] = flat_r + off * es;
            } else {
                s[i] = xmalloc(cnt[i] * es);
                r[i] = i & 1 ? s[i] : xmalloc(cnt[i] * es);
            }
            cc_fill(s[i], t, op, 77, rank, off, cnt[i]);
            off += cnt[i];
        }
        loom_stream_t st = NULL;
        if (variant == 2)
            OK(loom_stream_create_host(&st));
        int32_t bc = rank == 1 % n ? 4242 : 0; /* valid until the group ends */
        OK(loom_group_start());
        for (int i = 0; i < K; i++) {
            /* a broadcast in the middle cuts the runs */
            if (i == 30)
                OK(loom_broadcast(&bc, 1, LOOM_INT32, 1 % n, comm, st));
            OK(loom_allreduce(s[i], r[i], cnt[i], t, op, comm, st));
        }
        OK(loom_group_end());
        if (st) {
            loom_request_t req;
            OK(loom_request_create(st, NULL, NULL, &req));
            OK(loom_request_wait(req));
            OK(loom_request_free(req));
            OK(loom_stream_destroy(st));
        }
        if (bc != 4242)
            FAIL("variant %d: broadcast in the group gave %d", variant, (int)bc);
        off = 0;
        for (int i = 0; i < K; i++) {
            for (uint64_t e = 0; e < cnt[i]; e++)
                if (!cc_check_reduced(r[i], e, t, op, 77, n, off + e))
                    FAIL("variant %d call %d [%llu] wrong", variant, i,
                         (unsigned long long)e);
            off += cnt[i];
            if (variant) {
                if (r[i] != s[i])
                    free(r[i]);
                free(s[i]);
            }
        }
        free(flat_s);
        free(flat_r);
    }
    /* ranks that group differently are told */
    float a[8] = {0}, b[8] = {0};
    loom_result_t res;
    if (rank == 0) {
        OK(loom_group_start());
        OK(loom_allreduce(a, a, 8, LOOM_FLOAT32, LOOM_SUM, comm, NULL));
        OK(loom_allreduce(b, b, 8, LOOM_FLOAT32, LOOM_SUM, comm, NULL));
        res = loom_group_end();
    } else {
        res = loom_allreduce(a, a, 8, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
        if (res == LOOM_SUCCESS)
            res = loom_allreduce(b, b, 8, LOOM_FLOAT32, LOOM_SUM, comm, NULL);
    }
    const char *msg = loom_get_error_string(comm);
    if (res >= 0 || !strstr(msg, "#"))
        FAIL("grouping that differs went unnoticed: %s %s", loom_result_string(res), msg);
    /* with two ranks both name both calls; with more, a rank told by a peer
     * that failed first may hear whom to blame (rank 0) instead */
    int named = res == LOOM_ERROR_MISMATCH && strstr(msg, "allreduce(float32, 16, sum)") &&
                strstr(msg, "allreduce(float32, 8, sum)");
    if (!named && (n == 2 || !strstr(msg, "blaming rank 0")))
        FAIL("wrong message: %s: %s", loom_result_string(res), msg);
    loom_comm_destroy(comm);
    return 0;
}

/* ---- scaled sums and float32 accumulation ------------------------------- */
static int rank_redop(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_redop_t scaled, avg_scaled, acc, acc_avg;
    loom_redop_attr_t a = {.struct_size = sizeof a, .base = LOOM_SUM, .prescale = 0.5,
                           .postscale = 0.25};
    OK(loom_redop_create(&a, &scaled));
    a.base = LOOM_AVG;
    a.prescale = 4.0;
    a.postscale = 1.0;
    OK(loom_redop_create(&a, &avg_scaled));
    loom_redop_attr_t f = {.struct_size = sizeof f, .base = LOOM_SUM, .prescale = 1.0,
                           .postscale = 1.0, .accumulate = LOOM_ACCUM_FLOAT32};
    OK(loom_redop_create(&f, &acc));
    f.base = LOOM_AVG;
    OK(loom_redop_create(&f, &acc_avg));

    /* scaled: inputs small integers, scales powers of two: exact */
    static const uint64_t counts[] = {1, 1000, 200003};
    static const loom_dtype_t ft[] = {LOOM_FLOAT32, LOOM_BFLOAT16, LOOM_FLOAT64,
                                      LOOM_FLOAT16};
    for (int k = 0; k < 12; k++) {
        loom_dtype_t t = ft[k % 4];
        uint64_t c = counts[k / 4];
        size_t es = loom_dtype_size(t);
        char *s = xmalloc(c * es), *r = xmalloc(c * es), *ref = xmalloc(c * es);
        cc_fill(s, t, LOOM_SUM, 5 + (uint64_t)k, rank, 0, c);
        for (int kind = 0; kind < 3; kind++) {
            /* 0: allreduce out of place, 1: in place with avg, 2: reduce_scatter */
            uint64_t rc = kind == 2 ? c / (uint64_t)n : c;
            if (kind == 2) {
                OK(loom_reduce_scatter(s, r, rc, t, scaled, comm, NULL));
            } else if (kind == 1) {
                memcpy(r, s, c * es);
                OK(loom_allreduce(r, r, c, t, avg_scaled, comm, NULL));
            } else {
                OK(loom_allreduce(s, r, c, t, scaled, comm, NULL));
            }
            uint64_t first = kind == 2 ? (uint64_t)rank * rc : 0;
            for (uint64_t e = 0; e < rc; e++) {
                double sum = 0;
                for (int q = 0; q < n; q++)
                    sum += cc_float_input(5 + (uint64_t)k, q, first + e, LOOM_SUM);
                double want = kind == 1 ? sum * 4.0 / n : sum * 0.5 * 0.25;
                double got = cc_load_float(r, t, e);
                double tol = kind == 1 && t != LOOM_FLOAT64 ? 1e-2 * (1 + fabs(want)) : 0;
                if (fabs(got - want) > tol)
                    FAIL("scaled kind %d %s x %llu [%llu]: %g, want %g", kind,
                         loom_dtype_name(t), (unsigned long long)c,
                         (unsigned long long)e, got, want);
            }
        }
        free(s);
        free(r);
        free(ref);
    }
    /* integer dtypes cannot be scaled */
    int32_t iv = 1;
    if (loom_allreduce(&iv, &iv, 1, LOOM_INT32, scaled, comm, NULL) !=
            LOOM_ERROR_INVALID_ARGUMENT ||
        !strstr(loom_get_error_string(comm), "floating-point"))
        FAIL("scaled int32 accepted: %s", loom_get_error_string(comm));

    /* float32 accumulation: rank 0 gives 1, the others 2^-8 each. The float32
     * sum is exact, so the reference is it rounded once; bfloat16 steps round
     * every 1 + 2^-8 back to 1 */
    for (int k = 0; k < 6; k++) {
        loom_dtype_t t = k & 1 ? LOOM_FLOAT16 : LOOM_BFLOAT16;
        float tiny = t == LOOM_FLOAT16 ? 1.0f / 2048 : 1.0f / 256;
        /* whole in float32; reduce-scatter + allgather with padded blocks;
         * the same with blocks that tile the buffer (divisible by 2, 3, 4) */
        uint64_t c = k < 2 ? 33 : k < 4 ? 150001 : 120000;
        uint16_t *s = xmalloc(c * 2), *r = xmalloc(c * 2);
        for (uint64_t e = 0; e < c; e++)
            cc_store_float(s, t, e, rank == 0 ? 1.0 + (double)(e % 5) : tiny * (float)(1 + e % 3));
        OK(loom_allreduce(s, r, c, t, acc, comm, NULL));
        for (uint64_t e = 0; e < c; e++) {
            float exact = 1.0f + (float)(e % 5) + (float)(n - 1) * tiny * (float)(1 + e % 3);
            uint16_t want = t == LOOM_FLOAT16 ? loom_float_to_half(exact)
                                              : loom_float_to_bf16(exact);
            if (r[e] != want)
                FAIL("f32 accumulation %s x %llu [%llu]: %g, want %g", loom_dtype_name(t),
                     (unsigned long long)c, (unsigned long long)e,
                     cc_load_float(r, t, e), cc_load_float(&want, t, 0));
        }
        /* in a group, packed with a plain float32 call, and as avg */
        float f32 = (float)rank;
        OK(loom_group_start());
        OK(loom_allreduce(s, r, c, t, acc_avg, comm, NULL));
        OK(loom_allreduce(&f32, &f32, 1, LOOM_FLOAT32, LOOM_SUM, comm, NULL));
        OK(loom_group_end());
        if (f32 != (float)(n * (n - 1) / 2))
            FAIL("float32 call beside the accumulated one: %g", f32);
        for (uint64_t e = 0; e < c; e++) {
            float exact = (1.0f + (float)(e % 5) + (float)(n - 1) * tiny * (float)(1 + e % 3)) /
                          (float)n;
            uint16_t want = t == LOOM_FLOAT16 ? loom_float_to_half(exact)
                                              : loom_float_to_bf16(exact);
            if (r[e] != want)
                FAIL("f32 accumulated avg %s [%llu]: %g, want %g", loom_dtype_name(t),
                     (unsigned long long)e, cc_load_float(r, t, e),
                     cc_load_float(&want, t, 0));
        }
        free(s);
        free(r);
    }
    /* empty calls, packed and not: nothing to move, nothing to stage */
    OK(loom_group_start());
    OK(loom_allreduce(NULL, NULL, 0, LOOM_BFLOAT16, acc, comm, NULL));
    OK(loom_allreduce(NULL, NULL, 0, LOOM_BFLOAT16, acc, comm, NULL));
    OK(loom_group_end());
    OK(loom_allreduce(NULL, NULL, 0, LOOM_FLOAT16, acc, comm, NULL));
    OK(loom_reduce_scatter(NULL, NULL, 0, LOOM_FLOAT32, scaled, comm, NULL));

    OK(loom_redop_destroy(scaled));
    OK(loom_redop_destroy(avg_scaled));
    OK(loom_redop_destroy(acc));
    OK(loom_redop_destroy(acc_avg));
    if (loom_allreduce(&iv, &iv, 1, LOOM_INT32, acc, comm, NULL) != LOOM_ERROR_INVALID_ARGUMENT)
        FAIL("a destroyed op was accepted");
    if (loom_redop_destroy(acc) != LOOM_ERROR_INVALID_ARGUMENT)
        FAIL("a destroyed op was destroyed twice");
    OK(loom_barrier(comm, NULL));
    loom_comm_destroy(comm);
    return 0;
}

/* ---- requests: poll, wait, callbacks; several communicators in a group -- */
struct cb_count {
    atomic_int calls;
    atomic_int last;
    atomic_int errors;
};

static void on_done(void *arg, loom_result_t res)
{
    struct cb_count *c = arg;
    if (res != LOOM_SUCCESS)
        atomic_fetch_add(&c->errors, 1);
    atomic_fetch_add(&c->calls, 1);
}

static int rank_requests(int rank, int n, void *arg)
{
    (void)arg;
    loom_comm_t comm = join(rank, n);
    loom_stream_t st;
    OK(loom_stream_create_host(&st));
    enum { NB = 24, CNT = 20000 };
    struct cb_count cc = {0};
    float *buf[NB];
    loom_request_t req[NB];
    for (int b = 0; b < NB; b++) {
        buf[b] = xmalloc(CNT * sizeof(float));
        for (int i = 0; i < CNT; i++)
            buf[b][i] = (float)(rank + b);
        OK(loom_allreduce(buf[b], buf[b], CNT, LOOM_FLOAT32, LOOM_SUM, comm, st));
        OK(loom_request_create(st, on_done, &cc, &req[b]));
        /* some freed before they complete: their callbacks still run */
        if (b % 3 == 2)
            OK(loom_request_free(req[b]));
    }
    for (int b = 0; b < NB; b++) {
        if (b % 3 == 2)
            continue;
        if (b % 3 == 0) {
            OK(loom_request_wait(req[b]));
        } else {
            loom_result_t r;
            double until = harness_now() + 30;
            while ((r = loom_request_test(req[b])) == LOOM_NOT_READY && harness_now() < until)
                usleep(100);
            OK(r);
        }
        float want = (float)(n * (n - 1) / 2 + n * b);
        if (buf[b][0] != want || buf[b][CNT - 1] != want)
            FAIL("request %d complete but buffer %g, want %g", b, buf[b][0], want);
        OK(loom_request_free(req[b]));
    }
    OK(loom_stream_synchronize(st));
    /* callbacks run exactly once each, by now */
    if (atomic_load(&cc.calls) != NB || atomic_load(&cc.errors))
        FAIL("%d callbacks (%d errors), want %d", atomic_load(&cc.calls),
             atomic_load(&cc.errors), NB);
    /* a request after everything completed calls back at once */
    loom_request_t late;
    OK(loom_request_create(st, on_done, &cc, &late));
    if (atomic_load(&cc.calls) != NB + 1 || loom_request_test(late) != LOOM_SUCCESS)
        FAIL("late request not complete at once");
    OK(loom_request_free(late));
    for (int b = 0; b < NB; b++)
        free(buf[b]);

    /* two communicators in one blocking group: each pair of ranks swaps
     * through both at once (an even/odd split and the whole) */
    loom_comm_t half;
    OK(loom_comm_split(comm, rank % 2, rank, &half));
    int hn, hr;
    OK(loom_comm_size(half, &hn));
    OK(loom_comm_rank(half, &hr));
    enum { BIG = 1 << 20 };
    char *a = xmalloc(BIG), *b2 = xmalloc(BIG), *c1 = xmalloc(BIG), *c2 = xmalloc(BIG);
    memset(a, rank + 1, BIG);
    memset(c1, 0x77, BIG);
    int peer = rank ^ 1, hpeer = (hr + 1) % hn, hleft = (hr - 1 + hn) % hn;
    int world_pair = peer < n;
    OK(loom_group_start());
    if (world_pair) {
        OK(loom_send(a, BIG, LOOM_UINT8, peer, comm, NULL));
        OK(loom_recv(b2, BIG, LOOM_UINT8, peer, comm, NULL));
    }
    OK(loom_send(c1, BIG, LOOM_UINT8, hpeer, half, NULL));
    OK(loom_recv(c2, BIG, LOOM_UINT8, hleft, half, NULL));
    OK(loom_group_end());
    if (world_pair && (b2[0] != (char)(peer + 1) || b2[BIG - 1] != (char)(peer + 1)))
        FAIL("two-communicator group: world exchange wrong");
    if (c2[0] != 0x77 || c2[BIG - 1] != 0x77)
        FAIL("two-communicator group: split exchange wrong");
    free(a);
    free(b2);
    free(c1);
    free(c2);
    OK(loom_comm_destroy(half));
    OK(loom_barrier(comm, NULL));
    OK(loom_stream_destroy(st));
    loom_comm_destroy(comm);
    return 0;
}

struct tcase {
    const char *name;
    harness_fn fn;
    int min_ranks;
};

static const struct tcase cases[] = {
    {"sendrecv", rank_sendrecv, 2},
    {"p2p_mismatch", rank_p2p_mismatch, 2},
    {"alltoall", rank_a2a, 1},
    {"alltoallv", rank_a2av, 1},
    {"coalesce", rank_coalesce, 2},
    {"redop", rank_redop, 1},
    {"requests", rank_requests, 2},
};

static int run_case(const struct tcase *tc, int n)
{
    int failed = 0;
    for (int variant = 0; variant < (tc->fn == rank_p2p_mismatch ? 2 : 1); variant++) {
        int st[16];
        int v = variant;
        g_port = harness_free_port();
        double t0 = harness_now();
        int rc = harness_run(n, tc->fn, &v, 120, st);
        printf("%s %s %d ranks%s (%.1f s)\n", rc ? "FAIL" : "ok  ", tc->name, n,
               variant ? " (dtype)" : "", harness_now() - t0);
        for (int r = 0; rc && r < n; r++)
            fprintf(stderr, "%s: rank %d exited with %d\n", tc->name, r, st[r]);
        failed |= rc;
    }
    return failed;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int failed = 0;
    static const int sizes[] = {2, 3, 4};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], cases[c].name) == 0;
        if (!want)
            continue;
        for (int i = 0; i < 3; i++)
            if (sizes[i] >= cases[c].min_ranks)
                failed |= run_case(&cases[c], sizes[i]);
    }
    return failed ? 1 : 0;
}
