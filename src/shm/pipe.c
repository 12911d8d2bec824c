/* pipe.c - large messages through the segment, pipelined: no cross-memory
 * attach needed, both sides busy at once.
 *
 * Each rank's two staging slots are one ring of LOOM_SHM_PIPE_BUFS buffers.
 * A call goes in chunks; chunk c uses buffer c % LOOM_SHM_PIPE_BUFS of every
 * rank. Each chunk has a fixed number of stages (stage the input, reduce a
 * slice, copy out...); a rank bumps its phase counter after each, so the
 * counter says exactly which stage of which chunk it has done: the flag per
 * chunk is the counter itself, and a rank waits only for the stage of the
 * chunk it needs, never for a step of the whole group. While a slow rank
 * still copies chunk c out, a fast one stages chunk c + 1.
 *
 * Reuse: a rank writes buffer b for chunk c once every rank has finished
 * the last stage of chunk c - LOOM_SHM_PIPE_BUFS. The first half of the
 * ring is the slot the copy path's next epoch would write (peers finished
 * reading it before the previous call ended); the second half is written
 * only after every peer has begun this call. Every call ends with all
 * ranks past its last stage, so the next one finds the ring free. */
#include "build_config.h"

#include <string.h>

#include "shm_priv.h"
#include "util.h"

struct pipe {
    struct loom_shm_ctx *x;
    struct loom_shm *s;
    const struct loom_op *op;
    size_t es;
    loom_reduce_fn fn;
    const char *send;
    char *recv;
    uint32_t start;  /* the epoch the call began at                   */
    unsigned stages; /* bumps per chunk                               */
    uint64_t per;    /* elements per chunk (of each block: parts > 1) */
    uint64_t nchunks;
    int sliced; /* blocks are the slices of count (else count each) */
};

static size_t pipe_buf_bytes(const struct loom_shm *s)
{
    return 2 * s->slot_bytes / LOOM_SHM_PIPE_BUFS;
}

/* A chunk is a buffer's worth of elements, or of each of parts blocks. */
static void pipe_init(struct pipe *p, struct loom_shm_ctx *x, unsigned stages, unsigned parts)
{
    p->x = x;
    p->s = x->s;
    p->op = x->op;
    p->es = loom_dtype_size(x->op->dtype);
    p->fn = loom_reduce_get(x->op->dtype, x->op->op);
    p->send = x->op->sendbuf;
    p->recv = x->op->recvbuf;
    p->start = x->s->epoch;
    p->stages = stages;
    p->per = pipe_buf_bytes(x->s) / p->es / parts;
    p->nchunks = (x->op->count + p->per - 1) / p->per;
    p->sliced = 0;
}

/* The blocked collectives (one block per local rank, chunk c holding the
 * same stretch of every block; a buffer holds parts such stretches): blocks
 * of count in comm rank order, or (sliced) the n slices of count, which the
 * hierarchical allreduce hands whole to the network between local steps. */
static void pipe_init_blocks(struct pipe *p, struct loom_shm_ctx *x, int sliced, unsigned parts)
{
    pipe_init(p, x, 2, parts);
    uint64_t n = (uint64_t)x->s->n, longest = sliced ? (x->op->count + n - 1) / n : x->op->count;
    p->nchunks = (longest + p->per - 1) / p->per;
    p->sliced = sliced;
}

/* Local rank j's block: first element and length. */
static void pipe_block(const struct pipe *p, int j, uint64_t *at, uint64_t *len)
{
    if (p->sliced) {
        loom_shm_slice(p->op->count, p->s->n, j, at, len);
        return;
    }
    *at = (uint64_t)p->s->ranks[j] * p->op->count;
    *len = p->op->count;
}

/* Elements of a block of len elements in the chunk starting at base. */
static uint64_t pipe_piece(const struct pipe *p, uint64_t len, uint64_t base)
{
    return len <= base ? 0 : len - base < p->per ? len - base : p->per;
}

