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

/* magic u32 | tag i32 | dtype u32 | reserved u32 | count u64 */
#define TAG_HDR_LEN 24
#define TAG_MAGIC 0x4c544147u /* "LTAG" */

/* A message that arrived and waits for its receive. */
struct loom_tmsg {
    int from;
    int tag;
    loom_dtype_t dtype;
    uint64_t count;
    uint8_t *msg;            /* header and payload, as it came */
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

loom_result_t loom_tagged_send(struct loom_comm *comm, const struct loom_op *op)
{
    struct loom_coll_ext *e = loom_coll_ext_get(comm);
    size_t bytes = op_bytes(op);
    uint8_t *msg = malloc(TAG_HDR_LEN + bytes);
    struct loom_tmsg *self = op->peer == comm->rank ? malloc(sizeof *self) : NULL;
    if (!e || !msg || (op->peer == comm->rank && !self)) {
        free(msg);
        free(self);
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "tagged send: out of memory for "
                            "%zu bytes", TAG_HDR_LEN + bytes);
        return LOOM_ERROR_NO_MEMORY;
    }
    loom_put_le32(msg, TAG_MAGIC);
    loom_put_le32(msg + 4, (uint32_t)op->utag);
    loom_put_le32(msg + 8, (uint32_t)op->dtype);
    loom_put_le32(msg + 12, 0);
    loom_put_le64(msg + 16, op->count);
    if (bytes)
        memcpy(msg + TAG_HDR_LEN, op->sendbuf, bytes);
    if (self) { /* to this rank itself: straight into its arrivals */
        *self = (struct loom_tmsg){.from = comm->rank, .tag = op->utag, .dtype = op->dtype,
                                   .count = op->count, .msg = msg};
        queue_msg(e, self);
        return LOOM_SUCCESS;
    }
    loom_result_t res = loom_oob_send(comm->oob, op->peer, LOOM_OOB_TAG_P2P, msg,
                                      TAG_HDR_LEN + bytes);
    free(msg);
    if (res < 0) {
        char what[160];
        loom_op_describe(op, what, sizeof what);
        comm->blame = op->peer;
        loom_comm_set_error(comm, res, "%s failed: %s: %s", what,
                            loom_comm_describe(comm, op->peer), loom_thread_error());
    }
    return res;
}

/* Take what has arrived into the arrivals list, checking each header. */
static loom_result_t take_arrivals(struct loom_comm *comm, struct loom_coll_ext *e,
                                   const struct loom_op *op)
{
    for (;;) {
        int from = -1;
        void *buf = NULL;
        size_t len = 0;
        int got = loom_oob_poll(comm->oob, LOOM_OOB_TAG_P2P, -1, &from, &buf, &len);
        if (got == 0)
            return LOOM_SUCCESS;
        char what[160];
        loom_op_describe(op, what, sizeof what);
        if (got < 0) {
            loom_comm_set_error(comm, (loom_result_t)got, "%s failed: %s", what,
                                loom_thread_error());
            return (loom_result_t)got;
        }
        uint8_t *b = buf;
        uint32_t dtype = len >= TAG_HDR_LEN ? loom_get_le32(b + 8) : 0;
        uint64_t count = len >= TAG_HDR_LEN ? loom_get_le64(b + 16) : 0;
        if (len < TAG_HDR_LEN || loom_get_le32(b) != TAG_MAGIC ||
            dtype >= LOOM_DTYPE_COUNT ||
            count > (len - TAG_HDR_LEN) / loom_dtype_size((loom_dtype_t)dtype) ||
            count * loom_dtype_size((loom_dtype_t)dtype) != len - TAG_HDR_LEN) {
            free(buf);
            comm->blame = from;
            loom_comm_set_error(comm, LOOM_ERROR_PROTOCOL,
                                "%s: a tagged message of %zu bytes from %s is malformed "
                                "(header or length)", what, len,
                                loom_comm_describe(comm, from));
            return LOOM_ERROR_PROTOCOL;
        }
        struct loom_tmsg *m = malloc(sizeof *m);
        if (!m) {
            free(buf);
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "%s: out of memory", what);
            return LOOM_ERROR_NO_MEMORY;
        }
        *m = (struct loom_tmsg){.from = from, .tag = (int)loom_get_le32(b + 4),
                                .dtype = (loom_dtype_t)dtype, .count = count, .msg = b};
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
        struct loom_op sent = {.kind = LOOM_OP_SEND, .tagged = 1, .utag = m->tag,
                               .dtype = m->dtype, .count = m->count, .peer = comm->rank};
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

void loom_tagged_free(struct loom_coll_ext *e)
{
    while (e->tq_head) {
        struct loom_tmsg *m = e->tq_head;
        e->tq_head = m->next;
        free(m->msg);
        free(m);
    }
    e->tq_tail = NULL;
}
