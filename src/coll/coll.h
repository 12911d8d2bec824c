/* coll.h - collective algorithms over the transport's point-to-point calls.
 *
 * Each algorithm runs on the thread that executes the op (the progress
 * thread, or the caller inline) and returns when its part of the collective
 * is complete on this rank. */
#ifndef LOOM_COLL_H
#define LOOM_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "reduce/reduce.h"

#include "comm/algo.h"

/* Run op on comm now. Sets comm's error message on failure. */
loom_result_t loom_coll_run(struct loom_comm *comm, struct loom_op *op);

/* The algorithm chosen for op (LOOM_ALGO, else the table in coll.c by
 * collective, size and rank count). Exposed for the perf tools' headers
 * and tests; cheap enough for every call. */
enum loom_algo loom_coll_select(const struct loom_comm *comm,
                                const struct loom_op *op);

/* The automatic choice for a collective of bytes bytes (allgather: bytes
 * per rank) over nranks ranks on transport (its name; NULL for none),
 * ignoring LOOM_ALGO. */
enum loom_algo loom_coll_auto(const char *transport, enum loom_op_kind kind, size_t bytes,
                              int nranks);
/* The transport whose measurements choose for transport: its own, or tcp's
 * where it has none. */
const char *loom_coll_tuned_on(const char *transport);

/* ---- point-to-point helpers (p2p.c) ------------------------------------ */

/* Waiting policy and timeout/abort checks while an algorithm waits. */
struct loom_waiter {
    struct loom_comm *comm;
    const struct loom_op *op;
    uint64_t idle_since_ns;
    unsigned spins;
    int stall_warned;
    uint64_t probe_next_ns;   /* next "which call are you in?" to a blocker */
    int probe_peer;           /* asked, answer not yet read (-1 none)       */
    uint64_t gone_since_ns;   /* when the out-of-band service first said
                                 probe_peer is gone (0 not yet)             */
};

void loom_waiter_init(struct loom_waiter *w, struct loom_comm *comm,
                      const struct loom_op *op);
/* Post a send or receive of len bytes to/from peer. */
loom_result_t loom_p2p_post(struct loom_waiter *w, struct loom_tx_req *req,
                            int peer, int is_send, void *buf, size_t len);
/* The same with the message's own fingerprint and count (alltoallv's
 * messages), instead of w->op's. */
loom_result_t loom_p2p_post_msg(struct loom_waiter *w, struct loom_tx_req *req,
                                int peer, int is_send, void *buf, size_t len,
                                uint32_t desc, uint64_t count);
/* Move bytes without waiting. */
loom_result_t loom_p2p_progress(struct loom_waiter *w);
/* Nothing completed in the caller's last look: spin, yield, then sleep in
 * the transport. blocker is the request the caller waits for (named in a
 * timeout). Returns an error on abort, timeout or a failed link. */
loom_result_t loom_p2p_idle(struct loom_waiter *w,
                            const struct loom_tx_req *blocker);
/* Something completed: reset the idle clock. */
static inline void loom_waiter_active(struct loom_waiter *w)
{
    w->idle_since_ns = 0;
    w->spins = 0;
    w->gone_since_ns = 0;
}
/* Wait until every request in reqs[0..n) is done. */
loom_result_t loom_p2p_wait_all(struct loom_waiter *w, struct loom_tx_req *reqs,
                                int n);
/* Send slen bytes of sbuf to peer and receive rlen into rbuf, and wait for
 * both (either may be empty; both ends must skip the same empty ones). req
 * has room for 2. */
loom_result_t loom_p2p_exchange(struct loom_waiter *w, struct loom_tx_req *req, int peer,
                                void *sbuf, size_t slen, void *rbuf, size_t rlen);
/* Reap, in posting order, the requests of a ring of `window` slots that
 * have completed: *ndone advances up to npost, *moved is set when any did.
 * A failed request is recorded on the comm and returned. */
loom_result_t loom_p2p_reap(struct loom_waiter *w, struct loom_tx_req *reqs,
                            uint64_t window, uint64_t *ndone, uint64_t npost,
                            int *moved);
/* The end of one pass of a pipelined loop: reset the idle clock when
 * something completed, else spin, yield or sleep (blocker named on a
 * timeout). */
