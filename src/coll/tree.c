/* tree.c - pipelined double binary tree allreduce.
 *
 * Two complementary binary trees (tree_math.h) each carry half of the
 * buffer. In each tree, chunks are reduced up to the root (own data, then
 * each child's in label order) and the root's result is sent
 * back down, chunk by chunk, so the reduce of chunk c+1 overlaps the
 * broadcast of chunk c. Every rank ends with the root's bytes.
 *
 * A small buffer rides on one tree (TREE_SINGLE_MAX), and the two trees
 * take turns by call (the sequence number's parity, the same on every
 * rank). The leaves of a tree are the last ranks to finish a call, and they
 * are the inner nodes of the other tree, whose leaves (this call's inner
 * nodes) finished first and can start the next call's reduce at once; so
 * back-to-back calls overlap. Loopback, 8 B to 32 KiB, against staying on
 * one tree: 8 ranks 15-20% less time per call, 4 ranks about 10%, 2 ranks
 * the same or better.
 *
 * Message order: every message is a unit (tree t, phase, chunk c) with the
 * key (c + phase * lag) * 4 + phase * 2 + t (phase 0 up, 1 down). Each rank
 * posts all its receives at the start, and its sends as their data becomes
 * ready, both in key order per peer, so the two ends of every link agree on
 * the order. A unit only depends on units of a smaller key or of the same
 * key nearer the leaves (up) or the root (down), so this cannot deadlock;
 * the lag lets the upward chunks run a few ahead of the downward ones. */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "tree_math.h"
#include "base/util.h"

/* Chunks the broadcast of chunk c is ordered behind the reduce of c. */
#define TREE_LAG_MIN 4
/* Chunk size: small enough that a tree's half of the buffer makes about
 * TREE_PIPE_DEPTH chunks per level of the tree (so the levels overlap),
 * at least TREE_CHUNK_MIN bytes, at most LOOM_CHUNK_SIZE. */
#define TREE_PIPE_DEPTH 4
#define TREE_CHUNK_MIN 65536
/* Up to this many bytes one tree carries the whole buffer: splitting it
 * doubles the messages where latency, not link bandwidth, sets the time
 * (docs/perf.md, "Algorithm selection"). */
#define TREE_SINGLE_MAX (256 << 10)
/* Keys past the first unsent unit that post_sends looks at. */
#define TREE_LOOKAHEAD 64

#define KIDS LOOM_BTREE_MAXKIDS
/* Request streams of a side: NSTREAM = the children and the parent. */
#define NSTREAM (KIDS + 1)

struct tree_side {
    int parent;             /* rank, -1 at the root                         */
    int child[KIDS];        /* ranks, in label order                        */
    int nchild;
    uint64_t off, len;      /* elements of the buffer this tree carries     */
    uint64_t nchunks;
    /* receive streams: [i < KIDS] from child i (up), [KIDS] from the parent
     * (down); send streams: [0] to the parent (up), [1 + i] to child i */
    struct loom_tx_req *rreq[NSTREAM], *sreq[NSTREAM];
    uint64_t rdone[NSTREAM], sdone[NSTREAM], spost[NSTREAM];
    uint64_t up_ready;      /* chunks whose upward data is ready            */
    uint64_t down_ready;    /* chunks holding the final result              */
    char *acc;              /* reduced chunks (inner nodes and root)        */
    char *cbuf[KIDS];       /* chunks received from each child              */
};

struct tree_run {
    struct loom_comm *comm;
    struct loom_op *op;
    struct tree_side side[2];
    size_t elem;
    uint64_t chunk;         /* elements per chunk                           */
    uint64_t lag;
    loom_reduce_fn fn;
    const char *src;
    char *dst;
};

static void side_init(struct tree_run *tr, int t, uint64_t off, uint64_t len)
{
    struct loom_comm *comm = tr->comm;
    int n = comm->nranks;
    struct tree_side *s = &tr->side[t];
    memset(s, 0, sizeof *s);
    int x = loom_tree_label(comm->ring_pos, t, n);
    int p = loom_btree_parent(x, n), kids[KIDS];
    s->parent = p ? comm->ring[loom_tree_pos(p, t, n)] : -1;
    s->nchild = loom_btree_children(x, n, kids);
    for (int i = 0; i < s->nchild; i++)
        s->child[i] = comm->ring[loom_tree_pos(kids[i], t, n)];
    s->off = off;
    s->len = len;
    s->nchunks = loom_nchunks(len, tr->chunk);
}