/* Chunk c's first element (*base) and element count. */
static uint64_t pipe_chunk(const struct pipe *p, uint64_t c, uint64_t *base)
{
    *base = c * p->per;
    return p->op->count - *base < p->per ? p->op->count - *base : p->per;
}

/* The epoch a rank reaches when it has done stage st of chunk c. */
static uint32_t pipe_at(const struct pipe *p, uint64_t c, unsigned st)
{
    return p->start + (uint32_t)(c * p->stages + st + 1);
}

/* Local rank j's buffer for chunk c: the first half of the ring is the slot
 * of the parity after the call's start epoch (see above). */
static char *pipe_buf(const struct pipe *p, int j, uint64_t c)
{
    struct loom_shm *s = p->x->s;
    unsigned b = (unsigned)(c % LOOM_SHM_PIPE_BUFS), half = LOOM_SHM_PIPE_BUFS / 2;
    char *slot = loom_shm_slot(s, j, p->start + 1 + (b >= half ? 1 : 0));
    return slot + (size_t)(b % half) * pipe_buf_bytes(s);
}

static loom_result_t pipe_wait(struct pipe *p, int j, uint64_t c, unsigned st)
{
    return loom_shm_wait(p->x, j, pipe_at(p, c, st));
}

static loom_result_t pipe_wait_all(struct pipe *p, uint64_t c, unsigned st)
{
    return loom_shm_wait_all(p->x, pipe_at(p, c, st));
}

/* Before this rank writes its buffer for chunk c: every peer is done with
 * the chunk that used it last (or, for the second half of the ring, has
 * begun this call). */
static loom_result_t pipe_claim(struct pipe *p, uint64_t c)
{
    if (c < LOOM_SHM_PIPE_BUFS / 2)
        return LOOM_SUCCESS;
    if (c < LOOM_SHM_PIPE_BUFS)
        return loom_shm_wait_all(p->x, p->start + 1);
    return pipe_wait_all(p, c - LOOM_SHM_PIPE_BUFS, p->stages - 1);
}

/* Every rank past the call's last stage: the ring is free for the next.
 * The first stage's wait checks that each peer is in this same call; a
 * rank that never waited for some peer (the broadcast root) checks here. */
static loom_result_t pipe_end(struct pipe *p)
{
    loom_result_t res = loom_shm_wait_all(p->x, p->start + 1);
    if (res == LOOM_SUCCESS && p->nchunks)
        res = pipe_wait_all(p, p->nchunks - 1, p->stages - 1);
    return res;
}

/* Allreduce (root < 0) or reduce into local rank root, three stages per
 * chunk: every rank stages the slices of its input that others own; slice
 * j's owner reduces it (its own input read in place, the peers' from their
 * buffers, in rank order: the same bits everywhere) into the slice of its
 * own buffer it did not stage; then every rank (the root only, for reduce)
 * copies every slice out. Per rank and chunk: (n-1)/n staged, 1/n reduced
 * from n inputs, the chunk copied out. */
static loom_result_t pipe_reduce_all(struct loom_shm_ctx *x, int root)
{
    struct pipe p;
    pipe_init(&p, x, 3, 1);
    struct loom_shm *s = p.s;
    size_t es = p.es;
    for (uint64_t c = 0; c < p.nchunks; c++) {
        uint64_t base, cnt = pipe_chunk(&p, c, &base), o, l;
        const char *in = p.send + base * es;
        loom_result_t res = pipe_claim(&p, c);
        if (res < 0)
            return res;
        char *mine = pipe_buf(&p, s->me, c);
        for (int j = 0; j < s->n; j++) {
            loom_shm_slice(cnt, s->n, j, &o, &l);
            if (j != s->me && l)
                memcpy(mine + o * es, in + o * es, (size_t)l * es);
        }
        loom_shm_bump(s);
        loom_shm_slice(cnt, s->n, s->me, &o, &l);
        char *dst = mine + o * es;
        for (int j = 0; j < s->n; j++) {
            res = j == s->me ? LOOM_SUCCESS : pipe_wait(&p, j, c, 0);
            if (res < 0)
                return res;
            const char *src = j == s->me ? in + o * es : pipe_buf(&p, j, c) + o * es;
            if (!l)
                continue;
            if (j == 0)
                memcpy(dst, src, (size_t)l * es);
            else
                p.fn(dst, dst, src, (size_t)l);
        }
        if (p.op->op == LOOM_AVG && l)
            loom_reduce_avg_finish(dst, (size_t)l, p.op->dtype, x->comm->nranks);
        loom_shm_bump(s);
        for (int k = 0; (root < 0 || s->me == root) && k < s->n; k++) {
            int j = (s->me + k) % s->n;
            loom_shm_slice(cnt, s->n, j, &o, &l);
            res = j == s->me ? LOOM_SUCCESS : pipe_wait(&p, j, c, 1);
            if (res < 0)
                return res;
            if (l)
                memcpy(p.recv + (base + o) * es, pipe_buf(&p, j, c) + o * es, (size_t)l * es);
        }
        loom_shm_bump(s);
    }
    return pipe_end(&p);
}

