/* verbs_priv.h - the verbs transport's instance state, shared by verbs.c
 * (the vtable, init, progress), verbs_conn.c (its queue pair blob and the
 * link layer's hooks) and verbs_data.c (the data path). The protocol itself is
 * described in verbs_proto.h. */
#ifndef LOOM_VERBS_PRIV_H
#define LOOM_VERBS_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "net/net.h"
#include "transport/common/link_tx.h"
#include "transport/common/regcache.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_gid.h"
#include "transport/verbs/verbs_proto.h"
#include "transport/verbs/verbs_qp.h"

/* Sizes, per connected peer (both directions). Memory: the CTS ring and
 * the CTS entries to write from (8 KiB), bounce slots the peer writes
 * messages into when they do not go to a registered buffer, staging slots
 * this rank copies such messages through: with the defaults 1 MiB per peer,
 * and a rank connects only to the peers its algorithms use. */
struct loom_verbs_tuning {
    uint32_t cts_entries;  /* CTS ring (power of two, <= CTS_MAX)       */
    uint32_t bounce_slots; /* receive side                              */
    uint32_t stage_slots;  /* send side                                 */
    uint32_t slot_size;    /* bytes of a bounce or staging slot         */
    size_t zcopy_min;      /* registered buffers from this many bytes   */
    uint32_t inline_max;   /* data writes up to this go inline          */
    size_t max_write;      /* largest single RDMA write (port limit)    */
};
extern struct loom_verbs_tuning loom_verbs_default_tuning;

/* What a posted work request on a peer's send queue stands for, found by
 * its send-queue number when a signalled completion covers it. */
struct vx_sqrec {
    uint8_t kind;  /* enum loom_verbs_wr_kind                  */
    uint8_t stage; /* 1: it used a staging slot                */
    uint32_t len;
    struct loom_tx_req *req; /* the send it moved bytes of (DATA)         */
};

/* What an outstanding CTS entry asked for (receive side). */
struct vx_ctsrec {
    struct loom_tx_req *req;
    uint64_t off;
    uint32_t len;
    int bounce; /* bounce slot index, or -1                  */
};

struct vx_peer {
    struct loom_link_peer lk; /* first: the link layer's (link.h)          */
    struct ibv_qp *qp;
    uint32_t psn;
    struct loom_verbs_blob remote;
    /* memory: remote-writable (CTS ring, bounce slots) and local (CTS
     * entries to write from, staging slots) */
    uint8_t *rblock, *lblock;
    size_t rlen, llen;
    struct ibv_mr *rmr, *lmr;
    /* queue pair accounting: send-queue numbers posted and known done */
    uint32_t sq_depth, rq_depth;
    uint32_t sq_posted, sq_done, sq_last_signal;
    struct vx_sqrec *sqrec; /* sq_depth entries                          */
    uint32_t recv_owed;     /* receives consumed, not yet reposted       */
    /* sending to it */
    struct loom_tx_req *scur; /* the send the next CTS entry is for        */
    uint64_t send_msg;        /* message numbers assigned                  */
    uint32_t cts_seen;        /* CTS entries arrived                       */
    uint32_t cts_used;        /* ... of which written for                  */
    uint64_t cts_off;         /* bytes of entry cts_used already written   */
    uint32_t stage_posted, stage_done;
    /* receiving from it */
    struct loom_tx_req *radv; /* the receive to advertise next             */
    uint64_t radv_off;
    uint64_t recv_msg;
    uint32_t cts_posted, cts_landed;
    uint32_t bounce_posted, bounce_done;
    struct vx_ctsrec *ctsrec; /* cts_entries entries                       */
};

/* Request scratch (req->priv): what the data path tracks per request. */
struct vx_reqstate {
    uint64_t msg;      /* message number on its direction          */
    uint64_t covered;  /* send: bytes CTS entries have asked for;   */
                       /* receive: bytes landed                     */
    uint64_t written;  /* send: bytes whose writes completed        */
    struct ibv_mr *mr; /* registration used, or NULL (copies)       */
    void *ref;         /* regcache reference to put, or NULL        */
    uint32_t inflight; /* send: data writes not yet completed       */
    uint32_t flags;
};
#define VX_RS_ALL_COVERED 0x1u    /* send: the last chunk was asked for        */
#define VX_RS_ALL_ADVERTISED 0x2u /* receive: every chunk was advertised      */
static inline struct vx_reqstate *vx_rs(struct loom_tx_req *req)
{
    _Static_assert(sizeof(struct vx_reqstate) <= sizeof req->priv, "fits req->priv");
    return (struct vx_reqstate *)(void *)req->priv;
}

struct vx_priv {
    struct loom_link link; /* first: the link layer's (link.h)          */
    const struct loom_ibv *ibv;
    struct loom_verbs_tuning tune;
    struct loom_verbs_choice choice;
    struct loom_verbs_local local;
    uint32_t max_msg; /* port max_msg_sz                           */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    int cq_need; /* completions the queue pairs may produce   */
    int cq_armed;
    struct loom_regcache *rc;
    uint64_t nonce;
    struct vx_peer *peers; /* link.peers, typed; own slot unused        */
    /* per-message counters for the report and tests */
    struct loom_verbs_counts {
        uint64_t sends, recvs, data_wrs, cts_wrs, recv_wrs_posted;
        uint64_t cqes, regs, copies_in, copies_out, bytes_zcopy, bytes_copied;
    } counts;
};

/* verbs.c */
#define VX_EP_CHANNEL 2ull

/* verbs_conn.c: its blob (the queue pair) and hooks */
extern const struct loom_link_ops loom_verbs_link_ops;

/* verbs_data.c: kick advertises, writes and reposts; poll_cq returns -1
 * when the queue failed (the instance fails every peer) */
LOOM_LINK_DATA_PATH(verbs);
loom_result_t loom_verbs_peer_mem(struct loom_tx *tx, int r);
void loom_verbs_peer_mem_free(struct loom_tx *tx, int r);
loom_result_t loom_verbs_post_recvs(struct loom_tx *tx, int r, uint32_t n);

#endif
