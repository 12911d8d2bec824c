/* link.h - the per-peer connection machinery of the transports that keep
 * their own peers (ofi, verbs): the blob exchange through the out-of-band
 * service, one TCP control socket per peer taken from that service (signed
 * hello and ACK, BYE/GOT/FAIL/PING frames, keepalive), deadlines, the
 * admission of sockets whose hello is not read yet, failure notices, and
 * one fail_peer/describe.
 *
 * A transport embeds struct loom_link as the first member of its instance
 * state (tx->priv) and struct loom_link_peer as the first member of each
 * peer, and supplies only its blob (ofi: its endpoint address; verbs: its
 * queue pair) and a few hooks (struct loom_link_ops).
 *
 * Connecting to peer p (whoever starts, one link results):
 *  - a rank that starts (connect(p), or a first post to p) runs the start
 *    hook and sends p its blob under ops->oob_tag;
 *  - a rank that receives a blob from p applies it (after starting, if it
 *    had not) and, only if it had not started itself, answers with its own;
 *  - the lower rank of the two then opens a TCP socket to the higher rank's
 *    OOB port (the service hands it over: ops->oob_kind) and runs the
 *    handshake of every Loom socket (net/handshake.h): its hello carries
 *    the token the higher rank put in its blob, signed with the job key;
 *    the higher rank checks it (holding it until r's blob is applied) and
 *    proves the key back. Data moves only after that (the up hook).
 * Blobs travel only through the out-of-band service, whose messages come
 * from ranks that passed the bootstrap's authentication; the control socket
 * accepts only a hello with the token of that exchange (and the job key's
 * proof), so a stranger cannot take a peer's place. A peer whose process
 * ends closes its control socket: its peers learn it at once (a lost host
 * through TCP keepalive within LOOM_TIMEOUT), whatever the data path.
 *
 * A failure notice (FAIL) and the data it follows take different paths, so
 * the notice may overtake data the peer sent for calls it finished. Applying
 * a notice for call s therefore first runs the drain hook (take what has
 * arrived), and then, while requests of calls before s are still pending on
 * that peer, holds the notice up to LOOM_LINK_GRACE; the peer fails once
 * they are done or the grace has passed. The same hold covers a data path
 * error that the peer's notice may explain (loom_link_data_error). */
#ifndef LOOM_LINK_H
#define LOOM_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "loom.h"
#include "net/handshake.h"
#include "util.h"
#include "transport/common/link_notice.h"
#include "transport/common/link_wire.h"
#include "transport/transport.h"

/* How long a notice waits for what the peer sent before it, and how long a
 * peer whose control socket ended may still complete what it sent: data
 * in flight arrives within microseconds, but a process polling on a loaded
 * host may be descheduled. */
#define LOOM_LINK_GRACE 0.5
#define LOOM_LINK_MAX_PENDING 256
#define LOOM_LINK_BLOB_MAX 1024

/* epoll tags of the link's descriptors; a transport's own use 2 */
#define LOOM_LINK_EP_WAKE 1ull
#define LOOM_LINK_EP_OOB 3ull
#define LOOM_LINK_EP_PENDING(fd) (0x100000000ull | (uint64_t)(uint32_t)(fd))
#define LOOM_LINK_EP_PEER(r) (0x200000000ull | (uint64_t)(uint32_t)(r))

enum loom_link_state {
    LOOM_LINK_S_NONE = 0,
    LOOM_LINK_S_WAIT_BLOB, /* started, our blob sent, waiting for its  */
    LOOM_LINK_S_WAIT_CTL,  /* its blob applied, control channel not up */
    LOOM_LINK_S_UP,        /* control channel up: data moves           */
    LOOM_LINK_S_FAILED,
};

enum loom_link_ctl {
    LOOM_LINK_CS_NONE = 0,
    LOOM_LINK_CS_CONNECTING, /* lower rank: connect() in progress        */
    LOOM_LINK_CS_HS,         /* lower rank: the handshake runs (lp->hs)  */
    LOOM_LINK_CS_UP,
};

