/* chain.c - pipelined chain broadcast and reduce along the ring, starting
 * (broadcast) or ending (reduce) at the root. Each chunk moves one hop as
 * soon as it has arrived, so a message of S bytes takes about S/bandwidth
 * plus n-1 chunk latencies; every rank sends once per chunk, so back-to-back
 * small broadcasts also run faster than on the binomial tree, whose root
 * sends log2 n times (coll.c chooses it for small messages up to 5 ranks). */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "ring_math.h"
#include "base/util.h"

#define CHAIN_WINDOW 8

struct chain {
    int n, q;          /* q: hops from the root along the ring              */
    int prev, next;    /* ranks one hop nearer the root / farther from it   */
    size_t chunk_bytes;
    uint64_t nchunks;
    size_t bytes;
};

static void chain_init(struct chain *ch, struct loom_comm *comm,
                       const struct loom_op *op)
{
    int n = comm->nranks;
    int rootpos = 0;
    for (int i = 0; i < n; i++)
        if (comm->ring[i] == op->root)
            rootpos = i;
    ch->n = n;
    ch->q = loom_mod((int64_t)comm->ring_pos - rootpos, n);
    ch->prev = comm->ring[loom_mod((int64_t)comm->ring_pos - 1, n)];
    ch->next = comm->ring[loom_mod((int64_t)comm->ring_pos + 1, n)];
    size_t elem = loom_dtype_size(op->dtype);
    size_t ce = comm->chunk_size / elem;
    ch->chunk_bytes = (ce ? ce : 1) * elem;
    ch->bytes = (size_t)op->count * elem;
    ch->nchunks = loom_nchunks(ch->bytes, ch->chunk_bytes);
}

static size_t chunk_len(const struct chain *ch, uint64_t c)
{
    size_t off = (size_t)c * ch->chunk_bytes;
    return ch->bytes - off < ch->chunk_bytes ? ch->bytes - off : ch->chunk_bytes;
}

loom_result_t loom_chain_broadcast(struct loom_comm *comm, struct loom_op *op)
{
    struct chain ch;
    chain_init(&ch, comm, op);
    if (ch.n == 1 || ch.bytes == 0)
        return LOOM_SUCCESS;
    int recvs = ch.q > 0, sends = ch.q < ch.n - 1;
    char *buf = op->recvbuf;
    struct loom_tx_req *rreq = loom_comm_reqs(comm, 2 * CHAIN_WINDOW);
    if (!rreq) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "broadcast: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_tx_req *sreq = rreq + CHAIN_WINDOW;
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    uint64_t nrpost = 0, nrdone = recvs ? 0 : ch.nchunks, nspost = 0, nsdone = 0;
    uint64_t total_s = sends ? ch.nchunks : 0;
    loom_result_t res;
    for (;;) {
        while (recvs && nrpost < ch.nchunks && nrpost - nrdone < CHAIN_WINDOW) {
            res = loom_p2p_post(&w, &rreq[nrpost % CHAIN_WINDOW], ch.prev, 0,
                                buf + nrpost * ch.chunk_bytes, chunk_len(&ch, nrpost));
            if (res < 0)
                return res;
            nrpost++;
        }
        while (nspost < total_s && nspost < nrdone && nspost - nsdone < CHAIN_WINDOW) {
            res = loom_p2p_post(&w, &sreq[nspost % CHAIN_WINDOW], ch.next, 1,
                                buf + nspost * ch.chunk_bytes, chunk_len(&ch, nspost));
            if (res < 0)
                return res;
            nspost++;
        }
        res = loom_p2p_progress(&w);
        if (res < 0)
            return res;
        int moved = 0;
        LOOM_CHECK(loom_p2p_reap(&w, rreq, CHAIN_WINDOW, &nrdone, nrpost, &moved));
        LOOM_CHECK(loom_p2p_reap(&w, sreq, CHAIN_WINDOW, &nsdone, nspost, &moved));
        if (nrdone == ch.nchunks && nsdone == total_s)
            return LOOM_SUCCESS;
        LOOM_CHECK(loom_p2p_settle(&w, moved,
                                   nrdone < nrpost ? &rreq[nrdone % CHAIN_WINDOW]
                                                   : &sreq[nsdone % CHAIN_WINDOW]));
    }
}

