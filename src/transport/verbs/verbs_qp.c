/* verbs_qp.c - RC queue pair state changes (verbs_qp.h). The attribute
 * builders are pure; the three apply steps call ibv_modify_qp through the
 * verbs table. */
#include "build_config.h"

#include <errno.h>
#include <string.h>

#include "transport/verbs/verbs_qp.h"

/* verbs_proto.c maps completion statuses by number without the header:
 * these are the values it assumes (fixed by the verbs ABI). */
_Static_assert(IBV_WC_SUCCESS == 0 && IBV_WC_LOC_LEN_ERR == 1 && IBV_WC_LOC_QP_OP_ERR == 2 &&
                   IBV_WC_LOC_PROT_ERR == 4 && IBV_WC_WR_FLUSH_ERR == 5 &&
                   IBV_WC_BAD_RESP_ERR == 7 && IBV_WC_LOC_ACCESS_ERR == 8 &&
                   IBV_WC_REM_INV_REQ_ERR == 9 && IBV_WC_REM_ACCESS_ERR == 10 &&
                   IBV_WC_REM_OP_ERR == 11 && IBV_WC_RETRY_EXC_ERR == 12 &&
                   IBV_WC_RNR_RETRY_EXC_ERR == 13 && IBV_WC_REM_ABORT_ERR == 16 &&
                   IBV_WC_FATAL_ERR == 19 && IBV_WC_RESP_TIMEOUT_ERR == 20 &&
                   IBV_WC_GENERAL_ERR == 21,
               "enum ibv_wc_status values as verbs_proto.c maps them");
_Static_assert(IBV_MTU_256 == 1 && IBV_MTU_4096 == 5, "enum ibv_mtu values as blobs carry them");

void loom_verbs_qp_init_attr(const struct loom_verbs_local *l, struct ibv_qp_attr *attr, int *mask)
{
    /* the receive side only takes RDMA writes (CTS entries, data) */
    *attr = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = l->port,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
    };
    *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

void loom_verbs_qp_rtr_attr(const struct loom_verbs_local *l, const struct loom_verbs_remote *r,
                            struct ibv_qp_attr *attr, int *mask)
{
    uint8_t mtu = l->mtu < r->mtu ? l->mtu : r->mtu;
    *attr = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_RTR,
        .path_mtu = (enum ibv_mtu)mtu,
        .dest_qp_num = r->qpn,
        .rq_psn = r->psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = LOOM_VERBS_QP_MIN_RNR_TIMER,
        .ah_attr =
            {
                .dlid = r->lid,
                .sl = 0,
                .src_path_bits = 0,
                .port_num = l->port,
            },
    };
    /* RoCE addresses by GID only: every packet carries a global route
     * header (IBV_QPF_GRH_REQUIRED); InfiniBand within a subnet uses the
     * LID. */
    if (l->ethernet || r->ethernet) {
        attr->ah_attr.is_global = 1;
        memcpy(attr->ah_attr.grh.dgid.raw, r->gid, 16);
        attr->ah_attr.grh.sgid_index = l->gid_index;
        attr->ah_attr.grh.hop_limit = LOOM_VERBS_QP_HOP_LIMIT;
        attr->ah_attr.grh.traffic_class = 0;
        attr->ah_attr.grh.flow_label = 0;
    }
    *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

void loom_verbs_qp_rts_attr(uint32_t my_psn, struct ibv_qp_attr *attr, int *mask)
{
    *attr = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_RTS,
        .sq_psn = my_psn,
        .timeout = LOOM_VERBS_QP_TIMEOUT,
        .retry_cnt = LOOM_VERBS_QP_RETRY_CNT,
        .rnr_retry = LOOM_VERBS_QP_RNR_RETRY,
        .max_rd_atomic = 1,
    };
    *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
            IBV_QP_MAX_QP_RD_ATOMIC;
}

int loom_verbs_qp_to_init(const struct loom_ibv *ibv, struct ibv_qp *qp,
                          const struct loom_verbs_local *l)
{
    struct ibv_qp_attr attr;
    int mask;
    loom_verbs_qp_init_attr(l, &attr, &mask);
    return ibv->modify_qp(qp, &attr, mask);
}

int loom_verbs_qp_to_rtr(const struct loom_ibv *ibv, struct ibv_qp *qp,
                         const struct loom_verbs_local *l, const struct loom_verbs_remote *r)
{
    struct ibv_qp_attr attr;
    int mask;
    loom_verbs_qp_rtr_attr(l, r, &attr, &mask);
    return ibv->modify_qp(qp, &attr, mask);
}

int loom_verbs_qp_to_rts(const struct loom_ibv *ibv, struct ibv_qp *qp, uint32_t my_psn)
{
    struct ibv_qp_attr attr;
    int mask;
    loom_verbs_qp_rts_attr(my_psn, &attr, &mask);
    return ibv->modify_qp(qp, &attr, mask);
}

int loom_verbs_qp_to_err(const struct loom_ibv *ibv, struct ibv_qp *qp)
{
    struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
    return ibv->modify_qp(qp, &attr, IBV_QP_STATE);
}

int loom_verbs_mtu_bytes(uint8_t mtu)
{
    return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0;
}