/* A peer's requests of one direction not yet complete, oldest first. The
 * link reads them to hold a notice while earlier calls' data may still
 * arrive; the transport adds, completes and fails them. */
struct loom_link_fifo {
    struct loom_tx_req *head, *tail;
};

static inline void loom_link_fifo_push(struct loom_link_fifo *q, struct loom_tx_req *req)
{
    LOOM_FIFO_PUSH(q->head, q->tail, req);
}

/* The oldest request, taken off; NULL when none. */
static inline struct loom_tx_req *loom_link_fifo_pop(struct loom_link_fifo *q)
{
    struct loom_tx_req *req;
    LOOM_FIFO_POP(q->head, q->tail, req);
    return req;
}

/* Take req off wherever it is (a completion out of order). */
void loom_link_fifo_remove(struct loom_link_fifo *q, struct loom_tx_req *req);

/* First member of a transport's peer. */
struct loom_link_peer {
    enum loom_link_state state;
    enum loom_link_ctl ctl;
    double t_start;                      /* when connecting began                    */
    uint8_t token[LOOM_LINK_TOKEN_LEN];  /* its hello must carry this        */
    uint8_t rtoken[LOOM_LINK_TOKEN_LEN]; /* what ours must carry             */
    int have_blob;                       /* its blob was applied                     */
    int ctl_fd;
    struct loom_hs *hs; /* while ctl is LOOM_LINK_CS_HS             */
    double eof_at;      /* its control socket ended, no goodbye     */
    double bye_at;      /* it said goodbye with requests pending    */
    int bye;            /* it said goodbye: left in order           */
    loom_result_t failed;
    char *failmsg;
    /* a failure notice (or, held_data, a data path error) held while the
     * peer's earlier data may still arrive (see the top of this file) */
    loom_result_t held; /* 0: none                                  */
    uint64_t held_seq;
    double held_at;
    char *held_why;
    int held_data;
    struct loom_link_fifo reqs[2]; /* [is_send]                              */
};

struct loom_link_pending { /* a control socket, its handshake running  */
    int fd;
    char from[64];     /* its address, for a refusal's message     */
    struct loom_hs hs; /* accept side, until the connect timeout   */
};

struct loom_link_ops {
    const char *name; /* "ofi", "verbs": logs and messages        */
    struct loom_link_proto proto;
    int oob_tag, oob_kind;
    const char *blob_name; /* "endpoint address", "queue pair data"    */
    /* Make what a link to r needs before this rank's blob is sent (verbs:
     * its queue pair). Fails the peer itself when it fails. May be NULL. */
    loom_result_t (*start)(struct loom_tx *tx, int r);
    /* This rank's blob for r, at most LOOM_LINK_BLOB_MAX bytes: its
     * length. The link's token for r is lp->token. */
    size_t (*blob_encode)(struct loom_tx *tx, int r, uint8_t *out);
    /* r's blob (len bytes, not yet checked): check and apply it, copy the
     * token it carries to lp->rtoken; 0, or fail the peer and return -1. */
    int (*blob_apply)(struct loom_tx *tx, int r, const uint8_t *b, size_t len);
    /* The link to r is up: post what waits for it. */
    void (*up)(struct loom_tx *tx, int r);
    /* r said it received got of this rank's messages (BYE, GOT). May be NULL. */
    void (*got)(struct loom_tx *tx, int r, uint64_t got);
    /* How many of r's messages this rank received (sent in BYE and GOT). */
    uint64_t (*received)(struct loom_tx *tx, int r);
    /* Post a request (the vtable's isend/irecv through link_tx.h). */
    loom_result_t (*post)(struct loom_tx *tx, struct loom_tx_req *req, int is_send);
    /* Read the completion queue: how many entries were taken. */
    int (*poll)(struct loom_tx *tx);
    /* Take what has arrived from r; NULL: the poll hook. */
    void (*drain)(struct loom_tx *tx, int r);
    /* Whether what r wrote may still complete here after its socket ended;
     * NULL: whether r has requests not yet complete. */
    int (*busy)(struct loom_tx *tx, int r);
    /* r failed with res: stop its data path and fail its requests. */
    void (*lost)(struct loom_tx *tx, int r, loom_result_t res);
};

