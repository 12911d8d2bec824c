/* verbs_qp.h - an RC queue pair's state changes as small named steps.
 *
 * Each step is a pure function building the attributes and mask of one
 * ibv_modify_qp (reset -> init -> ready-to-receive -> ready-to-send), the
 * attributes the ibv_modify_qp(3) table requires for RC and nothing else,
 * so tests check them without a device; loom_verbs_qp_to_* apply them. */
#ifndef LOOM_VERBS_QP_H
#define LOOM_VERBS_QP_H

#include <stdint.h>

#include "loom.h"
#include "transport/verbs/verbs_api.h"

/* This end: the port and GID chosen (verbs_gid.h), its active MTU. */
struct loom_verbs_local {
    uint8_t port;
    uint8_t gid_index;
    uint8_t mtu;  /* enum ibv_mtu                              */
    int ethernet; /* RoCE: every packet carries a GRH          */
};

/* The other end, from its connection blob. */
struct loom_verbs_remote {
    uint32_t qpn, psn;
    uint8_t gid[16];
    uint16_t lid;
    uint8_t mtu;
    int ethernet;
};

/* RC timing: local ACK timeout 4.096 us * 2^18 (~1 s) per try, 7 retries;
 * receiver-not-ready retries without end (7), 12 (0.64 ms) minimum RNR
 * NAK timer. Liveness does not rest on these: a dead peer is found
 * through the control channel long before the retries run out. */
#define LOOM_VERBS_QP_TIMEOUT 18
#define LOOM_VERBS_QP_RETRY_CNT 7
#define LOOM_VERBS_QP_RNR_RETRY 7
#define LOOM_VERBS_QP_MIN_RNR_TIMER 12
#define LOOM_VERBS_QP_HOP_LIMIT 64

void loom_verbs_qp_init_attr(const struct loom_verbs_local *l, struct ibv_qp_attr *attr, int *mask);
void loom_verbs_qp_rtr_attr(const struct loom_verbs_local *l, const struct loom_verbs_remote *r,
                            struct ibv_qp_attr *attr, int *mask);
void loom_verbs_qp_rts_attr(uint32_t my_psn, struct ibv_qp_attr *attr, int *mask);

/* Apply one step; the errno of a failure (0 ok). */
int loom_verbs_qp_to_init(const struct loom_ibv *ibv, struct ibv_qp *qp,
                          const struct loom_verbs_local *l);
int loom_verbs_qp_to_rtr(const struct loom_ibv *ibv, struct ibv_qp *qp,
                         const struct loom_verbs_local *l, const struct loom_verbs_remote *r);
int loom_verbs_qp_to_rts(const struct loom_ibv *ibv, struct ibv_qp *qp, uint32_t my_psn);
/* Into the error state: outstanding work requests complete flushed. */
int loom_verbs_qp_to_err(const struct loom_ibv *ibv, struct ibv_qp *qp);

/* MTU enum <-> bytes (256..4096; 0 / IBV_MTU_1024 for anything else). */
int loom_verbs_mtu_bytes(uint8_t mtu);

#endif
