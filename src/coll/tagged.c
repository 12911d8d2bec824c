/* tagged.c - tagged point-to-point (loom_send_tagged, loom_recv_tagged):
 * messages matched by (source, tag) as MPI and gloo match them, a receive
 * from any source taking the earliest arrival.
 *
 * Untagged messages hold a place in the per-pair transport order that both
 * ranks count (sendrecv.c); a tagged receive cannot: it must find a message
 * by its tag, or the first to arrive from any rank, without taking the
 * place of a collective's next message. So a tagged message travels whole,
 * with a header, through the communicator's out-of-band namespace
 * (reliable and in order per sender) and waits on the receiving rank, in
 * arrival order, until a receive takes it. A send completes once its
 * message is queued (copied): posting order never deadlocks. */
#include "build_config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/oob.h"
#include "coll.h"
#include "comm/wait.h"
#include "util.h"
#include "wire.h"

/* A message: magic u32 | tag i32 | dtype u32 | more u32 | count u64, then
 * its first TAG_PIECE bytes at most; more = 1: the rest follows in pieces
 * of magic TAG_MORE u32 | 0 u32 | bytes (the service keeps one sender's
 * messages in order, and one rank's sends run one at a time). */
#define TAG_HDR_LEN 24
#define TAG_MAGIC 0x4c544147u /* "LTAG" */
#define TAG_MORE 0x4c544143u  /* "LTAC" */
#define TAG_MORE_LEN 8
#define TAG_PIECE ((size_t)16 << 20)

/* A message that arrived and waits for its receive. */
struct loom_tmsg {
    int from;
    int tag;
    loom_dtype_t dtype;
    uint64_t count;
    uint8_t *msg;  /* header and payload */
    size_t filled; /* payload bytes there (pieces still coming) */
    struct loom_tmsg *next;
};

static size_t op_bytes(const struct loom_op *op)
{
    return (size_t)op->count * loom_dtype_size(op->dtype);
}

static void queue_msg(struct loom_coll_ext *e, struct loom_tmsg *m)
{
    m->next = NULL;
    if (e->tq_tail)
        e->tq_tail->next = m;
    else
        e->tq_head = m;
    e->tq_tail = m;
}

static loom_result_t send_failed(struct loom_comm *comm, const struct loom_op *op,
                                 loom_result_t res)
{
    char what[160];
    loom_op_describe(op, what, sizeof what);
    comm->blame = op->peer;
    loom_comm_set_error(comm, res, "%s failed: %s: %s", what, loom_comm_describe(comm, op->peer),
                        loom_thread_error());
    return res;
}

loom_result_t loom_tagged_send(struct loom_comm *comm, const struct loom_op *op)
{
    struct loom_coll_ext *e = loom_coll_ext_get(comm);
    size_t bytes = op_bytes(op);
    int self = op->peer == comm->rank;
    /* to itself, whole, straight into its arrivals; else the first piece */
    size_t first = self || bytes <= TAG_PIECE ? bytes : TAG_PIECE;
    uint8_t *msg = malloc(TAG_HDR_LEN + first);
    struct loom_tmsg *m = self ? malloc(sizeof *m) : NULL;
    if (!e || !msg || (self && !m)) {
        free(msg);
        free(m);
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                            "tagged send: out of memory for "
                            "%zu bytes",
                            TAG_HDR_LEN + first);
        return LOOM_ERROR_NO_MEMORY;
    }
    loom_put_le32(msg, TAG_MAGIC);
    loom_put_le32(msg + 4, (uint32_t)op->utag);
    loom_put_le32(msg + 8, (uint32_t)op->dtype);
    loom_put_le32(msg + 12, first < bytes);
    loom_put_le64(msg + 16, op->count);
    if (first)
        memcpy(msg + TAG_HDR_LEN, op->sendbuf, first);
    if (self) {
        *m = (struct loom_tmsg){.from = comm->rank,
                                .tag = op->utag,
                                .dtype = op->dtype,
                                .count = op->count,
                                .msg = msg,
                                .filled = bytes};
        queue_msg(e, m);
        return LOOM_SUCCESS;
    }
    loom_result_t res = loom_oob_send(comm->oob, op->peer, LOOM_OOB_TAG_P2P, msg,
                                      TAG_HDR_LEN + first);
    free(msg);
    for (size_t off = first; res == LOOM_SUCCESS && off < bytes; off += TAG_PIECE) {
        size_t len = bytes - off < TAG_PIECE ? bytes - off : TAG_PIECE;
        uint8_t *piece = malloc(TAG_MORE_LEN + len);
        if (!piece) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "tagged send: out of memory");
            return LOOM_ERROR_NO_MEMORY;
        }
        loom_put_le32(piece, TAG_MORE);
        loom_put_le32(piece + 4, 0);
        memcpy(piece + TAG_MORE_LEN, (const uint8_t *)op->sendbuf + off, len);
        res = loom_oob_send(comm->oob, op->peer, LOOM_OOB_TAG_P2P, piece, TAG_MORE_LEN + len);
        free(piece);
    }
    return res < 0 ? send_failed(comm, op, res) : LOOM_SUCCESS;
}