/* First member of a transport's instance state (tx->priv). */
struct loom_link {
    const struct loom_link_ops *ops;
    struct loom_auth_key key; /* LOOM_JOB_KEY                              */
    struct loom_hs_proto hs;  /* the control socket's handshake (ops')     */
    int epfd;                 /* the transport sleeps on it                */
    int wakefd, oobfd;        /* wake(); the OOB service's notices         */
    void *peers;              /* nranks entries of peer_size bytes        */
    size_t peer_size;
    int *live; /* peers whose link was started             */
    int nlive;
    struct loom_link_pending *pending;
    int npending;
    loom_result_t err; /* a failure progress has yet to report     */
    int shut;
    int draining; /* in the drain hook                        */
};

static inline struct loom_link *loom_link_of(struct loom_tx *tx)
{
    return (struct loom_link *)tx->priv;
}

static inline struct loom_link_peer *loom_link_peer(struct loom_tx *tx, int r)
{
    struct loom_link *l = loom_link_of(tx);
    return (struct loom_link_peer *)(void *)((char *)l->peers + (size_t)r * l->peer_size);
}

/* Set up: the job key, nranks zeroed peers of peer_size bytes (link.peers),
 * the epoll set with the wake and OOB eventfds, the OOB service's
 * notices; else errmsg says why. Free undoes all of it (after an init that
 * failed half way too). */
loom_result_t loom_link_init(struct loom_tx *tx, const struct loom_link_ops *ops, size_t peer_size);
void loom_link_free(struct loom_tx *tx);
/* The vtable's wake: progress returns. */
void loom_link_wake(struct loom_tx *tx);

/* "the describe callback's words for rank", or "rank N" */
const char *loom_link_describe(struct loom_tx *tx, int rank, char *buf, size_t len);
/* Peer r failed: its message is the description then fmt's words (a
 * leading ':' joins them without a space); logged once at WARN. */
void loom_link_fail(struct loom_tx *tx, int r, loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Start the link to r (a first post): its failure or 0. */
loom_result_t loom_link_start(struct loom_tx *tx, int r);
/* The vtable's connect: r checked, a failed peer's message, a shut
 * transport, else loom_link_start. */
loom_result_t loom_link_connect(struct loom_tx *tx, int r);
/* The failure progress has yet to report, cleared. */
loom_result_t loom_link_take_err(struct loom_tx *tx);
void loom_link_epoll_add(struct loom_tx *tx, int fd, uint32_t events, uint64_t tag);
/* Progress: blobs from the OOB service and sockets it handed over. */
void loom_link_poll(struct loom_tx *tx);
/* An epoll event; 1 when tag was the link's (*woken: it was wake()'s). */
int loom_link_event(struct loom_tx *tx, uint64_t tag, uint32_t events, int *woken);
/* Deadlines, held notices and goodbyes: the ms until the next check, or -1. */
int loom_link_timeouts(struct loom_tx *tx);
/* The data path failed a request to or from r (why: how, from ": "): what
 * came on its control socket is read first, and the failure is held a
 * moment for the peer's notice, which says why. */
void loom_link_data_error(struct loom_tx *tx, int r, const char *why);
/* A frame to r (best effort, never blocks). */
void loom_link_send(struct loom_tx *tx, int r, uint16_t type, uint16_t flags, uint64_t w0,
                    uint64_t w1, uint64_t w2);
/* Tell the live peers why this rank stops (res), then mark every peer
 * failed: the transport was shut down. */
void loom_link_shutdown(struct loom_tx *tx, loom_result_t res);
/* Say goodbye to the peers whose link is up (finalize). */
void loom_link_goodbye(struct loom_tx *tx);
void loom_link_close(struct loom_tx *tx, int r);

/* Whether a request whose core tag is tag belongs to a call before call
 * seq (the tag holds the call's low 31 bits, the top bit for Loom's own
 * calls, which count apart). Pure. */
int loom_link_tag_earlier(uint32_t tag, uint64_t seq);

#endif
