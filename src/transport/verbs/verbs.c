/* verbs.c - the native libibverbs transport: RC queue pairs, clear-to-send
 * credits, RDMA write with immediate (verbs_proto.h), connections on first
 * use through the out-of-band service and a TCP control channel per peer
 * (common/link.c; the queue pair in verbs_conn.c), the data path
 * (verbs_data.c). This file: the vtable, device choice and set-up,
 * progress.
 *
 * libibverbs is reached only through the table of verbs_api.h (loaded with
 * dlopen at first use); tests put a software model of verbs behind it. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "config.h"
#include "log.h"
#include "util.h"
#include "bootstrap/oob.h"
#include "transport/verbs/verbs_priv.h"

/* Defaults (verbs_priv.h). 64 CTS entries: 64 chunks in flight per
 * direction; 16 slots of 64 KiB each way (1 MiB per peer and direction):
 * enough to keep a 100 Gb/s link busy with copied messages; buffers of
 * 64 KiB and more go zero-copy through the registration cache; the port's
 * limit (usually 1 or 2 GiB) bounds one write. */
struct loom_verbs_tuning loom_verbs_default_tuning = {
    .cts_entries = 64,
    .bounce_slots = 16,
    .stage_slots = 16,
    .slot_size = 64 * 1024,
    .zcopy_min = 64 * 1024,
    .inline_max = 128,
    .max_write = 1u << 30,
};

#define VX_RC_ENTRIES 256
#define VX_RC_BYTES (4ull << 30)

/* The interface that holds addr (for IPoIB, whose addresses are not in the
 * GID tables), or "" . */
static void iface_of(const char *addr, char *out, size_t len)
{
    out[0] = '\0';
    struct sockaddr_storage want;
    socklen_t wl;
    struct ifaddrs *ifs = NULL;
    if (!addr || loom_net_parse(addr, 0, &want, &wl) != LOOM_SUCCESS || getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != want.ss_family)
            continue;
        int same = want.ss_family == AF_INET
                       ? memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                                &((struct sockaddr_in *)&want)->sin_addr, 4) == 0
                       : memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                                &((struct sockaddr_in6 *)&want)->sin6_addr, 16) == 0;
        if (same) {
            snprintf(out, len, "%s", i->ifa_name);
            break;
        }
    }
    freeifaddrs(ifs);
}

static int vx_available(char *why, size_t len)
{
    char w[256] = "";
    const struct loom_ibv *ibv = loom_ibv_get(w, sizeof w);
    if (!ibv) {
        snprintf(why, len, "%s", w);
        return -1;
    }
    int n = 0;
    errno = 0;
    struct ibv_device **list = ibv->get_device_list(&n);
    if (!list) {
        int e = errno;
        snprintf(why, len, "ibv_get_device_list: %s%s", strerror(e),
                 e == ENOSYS ? " (this kernel has no RDMA support loaded)" : "");
        return -1;
    }
    ibv->free_device_list(list);
    if (n == 0) {
        snprintf(why, len, "%s found no RDMA device", ibv->name);
        return -1;
    }
    return 0;
}

static loom_result_t rc_reg(void *ctx, void *buf, size_t len, void **handle)
{
    struct loom_tx *tx = ctx;
    struct vx_priv *vp = tx->priv;
    struct ibv_mr *mr = vp->ibv->reg_mr(vp->pd, buf, len,
                                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr)
        return loom_verbs_errno_result(errno);
    vp->counts.regs++;
    *handle = mr;
    return LOOM_SUCCESS;
}

static void rc_dereg(void *ctx, void *handle)
{
    struct loom_tx *tx = ctx;
    struct vx_priv *vp = tx->priv;
    vp->ibv->dereg_mr(handle);
}

/* verbs' own configuration rows (config.h), passed on to verbs_gid.c. */
struct verbs_knobs {
    char ib_hca[128]; /* LOOM_IB_HCA: device[:port]; "" = by device_ip */
    int ib_gid_index; /* LOOM_IB_GID_INDEX: -1 = by device_ip         */
};
static struct verbs_knobs verbs_knobs;
static const struct loom_config_var verbs_rows[] = {
    {"LOOM_IB_HCA", LOOM_CONFIG_STRING, "", LOOM_CONFIG_FIELD(struct verbs_knobs, ib_hca), 0, 0, 0,
     "verbs transport: device[:port] to use (\"mlx5_0:1\"); \"\" = the one whose GID holds device_ip",
     NULL},
    {"LOOM_IB_GID_INDEX", LOOM_CONFIG_INT, "-1",
     LOOM_CONFIG_FIELD(struct verbs_knobs, ib_gid_index), -1, 255, 0,
     "verbs transport: GID index; -1 = the RoCE v2 GID holding the rank's device_ip", NULL},
};
static struct loom_config_section verbs_section = {
    "verbs", verbs_rows, sizeof verbs_rows / sizeof verbs_rows[0], &verbs_knobs};