static void chunk_span(const struct tree_run *tr, const struct tree_side *s,
                       uint64_t c, size_t *off, size_t *len)
{
    uint64_t first = c * tr->chunk;
    uint64_t k = s->len - first < tr->chunk ? s->len - first : tr->chunk;
    *off = (size_t)((s->off + first) * tr->elem);
    *len = (size_t)(k * tr->elem);
}

/* Offset of chunk c within the tree's own scratch (acc, cbuf). */
static size_t local_off(const struct tree_run *tr, uint64_t c)
{
    return (size_t)(c * tr->chunk * tr->elem);
}

/* Post every receive of both trees, in key order. */
static loom_result_t post_receives(struct tree_run *tr, struct loom_waiter *w)
{
    uint64_t cmax = tr->side[0].nchunks > tr->side[1].nchunks ? tr->side[0].nchunks
                                                              : tr->side[1].nchunks;
    for (uint64_t k = 0; k < cmax + tr->lag; k++)
        for (int phase = 0; phase < 2; phase++)
            for (int t = 0; t < 2; t++) {
                struct tree_side *s = &tr->side[t];
                uint64_t c = k - (phase ? tr->lag : 0);
                if (k < (phase ? tr->lag : 0) || c >= s->nchunks)
                    continue;
                size_t off, len;
                chunk_span(tr, s, c, &off, &len);
                if (phase == 0) {
                    for (int i = 0; i < s->nchild; i++)
                        LOOM_CHECK(loom_p2p_post(w, &s->rreq[i][c], s->child[i], 0,
                                                 s->cbuf[i] + local_off(tr, c), len));
                } else if (s->parent >= 0) {
                    LOOM_CHECK(loom_p2p_post(w, &s->rreq[KIDS][c], s->parent, 0,
                                             tr->dst + off, len));
                }
            }
    return LOOM_SUCCESS;
}

/* Does receive stream i of s exist (a child there, or a parent)? */
static int rstream_live(const struct tree_side *s, int i)
{
    return i < KIDS ? i < s->nchild : s->parent >= 0;
}

/* Has chunk c arrived from every child? */
static int kids_arrived(const struct tree_side *s, uint64_t c)
{
    for (int i = 0; i < s->nchild; i++)
        if (s->rdone[i] <= c)
            return 0;
    return 1;
}

/* Reduce and finish the chunks whose inputs have all arrived. */
static int advance(struct tree_run *tr, struct loom_waiter *w, loom_result_t *res)
{
    int moved = 0;
    for (int t = 0; t < 2; t++) {
        struct tree_side *s = &tr->side[t];
        for (int i = 0; i < NSTREAM; i++) {
            int have = rstream_live(s, i);
            while (have && s->rdone[i] < s->nchunks && s->rreq[i][s->rdone[i]].done) {
                if (s->rreq[i][s->rdone[i]].status < 0) {
                    *res = loom_p2p_req_failed(w, &s->rreq[i][s->rdone[i]]);
                    return moved;
                }
                s->rdone[i]++;
                moved = 1;
            }
            while (s->sdone[i] < s->spost[i] && s->sreq[i][s->sdone[i]].done) {
                if (s->sreq[i][s->sdone[i]].status < 0) {
                    *res = loom_p2p_req_failed(w, &s->sreq[i][s->sdone[i]]);
                    return moved;
                }
                s->sdone[i]++;
                moved = 1;
            }
        }
        /* upward: own data, then each child's, in child order */
        while (s->up_ready < s->nchunks && s->nchild > 0 &&
               kids_arrived(s, s->up_ready)) {
            uint64_t c = s->up_ready;
            size_t off, len;
            chunk_span(tr, s, c, &off, &len);
            uint64_t k = len / tr->elem;
            char *acc = s->acc + local_off(tr, c);
            tr->fn(acc, tr->src + off, s->cbuf[0] + local_off(tr, c), k);
            for (int i = 1; i < s->nchild; i++)
                tr->fn(acc, acc, s->cbuf[i] + local_off(tr, c), k);
            s->up_ready++;
            moved = 1;
        }
        if (s->parent < 0) {
            /* the root: its reduction is the result */
            while (s->down_ready < s->up_ready) {
                uint64_t c = s->down_ready;
                size_t off, len;
                chunk_span(tr, s, c, &off, &len);
                memcpy(tr->dst + off, s->acc + local_off(tr, c), len);
                if (tr->op->op == LOOM_AVG)
                    loom_reduce_avg_finish(tr->dst + off, len / tr->elem,
                                           tr->op->dtype, tr->comm->nranks);
                s->down_ready++;
                moved = 1;
            }
        } else {
            s->down_ready = s->rdone[KIDS];
        }
    }
    return moved;
}

