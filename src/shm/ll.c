/* ll.c - small messages: each rank writes its part of a call into its own
 * lines of the segment, a cache line at a time, 56 bytes of data and then,
 * with release order, the number of the piece they belong to; a reader
 * polls the number in the line it wants and takes the data with it. No
 * system call, no separate flag to wait for, no futex while the peers keep
 * up (NCCL's LL protocols do the same with 8- and 128-byte lines).
 *
 * A call goes in pieces of up to LOOM_SHM_LL_CAP bytes per rank, numbered
 * alike on every rank; each piece takes the next of its writer's line
 * sets in turn, among those of its size class (small calls many, calls
 * over LOOM_SHM_LL_BIG bytes a few, so that a stream of them stays in
 * cache), the same set on every rank. Every rank writes line 0 of every
 * piece (the call's fingerprint, also when it has no data) but waits only
 * for the lines it reads: a broadcast's non-root for the root's, the root
 * for nobody's.
 *
 * Before each piece a rank looks, in order, at the line 0 of every peer's
 * pieces that it did not read, as soon as each is there, and compares the
 * fingerprint with its own of that piece. It waits only when it would
 * overwrite a set: not before every peer has begun the piece after the one
 * the set held (so finished that one). Of two ranks that read nothing of
 * each other's piece, the one that gets there second still finds the
 * other's line 0 in place, so a mismatch is always named, by at least one
 * rank, usually at its next call and at most SETS pieces late. A rank is
 * thus at most SETS pieces ahead of the slowest.
 *
 * Each piece is also a phase: the writer bumps its epoch after its lines,
 * so a reader that has spun LOOM_SPIN_US sleeps on that counter, with
 * every check of wait.c (abort, timeout, a failed or dead peer, another
 * call); a peer that reaches the phase without the line took another path.
 *
 * The other paths reuse the staging slots assuming every peer has left the
 * calls before; a rank ahead here does not know that. So the first call of
 * a run of small calls after another path ends only once every peer has
 * begun its first piece (and so left that path's slots). */
#include "build_config.h"

#include <string.h>

#include "shm_priv.h"
#include "util.h"

#define SETS LOOM_SHM_LL_SETS
#define REC LOOM_SHM_LL_RECORD
/* In a line 0's flag while its writer rewrites it for a later piece. */
#define BUSY (1ull << 63)

static inline struct loom_shm_ll_line *lines_of(struct loom_shm *s, int j, uint64_t q)
{
    return s->ll + ((size_t)j * SETS + s->ll_rec[q % REC].set) * LOOM_SHM_LL_LINES;
}

/* The set of piece q of a call that writes bytes per rank, in turn among
 * the sets of its size class; returns the piece the set held last (0:
 * none). */
static uint64_t place(struct loom_shm *s, uint64_t q, size_t bytes)
{
    int big = bytes > LOOM_SHM_LL_BIG;
    uint32_t set = big ? SETS - LOOM_SHM_LL_BIG_SETS + s->ll_turn[1]++ % LOOM_SHM_LL_BIG_SETS
                       : s->ll_turn[0]++ % (SETS - LOOM_SHM_LL_BIG_SETS);
    uint64_t last = s->ll_last[set];
    s->ll_last[set] = q;
    s->ll_rec[q % REC].set = set;
    return last;
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
    /* a peer may be reading the fingerprint of the piece this overwrites
     * (ready()): it must see the change, seqlock fashion. Release stores
     * of the fingerprint keep the BUSY mark ahead of them (no fence:
     * ThreadSanitizer does not model fences). */
    __atomic_store_n(&l[0].flag, q | BUSY, __ATOMIC_RELAXED);
    __atomic_store_n(&l[0].data[0], (uint64_t)loom_op_desc(x->op), __ATOMIC_RELEASE);
    __atomic_store_n(&l[0].data[1], x->op->count, __ATOMIC_RELEASE);
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
    s->ll_rec[q % REC].ep = s->epoch;
    s->ll_rec[q % REC].call = x->op->seq;
}

/* Whether flag f says piece p is there (later: or a later one, or being
 * written). */
static inline int there(uint64_t f, uint64_t p, int later)
{
    return f == p || (later && (f & ~BUSY) > p);
}

