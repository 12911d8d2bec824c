/* verbs_model.h - a software model of the libibverbs subset the verbs
 * transport uses, for tests only (never linked into libloom).
 *
 * It fills the same table the transport reaches libibverbs through
 * (src/transport/verbs/verbs_api.h), so the transport runs unchanged over it:
 * devices with ports and GID tables (and a matching sysfs tree), protection
 * domains, memory regions with lkey/rkey and access and bounds checks,
 * completion queues and channels, and RC queue pairs with the state
 * machine of ibv_modify_qp(3), RDMA write, write with immediate and
 * send/receive, in-order completions, and error completions (remote access
 * error for a bad key or range, retry exceeded for a peer that vanished,
 * flushes after an error, CQ overrun).
 *
 * Processes share it through memory mapped before they fork: each queue
 * pair has an inbound request ring and an inbound response ring in that
 * segment, and each process runs one "adapter" thread that moves packets
 * between its queue pairs' rings and its own memory, as a NIC's DMA
 * engine would. Every imitated behaviour cites the verbs man pages (or the
 * InfiniBand specification / the kernel's soft-RoCE driver where the man
 * pages say nothing) next to the code.
 *
 * Use: vmodel_create(&cfg) in the parent, then fork; in each process
 * loom_ibv_set(vmodel_ibv()) before the transport opens; vmodel_destroy()
 * in the parent at the end. */
#ifndef LOOM_VERBS_MODEL_H
#define LOOM_VERBS_MODEL_H

#include <stdint.h>

#include "transport/verbs/verbs_api.h"

#define VMODEL_MAX_DEVS 4
#define VMODEL_MAX_PORTS 2
#define VMODEL_MAX_GIDS 8

struct vmodel_gid_cfg {
    const char *gid;  /* sysfs form "0000:...:0000"              */
    const char *type; /* "RoCE v2", "IB/RoCE v1", NULL (IB)      */
};

struct vmodel_port_cfg {
    int ethernet; /* RoCE; else InfiniBand                   */
    int down;     /* state DOWN instead of ACTIVE            */
    uint16_t lid;
    enum ibv_mtu mtu; /* active MTU (0: IBV_MTU_4096)            */
    int ngids;
    struct vmodel_gid_cfg gids[VMODEL_MAX_GIDS];
};

struct vmodel_dev_cfg {
    const char *name;
    int nports;
    struct vmodel_port_cfg ports[VMODEL_MAX_PORTS];
};

struct vmodel_cfg {
    int ndevs;
    struct vmodel_dev_cfg devs[VMODEL_MAX_DEVS];
    /* RC timers (local ACK timeout x retries) are multiplied by this
     * (0: 1.0, real time); tests of retry exhaustion shorten them. */
    double time_scale;
};

/* One RoCE device "mlx5_0", port 1 up, GIDs: fe80::1 (v1, v2) and
 * ::ffff:127.0.0.1 (v1 at index 2, v2 at index 3). */
void vmodel_cfg_loopback(struct vmodel_cfg *cfg);

/* Map the shared segment and write the sysfs tree. 0 ok, -1 with a
 * message on stderr. Call before forking the processes that use it. */
int vmodel_create(const struct vmodel_cfg *cfg);
/* Unmap it and remove the sysfs tree (the creating process, at the end). */
void vmodel_destroy(void);
/* The table (its sysfs is the model's tree). */
const struct loom_ibv *vmodel_ibv(void);
const char *vmodel_sysfs(void);

/* Faults, for this process's adapter. */
enum vmodel_fault {
    /* the next n RDMA writes this process sends carry a wrong rkey */
    VMODEL_FAULT_BAD_RKEY = 1,
    /* completion queues created from now on hold only n entries, whatever
     * they report (a device that overruns) */
    VMODEL_FAULT_CQ_SIZE = 2,
};
void vmodel_inject(enum vmodel_fault fault, int n);

/* What this process did through the table, for per-message counts. */
struct vmodel_stats {
    uint64_t post_send_calls, send_wrs, inline_wrs, signaled_wrs;
    uint64_t writes, writes_imm, sends;
    uint64_t post_recv_calls, recv_wrs;
    uint64_t poll_calls, cqes;
    uint64_t reg_mr, dereg_mr;
    uint64_t bytes_out; /* payload bytes this adapter sent         */
};
void vmodel_stats(struct vmodel_stats *st);
void vmodel_stats_reset(void);

#endif
