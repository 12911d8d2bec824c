/* ll.c - small messages: each rank writes its part of a call into its own
 * lines of the segment, a cache line at a time, 56 bytes of data and then,
 * with release order, the number of the piece they belong to; a reader
 * polls the number in the line it wants and takes the data with it. No
 * system call, no separate flag to wait for, no futex while the peers keep
 * up (NCCL's LL protocols do the same with 8- and 128-byte lines).
 *
 * A call goes in pieces of up to LOOM_SHM_LL_CAP bytes per rank. Every rank
 * writes line 0 of every piece (the call's fingerprint, so that a peer in
 * another call is named, never read as data) and reads line 0 of every
 * peer's: a rank that has seen piece q from every peer knows that all of
 * them finished piece q - 1, so its lines for piece q + 1 (the same parity
 * as q - 1) are free. Each piece is also a phase: the writer bumps its
 * epoch after its lines, so a reader that has spun LOOM_SPIN_US without
 * seeing a line sleeps on that counter, with every check of wait.c (abort,
 * timeout, a failed or dead peer, another call). */
#include "build_config.h"

#include <string.h>

#include "shm_priv.h"
#include "util.h"

static inline struct loom_shm_ll_line *lines_of(struct loom_shm *s, int j, uint64_t q)
{
    return s->ll + ((size_t)j * 2 + (q & 1)) * LOOM_SHM_LL_LINES;
}

size_t loom_shm_ll_bytes(const struct loom_shm *s, const struct loom_op *op)
{
    size_t bytes = (size_t)op->count * loom_dtype_size(op->dtype);
    if (op->kind == LOOM_OP_BARRIER)
        return 0;
    return op->kind == LOOM_OP_REDUCE_SCATTER ? bytes * (size_t)s->n : bytes;
}

/* Write len bytes at src as piece q (line 0 carries the fingerprint), then
 * end the phase. */
static void put(struct loom_shm_ctx *x, uint64_t q, const char *src, size_t len)
{
    struct loom_shm *s = x->s;
    struct loom_shm_ll_line *l = lines_of(s, s->me, q);
    size_t b = len < LOOM_SHM_LL_DATA - LOOM_SHM_LL_HEAD ? len
                                                         : LOOM_SHM_LL_DATA - LOOM_SHM_LL_HEAD;
    l[0].data[0] = loom_op_desc(x->op);
    l[0].data[1] = x->op->count;
    if (b) /* a call of no data (count 0, barrier) has no src */
        memcpy((char *)l[0].data + LOOM_SHM_LL_HEAD, src, b);
    __atomic_store_n(&l[0].flag, q, __ATOMIC_RELEASE);
    for (size_t i = 1; b < len; i++) {
        size_t k = len - b < LOOM_SHM_LL_DATA ? len - b : LOOM_SHM_LL_DATA;
        memcpy(l[i].data, src + b, k);
        __atomic_store_n(&l[i].flag, q, __ATOMIC_RELEASE);
        b += k;
    }
    loom_shm_bump(s);
}

/* Wait until line l of local rank j holds piece q (piece k of this call). */
static loom_result_t wait_line(struct loom_shm_ctx *x, int j, const struct loom_shm_ll_line *l,
                               uint64_t q, uint32_t k)
{
    if (__atomic_load_n(&l->flag, __ATOMIC_ACQUIRE) == q)
        return LOOM_SUCCESS;
    struct loom_shm_spin sp;
    loom_shm_spin_init(&sp, x->comm);
    while (loom_shm_spin_more(&sp))
        if (__atomic_load_n(&l->flag, __ATOMIC_ACQUIRE) == q)
            return LOOM_SUCCESS;
    /* the peer bumps its epoch once its lines of the piece are written */
    loom_result_t res = loom_shm_wait_sleep(x, j, x->start + k + 1);
    if (res < 0)
        return res;
    if (__atomic_load_n(&l->flag, __ATOMIC_ACQUIRE) == q)
        return LOOM_SUCCESS;
    /* it finished the phase without these lines: it moves this call's
     * data another way (LOOM_ALGO differs between the ranks) */
    char what[160];
    loom_op_format(loom_op_desc(x->op), x->op->count, x->op->seq, what, sizeof what);
    loom_comm_set_error(x->comm, LOOM_ERROR_MISMATCH,
                        "%s: %s ended its part without writing it to the small-message "
                        "lines (does LOOM_ALGO differ between the ranks?)",
                        what, loom_comm_describe(x->comm, x->s->ranks[j]));
    loom_shm_mark_failed(x, x->s->ranks[j]);
    return LOOM_ERROR_MISMATCH;
}

/* Wait for line 0 of every peer's piece q and check that it is in this
 * call. */
static loom_result_t heads(struct loom_shm_ctx *x, uint64_t q, uint32_t k)
{
    struct loom_shm *s = x->s;
    for (int i = 1; i < s->n; i++) {
        int j = (s->me + i) % s->n;
        const struct loom_shm_ll_line *l = lines_of(s, j, q);
        loom_result_t res = wait_line(x, j, l, q, k);
        if (res < 0)
            return res;
        uint32_t desc = (uint32_t)l->data[0];
        uint64_t count = l->data[1];
        if (desc != loom_op_desc(x->op) || count != x->op->count)
            return loom_shm_differ(x, j, desc, count);
    }
    return LOOM_SUCCESS;
}

/* Copy bytes [off, off + len) of local rank j's piece q to dst, each line
 * as soon as it is there. */