/* This rank's call of piece p (still in its lines), formatted. */
static void call_of(struct loom_shm_ctx *x, uint64_t p, char *buf, size_t len)
{
    const struct loom_shm_ll_line *l = lines_of(x->s, x->s->me, p);
    loom_op_format((uint32_t)l->data[0], l->data[1], x->s->ll_rec[p % REC].call, buf, len);
}

/* Peer j's line 0 of piece p, where it still holds p: 1 and its
 * fingerprint in *desc and *count. */
static int fingerprint(struct loom_shm *s, int j, uint64_t p, uint32_t *desc, uint64_t *count)
{
    const struct loom_shm_ll_line *l = lines_of(s, j, p);
    if (__atomic_load_n(&l->flag, __ATOMIC_ACQUIRE) != p)
        return 0;
    /* acquire loads: a fingerprint half rewritten shows as a flag that
     * moved on (the writer's BUSY mark comes before its new words) */
    *desc = (uint32_t)__atomic_load_n(&l->data[0], __ATOMIC_ACQUIRE);
    *count = __atomic_load_n(&l->data[1], __ATOMIC_ACQUIRE);
    return __atomic_load_n(&l->flag, __ATOMIC_RELAXED) == p;
}

/* Peer j's line 0 of piece p says (desc, count): the same as mine? */
static loom_result_t same(struct loom_shm_ctx *x, int j, uint64_t p, uint32_t desc, uint64_t count)
{
    const struct loom_shm_ll_line *m = lines_of(x->s, x->s->me, p);
    if (desc == (uint32_t)m->data[0] && count == m->data[1])
        return LOOM_SUCCESS;
    return loom_shm_differ_call(x, j, (uint32_t)m->data[0], m->data[1], x->s->ll_rec[p % REC].call,
                                desc, count);
}

/* A peer failed while this rank waited (x->differs): where one of the
 * pieces still in this rank's lines differs from a peer's, that is likely
 * the cause it found, and this rank names it too, with both calls. */
static loom_result_t differs(struct loom_shm_ctx *x)
{
    struct loom_shm *s = x->s;
    uint64_t p = s->ll_seq > REC / 2 ? s->ll_seq - REC / 2 + 1 : 1;
    for (; p <= s->ll_seq; p++)
        for (int j = 0; j < s->n; j++) {
            uint32_t desc;
            uint64_t count;
            /* pieces whose set this rank has since written over are past */
            if (j != s->me && lines_of(s, s->me, p)->flag == p &&
                fingerprint(s, j, p, &desc, &count) && same(x, j, p, desc, count) < 0)
                return LOOM_ERROR_MISMATCH;
        }
    return LOOM_SUCCESS;
}

/* Wait until line l of local rank j holds piece p (later: or a later
 * one); its flag then in *f. */
static loom_result_t wait_line(struct loom_shm_ctx *x, int j, const struct loom_shm_ll_line *l,
                               uint64_t p, int later, uint64_t *f)
{
    if (there(*f = __atomic_load_n(&l->flag, __ATOMIC_ACQUIRE), p, later))
        return LOOM_SUCCESS;
    struct loom_shm_spin sp;
    loom_shm_spin_init(&sp, x->comm);
    while (loom_shm_spin_more(&sp))
        if (there(*f = __atomic_load_n(&l->flag, __ATOMIC_ACQUIRE), p, later))
            return LOOM_SUCCESS;
    /* the peer bumps its epoch once its lines of the piece are written */
    loom_result_t res = loom_shm_wait_sleep(x, j, x->s->ll_rec[p % REC].ep);
    if (res < 0)
        return res;
    if (there(*f = __atomic_load_n(&l->flag, __ATOMIC_ACQUIRE), p, later))
        return LOOM_SUCCESS;
    /* it finished the phase without these lines: it moves this call's
     * data another way (LOOM_ALGO differs between the ranks) */
    char what[160];
    call_of(x, p, what, sizeof what);
    loom_comm_set_error(x->comm, LOOM_ERROR_MISMATCH,
                        "%s: %s ended its part without writing it to the small-message "
                        "lines (does LOOM_ALGO differ between the ranks?)",
                        what, loom_comm_describe(x->comm, x->s->ranks[j]));
    loom_shm_mark_failed(x, x->s->ranks[j]);
    return LOOM_ERROR_MISMATCH;
}

/* Wait for line 0 of peer j's piece q of this call, which this rank
 * reads, and check its fingerprint. */