/* Reduce: data flows from the farthest rank (q = n-1) toward the root. A
 * middle rank receives the partial result from next into a slot, reduces its
 * own chunk into that slot and forwards the slot to prev; the slot is free
 * again once that send is done. The root reduces into recvbuf. */
loom_result_t loom_chain_reduce(struct loom_comm *comm, struct loom_op *op)
{
    struct chain ch;
    chain_init(&ch, comm, op);
    size_t elem = loom_dtype_size(op->dtype);
    int is_root = ch.q == 0;
    if (ch.n == 1 || ch.bytes == 0) {
        if (is_root && op->recvbuf != op->sendbuf && ch.bytes)
            memcpy(op->recvbuf, op->sendbuf, ch.bytes);
        return LOOM_SUCCESS;
    }
    int recvs = ch.q < ch.n - 1;  /* from next (farther)  */
    int sends = !is_root;         /* to prev (nearer)     */
    loom_reduce_fn fn = loom_reduce_get(op->dtype, op->op);
    const char *src = op->sendbuf;
    char *tmp = NULL;
    if (recvs) {
        tmp = loom_comm_scratch(comm, CHAIN_WINDOW * ch.chunk_bytes);
        if (!tmp) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "reduce: out of memory");
            return LOOM_ERROR_NO_MEMORY;
        }
    }
    struct loom_tx_req *rreq = loom_comm_reqs(comm, 2 * CHAIN_WINDOW);
    if (!rreq) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "reduce: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_tx_req *sreq = rreq + CHAIN_WINDOW;
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    /* chunk c uses slot c % WINDOW from its receive until its send is done */
    uint64_t nrpost = 0, nrdone = recvs ? 0 : ch.nchunks, nspost = 0, nsdone = 0;
    uint64_t total_s = sends ? ch.nchunks : 0;
    loom_result_t res;
    for (;;) {
        /* a slot is free when the chunk that used it last has been sent on */
        while (recvs && nrpost < ch.nchunks &&
               nrpost - (sends ? nsdone : nrdone) < CHAIN_WINDOW) {
            res = loom_p2p_post(&w, &rreq[nrpost % CHAIN_WINDOW], ch.next, 0,
                                tmp + (nrpost % CHAIN_WINDOW) * ch.chunk_bytes,
                                chunk_len(&ch, nrpost));
            if (res < 0)
                return res;
            nrpost++;
        }
        while (nspost < total_s && nspost < nrdone && nspost - nsdone < CHAIN_WINDOW) {
            const char *from = recvs ? tmp + (nspost % CHAIN_WINDOW) * ch.chunk_bytes
                                     : src + nspost * ch.chunk_bytes;
            res = loom_p2p_post(&w, &sreq[nspost % CHAIN_WINDOW], ch.prev, 1,
                                (void *)from, chunk_len(&ch, nspost));
            if (res < 0)
                return res;
            nspost++;
        }
        res = loom_p2p_progress(&w);
        if (res < 0)
            return res;
        int moved = 0;
        while (nrdone < nrpost && rreq[nrdone % CHAIN_WINDOW].done) {
            struct loom_tx_req *rq = &rreq[nrdone % CHAIN_WINDOW];
            if (rq->status < 0)
                return loom_p2p_req_failed(&w, rq);
            size_t off = (size_t)nrdone * ch.chunk_bytes, len = chunk_len(&ch, nrdone);
            char *slot = tmp + (nrdone % CHAIN_WINDOW) * ch.chunk_bytes;
            if (is_root) {
                char *dst = (char *)op->recvbuf + off;
                fn(dst, src + off, slot, len / elem);
                if (op->op == LOOM_AVG)
                    loom_reduce_avg_finish(dst, len / elem, op->dtype, ch.n);
            } else {
                fn(slot, src + off, slot, len / elem);
            }
            nrdone++;
            moved = 1;
        }
        LOOM_CHECK(loom_p2p_reap(&w, sreq, CHAIN_WINDOW, &nsdone, nspost, &moved));
        if (nrdone == ch.nchunks && nsdone == total_s)
            return LOOM_SUCCESS;
        LOOM_CHECK(loom_p2p_settle(&w, moved,
                                   nrdone < nrpost ? &rreq[nrdone % CHAIN_WINDOW]
                                                   : &sreq[nsdone % CHAIN_WINDOW]));
    }
}