static loom_result_t get(struct loom_shm_ctx *x, int j, uint64_t q, uint32_t k, char *dst,
                         size_t off, size_t len)
{
    const struct loom_shm_ll_line *lines = lines_of(x->s, j, q);
    /* piece byte b is in line (b + HEAD) / DATA at (b + HEAD) % DATA */
    size_t at = off + LOOM_SHM_LL_HEAD, end = at + len;
    while (at < end) {
        const struct loom_shm_ll_line *l = &lines[at / LOOM_SHM_LL_DATA];
        size_t in = at % LOOM_SHM_LL_DATA;
        size_t n = LOOM_SHM_LL_DATA - in < end - at ? LOOM_SHM_LL_DATA - in : end - at;
        loom_result_t res = wait_line(x, j, l, q, k);
        if (res < 0)
            return res;
        memcpy(dst, (const char *)l->data + in, n);
        dst += n;
        at += n;
    }
    return LOOM_SUCCESS;
}

/* dst = piece bytes [off, off + cnt elements) of rank 0 op rank 1 op ... in
 * local rank order: every rank that does this gets the same bits. */
static loom_result_t reduce_all(struct loom_shm_ctx *x, uint64_t q, uint32_t k, char *dst,
                                size_t off, uint64_t cnt)
{
    struct loom_shm *s = x->s;
    size_t es = loom_dtype_size(x->op->dtype), len = (size_t)cnt * es;
    loom_reduce_fn fn = loom_reduce_get(x->op->dtype, x->op->op);
    loom_result_t res = get(x, 0, q, k, s->tmp, off, len);
    for (int j = 1; res == LOOM_SUCCESS && j < s->n; j++) {
        res = get(x, j, q, k, s->out, off, len);
        if (res == LOOM_SUCCESS)
            fn(dst, j == 1 ? s->tmp : dst, s->out, (size_t)cnt);
    }
    return res;
}

/* One piece: elements [off, off + cnt) of the call (of every block, for
 * reduce_scatter). */
static loom_result_t piece(struct loom_shm_ctx *x, uint64_t q, uint32_t k, uint64_t off,
                           uint64_t cnt)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype), b = (size_t)cnt * es;
    /* a reduce's non-root may have no recvbuf */
    const char *send = op->sendbuf ? (const char *)op->sendbuf + off * es : NULL;
    char *recv = op->recvbuf ? (char *)op->recvbuf + off * es : NULL;
    int root = op->kind == LOOM_OP_BROADCAST || op->kind == LOOM_OP_REDUCE
                   ? loom_shm_local_of(s, op->root)
                   : -1;
    switch (op->kind) {
    case LOOM_OP_BROADCAST: put(x, q, recv, s->me == root ? b : 0); break;
    case LOOM_OP_REDUCE_SCATTER:
        /* the same stretch of every block (local rank j's at its comm
         * rank), block after block */
        for (int j = 0; b && j < s->n; j++)
            memcpy(s->out + (size_t)j * b,
                   (const char *)op->sendbuf + ((uint64_t)s->ranks[j] * op->count + off) * es,
                   b);
        put(x, q, s->out, b * (size_t)s->n);
        break;
    case LOOM_OP_BARRIER: put(x, q, NULL, 0); break;
    default: put(x, q, send, b); break;
    }
    loom_result_t res = heads(x, q, k);
    if (res < 0)
        return res;
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE: return reduce_all(x, q, k, recv, 0, cnt);
    case LOOM_OP_REDUCE: return s->me == root ? reduce_all(x, q, k, recv, 0, cnt) : res;
    case LOOM_OP_REDUCE_SCATTER: return reduce_all(x, q, k, recv, (size_t)s->me * b, cnt);
    case LOOM_OP_BROADCAST: return s->me == root ? res : get(x, root, q, k, recv, 0, b);
    case LOOM_OP_ALLGATHER: {
        size_t block = (size_t)op->count * es;
        for (int j = 0; res == LOOM_SUCCESS && j < s->n; j++)
            if (j != s->me)
                res = get(x, j, q, k, (char *)op->recvbuf + (size_t)s->ranks[j] * block + off * es,
                          0, b);
        char *mine = (char *)op->recvbuf + (size_t)s->ranks[s->me] * block + off * es;
        if (res == LOOM_SUCCESS && b && mine != send)
            memcpy(mine, send, b);
        return res;
    }
    default: return res;
    }
}

loom_result_t loom_shm_ll_run(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    size_t es = loom_dtype_size(op->dtype);
    uint64_t per = LOOM_SHM_LL_CAP / (es ? es : 1);
    if (op->kind == LOOM_OP_REDUCE_SCATTER)
        per /= (uint64_t)s->n;
    uint64_t off = 0;
    uint32_t k = 0;
    do {
        uint64_t cnt = op->count - off < per ? op->count - off : per;
        loom_result_t res = piece(x, ++s->ll_seq, k++, off, cnt);
        if (res < 0)
            return res;
        off += cnt;
    } while (off < op->count);
    if (op->op != LOOM_AVG)
        return LOOM_SUCCESS;
    if (op->kind == LOOM_OP_ALLREDUCE)
        loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, x->comm->nranks);
    else if (op->kind == LOOM_OP_REDUCE_SCATTER ||
             (op->kind == LOOM_OP_REDUCE && s->me == loom_shm_local_of(s, op->root)))
        loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, s->n);
    return LOOM_SUCCESS;
}