LOOM_CONFIG_SECTION(verbs_section)

/* Choose the device, port and GID; open it; make what every peer shares. */
static loom_result_t open_device(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    const struct verbs_knobs *knobs = loom_config_values(&verbs_section);
    struct loom_verbs_topo topo;
    loom_result_t res = loom_verbs_topo_scan(vp->ibv->sysfs, &topo);
    if (res < 0)
        return loom_link_errf(tx, res, "verbs: out of memory reading %s", vp->ibv->sysfs);
    char ifname[IF_NAMESIZE + 1];
    iface_of(tx->params.local_addr, ifname, sizeof ifname);
    char err[LOOM_TX_ERRLEN];
    res = loom_verbs_choose(&topo, vp->ibv->sysfs, tx->params.local_addr, ifname, knobs->ib_hca,
                            knobs->ib_gid_index, &vp->choice, err, sizeof err);
    loom_verbs_topo_free(&topo);
    if (res < 0)
        return loom_link_errf(tx, res, "verbs: %s", err);

    int n = 0;
    struct ibv_device **list = vp->ibv->get_device_list(&n);
    if (!list)
        return loom_link_errf(tx, LOOM_ERROR_NOT_SUPPORTED, "verbs: ibv_get_device_list: %s",
                              strerror(errno));
    for (int i = 0; i < n && !vp->ctx; i++)
        if (strcmp(vp->ibv->get_device_name(list[i]), vp->choice.dev) == 0)
            vp->ctx = vp->ibv->open_device(list[i]);
    int e = errno;
    vp->ibv->free_device_list(list);
    if (!vp->ctx)
        return loom_link_errf(tx, LOOM_ERROR_NOT_SUPPORTED,
                              "verbs: cannot open %s (in sysfs%s): %s", vp->choice.dev,
                              n ? "" : ", but libibverbs lists no device", strerror(e));
    struct ibv_port_attr pa;
    int err_no = vp->ibv->query_port(vp->ctx, (uint8_t)vp->choice.port, &pa);
    if (err_no)
        return loom_link_errf(tx, loom_verbs_errno_result(err_no),
                              "verbs: ibv_query_port %s:%d: %s", vp->choice.dev, vp->choice.port,
                              strerror(err_no));
    if (pa.state != IBV_PORT_ACTIVE)
        return loom_link_errf(tx, LOOM_ERROR_NOT_SUPPORTED,
                              "verbs: %s port %d is not active (state %d)", vp->choice.dev,
                              vp->choice.port, pa.state);
    vp->local = (struct loom_verbs_local){
        .port = (uint8_t)vp->choice.port,
        .gid_index = (uint8_t)vp->choice.gid_index,
        .mtu = (uint8_t)pa.active_mtu,
        .ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET,
    };
    if (!vp->local.ethernet)
        vp->choice.lid = pa.lid;
    vp->max_msg = pa.max_msg_sz ? pa.max_msg_sz : (1u << 30);
    if (vp->tune.max_write > vp->max_msg)
        vp->tune.max_write = vp->max_msg;

    vp->pd = vp->ibv->alloc_pd(vp->ctx);
    if (!vp->pd)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "verbs: ibv_alloc_pd on %s: %s",
                              vp->choice.dev, strerror(errno));
    vp->ch = vp->ibv->create_comp_channel(vp->ctx);
    if (!vp->ch)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "verbs: ibv_create_comp_channel: %s",
                              strerror(errno));
    int fl = fcntl(vp->ch->fd, F_GETFL);
    if (fl < 0 || fcntl(vp->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "verbs: completion channel non-blocking: %s",
                              strerror(errno));
    vp->cq = vp->ibv->create_cq(vp->ctx, 1024, tx, vp->ch, 0);
    if (!vp->cq)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "verbs: ibv_create_cq: %s", strerror(errno));
    struct loom_regcache_ops ops = {.reg = rc_reg, .dereg = rc_dereg};
    res = loom_regcache_new(&ops, tx, VX_RC_ENTRIES, VX_RC_BYTES, &vp->rc);
    if (res < 0)
        return loom_link_errf(tx, res, "verbs: cannot make a registration cache");
    return LOOM_SUCCESS;
}

