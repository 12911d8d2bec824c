/* coalesce.c - allreduces that are more than one call of the table:
 * several calls of a group run as one (a bucket of small gradients costs
 * one collective), and calls whose op scales or sums 16-bit floats in
 * float32 (loom_redop_create).
 *
 * A run is cut from what every rank agrees on (kinds, counts, dtypes, ops),
 * so every rank cuts the same runs and numbers them alike. How a run moves
 * its data is each rank's own choice, invisible on the wire: calls whose
 * send and receive buffers are adjacent merge into one allreduce with no
 * copy; otherwise they are packed into a staging buffer (scaled or widened
 * on the way in, narrowed or scaled on the way out) and the staging
 * buffer is reduced in place.
 *
 * LOOM_PACK_MAX: packing two 64 KiB halves costs four copies of 64 KiB
 * (~10 us at memory speed here) where a second allreduce of 64 KiB costs a
 * round trip and more (~30-60 us on loopback); beyond it the per-call cost
 * is small next to moving the bytes, and calls run on their own.
 *
 * Float32 accumulation of a 16-bit call: up to LOOM_PACK_MAX bytes of
 * float32 (latency-bound) the widened buffer is allreduced whole, twice the
 * bytes of the call; above, as a reduce-scatter of float32 partial sums
 * followed by an allgather of the rounded 16-bit results, 1.5 times the
 * bytes (a ring allreduce is those two halves, each at the call's size).
 * That takes two call numbers (loom_coalesce_seqs). */
#include "build_config.h"

#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "comm/redop.h"
#include "base/util.h"

#define LOOM_PACK_MAX (64u << 10)
/* staging kept between calls up to this size; larger is freed after use */
#define LOOM_PACK_KEEP (4u << 20)

static int wide(const struct loom_op *op)
{
    return op->accum == LOOM_ACCUM_FLOAT32 &&
           (op->dtype == LOOM_FLOAT16 || op->dtype == LOOM_BFLOAT16);
}

/* the dtype partial results travel in */
static loom_dtype_t wire_dtype(const struct loom_op *op)
{
    return wide(op) ? LOOM_FLOAT32 : op->dtype;
}

static size_t wire_bytes(const struct loom_op *op)
{
    return (size_t)op->count * loom_dtype_size(wire_dtype(op));
}

/* A run of one widened call too large to allreduce whole in float32. */
static int wide_split(const struct loom_op *subs, int k)
{
    return k == 1 && wide(&subs[0]) && wire_bytes(&subs[0]) > LOOM_PACK_MAX;
}

uint32_t loom_coalesce_seqs(const struct loom_op *subs, int k)
{
    return wide_split(subs, k) ? 2 : 1;
}

int loom_coalesce_len(const struct loom_op *subs, int n)
{
    const struct loom_op *a = &subs[0];
    if (a->kind != LOOM_OP_ALLREDUCE || wire_bytes(a) > LOOM_PACK_MAX)
        return 1;
    size_t total = wire_bytes(a);
    int k = 1;
    while (k < n) {
        const struct loom_op *b = &subs[k];
        if (b->kind != LOOM_OP_ALLREDUCE || b->dtype != a->dtype || b->op != a->op ||
            wide(b) != wide(a) || total + wire_bytes(b) > LOOM_PACK_MAX)
            break;
        total += wire_bytes(b);
        k++;
    }
    return k;
}

uint32_t loom_group_nruns(const struct loom_op *subs, int n)
{
    uint32_t runs = 0;
    int i = 0;
    while (i < n && loom_op_kind_is_p2p(subs[i].kind))
        i++;
    while (i < n) {
        int k = loom_coalesce_len(subs + i, n - i);
        runs += subs[i].kind == LOOM_OP_ALLREDUCE ? loom_coalesce_seqs(subs + i, k) : 1;
        i += k;
    }
    return runs;
}

/* ---- element conversion with a scale ----------------------------------- */

