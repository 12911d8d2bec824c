/* transport.h - the point-to-point interface every transport implements
 * (version 2: per-peer connections on first use, an out-of-band exchange
 * service, registration and capabilities).
 *
 * A transport instance (struct loom_tx) moves byte messages between the ranks
 * of one communicator. Matching is FIFO per peer: the k-th receive posted for
 * peer p matches the k-th message p sends to this rank. Collectives post
 * sends and receives in the same order on every rank, so no tag search is
 * needed. Every request carries its call's fingerprint (tag = the call's
 * sequence number, low 32 bits; desc = kind/dtype/op/root packed; count).
 *
 * Connections are made per peer, on first use: the core calls connect(peer)
 * before it posts the first request to that peer; the peer's side learns of
 * it in its progress() (through its listener or the OOB service) and both
 * sides end with one connection whoever started first (no race). Peers a
 * rank never talks to are never connected: thousands of ranks, a handful of
 * connections each.
 *
 * Threading: one thread drives an instance at a time (the communicator's
 * progress thread, or the caller's thread running a call inline); only
 * wake() may be called from any other thread. Nothing here locks.
 *
 * Requests are owned by the caller and must stay put until done.
 *
 * While it waits in progress(), a transport also watches links with nothing
 * posted: a peer that goes away without saying goodbye, or tells it has
 * failed, fails progress() at once, whatever is posted. */
#ifndef LOOM_TRANSPORT_H
#define LOOM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* Where an op's buffers live: host memory the CPU reads, or device memory
 * reached through a stream adapter's staging hooks. */
enum loom_mem_type {
    LOOM_MEM_HOST = 0,
    LOOM_MEM_DEVICE = 1
};


struct loom_oob;      /* bootstrap/oob.h: out-of-band exchange with any rank */

#define LOOM_TX_ERRLEN 512

/* Capabilities: ops->caps, refined per instance in tx->caps by init. */
/* The transport carries each request's fingerprint (tag, desc, count) with
 * the message and fails a receive whose peer's message has another one with
 * LOOM_ERROR_MISMATCH, tx->mismatch filled. Without it the core wraps every
 * message with an envelope and checks it itself. */
#define LOOM_TX_CAP_FINGERPRINT (1u << 0)
/* Buffers must be registered: isend/irecv need req->mr from mem_reg
 * covering [buf, buf + len) (the core registers through a cache). */
#define LOOM_TX_CAP_NEEDS_REG (1u << 1)
/* Data moves by one-sided RDMA writes (informational: selection, logs). */
#define LOOM_TX_CAP_RDMA_WRITE (1u << 2)
/* A peer that dies is noticed within seconds even on an idle link. */
#define LOOM_TX_CAP_LIVENESS (1u << 3)
/* isend/irecv accept LOOM_MEM_DEVICE buffers (no staging needed). */
#define LOOM_TX_CAP_DEVICE_MEM (1u << 4)

struct loom_tx_req {
    /* set by the caller before isend/irecv */
    int peer;
    int is_send;
    void *buf;
    size_t len;
    uint32_t tag;                /* the call's sequence number (low bits)   */
    uint32_t desc;               /* the call's kind/dtype/op/root, packed   */
    uint64_t count;              /* the call's element count                */
    enum loom_mem_type mem;      /* where buf lives                         */
    void *mr;                    /* mem_reg handle covering buf, or NULL    */
    /* set by the transport */
    volatile int done;           /* 1 once complete (ok or failed)          */
    loom_result_t status;        /* valid once done                         */
    struct loom_tx_req *next;    /* transport's queue link                  */
    uint64_t priv[8];            /* transport scratch                       */
};

struct loom_tx_params {
    size_t struct_size;          /* sizeof(struct loom_tx_params)           */
    int rank;
    int nranks;
    uint64_t comm_id;            /* the same on every rank; in every hello  */
    const char *local_addr;      /* numeric IPv4/IPv6 address of this rank  */
    double connect_timeout;      /* seconds a connection may take (LOOM_BOOTSTRAP_TIMEOUT) */
    double timeout;              /* LOOM_TIMEOUT: keepalive on idle links (0 none) */
    /* "rank 3 (server 10.0.0.3, 10.0.0.3:29603)": for messages. May be NULL. */
    const char *(*describe)(void *ctx, int rank);
    void *describe_ctx;
    struct loom_oob *oob;        /* swap blobs with any rank (bootstrap/oob.h) */
};
/* Transport-specific knobs are not parameters: each transport defines its
 * own configuration rows beside its code (LOOM_NSOCKS in tcp.c,
 * LOOM_OFI_PROVIDER in ofi.c, LOOM_IB_HCA and LOOM_IB_GID_INDEX in verbs.c),
 * registers them with LOOM_CONFIG_SECTION and reads them through
 * loom_config_values (base/config.h). What more than one transport reads
 * (LOOM_SOCKET_SNDBUF) is a core row, in loom_config(). */

/* What a peer's message said when it did not match the posted receive's call
 * (the transport fails that peer with LOOM_ERROR_MISMATCH and fills this). */
struct loom_tx_mismatch {
    int valid;
    int peer;
    uint32_t tag, desc;
    uint64_t count;
};