static loom_result_t init_steps(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    const struct loom_tx_params *pr = &tx->params;
    vp->tune = loom_verbs_default_tuning;
    LOOM_CHECK(loom_link_open(tx, &loom_verbs_link_ops, sizeof *vp->peers));
    vp->peers = vp->link.peers;
    char why[256] = "";
    vp->ibv = loom_ibv_get(why, sizeof why);
    if (!vp->ibv)
        return loom_link_errf(tx, LOOM_ERROR_NOT_SUPPORTED, "verbs is unavailable: %s", why);
    if (getrandom(&vp->nonce, sizeof vp->nonce, 0) != (ssize_t)sizeof vp->nonce)
        vp->nonce = loom_now_ns() ^ (uint64_t)getpid() << 32;
    LOOM_CHECK(open_device(tx));
    loom_link_epoll_add(tx, vp->ch->fd, EPOLLIN, VX_EP_CHANNEL);
    char gs[64];
    loom_verbs_gid_format(vp->choice.gid, gs, sizeof gs);
    snprintf(tx->info, sizeof tx->info, "verbs %s:%d gid %d%s", vp->choice.dev, vp->choice.port,
             vp->choice.gid_index,
             vp->choice.type == LOOM_VERBS_GID_ROCE_V2   ? " (RoCE v2)"
             : vp->choice.type == LOOM_VERBS_GID_ROCE_V1 ? " (RoCE v1)"
                                                         : "");
    LOOM_INFO(LOOM_SUB_NET, "verbs: rank %d: %s %s: %s; %s, MTU %d, %s", pr->rank, tx->info, gs,
              vp->choice.why, vp->ibv->name, loom_verbs_mtu_bytes(vp->local.mtu),
              loom_regcache_cached(vp->rc, NULL, 0) ? "registration cache on"
                                                    : "registrations per use");
    tx->caps = tx->ops->caps;
    return LOOM_SUCCESS;
}

/* On failure errmsg says why; loom_tx_open calls finalize, which frees
 * what was made. */
static loom_result_t vx_init(struct loom_tx *tx)
{
    return init_steps(tx);
}

/* Requests finished so far: progress() that may wait returns once this
 * moves (or on an error, wake() or the timeout), not for traffic that
 * finishes nothing (a CTS entry arriving, a peer's queue pair coming up). */
static uint64_t finished(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    return vp->counts.sends + vp->counts.recvs;
}

/* arm the channel, then look once more: a completion that came between the
 * poll and the arming raises no event [ibv_get_cq_event(3)] */
static loom_result_t arm(struct loom_tx *tx, int *ms, int *state)
{
    struct vx_priv *vp = tx->priv;
    (void)ms;
    (void)state;
    if (vp->cq_armed)
        return LOOM_SUCCESS;
    int err = vp->ibv->req_notify_cq(vp->cq, 0);
    if (err)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "verbs: ibv_req_notify_cq: %s", strerror(err));
    vp->cq_armed = 1;
    loom_verbs_poll_cq(tx);
    return LOOM_SUCCESS;
}

static void channel_event(struct loom_tx *tx, uint64_t tag, uint32_t events)
{
    struct vx_priv *vp = tx->priv;
    struct ibv_cq *cq;
    void *ctx;
    (void)events;
    if (tag != VX_EP_CHANNEL)
        return;
    while (vp->ibv->get_cq_event(vp->ch, &cq, &ctx) == 0) {
        vp->ibv->ack_cq_events(cq, 1);
        vp->cq_armed = 0;
    }
}

static const struct loom_link_wait vx_wait = {
    .finished = finished,
    .before_sleep = arm,
    .event = channel_event,
};

static loom_result_t vx_progress(struct loom_tx *tx, int timeout_us)
{
    return loom_link_progress(tx, timeout_us, &vx_wait);
}