loom_result_t loom_p2p_settle(struct loom_waiter *w, int moved,
                              const struct loom_tx_req *blocker);
/* A request completed with an error: record it on the comm. */
loom_result_t loom_p2p_req_failed(struct loom_waiter *w,
                                  const struct loom_tx_req *req);
/* After an algorithm finished on a transport that does not check
 * fingerprints: wait for the op's envelopes and check them, so that a call
 * never succeeds on a peer's message of another call. */
loom_result_t loom_p2p_env_drain(struct loom_comm *comm, struct loom_op *op);
/* Free the envelopes (the transport is closed by then). */
void loom_p2p_env_free(struct loom_comm *comm);

/* ---- algorithms ---------------------------------------------------------- */
/* The start of an allreduce that reduces in the receive buffer (rd, rhd):
 * the input is copied there, and scratch bytes and nreq requests are taken;
 * a failure is set on comm naming algo. loom_coll_run calls the algorithms
 * with more than one rank and a count above zero. */
loom_result_t loom_allreduce_begin(struct loom_comm *comm, struct loom_op *op,
                                   const char *algo, size_t scratch, size_t nreq,
                                   char **tmp, struct loom_tx_req **req);
loom_result_t loom_ring_allreduce(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_ring_allgather(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_ring_reduce_scatter(struct loom_comm *comm,
                                       struct loom_op *op);
loom_result_t loom_rd_allreduce(struct loom_comm *comm, struct loom_op *op);
/* The ranks recursive doubling exchanges with (at most max of them). */
int loom_rd_partners(int rank, int n, int *out, int max);
/* Start connecting (without waiting) to the peers small allreduces use on
 * every call, so that the first call's handshakes overlap instead of
 * running one after another; every other peer is connected on first use. */
void loom_coll_warm(struct loom_comm *comm);
loom_result_t loom_chain_broadcast(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_chain_reduce(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_binomial_broadcast(struct loom_comm *comm,
                                      struct loom_op *op);
loom_result_t loom_tree_allreduce(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_rhd_allreduce(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_bruck_allgather(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_scatter_allgather_broadcast(struct loom_comm *comm,
                                               struct loom_op *op);
loom_result_t loom_dissemination_barrier(struct loom_comm *comm,
                                         struct loom_op *op);

/* hier.c: several servers, each in shared memory (comm->shm), and between
 * them comm->hier_sub (the ranks of one local index): allreduce, broadcast,
 * allgather and reduce (but an average) compose the engine inside servers
 * with the network across. */
int loom_hier_usable(const struct loom_comm *comm, const struct loom_op *op);
loom_result_t loom_hier_run(struct loom_comm *comm, struct loom_op *op);

/* ---- point-to-point calls, alltoall/gather/scatter, groups ------------- */

/* What these keep per communicator (comm->ext, made on first use, freed
 * with the communicator). Only the executing thread touches it. */
struct loom_coll_ext {
    uint32_t *send_seq;      /* messages sent to each peer so far          */
    uint32_t *recv_seq;      /* messages received from each peer so far    */
    uint32_t *sent_desc;     /* fingerprint and count of the last message  */
    uint64_t *sent_count;    /* sent to each peer, for messages            */
    void *pack;              /* staging of packed allreduces (coalesce.c)  */
    size_t pack_size;
    /* tagged messages that arrived, in arrival order (tagged.c) */
    struct loom_tmsg *tq_head, *tq_tail;
    struct loom_tmsg **partial; /* per sender: a message still in pieces */
    /* entries of point-to-point sets, reused: a posted request's memory
     * outlives a failed call (sendrecv.c) */
    struct loom_p2p_entry *free_entries;
};
struct loom_coll_ext *loom_coll_ext_get(struct loom_comm *comm);
void loom_coll_ext_free(struct loom_comm *comm);

/* The kinds and attributes the original table does not run: alltoall,
 * gather, scatter, send/recv, groups, scaled or float32-accumulated
 * reductions. Called by loom_coll_run. */
loom_result_t loom_coll_run_ext(struct loom_comm *comm, struct loom_op *op);
/* Whether loom_coll_run must hand op to loom_coll_run_ext. */
int loom_coll_is_ext(const struct loom_op *op);

/* One call of a set in flight. */
struct loom_p2p_entry {
    struct loom_op *op;
    struct loom_tx_req req; /* an untagged call's message               */
    int done;
    struct loom_p2p_entry *next;
};

/* Point-to-point calls in flight together, each completing on its own: a
 * group's, or a lone call's with the calls queued right behind it, which
 * core/queue.c adds as they come (so a receive issued before a send never
 * waits for it). */
struct loom_p2p_set {
    struct loom_comm *comm;
    struct loom_op *wop;                /* the group being run, or NULL           */
    struct loom_p2p_entry *head, *tail; /* in the order added             */
    int pending;
    struct loom_waiter w;
};
void loom_p2p_set_init(struct loom_p2p_set *set, struct loom_comm *comm, struct loom_op *wop);
/* Number op (untagged: its place among the messages between the two
 * ranks) and post it (a tagged send completes here). Sets comm's error on
 * failure. */
loom_result_t loom_p2p_set_add(struct loom_p2p_set *set, struct loom_op *op);
/* Progress once (waiting a little when nothing moved): *done is a call
 * that completed, taken off the set, or NULL. */
loom_result_t loom_p2p_set_step(struct loom_p2p_set *set, struct loom_op **done);
/* Take the first call still in the set off it (after a failure); NULL
 * when none is left. */
struct loom_op *loom_p2p_set_pop(struct loom_p2p_set *set);
/* Forget the calls still in the set (after a failure). */
void loom_p2p_set_clear(struct loom_p2p_set *set);

/* Tagged messages (tagged.c): a send (complete on return); taking what has
 * arrived; matching a tagged receive against it (1: op is complete, 0:
 * nothing yet, or LOOM_ERROR_MISMATCH); waiting a little for more. */
struct loom_tmsg;
loom_result_t loom_tagged_send(struct loom_comm *comm, const struct loom_op *op);
loom_result_t loom_tagged_poll(struct loom_comm *comm, const struct loom_op *op);
int loom_tagged_match(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_tagged_idle(struct loom_waiter *w, const struct loom_op *op);
void loom_tagged_free(struct loom_comm *comm, struct loom_coll_ext *e);

/* Post the sends and receives ops[0..n) together and wait for all of them
 * (sendrecv.c). wop is the op being executed (ops itself for a lone call,
 * else the group): messages name it, or through loom_p2p_mismatch the call
 * of the group a peer disagreed with. Numbers each message (op->seq) by
 * its place among those between the two ranks. */
loom_result_t loom_p2p_batch(struct loom_comm *comm, struct loom_op *wop,
                             struct loom_op *ops, int n);
/* Whether a disagreement the transport saw (m) involves a point-to-point
 * call, on either side; then loom_p2p_mismatch records it, naming both
 * calls (in a group, the call whose message to or from that peer went
 * wrong; a send of this rank's that already completed when the peer
 * objected, by its number). */
int loom_p2p_involved(const struct loom_op *wop, const struct loom_tx_mismatch *m);
loom_result_t loom_p2p_mismatch(struct loom_comm *comm, const struct loom_op *wop,
                                const struct loom_tx_mismatch *m);

loom_result_t loom_pairwise_alltoall(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_pairwise_alltoallv(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_linear_gather(struct loom_comm *comm, struct loom_op *op);
loom_result_t loom_linear_scatter(struct loom_comm *comm, struct loom_op *op);

/* Coalescing (coalesce.c): the number of collective runs the collectives
 * subs[0..n) of a group make (p2p calls are skipped), from what every rank
 * agrees on; and running k consecutive allreduces of one run as one
 * allreduce numbered seq (k == 1: one call with its attributes). */
uint32_t loom_group_nruns(const struct loom_op *subs, int n);
int loom_coalesce_len(const struct loom_op *subs, int n);
/* The call numbers the run subs[0..k) takes: 2 for one float32-accumulated
 * call large enough to run as a reduce-scatter and an allgather, else 1. */
uint32_t loom_coalesce_seqs(const struct loom_op *subs, int k);
loom_result_t loom_coalesce_run(struct loom_comm *comm, struct loom_op *subs, int k,
                                uint64_t seq);
/* reduce and reduce_scatter with scaling or float32 accumulation. */
loom_result_t loom_xform_run(struct loom_comm *comm, struct loom_op *op);
/* A group's op (group_run.c). */
loom_result_t loom_group_run(struct loom_comm *comm, struct loom_op *op);

#endif
