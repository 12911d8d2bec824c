/* transport.h - the point-to-point interface every transport implements.
 *
 * A transport instance (struct loom_tx) connects one communicator's ranks to
 * each other and moves byte messages between them. Matching is FIFO per peer:
 * the k-th receive posted for peer p matches the k-th message p sends to this
 * rank, and their lengths and tags must agree (a disagreement is
 * LOOM_ERROR_PROTOCOL naming the peer). Collectives post sends and receives
 * in the same order on every rank, so no tag search is needed.
 *
 * Threading: one thread drives an instance at a time (the communicator's
 * progress thread, or the caller's thread when it runs a call inline). Nothing
 * here locks.
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

#define LOOM_EP_MAX 128          /* bytes of one rank's endpoint blob       */
#define LOOM_TX_ERRLEN 512

struct loom_tx_req {
    /* set by the caller through isend/irecv */
    int peer;
    int is_send;
    void *buf;
    size_t len;
    uint32_t tag;                /* the call's sequence number (low bits)   */
    uint32_t desc;               /* the call's kind/dtype/op/root, packed   */
    uint64_t count;              /* the call's element count                */
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
    uint64_t comm_id;            /* carried in every frame; checked         */
    const char *local_addr;      /* numeric IPv4/IPv6 address to listen on  */
    int nsocks;                  /* sockets per peer and direction (lanes)  */
    double connect_timeout;      /* seconds for connect_all                 */
    int wake_fd;                 /* readable = leave progress now (abort); -1 none */
    /* "rank 3 (server 10.0.0.3, 10.0.0.3:29603)": for messages. May be NULL. */
    const char *(*describe)(void *ctx, int rank);
    void *describe_ctx;
    double timeout;              /* LOOM_TIMEOUT: keepalive on idle links (0 none) */
    size_t sndbuf;               /* SO_SNDBUF of data sockets; 0 = autotuned */
};

/* What a peer's frame said when it did not match the posted receive's call
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
    char errmsg[LOOM_TX_ERRLEN]; /* the last error, full sentence            */
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
    size_t struct_size;
    const char *name;
    size_t priv_size;
    /* Open a listener on params->local_addr; write this rank's endpoint (what
     * peers need to connect) to ep, at most LOOM_EP_MAX bytes, and its length
     * to *ep_len. Must not block. */
    loom_result_t (*init)(struct loom_tx *tx, void *ep, size_t *ep_len);
    /* Given every rank's endpoint (eps + r * ep_stride), connect to every
     * peer. Blocks at most params.connect_timeout; the error names the peer. */
    loom_result_t (*connect_all)(struct loom_tx *tx, const void *eps,
                                 size_t ep_stride);
    /* Post a send / receive. Never blocks; the request completes in progress. */
    loom_result_t (*isend)(struct loom_tx *tx, struct loom_tx_req *req);
    loom_result_t (*irecv)(struct loom_tx *tx, struct loom_tx_req *req);
    /* Move bytes. Waits up to timeout_us for an event (0 = poll once, -1 =
     * until something happens). Returns an error when a link failed (the
     * requests on it are failed too; errmsg names the peer). */
    loom_result_t (*progress)(struct loom_tx *tx, int timeout_us);
    /* Fail every pending request with res and close the links. With an
     * error res, first tell every live peer (best effort, never blocks)
     * that this rank failed and why (notice_seq, notice_culprit), so that a
     * rank not talking to the cause learns it at once. */
    void (*shutdown)(struct loom_tx *tx, loom_result_t res);
    /* Say goodbye to the peers (an orderly end, not a failure) and free
     * everything. */
    void (*finalize)(struct loom_tx *tx);
};

/* The registry: NULL slots are transports not built. */
extern const struct loom_transport *const loom_transports[];
const struct loom_transport *loom_transport_find(const char *name);

/* Create and init an instance of ops (allocates tx and priv). */
loom_result_t loom_tx_open(const struct loom_transport *ops,
                           const struct loom_tx_params *params,
                           struct loom_tx **tx, void *ep, size_t *ep_len);
void loom_tx_close(struct loom_tx *tx);

extern const struct loom_transport loom_tcp_transport;

#endif