/* Is a peer among the first nb of blocked[]? */
static int is_blocked(const int *blocked, int nb, int peer)
{
    for (int i = 0; i < nb; i++)
        if (blocked[i] == peer)
            return 1;
    return 0;
}

/* Are all of s's children free of blocked[0..nb)? */
static int kids_free(const struct tree_side *s, const int *blocked, int nb)
{
    for (int i = 0; i < s->nchild; i++)
        if (is_blocked(blocked, nb, s->child[i]))
            return 0;
    return 1;
}

/* Post the sends whose data is ready, in key order per peer: a unit that
 * is not ready blocks its peers, later units to other peers go ahead (up to
 * TREE_LOOKAHEAD keys past the first unposted one, *next). */
static loom_result_t post_sends(struct tree_run *tr, struct loom_waiter *w,
                                uint64_t *next, uint64_t kend, int *moved)
{
    /* at most every child and the parent of both trees */
    enum { MAXBLOCKED = 2 * NSTREAM };
    int blocked[MAXBLOCKED], nb = 0, prefix = 1;
    for (uint64_t key = *next; key < kend && key < *next + TREE_LOOKAHEAD && nb < MAXBLOCKED;
         key++) {
        uint64_t k = key / 4;
        int phase = (int)(key / 2 % 2), t = (int)(key % 2);
        struct tree_side *s = &tr->side[t];
        uint64_t base = phase ? tr->lag : 0;
        int done = k < base || k - base >= s->nchunks || (phase ? s->nchild == 0
                                                                : s->parent < 0);
        uint64_t c = k - base;
        if (!done)
            done = s->spost[phase ? 1 : 0] > c;
        if (!done) {
            int ready = phase ? s->down_ready > c : s->up_ready > c;
            int free = phase ? kids_free(s, blocked, nb) : !is_blocked(blocked, nb, s->parent);
            if (ready && free) {
                size_t off, len;
                chunk_span(tr, s, c, &off, &len);
                if (phase == 0) {
                    const char *from = s->nchild ? s->acc + local_off(tr, c) : tr->src + off;
                    LOOM_CHECK(loom_p2p_post(w, &s->sreq[0][c], s->parent, 1, (void *)from,
                                             len));
                    s->spost[0]++;
                } else {
                    for (int i = 0; i < s->nchild; i++) {
                        LOOM_CHECK(loom_p2p_post(w, &s->sreq[1 + i][c], s->child[i], 1,
                                                 tr->dst + off, len));
                        s->spost[1 + i]++;
                    }
                }
                *moved = 1;
                done = 1;
            } else if (phase == 0) {
                if (!is_blocked(blocked, nb, s->parent))
                    blocked[nb++] = s->parent;
            } else {
                for (int i = 0; i < s->nchild && nb < MAXBLOCKED; i++)
                    if (!is_blocked(blocked, nb, s->child[i]))
                        blocked[nb++] = s->child[i];
            }
        }
        if (done && prefix)
            *next = key + 1;
        else
            prefix = 0;
    }
    return LOOM_SUCCESS;
}

/* Every receive and every posted send of s complete (the caller checks
 * that all sends were posted). */
static int side_done(const struct tree_side *s)
{
    for (int i = 0; i < s->nchild; i++)
        if (s->rdone[i] < s->nchunks)
            return 0;
    for (int i = 0; i < NSTREAM; i++)
        if (s->sdone[i] < s->spost[i])
            return 0;
    return s->down_ready >= s->nchunks;
}

