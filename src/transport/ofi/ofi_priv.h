/* ofi_priv.h - the libfabric transport's instance state, shared by ofi.c
 * (the vtable, provider choice, set-up, progress), ofi_conn.c (per-peer
 * address exchange and the control channel) and ofi_data.c (tagged
 * messages). Only the ofi*.c files include this header (it includes
 * <rdma/fabric.h>).
 *
 * The data path. Each instance has one reliable-datagram endpoint
 * (FI_EP_RDM), one completion queue and one address vector. Every message
 * is one or more tagged sends (a message larger than the chunk size, at most
 * the provider's max_msg_size, is split); receives are directed
 * (FI_DIRECTED_RECV) at the peer's address, learnt through the out-of-band
 * service, so a message matches only a receive posted for its sender. The
 * tag (64 bits):
 *
 *   63..60 protocol (OX_PROTO_DATA)   59..52 communicator bits (reserved, 0:
 *   each communicator has its own endpoint)   51..40 chunk index
 *   39..28 a hash of the message's length   27..0 message number on that
 *   direction of that peer link (modulo 2^28: distinct among those posted)
 *
 * The k-th send to a peer is message k; the k-th receive posted for it
 * expects message k: FIFO per peer whatever order the provider completes in,
 * and completions are handed to the caller in that order too (so the
 * core's envelope, message k, is checked before the data it announces,
 * message k+1). The call's fingerprint travels in that envelope (the
 * transport has no LOOM_TX_CAP_FINGERPRINT). Lengths: a message of another
 * length than its receive does not match it (the length hash in the tag),
 * so no provider truncates (tcp;ofi_rxm drops the connection after a
 * truncation, shm may hang or crash, udp;ofi_rxd truncates silently): the
 * receive waits and the core's envelope, which carries the length, names
 * the mismatch. Should the hashes collide, a chunk that arrives shorter
 * than posted, or truncated (however the provider says it), fails the
 * receive with LOOM_ERROR_MISMATCH. */
#ifndef LOOM_OFI_PRIV_H
#define LOOM_OFI_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "auth.h"
#include "transport/common/link_tx.h"
#include "transport/ofi/ofi_api.h"
#include "transport/common/regcache.h"
#include "transport/transport.h"

#define OX_PROTO_DATA 1ull
/* 12 bits of a message's length: a message of another length than the
 * receive (3.999 times in 4096) matches nothing rather than being truncated
 * (each provider reports truncation its own way, one not at all) */
static inline uint64_t ox_len_hash(uint64_t len)
{
    return ((len + 1) * 0x9e3779b97f4a7c15ull) >> 52;
}
#define OX_TAG(chunk, len, msg)                                                                    \
    ((OX_PROTO_DATA << 60) | ((uint64_t)(chunk)&0xfffull) << 40 | ox_len_hash(len) << 28 |         \
     ((uint64_t)(msg)&0xfffffffull))
#define OX_MAX_CHUNKS 4096u

#define OX_ADDR_MAX 256 /* bytes of a provider address we accept    */

/* One posted tagged operation (a chunk of a request), its context. */
struct ox_op {
    struct fi_context2 ctx;  /* first: the provider's (FI_CONTEXT2)     */
    struct loom_tx_req *req; /* NULL once the request was given up       */
    int peer;
    int is_send;
    size_t len;                /* bytes posted                             */
    size_t off;                /* where in the request's buffer            */
    uint8_t *bounce;           /* a bounce slot it copies through, or NULL */
    struct ox_op *prev, *next; /* in flight                                */
};

struct ox_peer {
    struct loom_link_peer lk; /* first: the link layer's (link.h)      */
    fi_addr_t addr;
    uint64_t send_msg, recv_msg;
    uint64_t recv_done; /* receives handed back: its goodbye
                                           tells it how many of its messages
                                           arrived                           */
    uint32_t inflight;  /* ops posted, not yet completed     */
    /* tcp-based providers: its endpoint address as a socket address, and
     * whether the provider's sockets to it were looked for (ofi.c,
     * loom_ofi_tune_sockets) */
    struct sockaddr_storage sa;
    socklen_t salen;
    int socks_tuned;
};

/* Request scratch (req->priv). */
struct ox_reqstate {
    uint64_t msg;
    uint64_t chunk; /* bytes per chunk                          */
    uint32_t nchunks, posted, ndone;
    int32_t err;     /* a chunk failed: the request's result     */
    void *ref;       /* regcache reference, or NULL              */
    void *desc;      /* its fi_mr_desc, or NULL                  */
    uint32_t landed; /* every chunk completed                    */
};
static inline struct ox_reqstate *ox_rs(struct loom_tx_req *req)
{
    _Static_assert(sizeof(struct ox_reqstate) <= sizeof req->priv, "fits req->priv");
    return (struct ox_reqstate *)(void *)req->priv;
}

struct ox_priv {
    struct loom_link link; /* first: the link layer's (link.h)       */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    int cq_fd; /* the CQ's wait fd, or -1 (polled)          */
    uint8_t addr[OX_ADDR_MAX];
    size_t addrlen;
    size_t chunk;    /* largest tagged message posted             */
    int need_reg;    /* FI_MR_LOCAL: buffers need a descriptor    */
    int mr_endpoint; /* FI_MR_ENDPOINT: bind each MR to the EP    */
    struct loom_regcache *rc;
    uint8_t *bounce; /* bounce slots (need_reg)                   */
    struct fid_mr *bounce_mr;
    void *bounce_desc;
    size_t bounce_size;
    uint32_t nbounce;
    uint8_t **bounce_free;
    uint32_t nbounce_free;
    struct ox_op *ops_free;
    struct ox_op *inflight; /* every posted op (list)                    */
    int eagain;             /* a post was refused: retry from progress   */
    struct ox_peer *peers;  /* link.peers, typed                         */
    unsigned polls;         /* progress(0) calls                         */
    size_t sndbuf;          /* SO_SNDBUF for a tcp provider's sockets (0: none) */
    struct loom_ofi_counts {
        uint64_t sends, recvs, chunks, eagains, regs, bounced, socks_tuned;
    } counts;
};

/* ofi.c */
/* A tcp-based provider's sockets to or from peer r get vp->sndbuf, once
 * (from its first completion: the provider connects on first use). */
void loom_ofi_tune_sockets(struct loom_tx *tx, int r);
#define OX_EP_CQ 2ull

/* ofi_conn.c: its blob (the endpoint address) and hooks */
extern const struct loom_link_ops loom_ofi_link_ops;

/* ofi_data.c: kick also posts what a refused post (-FI_EAGAIN) left */
LOOM_LINK_DATA_PATH(ofi);
/* Peer r said goodbye having received got of this rank's messages: the
 * sends among them are complete, whatever the provider has yet to say (a
 * reliable-datagram provider's acknowledgement may never come from an
 * endpoint that is closed). */
void loom_ofi_sends_received(struct loom_tx *tx, int r, uint64_t got);
loom_result_t loom_ofi_data_init(struct loom_tx *tx);
void loom_ofi_data_free(struct loom_tx *tx);

#endif