static loom_result_t head(struct loom_shm_ctx *x, int j, uint64_t q)
{
    struct loom_shm *s = x->s;
    uint64_t *ok = &s->ll_ok[(size_t)j * REC + q % REC], f;
    if (*ok == q)
        return LOOM_SUCCESS;
    const struct loom_shm_ll_line *l = lines_of(s, j, q);
    loom_result_t res = wait_line(x, j, l, q, 0, &f);
    if (res < 0)
        return res;
    /* j overwrites it only after this rank has begun piece q + 1 */
    res = same(x, j, q, (uint32_t)l->data[0], l->data[1]);
    if (res == LOOM_SUCCESS)
        *ok = q;
    return res;
}

/* Whether peer j has begun piece p (so finished p - 1), waiting for it
 * where wait; where its line 0 still holds p, its fingerprint must be mine
 * of p (where it has gone past p, it checked mine). */
static loom_result_t ready(struct loom_shm_ctx *x, int j, uint64_t p, int wait, int *done)
{
    struct loom_shm *s = x->s;
    const struct loom_shm_ll_line *l = lines_of(s, j, p);
    uint64_t f = __atomic_load_n(&l->flag, __ATOMIC_ACQUIRE);
    *done = s->ll_ok[(size_t)j * REC + p % REC] == p || there(f, p, 1);
    if (!*done && !wait)
        return LOOM_SUCCESS;
    loom_result_t res = *done ? LOOM_SUCCESS : wait_line(x, j, l, p, 1, &f);
    *done = res == LOOM_SUCCESS;
    uint32_t desc;
    uint64_t count;
    if (res < 0 || s->ll_ok[(size_t)j * REC + p % REC] == p || f != p ||
        !fingerprint(s, j, p, &desc, &count))
        return res;
    return same(x, j, p, desc, count);
}

/* Before this rank writes piece q over piece last (0: none): every peer's
 * pieces before q that it has not read, checked in order as soon as each
 * is there; last is left behind once the peer has begun last + 1, which
 * this waits for. */
static loom_result_t catch_up(struct loom_shm_ctx *x, uint64_t q, uint64_t last)
{
    struct loom_shm *s = x->s;
    for (int i = 1; i < s->n; i++) {
        int j = (s->me + i) % s->n, done = 1;
        uint64_t *chk = &s->ll_chk[j];
        while (done && *chk + 1 < q) {
            loom_result_t res = ready(x, j, *chk + 1, last && *chk <= last, &done);
            if (res < 0)
                return res;
            *chk += (uint64_t)done;
        }
    }
    return LOOM_SUCCESS;
}

/* Copy bytes [off, off + len) of local rank j's piece q to dst, each line
 * as soon as it is there. */
static loom_result_t get(struct loom_shm_ctx *x, int j, uint64_t q, char *dst, size_t off,
                         size_t len)
{
    const struct loom_shm_ll_line *lines = lines_of(x->s, j, q);
    /* piece byte b is in line (b + HEAD) / DATA at (b + HEAD) % DATA */
    size_t at = off + LOOM_SHM_LL_HEAD, end = at + len;
    while (at < end) {
        const struct loom_shm_ll_line *l = &lines[at / LOOM_SHM_LL_DATA];
        size_t in = at % LOOM_SHM_LL_DATA;
        size_t n = LOOM_SHM_LL_DATA - in < end - at ? LOOM_SHM_LL_DATA - in : end - at;
        uint64_t f;
        loom_result_t res = wait_line(x, j, l, q, 0, &f);
        if (res < 0)
            return res;
        memcpy(dst, (const char *)l->data + in, n);
        dst += n;
        at += n;
    }
    return LOOM_SUCCESS;
}

/* Line 0 of piece q of every peer, checked. */
static loom_result_t heads(struct loom_shm_ctx *x, uint64_t q)
{
    for (int i = 1; i < x->s->n; i++) {
        loom_result_t res = head(x, (x->s->me + i) % x->s->n, q);
        if (res < 0)
            return res;
    }
    return LOOM_SUCCESS;
}

/* dst = piece bytes [off, off + cnt elements) of rank 0 op rank 1 op ... in
 * local rank order: every rank that does this gets the same bits. */