/* A request this rank is waiting for, to name in a timeout. */
static const struct loom_tx_req *first_pending(const struct tree_run *tr)
{
    for (int t = 0; t < 2; t++) {
        const struct tree_side *s = &tr->side[t];
        for (int i = 0; i < NSTREAM; i++) {
            int have = rstream_live(s, i);
            if (have && s->rdone[i] < s->nchunks)
                return &s->rreq[i][s->rdone[i]];
            if (s->sdone[i] < s->spost[i])
                return &s->sreq[i][s->sdone[i]];
        }
    }
    return NULL;
}

loom_result_t loom_tree_allreduce(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks;
    struct tree_run tr;
    memset(&tr, 0, sizeof tr);
    tr.comm = comm;
    tr.op = op;
    tr.elem = loom_dtype_size(op->dtype);
    tr.fn = loom_reduce_get(op->dtype, op->op);
    tr.src = op->sendbuf;
    tr.dst = op->recvbuf;
    size_t bytes = (size_t)op->count * tr.elem;
    if (n == 1 || bytes == 0) {
        if (op->sendbuf != op->recvbuf && bytes)
            memcpy(op->recvbuf, op->sendbuf, bytes);
        return LOOM_SUCCESS;
    }
    int depth = 0;
    for (int m = 1; m < n; m *= 2)
        depth++;
    uint64_t half = op->count / 2;
    if (bytes <= TREE_SINGLE_MAX)
        half = op->seq & 1 ? op->count : 0; /* one tree carries it all */
    size_t cb = bytes / 2 / (size_t)(TREE_PIPE_DEPTH * depth);
    if (cb < TREE_CHUNK_MIN)
        cb = TREE_CHUNK_MIN;
    if (cb > comm->chunk_size)
        cb = comm->chunk_size;
    tr.chunk = cb / tr.elem ? cb / tr.elem : 1;
    side_init(&tr, 0, 0, half);
    side_init(&tr, 1, half, op->count - half);
    tr.lag = (uint64_t)(2 * depth > TREE_LAG_MIN ? 2 * depth : TREE_LAG_MIN);

    /* scratch: per tree, acc and one buffer per child, each the tree's size */
    size_t need = 0, nreq = 0;
    for (int t = 0; t < 2; t++) {
        struct tree_side *s = &tr.side[t];
        size_t sz = ((size_t)s->len * tr.elem + 63) & ~(size_t)63;
        if (s->nchild)
            need += sz * (size_t)(1 + s->nchild);
        nreq += 2 * NSTREAM * (size_t)s->nchunks;
    }
    char *scratch = need ? loom_comm_scratch(comm, need) : NULL;
    struct loom_tx_req *reqs = loom_comm_reqs(comm, nreq);
    if ((need && !scratch) || !reqs) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "allreduce (tree): cannot allocate %zu bytes of scratch", need);
        return LOOM_ERROR_NO_MEMORY;
    }
    for (int t = 0; t < 2; t++) {
        struct tree_side *s = &tr.side[t];
        size_t sz = ((size_t)s->len * tr.elem + 63) & ~(size_t)63;
        for (int i = 0; i < NSTREAM; i++) {
            s->rreq[i] = reqs;
            reqs += s->nchunks;
            s->sreq[i] = reqs;
            reqs += s->nchunks;
        }
        if (s->nchild) {
            s->acc = scratch;
            scratch += sz;
            for (int i = 0; i < s->nchild; i++) {
                s->cbuf[i] = scratch;
                scratch += sz;
            }
        } else {
            s->up_ready = s->nchunks; /* a leaf sends its own data */
        }
    }

    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    LOOM_CHECK(post_receives(&tr, &w));
    uint64_t cmax = tr.side[0].nchunks > tr.side[1].nchunks ? tr.side[0].nchunks
                                                            : tr.side[1].nchunks;
    uint64_t next = 0, kend = (cmax + tr.lag) * 4;
    loom_result_t res = LOOM_SUCCESS;
    for (;;) {
        int moved = advance(&tr, &w, &res);
        if (res < 0)
            return res;
        LOOM_CHECK(post_sends(&tr, &w, &next, kend, &moved));
        if (next == kend && side_done(&tr.side[0]) && side_done(&tr.side[1]))
            return LOOM_SUCCESS;
        res = loom_p2p_progress(&w);
        if (res < 0)
            return res;
        if (moved) {
            loom_waiter_active(&w);
        } else {
            res = loom_p2p_idle(&w, first_pending(&tr));
            if (res < 0)
                return res;
        }
    }
}