static loom_result_t vx_mem_reg(struct loom_tx *tx, void *buf, size_t len, enum loom_mem_type mem,
                                void **mr)
{
    struct vx_priv *vp = tx->priv;
    if (mem != LOOM_MEM_HOST) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "verbs: device memory is not supported here");
        return LOOM_ERROR_NOT_SUPPORTED;
    }
    struct ibv_mr *m = vp->ibv->reg_mr(vp->pd, buf, len,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!m) {
        int e = errno;
        snprintf(tx->errmsg, sizeof tx->errmsg, "verbs: ibv_reg_mr of %zu bytes at %p: %s", len,
                 buf, strerror(e));
        return loom_verbs_errno_result(e);
    }
    vp->counts.regs++;
    *mr = m;
    return LOOM_SUCCESS;
}

static loom_result_t vx_mem_dereg(struct loom_tx *tx, void *mr)
{
    struct vx_priv *vp = tx->priv;
    int err = mr ? vp->ibv->dereg_mr(mr) : 0;
    if (err) {
        snprintf(tx->errmsg, sizeof tx->errmsg, "verbs: ibv_dereg_mr: %s", strerror(err));
        return loom_verbs_errno_result(err);
    }
    return LOOM_SUCCESS;
}

/* its socket first, then its queue pair and memory */
static void drop_peer(struct loom_tx *tx, int r, loom_result_t res)
{
    struct vx_priv *vp = tx->priv;
    struct vx_peer *p = &vp->peers[r];
    loom_verbs_fail_reqs(tx, r, res);
    loom_link_close(tx, r);
    if (p->qp)
        vp->ibv->destroy_qp(p->qp);
    p->qp = NULL;
    loom_verbs_peer_mem_free(tx, r);
}

static void vx_finalize(struct loom_tx *tx)
{
    struct vx_priv *vp = tx->priv;
    loom_link_finish(tx, drop_peer);
    if (vp->rc)
        loom_regcache_free(vp->rc);
    vp->rc = NULL;
    if (vp->cq)
        vp->ibv->destroy_cq(vp->cq);
    if (vp->ch)
        vp->ibv->destroy_comp_channel(vp->ch);
    if (vp->pd)
        vp->ibv->dealloc_pd(vp->pd);
    if (vp->ctx)
        vp->ibv->close_device(vp->ctx);
    vp->cq = NULL;
    vp->ch = NULL;
    vp->pd = NULL;
    vp->ctx = NULL;
}

const struct loom_transport loom_verbs_transport = {
    .struct_size = sizeof(struct loom_transport),
    .name = "verbs",
    .priv_size = sizeof(struct vx_priv),
    .caps = LOOM_TX_CAP_FINGERPRINT | LOOM_TX_CAP_RDMA_WRITE | LOOM_TX_CAP_LIVENESS,
    /* libibverbs.so.1 loads and lists at least one device; else why not,
     * in the loader's or libibverbs' words (e.g. "cannot open shared
     * object file", "ibv_get_device_list: Function not implemented"). */
    .available = vx_available,
    /* Choose the device, port and GID (by params.local_addr, or
     * LOOM_IB_HCA / LOOM_IB_GID_INDEX; the error lists all found), open
     * it, make the protection domain, completion channel and queue,
     * registration cache and control listener. Touches no peer. */
    .init = vx_init,
    /* Make the queue pair and send its data to the peer through the
     * out-of-band service; never blocks; the rest in progress(). */
    .connect = loom_link_connect,
    /* Queue; advertise or write what credits allow now. A peer that failed
     * fails the request at once (done=1) and returns its error. */
    .isend = loom_link_isend,
    .irecv = loom_link_irecv,
    /* Drain the completion queue and the out-of-band messages; when no
     * request finished and timeout_us != 0, sleep on the completion
     * channel, the control sockets and the wake and OOB eventfds until one
     * does, wake() is called or the timeout passes (traffic that finishes
     * nothing, such as a CTS entry arriving, does not end the wait). A
     * failed link fails its requests and is returned once, errmsg naming
     * the peer. */
    .progress = vx_progress,
    .wake = loom_link_wake,
    .mem_reg = vx_mem_reg,
    .mem_dereg = vx_mem_dereg,
    /* Tell live peers (control channel), stop every queue pair, fail every
     * pending request with res. */
    .shutdown = loom_link_shutdown,
    /* Say goodbye on the control channels and free everything. */
    .finalize = vx_finalize,
};