loom_result_t loom_shm_pipe_allreduce(struct loom_shm_ctx *x)
{
    return pipe_reduce_all(x, -1);
}

loom_result_t loom_shm_pipe_reduce(struct loom_shm_ctx *x)
{
    return pipe_reduce_all(x, loom_shm_local_of(x->s, x->op->root));
}

/* Two stages per chunk: the root stages it, the others copy it out, all
 * at once; the root stages the next chunks meanwhile. */
loom_result_t loom_shm_pipe_broadcast(struct loom_shm_ctx *x)
{
    struct pipe p;
    pipe_init(&p, x, 2, 1);
    struct loom_shm *s = p.s;
    int root = loom_shm_local_of(s, p.op->root);
    for (uint64_t c = 0; c < p.nchunks; c++) {
        uint64_t base, cnt = pipe_chunk(&p, c, &base);
        char *at = p.recv + base * p.es;
        loom_result_t res;
        if (s->me == root) {
            res = pipe_claim(&p, c);
            if (res < 0)
                return res;
            memcpy(pipe_buf(&p, root, c), at, (size_t)cnt * p.es);
        }
        loom_shm_bump(s);
        if (s->me != root) {
            res = pipe_wait(&p, root, c, 0);
            if (res < 0)
                return res;
            memcpy(at, pipe_buf(&p, root, c), (size_t)cnt * p.es);
        }
        loom_shm_bump(s);
    }
    return pipe_end(&p);
}

/* Two stages per chunk: every rank stages a chunk of its block (from
 * mine), then copies the same chunk of every peer's block into recvbuf. */
static loom_result_t pipe_gather(struct pipe *p, const char *mine)
{
    struct loom_shm *s = p->s;
    size_t es = p->es;
    uint64_t at, len;
    for (uint64_t c = 0; c < p->nchunks; c++) {
        uint64_t base = c * p->per;
        loom_result_t res = pipe_claim(p, c);
        if (res < 0)
            return res;
        pipe_block(p, s->me, &at, &len);
        uint64_t cnt = pipe_piece(p, len, base);
        if (cnt)
            memcpy(pipe_buf(p, s->me, c), mine + base * es, (size_t)cnt * es);
        loom_shm_bump(s);
        for (int k = 1; k < s->n; k++) {
            int j = (s->me + k) % s->n;
            res = pipe_wait(p, j, c, 0);
            if (res < 0)
                return res;
            pipe_block(p, j, &at, &len);
            cnt = pipe_piece(p, len, base);
            if (cnt)
                memcpy(p->recv + (at + base) * es, pipe_buf(p, j, c), (size_t)cnt * es);
        }
        loom_shm_bump(s);
    }
    pipe_block(p, s->me, &at, &len);
    if (mine != p->recv + at * es)
        memmove(p->recv + at * es, mine, (size_t)len * es);
    return pipe_end(p);
}