static float load_f(const void *p, loom_dtype_t t, size_t i)
{
    switch (t) {
    case LOOM_FLOAT16: return loom_half_to_float(((const uint16_t *)p)[i]);
    case LOOM_BFLOAT16: return loom_bf16_to_float(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static void store_f(void *p, loom_dtype_t t, size_t i, float v)
{
    switch (t) {
    case LOOM_FLOAT16: ((uint16_t *)p)[i] = loom_float_to_half(v); break;
    case LOOM_BFLOAT16: ((uint16_t *)p)[i] = loom_float_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

/* dst (dtype dt) = scale * src (dtype st), n elements; float types only
 * unless the types are equal and scale is 1 (a copy). dst == src is fine. */
static void convert(void *dst, loom_dtype_t dt, const void *src, loom_dtype_t st,
                    size_t n, double scale)
{
    if (dt == st && scale == 1.0) {
        if (dst != src)
            memmove(dst, src, n * loom_dtype_size(dt));
        return;
    }
    if (dt == LOOM_FLOAT64 && st == LOOM_FLOAT64) {
        double *d = dst;
        const double *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i] * scale;
        return;
    }
    float f = (float)scale;
    if (dt == LOOM_FLOAT32 && st == LOOM_FLOAT32) {
        float *d = dst;
        const float *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] = s[i] * f;
        return;
    }
    if (dt == LOOM_FLOAT64 || st == LOOM_FLOAT64) {
        /* not produced by Loom's own staging; kept for completeness */
        for (size_t i = 0; i < n; i++) {
            double v = st == LOOM_FLOAT64 ? ((const double *)src)[i] : load_f(src, st, i);
            v *= scale;
            if (dt == LOOM_FLOAT64)
                ((double *)dst)[i] = v;
            else
                store_f(dst, dt, i, (float)v);
        }
        return;
    }
    if (scale == 1.0) {
        for (size_t i = 0; i < n; i++)
            store_f(dst, dt, i, load_f(src, st, i));
    } else {
        for (size_t i = 0; i < n; i++)
            store_f(dst, dt, i, load_f(src, st, i) * f);
    }
}

/* ---- staging ------------------------------------------------------------ */

static void *stage_get(struct loom_comm *comm, size_t bytes, int *owned)
{
    struct loom_coll_ext *e = loom_coll_ext_get(comm);
    *owned = 0;
    if (!e)
        return NULL;
    if (bytes <= e->pack_size)
        return e->pack;
    if (bytes > LOOM_PACK_KEEP) {
        *owned = 1;
        return malloc(bytes ? bytes : 1);
    }
    void *p = malloc(bytes);
    if (!p)
        return NULL;
    free(e->pack);
    e->pack = p;
    e->pack_size = bytes;
    return p;
}

static void stage_put(void *p, int owned)
{
    if (owned)
        free(p);
}

static loom_result_t no_memory(struct loom_comm *comm, const struct loom_op *op,
                               size_t bytes)
{
    char what[160];
    loom_op_describe(op, what, sizeof what);
    loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "%s: cannot allocate %zu bytes "
                        "of staging", what, bytes);
    return LOOM_ERROR_NO_MEMORY;
}

/* A plain op of the table (no attributes) from a call. */
static struct loom_op plain(const struct loom_op *op, uint64_t seq)
{
    struct loom_op sub = *op;
    sub.seq = seq;
    sub.prescale = sub.postscale = 1.0;
    sub.scaled = 0;
    sub.accum = LOOM_ACCUM_NATIVE;
    sub.subs = NULL;
    sub.nsubs = 0;
    sub.nseqs = 1;
    sub.exec = NULL;
    return sub;
}

static int adjacent(const struct loom_op *subs, int k)
{
    for (int i = 0; i + 1 < k; i++) {
        size_t b = (size_t)subs[i].count * loom_dtype_size(subs[i].dtype);
        if ((const char *)subs[i].sendbuf + b != (const char *)subs[i + 1].sendbuf ||
            (char *)subs[i].recvbuf + b != (char *)subs[i + 1].recvbuf)
            return 0;
    }
    return 1;
}

/* Float32 accumulation of a large 16-bit call: reduce-scatter of float32
 * partial sums (#seq), each rank rounds its block once, allgather of the
 * 16-bit blocks (#seq + 1). Blocks are count / n rounded up, the float32
 * input zero-padded; the allgather lands in the receive buffer itself when
 * the blocks tile it exactly. */
static loom_result_t wide_split_run(struct loom_comm *comm, const struct loom_op *a,
                                    uint64_t seq)
{
    uint64_t n = (uint64_t)comm->nranks, me = (uint64_t)comm->rank;
    uint64_t blk = (a->count + n - 1) / n;
    size_t es = loom_dtype_size(a->dtype);
    int padded = blk * n != a->count;
    size_t fin = (size_t)(n * blk) * 4, fout = (size_t)blk * 4;
    size_t bytes = fin + fout + (padded ? (size_t)(n * blk) * es : 0);
    int owned;
    char *st = stage_get(comm, bytes, &owned);
    if (!st)
        return no_memory(comm, a, bytes);
    float *in = (float *)st, *out = (float *)(st + fin);
    char *gather = padded ? st + fin + fout : a->recvbuf;
    convert(in, LOOM_FLOAT32, a->sendbuf, a->dtype, (size_t)a->count, loom_op_pre(a));
    memset(in + a->count, 0, (size_t)(n * blk - a->count) * 4);
    struct loom_op rs = plain(a, seq);
    rs.kind = LOOM_OP_REDUCE_SCATTER;
    rs.sendbuf = in;
    rs.recvbuf = out;
    rs.count = blk;
    rs.dtype = LOOM_FLOAT32;
    loom_result_t res = loom_coll_run(comm, &rs);
    if (res == LOOM_SUCCESS) {
        char *mine = gather + (size_t)(me * blk) * es;
        convert(mine, a->dtype, out, LOOM_FLOAT32, (size_t)blk, loom_op_post(a));
        struct loom_op ag = plain(a, seq + 1);
        ag.kind = LOOM_OP_ALLGATHER;
        ag.sendbuf = mine; /* in place */
        ag.recvbuf = gather;
        ag.count = blk;
        ag.op = LOOM_SUM;
        res = loom_coll_run(comm, &ag);
    }
    if (res == LOOM_SUCCESS && padded)
        memcpy(a->recvbuf, gather, (size_t)a->count * es);
    stage_put(st, owned);
    return res;
}

loom_result_t loom_coalesce_run(struct loom_comm *comm, struct loom_op *subs, int k,
                                uint64_t seq)
{
    if (wide_split(subs, k))
        return wide_split_run(comm, &subs[0], seq);
    const struct loom_op *a = &subs[0];
    loom_dtype_t wd = wire_dtype(a);
    uint64_t total = 0;
    int prescaled = 0;
    for (int i = 0; i < k; i++) {
        total += subs[i].count;
        prescaled |= loom_op_pre(&subs[i]) != 1.0;
    }
    loom_result_t res;
    if (!wide(a) && (k == 1 || (!prescaled && adjacent(subs, k)))) {
        /* in the caller's buffers: the prescale copies the input into the
         * receive buffer, which is then reduced in place */
        struct loom_op sub = plain(a, seq);
        sub.count = total;
        if (k == 1 && prescaled && total) {
            convert(sub.recvbuf, a->dtype, a->sendbuf, a->dtype, (size_t)total,
                    loom_op_pre(a));
            sub.sendbuf = sub.recvbuf;
        }
        if ((res = loom_coll_run(comm, &sub)) < 0)
            return res;
        for (int i = 0; i < k; i++)
            if (loom_op_post(&subs[i]) != 1.0)
                convert(subs[i].recvbuf, a->dtype, subs[i].recvbuf, a->dtype,
                        (size_t)subs[i].count, loom_op_post(&subs[i]));
        return LOOM_SUCCESS;
    }
    if (total == 0)
        return LOOM_SUCCESS; /* an empty allreduce moves nothing, on any rank */
    size_t bytes = (size_t)total * loom_dtype_size(wd);
    int owned;
    char *pack = stage_get(comm, bytes, &owned);
    if (!pack)
        return no_memory(comm, a, bytes);
    size_t off = 0, es = loom_dtype_size(wd);
    for (int i = 0; i < k; i++) {
        convert(pack + off * es, wd, subs[i].sendbuf, a->dtype, (size_t)subs[i].count,
                loom_op_pre(&subs[i]));
        off += (size_t)subs[i].count;
    }
    struct loom_op sub = plain(a, seq);
    sub.sendbuf = sub.recvbuf = pack;
    sub.count = total;
    sub.dtype = wd;
    res = loom_coll_run(comm, &sub);
    if (res == LOOM_SUCCESS) {
        off = 0;
        for (int i = 0; i < k; i++) {
            convert(subs[i].recvbuf, a->dtype, pack + off * es, wd,
                    (size_t)subs[i].count, loom_op_post(&subs[i]));
            off += (size_t)subs[i].count;
        }
    }
    stage_put(pack, owned);
    return res;
}

loom_result_t loom_xform_run(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks;
    int rs = op->kind == LOOM_OP_REDUCE_SCATTER;
    int has_out = !(op->kind == LOOM_OP_REDUCE && comm->rank != op->root);
    loom_dtype_t wd = wire_dtype(op);
    size_t in_n = (size_t)op->count * (rs ? (size_t)n : 1), out_n = (size_t)op->count;
    size_t wes = loom_dtype_size(wd);
    struct loom_op sub = plain(op, op->seq);
    sub.dtype = wd;
    void *tin = NULL, *tout = NULL;
    if ((wide(op) || loom_op_pre(op) != 1.0) && in_n) {
        if (!(tin = malloc(in_n * wes)))
            return no_memory(comm, op, in_n * wes);
        convert(tin, wd, op->sendbuf, op->dtype, in_n, loom_op_pre(op));
        sub.sendbuf = tin;
    }
    if (wide(op) && has_out && out_n) {
        if (!(tout = malloc(out_n * wes))) {
            free(tin);
            return no_memory(comm, op, out_n * wes);
        }
        sub.recvbuf = tout;
    }
    loom_result_t res = loom_coll_run(comm, &sub);
    if (res == LOOM_SUCCESS && has_out && out_n) {
        if (tout)
            convert(op->recvbuf, op->dtype, tout, wd, out_n, loom_op_post(op));
        else if (loom_op_post(op) != 1.0)
            convert(op->recvbuf, op->dtype, op->recvbuf, op->dtype, out_n, loom_op_post(op));
    }
    free(tin);
    free(tout);
    return res;
}
