/* comm.h - the communicator: identity, transport, op queue, progress thread. */
#ifndef LOOM_COMM_H
#define LOOM_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "loom.h"
#include "op.h"
#include "trace.h"
#include "transport/transport.h"

struct loom_env;

struct loom_comm {
    int rank;
    int nranks;
    uint64_t comm_id;
    struct loom_tx *tx;           /* NULL when nranks == 1                  */
    struct loom_oob *oob;         /* out-of-band view: the job's, or a split's */
    uint8_t *peer_used;           /* nranks: connect() was called for the peer */

    /* ring order: ring[pos] = rank, so that ranks of a server are adjacent */
    int *ring;
    int ring_pos;

    /* descriptions of ranks for messages: "rank 3 (server s, addr:port)" */
    char **rank_desc;
    char local_addr[64];
    uint64_t table_hash;

    /* this host: ranks sharing it (same boot id and host name), and whether
     * they outnumber its CPUs (then waiting ranks yield at once) */
    int local_size;
    int oversubscribed;
    int nhosts;                   /* distinct hosts in the communicator      */
    int *host_of;                 /* host index (0..nhosts-1) of each rank   */
    int *local_ranks;             /* ranks on this host, ascending           */
    int local_index;              /* this rank's place in local_ranks        */
    int *server_of;               /* rank table's server index of each rank;
                                     NULL for tcp:// and split communicators */
    int device_id;                /* rank table's device_id of this rank;
                                     -1 without a table (split: the parent's) */
    void *shm;                    /* shared-memory state (src/shm), or NULL  */
    /* With several servers in shared memory: the ranks of the same local
     * index on every server (coll/hier.c), made by core. */
    struct loom_comm *hier_sub;
    int no_shm;                   /* set up no shared memory (hier_sub itself) */
    struct loom_coll_ext *ext;    /* p2p numbering, group staging (coll.h)   */

    /* tuning, from the configuration at creation */
    size_t chunk_size;
    int spin_us;
    double timeout;
    int algo_forced[LOOM_OP_KIND_COUNT]; /* enum loom_algo from LOOM_ALGO */

    /* queue and progress thread */
    pthread_mutex_t lock;
    pthread_cond_t work_cv;       /* progress thread sleeps here            */
    pthread_cond_t done_cv;       /* blocking callers sleep here            */
    struct loom_op *head, *tail;
    int busy;                     /* an op is executing (thread or inline)  */
    int thread_sleeping;
    int stop;
    pthread_t thread;
    int thread_started;
    uint64_t next_seq;
    uint64_t next_internal;       /* set-up collectives: their own numbers  */

    int aborted;                  /* set by abort and revoke (atomic access) */
    int revoked;                  /* revoked here or by a peer (atomic)     */
    int shrunk;                   /* loom_comm_shrink was called: 1; failed: 2 */
    /* a shrunk communicator: a view of its parent's namespace, where the
     * agreement's decision stays published while it lives (bootstrap/agree.h) */
    struct loom_oob *agree_oob;
    int blame;                    /* the peer a failure is blamed on, -1 none */
    loom_result_t error;          /* sticky: first error, returned after    */
    char errmsg[1024];

    /* scratch reused across ops (only the executing thread touches it) */
    void *scratch;
    size_t scratch_size;
    struct loom_tx_req *reqs;
    size_t nreqs;
    /* envelopes: the call's fingerprint sent ahead of each message when the
     * transport does not check fingerprints itself (coll/p2p.c) */
    struct loom_env *env_busy, *env_free;

    int split_count;              /* for unique ids of children              */

    /* the flight recorder: the last LOOM_TRACE_LEN calls (under lock) */
    struct loom_trace_rec trace[LOOM_TRACE_LEN];
    double stall_warn;
    double bootstrap_timeout;     /* seconds for the rendezvous and set-up   */
};

/* Record an error on comm (the first one is sticky). The calls on comm
 * return it, so it is logged at INFO only (once on stderr: where the caller
 * prints it), under COLL: nearly every caller is an operation's code. */
void loom_comm_set_error(struct loom_comm *comm, loom_result_t res,
                         const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, logged under subsys (LOOM_SUB_INIT for the communicator's own
 * life: abort, split; LOOM_SUB_STREAM for stream hooks). */
void loom_comm_set_error_sub(struct loom_comm *comm, unsigned subsys,
                             loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A bad argument of a call on comm: the message for loom_get_error_string,
 * not sticky (comm stays usable) and kept behind a sticky error. Logged at
 * INFO: the caller reports it. */
void loom_comm_set_arg_error(struct loom_comm *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A user's call starts without the last failed call's message; a sticky
 * error's message stays. (queue.c clears it while numbering the call.) */
void loom_comm_clear_errmsg(struct loom_comm *comm);

/* The sticky error (LOOM_SUCCESS when none), read under the lock. */
loom_result_t loom_comm_error(struct loom_comm *comm);

/* "rank 3 (server 127.0.0.1, 127.0.0.1:29603)" */
const char *loom_comm_describe(void *comm, int rank);

/* Scratch buffer of at least bytes (grown as needed). */
void *loom_comm_scratch(struct loom_comm *comm, size_t bytes);
struct loom_tx_req *loom_comm_reqs(struct loom_comm *comm, size_t n);

/* This rank's index among the ranks of its server, and their number: by
 * the rank table's server when there is one, else by host. */
void loom_comm_local_place(const struct loom_comm *comm, int *index, int *size);

#endif