loom_result_t loom_shm_pipe_allgather(struct loom_shm_ctx *x)
{
    struct pipe p;
    pipe_init_blocks(&p, x, 0, 1);
    return pipe_gather(&p, p.send);
}

/* Two stages per chunk: every rank stages the same stretch of each block
 * its peers own, then reduces that stretch of its own block from every
 * rank's input in rank order (its own read in place) into out. avg > 0:
 * the result divided by avg (LOOM_AVG; 0 leaves a sum). Peers may still
 * read this rank's buffers: pipe_end before the ring is used again. */
static loom_result_t pipe_scatter(struct pipe *p, char *out, int avg)
{
    struct loom_shm *s = p->s;
    size_t es = p->es, piece = (size_t)p->per * es;
    uint64_t at, len, mat, mlen;
    pipe_block(p, s->me, &mat, &mlen);
    const char *my_block = p->send + mat * es;
    /* in place, the result overwrites this rank's input before the rank
     * order reaches it: stage that block too */
    int in_place = out == my_block;
    for (uint64_t c = 0; c < p->nchunks; c++) {
        uint64_t base = c * p->per;
        loom_result_t res = pipe_claim(p, c);
        if (res < 0)
            return res;
        char *mine = pipe_buf(p, s->me, c);
        for (int j = 0; j < s->n; j++) {
            pipe_block(p, j, &at, &len);
            uint64_t cnt = pipe_piece(p, len, base);
            if ((j != s->me || in_place) && cnt)
                memcpy(mine + (size_t)j * piece, p->send + (at + base) * es, (size_t)cnt * es);
        }
        loom_shm_bump(s);
        uint64_t cnt = pipe_piece(p, mlen, base);
        char *dst = out + base * es;
        for (int j = 0; j < s->n; j++) {
            res = j == s->me ? LOOM_SUCCESS : pipe_wait(p, j, c, 0);
            if (res < 0)
                return res;
            if (!cnt)
                continue;
            const char *src = j == s->me && !in_place ? my_block + base * es
                                                      : pipe_buf(p, j, c) + (size_t)s->me * piece;
            if (j == 0) {
                if (dst != src)
                    memcpy(dst, src, (size_t)cnt * es);
            } else {
                p->fn(dst, dst, src, (size_t)cnt);
            }
        }
        if (p->op->op == LOOM_AVG && avg && cnt)
            loom_reduce_avg_finish(dst, (size_t)cnt, p->op->dtype, avg);
        loom_shm_bump(s);
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_shm_pipe_reduce_scatter(struct loom_shm_ctx *x)
{
    struct pipe p;
    pipe_init_blocks(&p, x, 0, (unsigned)x->s->n);
    loom_result_t res = pipe_scatter(&p, p.recv, x->s->n);
    return res < 0 ? res : pipe_end(&p);
}

/* The hierarchical allreduce: a reduce-scatter into each rank's slice of
 * recvbuf, mid on the whole slice (while slower local peers still reduce
 * theirs), then an allgather of the slices. Each slice is reduced by one
 * rank here and by the network step alike on every server: the same bits
 * everywhere. */
loom_result_t loom_shm_pipe_allreduce_mid(struct loom_shm_ctx *x, const struct loom_shm_mid *mid)
{
    struct pipe p;
    pipe_init_blocks(&p, x, 1, (unsigned)x->s->n);
    uint64_t at, len;
    pipe_block(&p, x->s->me, &at, &len);
    char *mine = p.recv + at * p.es;
    loom_result_t res = pipe_scatter(&p, mine, 0);
    if (res == LOOM_SUCCESS)
        res = loom_shm_inter(x, mid, mine, len);
    if (res < 0)
        return res;
    if (x->op->op == LOOM_AVG && len)
        loom_reduce_avg_finish(mine, (size_t)len, x->op->dtype, x->comm->nranks);
    /* a second run of the ring from the epoch reached, once pipe_end has
     * seen every buffer free */
    res = pipe_end(&p);
    if (res < 0)
        return res;
    pipe_init_blocks(&p, x, 1, 1);
    return pipe_gather(&p, mine);
}