static loom_result_t malformed(struct loom_comm *comm, const char *what, size_t len, int from,
                               const char *why)
{
    comm->blame = from;
    loom_comm_set_error(comm, LOOM_ERROR_PROTOCOL,
                        "%s: a tagged message of %zu bytes from %s is malformed (%s)", what, len,
                        loom_comm_describe(comm, from), why);
    return LOOM_ERROR_PROTOCOL;
}

/* A piece of from's message in progress: appended; the message is queued
 * once whole. */
static loom_result_t add_piece(struct loom_comm *comm, struct loom_coll_ext *e, const char *what,
                               int from, const uint8_t *b, size_t len)
{
    struct loom_tmsg *m = e->partial ? e->partial[from] : NULL;
    if (!m)
        return malformed(comm, what, len, from, "a piece of no message");
    size_t total = (size_t)m->count * loom_dtype_size(m->dtype);
    if (len - TAG_MORE_LEN > total - m->filled)
        return malformed(comm, what, len, from, "longer than its message");
    memcpy(m->msg + TAG_HDR_LEN + m->filled, b + TAG_MORE_LEN, len - TAG_MORE_LEN);
    m->filled += len - TAG_MORE_LEN;
    if (m->filled == total) {
        e->partial[from] = NULL;
        queue_msg(e, m);
    }
    return LOOM_SUCCESS;
}

/* Take what has arrived into the arrivals list, checking each header. */
static loom_result_t take_arrivals(struct loom_comm *comm, struct loom_coll_ext *e,
                                   const struct loom_op *op)
{
    char what[160];
    for (;;) {
        int from = -1;
        void *buf = NULL;
        size_t len = 0;
        int got = loom_oob_poll(comm->oob, LOOM_OOB_TAG_P2P, -1, &from, &buf, &len);
        if (got == 0)
            return LOOM_SUCCESS;
        loom_op_describe(op, what, sizeof what);
        if (got < 0) {
            loom_comm_set_error(comm, (loom_result_t)got, "%s failed: %s", what,
                                loom_thread_error());
            return (loom_result_t)got;
        }
        uint8_t *b = buf;
        loom_result_t res = LOOM_SUCCESS;
        if (len >= TAG_MORE_LEN && loom_get_le32(b) == TAG_MORE) {
            res = add_piece(comm, e, what, from, b, len);
            free(buf);
            if (res < 0)
                return res;
            continue;
        }
        uint32_t dtype = len >= TAG_HDR_LEN ? loom_get_le32(b + 8) : 0;
        uint64_t count = len >= TAG_HDR_LEN ? loom_get_le64(b + 16) : 0;
        int more = len >= TAG_HDR_LEN && loom_get_le32(b + 12) == 1;
        size_t got_bytes = len >= TAG_HDR_LEN ? len - TAG_HDR_LEN : 0;
        if (len < TAG_HDR_LEN || loom_get_le32(b) != TAG_MAGIC || dtype >= LOOM_DTYPE_COUNT ||
            count > (uint64_t)(SIZE_MAX / 2) / loom_dtype_size((loom_dtype_t)dtype) ||
            (more ? count * loom_dtype_size((loom_dtype_t)dtype) <= got_bytes ||
                        (e->partial && e->partial[from])
                  : count * loom_dtype_size((loom_dtype_t)dtype) != got_bytes)) {
            free(buf);
            return malformed(comm, what, len, from, "header or length");
        }
        size_t total = (size_t)count * loom_dtype_size((loom_dtype_t)dtype);
        struct loom_tmsg *m = malloc(sizeof *m);
        if (more && m && !e->partial)
            e->partial = calloc((size_t)comm->nranks, sizeof *e->partial);
        uint8_t *whole = more && m && e->partial ? malloc(TAG_HDR_LEN + total) : NULL;
        if (!m || (more && !whole)) {
            free(buf);
            free(m);
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                                "%s: out of memory for a tagged "
                                "message of %zu bytes",
                                what, total);
            return LOOM_ERROR_NO_MEMORY;
        }
        *m = (struct loom_tmsg){.from = from,
                                .tag = (int)loom_get_le32(b + 4),
                                .dtype = (loom_dtype_t)dtype,
                                .count = count,
                                .msg = b,
                                .filled = got_bytes};
        if (more) { /* the rest comes in pieces */
            memcpy(whole, b, len);
            free(buf);
            m->msg = whole;
            e->partial[from] = m;
            continue;
        }
        queue_msg(e, m);
    }
}