static loom_result_t reduce_all(struct loom_shm_ctx *x, uint64_t q, char *dst, size_t off,
                                uint64_t cnt)
{
    struct loom_shm *s = x->s;
    size_t es = loom_dtype_size(x->op->dtype), len = (size_t)cnt * es;
    loom_reduce_fn fn = loom_reduce_get(x->op->dtype, x->op->op);
    loom_result_t res = heads(x, q);
    if (res == LOOM_SUCCESS)
        res = get(x, 0, q, s->tmp, off, len);
    for (int j = 1; res == LOOM_SUCCESS && j < s->n; j++) {
        res = get(x, j, q, s->out, off, len);
        if (res == LOOM_SUCCESS)
            fn(dst, j == 1 ? s->tmp : dst, s->out, (size_t)cnt);
    }
    return res;
}

/* One piece: elements [off, off + cnt) of the call (of every block, for
 * reduce_scatter). */
static loom_result_t piece(struct loom_shm_ctx *x, uint64_t q, uint64_t off, uint64_t cnt)
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
    loom_result_t res = catch_up(x, q, place(s, q, loom_shm_ll_bytes(s, op)));
    if (res < 0)
        return res;
    switch (op->kind) {
    case LOOM_OP_BROADCAST: put(x, q, recv, s->me == root ? b : 0); break;
    case LOOM_OP_REDUCE_SCATTER:
        /* the same stretch of every block (local rank j's at its comm
         * rank), block after block */
        for (int j = 0; b && j < s->n; j++)
            memcpy(s->out + (size_t)j * b,
                   (const char *)op->sendbuf + ((uint64_t)s->ranks[j] * op->count + off) * es, b);
        put(x, q, s->out, b * (size_t)s->n);
        break;
    case LOOM_OP_BARRIER: put(x, q, NULL, 0); break;
    default: put(x, q, send, b); break;
    }
    switch (op->kind) {
    case LOOM_OP_ALLREDUCE: return reduce_all(x, q, recv, 0, cnt);
    case LOOM_OP_REDUCE: return s->me == root ? reduce_all(x, q, recv, 0, cnt) : res;
    case LOOM_OP_REDUCE_SCATTER: return reduce_all(x, q, recv, (size_t)s->me * b, cnt);
    case LOOM_OP_BROADCAST:
        if (s->me == root)
            return res;
        res = head(x, root, q);
        return res < 0 ? res : get(x, root, q, recv, 0, b);
    case LOOM_OP_ALLGATHER: {
        size_t block = (size_t)op->count * es;
        res = heads(x, q);
        for (int j = 0; res == LOOM_SUCCESS && j < s->n; j++)
            if (j != s->me)
                res = get(x, j, q, (char *)op->recvbuf + (size_t)s->ranks[j] * block + off * es, 0,
                          b);
        char *mine = (char *)op->recvbuf + (size_t)s->ranks[s->me] * block + off * es;
        if (res == LOOM_SUCCESS && b && mine != send)
            memcpy(mine, send, b);
        return res;
    }
    default: return heads(x, q); /* barrier */
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
    x->differs = differs;
    if (x->start != s->ll_end) { /* another path ran since the last call here */
        s->ll_dirty = 1;
        s->ll_first = s->ll_seq + 1;
    }
    uint64_t off = 0;
    do {
        uint64_t cnt = op->count - off < per ? op->count - off : per;
        loom_result_t res = piece(x, ++s->ll_seq, off, cnt);
        if (res < 0)
            return res;
        off += cnt;
    } while (off < op->count);
    /* the first call of a run: every peer has left the path before */
    for (int i = 1; s->ll_dirty && i < s->n; i++) {
        int j = (s->me + i) % s->n, done;
        loom_result_t res = s->ll_chk[j] >= s->ll_first ? LOOM_SUCCESS
                                                        : ready(x, j, s->ll_first, 1, &done);
        if (res < 0)
            return res;
    }
    s->ll_dirty = 0;
    s->ll_end = s->epoch;
    if (op->op != LOOM_AVG)
        return LOOM_SUCCESS;
    if (op->kind == LOOM_OP_ALLREDUCE)
        loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, x->comm->nranks);
    else if (op->kind == LOOM_OP_REDUCE_SCATTER ||
             (op->kind == LOOM_OP_REDUCE && s->me == loom_shm_local_of(s, op->root)))
        loom_reduce_avg_finish(op->recvbuf, (size_t)op->count, op->dtype, s->n);
    return LOOM_SUCCESS;
}