struct loom_tx {
    const struct loom_transport *ops;
    struct loom_tx_params params;
    uint32_t caps;               /* ops->caps, refined by init              */
    char info[128];              /* what the instance runs on, set by init:
                                    "tcp", "ofi tcp;ofi_rxm", "verbs mlx5_0:1 gid 3" */
    char errmsg[LOOM_TX_ERRLEN]; /* the last error, full sentence            */
    int blame;                   /* set by the transport: rank + 1 of the peer
                                    its failures are blamed on (the one whose
                                    link failed first, or the cause a peer's
                                    notice named), 0 none                   */
    struct loom_tx_mismatch mismatch;
    /* Set by the owner before shutdown() with an error: told to every live
     * peer so that they can name the cause (call number, rank blamed or -1). */
    uint64_t notice_seq;         /* the failed call's fingerprint           */
    uint32_t notice_desc;
    uint64_t notice_count;
    int notice_culprit;
    void *priv;                  /* ops->priv_size bytes, zeroed             */
};

struct loom_transport {
    size_t struct_size;          /* sizeof(struct loom_transport)           */
    const char *name;            /* "tcp", "ofi", "verbs": LOOM_TRANSPORT   */
    size_t priv_size;
    uint32_t caps;               /* LOOM_TX_CAP_*                            */
    /* Optional (NULL: always). Whether this transport can run on this host
     * now; 0 yes, else -1 and why ("libibverbs.so.1: cannot open shared
     * object file", "no libfabric provider matches LOOM_OFI_PROVIDER=efa;
     * found: tcp;ofi_rxm shm udp;ofi_rxd"). loom-info lists it; asking for
     * this transport where it is unavailable is an error carrying why. */
    int (*available)(char *why, size_t len);
    /* Open local resources (listener, endpoint, completion queue, ...),
     * publish what peers need through params.oob when the transport wants
     * that, set tx->info and refine tx->caps. Must not block on peers. */
    loom_result_t (*init)(struct loom_tx *tx);
    /* Start connecting to peer unless connected or connecting. Must not
     * block; idempotent. Requests posted to a peer whose connection is not
     * complete wait queued; the connection completes in progress() (the
     * peer's side in its progress()), both sides agreeing on one connection
     * whoever starts first. One not complete in params.connect_timeout fails
     * progress() naming the peer. */
    loom_result_t (*connect)(struct loom_tx *tx, int peer);
    /* Post a send / receive. Never blocks; the request completes in
     * progress(). A LOOM_MEM_DEVICE buffer only with LOOM_TX_CAP_DEVICE_MEM;
     * with LOOM_TX_CAP_NEEDS_REG, req->mr covers the buffer. */
    loom_result_t (*isend)(struct loom_tx *tx, struct loom_tx_req *req);
    loom_result_t (*irecv)(struct loom_tx *tx, struct loom_tx_req *req);
    /* Move bytes, and make connections. Waits up to timeout_us for an event
     * (0 = poll once, -1 = until something happens or wake()). Returns an
     * error when a link failed (the requests on it are failed too; errmsg
     * names the peer). */
    loom_result_t (*progress)(struct loom_tx *tx, int timeout_us);
    /* Any thread: a progress() waiting now (or next) returns soon. Used by
     * abort; must be async-signal-light (a write to an eventfd). */
    void (*wake)(struct loom_tx *tx);
    /* Optional (NULL when not needed). Register [buf, buf + len) of memory
     * type mem for isend/irecv; *mr is the handle to put in requests. The
     * core caches registrations (bounded, invalidated on free). */
    loom_result_t (*mem_reg)(struct loom_tx *tx, void *buf, size_t len,
                             enum loom_mem_type mem, void **mr);
    loom_result_t (*mem_dereg)(struct loom_tx *tx, void *mr);
    /* Fail every pending request with res and close the links. With an
     * error res, first tell every live peer (best effort, never blocks)
     * that this rank failed and why (notice_seq, notice_culprit), so that a
     * rank not talking to the cause learns it at once. */
    void (*shutdown)(struct loom_tx *tx, loom_result_t res);
    /* Say goodbye to the peers (an orderly end, not a failure) and free
     * everything. */
    void (*finalize)(struct loom_tx *tx);
};

/* The registry: a slot per transport, NULL where it is not built (tcp, ofi,
 * verbs, in that order). */
#define LOOM_TRANSPORT_SLOTS 3
extern const struct loom_transport *const loom_transports[LOOM_TRANSPORT_SLOTS];
/* The built transport of that name, or NULL. */
const struct loom_transport *loom_transport_find(const char *name);

/* Create and init an instance of ops (allocates tx and priv). */
loom_result_t loom_tx_open(const struct loom_transport *ops,
                           const struct loom_tx_params *params,
                           struct loom_tx **tx);
void loom_tx_close(struct loom_tx *tx);

/* For tests and benchmarks that drive a transport without a communicator:
 * open this rank's out-of-band service on addr (rank 0 at root_host:root_port),
 * rendezvous, and open an instance of ops for the whole job (comm_id = the
 * job's id). On failure err says why. *oob outlives *tx: close tx first. */
loom_result_t loom_tx_bootstrap(const struct loom_transport *ops, int rank, int nranks,
                                const char *addr, const char *root_host, int root_port,
                                double timeout, struct loom_oob **oob,
                                struct loom_tx **tx, char *err, size_t errlen);

/* What a peer's failure notice says, as the end of a sentence naming the
 * peer ("stopped in call #7: it timed out waiting for rank 3 (...)"): code
 * is the error it stopped with, seq its call, who the rank it blamed
 * ("this rank", or that rank described), NULL when it blamed none. Every
 * transport that carries notices words them alike. */
void loom_tx_stop_reason(char *buf, size_t len, loom_result_t code,
                         unsigned long long seq, const char *who);

extern const struct loom_transport loom_tcp_transport;
extern const struct loom_transport loom_ofi_transport;   /* when built */
extern const struct loom_transport loom_verbs_transport; /* when built */

#endif