static int matches(const struct loom_op *op, const struct loom_tmsg *m)
{
    return (op->peer == LOOM_ANY_SOURCE || op->peer == m->from) &&
           (op->utag == LOOM_ANY_TAG || op->utag == m->tag);
}

loom_result_t loom_tagged_poll(struct loom_comm *comm, const struct loom_op *op)
{
    struct loom_coll_ext *e = loom_coll_ext_get(comm);
    if (!e) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "tagged receive: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    return comm->oob ? take_arrivals(comm, e, op) : LOOM_SUCCESS;
}

int loom_tagged_match(struct loom_comm *comm, struct loom_op *op)
{
    struct loom_coll_ext *e = comm->ext;
    struct loom_tmsg **pp = &e->tq_head, *prev = NULL;
    while (*pp && !matches(op, *pp)) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    struct loom_tmsg *m = *pp;
    if (!m)
        return 0;
    if (m->dtype != op->dtype || m->count != op->count) {
        char mine[160], theirs[160];
        loom_op_describe(op, mine, sizeof mine);
        struct loom_op sent = {.kind = LOOM_OP_SEND,
                               .tagged = 1,
                               .utag = m->tag,
                               .dtype = m->dtype,
                               .count = m->count,
                               .peer = comm->rank};
        loom_op_describe(&sent, theirs, sizeof theirs);
        comm->blame = m->from;
        loom_comm_set_error(comm, LOOM_ERROR_MISMATCH,
                            "point-to-point calls differ: rank %d called %s; %s called %s",
                            comm->rank, mine, loom_comm_describe(comm, m->from), theirs);
        return LOOM_ERROR_MISMATCH;
    }
    *pp = m->next;
    if (e->tq_tail == m)
        e->tq_tail = prev;
    if (op->count)
        memcpy(op->recvbuf, m->msg + TAG_HDR_LEN, op_bytes(op));
    if (op->source)
        *op->source = m->from;
    free(m->msg);
    free(m);
    return 1;
}

loom_result_t loom_tagged_idle(struct loom_waiter *w, const struct loom_op *op)
{
    struct loom_comm *comm = w->comm;
    if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE)) {
        char what[160];
        loom_op_describe(op, what, sizeof what);
        loom_comm_set_error(comm, LOOM_ERROR_ABORTED, "%s: aborted", what);
        return LOOM_ERROR_ABORTED;
    }
    uint64_t now = loom_now_ns();
    if (w->idle_since_ns == 0) {
        w->idle_since_ns = now;
        return LOOM_SUCCESS;
    }
    char waiting[320];
    if (op->peer == LOOM_ANY_SOURCE)
        snprintf(waiting, sizeof waiting, "for a tagged message from any rank");
    else
        snprintf(waiting, sizeof waiting, "for a tagged message from %s",
                 loom_comm_describe(comm, op->peer));
    struct loom_wait lw = {.since_ns = w->idle_since_ns, .stall_warned = w->stall_warned};
    loom_result_t res = loom_wait_check(&lw, comm, op, now, waiting, op->peer);
    w->stall_warned = lw.stall_warned;
    if (res < 0)
        return res;
    /* the service thread delivers: spin a little, then yield, then nap */
    uint64_t idle = now - w->idle_since_ns;
    if (idle < (uint64_t)comm->spin_us * 1000ull)
        return LOOM_SUCCESS;
    if (idle < 2000000ull) {
        sched_yield();
        return LOOM_SUCCESS;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    return LOOM_SUCCESS;
}

void loom_tagged_free(struct loom_comm *comm, struct loom_coll_ext *e)
{
    for (int r = 0; e->partial && r < comm->nranks; r++)
        if (e->partial[r]) {
            free(e->partial[r]->msg);
            free(e->partial[r]);
        }
    free(e->partial);
    e->partial = NULL;
    while (e->tq_head) {
        struct loom_tmsg *m = e->tq_head;
        e->tq_head = m->next;
        free(m->msg);
        free(m);
    }
    e->tq_tail = NULL;
}
