/* ofi.c - the libfabric transport: one reliable-datagram endpoint,
 * completion queue and address vector per instance, tagged messages with
 * directed receives (ofi_priv.h), connections on first use through the
 * out-of-band service and a TCP control channel per peer (common/link.c;
 * the blob and hooks in ofi_conn.c), the data path (ofi_data.c). This
 * file: the vtable, provider choice and set-up, progress.
 *
 * Provider choice: LOOM_OFI_PROVIDER names one ("tcp;ofi_rxm", "shm",
 * "udp;ofi_rxd", "verbs;ofi_rxm", "efa", ...); else the first available of
 * ox_order below, best first: the NIC providers, then verbs through rxm,
 * then TCP through rxm, then UDP through rxd. shm is taken only when asked
 * (it reaches no other host). The choice is logged at INFO and is in
 * tx->info ("ofi tcp;ofi_rxm"). */
#include "build_config.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "config.h"
#include "log.h"
#include "util.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "transport/ofi/ofi_priv.h"

#define OX_FI_VERSION FI_VERSION(1, 9)

static const char *const ox_order[] = {
    "cxi", "efa", "opx", "psm3", "verbs;ofi_rxm", "tcp;ofi_rxm", "udp;ofi_rxd",
};
#define OX_NORDER (sizeof ox_order / sizeof ox_order[0])

/* Largest tagged message posted: the provider's max_msg_size, or less for
 * tests (LOOM_TEST_OFI_CHUNK=bytes makes small messages split). */
#define OX_CHUNK_MAX (1ull << 30)

/* ---- provider choice ---- */

static struct fi_info *hints_new(const char *prov)
{
    struct fi_info *h = loom_fi.dupinfo(NULL);
    if (!h)
        return NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    /* every mode ofi_data.c handles (a provider that needs none of them
     * gets none) */
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                              FI_MR_ENDPOINT;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    /* no ordering asked for: 0, which libfabric 1.x calls FI_ORDER_NONE
     * (deprecated in 2.x, where using the name draws a warning) */
    h->tx_attr->msg_order = 0;
    h->rx_attr->msg_order = 0;
    if (prov && *prov && !(h->fabric_attr->prov_name = strdup(prov))) {
        loom_fi.freeinfo(h);
        return NULL;
    }
    return h;
}

/* ofi's own configuration rows (config.h). */
struct ofi_knobs {
    char provider[128]; /* LOOM_OFI_PROVIDER: "" = best available */
};
static struct ofi_knobs ofi_knobs;
static const struct loom_config_var ofi_rows[] = {
    {"LOOM_OFI_PROVIDER", LOOM_CONFIG_STRING, "", LOOM_CONFIG_FIELD(struct ofi_knobs, provider), 0,
     0, 0,
     "ofi transport: libfabric provider (\"tcp;ofi_rxm\", \"shm\", \"verbs;ofi_rxm\", \"efa\", ...); \"\" = best available",
     NULL},
};
static struct loom_config_section ofi_section = {"ofi", ofi_rows,
                                                 sizeof ofi_rows / sizeof ofi_rows[0], &ofi_knobs};
LOOM_CONFIG_SECTION(ofi_section)

/* LOOM_OFI_PROVIDER's value. */
static const char *want_provider(void)
{
    const struct ofi_knobs *knobs = loom_config_values(&ofi_section);
    return knobs->provider;
}

/* libfabric 1.17's shm provider moves a large message with one
 * process_vm_readv (CMA) by the receiver, holding its own region's lock
 * throughout, so a peer's next send waits for the copy to end; through its
 * shared buffers (SAR) both sides copy at once, in pieces. Here SAR is
 * 1.1-2x faster from 1 MiB up (docs/ofi.md), so when LOOM_OFI_PROVIDER
 * asks for shm, FI_SHM_DISABLE_CMA=1 unless the user set it. libfabric
 * reads it once, when the process first calls it: this is done before
 * Loom's first fi_getinfo, and has no effect where something else in the
 * process called libfabric first. */
static void shm_env_once(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    if (strcmp(want_provider(), "shm") == 0 && !getenv("FI_SHM_DISABLE_CMA")) {
        setenv("FI_SHM_DISABLE_CMA", "1", 0);
        LOOM_INFO(LOOM_SUB_NET,
                  "ofi: shm copies through its shared buffers "
                  "(FI_SHM_DISABLE_CMA=1; FI_SHM_DISABLE_CMA=0 keeps its CMA copies)");
    }
}

/* fi_getinfo for prov (on node with FI_SOURCE when given); 0 or -fi_errno. */
static int getinfo(const char *prov, const char *node, struct fi_info **out)
{
    shm_env_once();
    struct fi_info *h = hints_new(prov);
    if (!h)
        return -FI_ENOMEM;
    int ret = loom_fi.getinfo(OX_FI_VERSION, node, NULL, node ? FI_SOURCE : 0, h, out);
    loom_fi.freeinfo(h);
    return ret;
}

/* "tcp;ofi_rxm shm udp;ofi_rxd": the providers of tagged RDM endpoints. */
static void list_found(char *buf, size_t len)
{
    struct fi_info *all = NULL;
    size_t off = 0;
    buf[0] = '\0';
    if (getinfo(NULL, NULL, &all) != 0) {
        snprintf(buf, len, "none");
        return;
    }
    for (struct fi_info *i = all; i; i = i->next) {
        const char *name = i->fabric_attr->prov_name;
        int seen = 0;
        for (struct fi_info *j = all; j != i && !seen; j = j->next)
            seen = strcmp(j->fabric_attr->prov_name, name) == 0;
        if (!seen && off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? " " : "", name);
    }
    loom_fi.freeinfo(all);
}

/* The provider to use: LOOM_OFI_PROVIDER, else the first of ox_order that
 * is there. 0 and *prov, or -1 with why. The first call opens libfabric
 * (ofi_dl.c). */
static int choose(const char **prov, char *why, size_t len)
{
    const char *want = want_provider();
    struct fi_info *info = NULL;
    char dlwhy[256];
    if (loom_fi_load(dlwhy, sizeof dlwhy) != 0) {
        snprintf(why, len, "libfabric cannot be loaded: %s (install libfabric1)", dlwhy);
        return -1;
    }
    if (want[0]) {
        int ret = getinfo(want, NULL, &info);
        if (ret == 0) {
            loom_fi.freeinfo(info);
            *prov = want;
            return 0;
        }
        char found[256];
        list_found(found, sizeof found);
        snprintf(why, len, "no libfabric provider matches LOOM_OFI_PROVIDER=%s (%s); found: %s",
                 want, loom_fi.strerror(-ret), found);
        return -1;
    }
    for (size_t i = 0; i < OX_NORDER; i++) {
        if (getinfo(ox_order[i], NULL, &info) == 0) {
            loom_fi.freeinfo(info);
            *prov = ox_order[i];
            return 0;
        }
    }
    char found[256];
    list_found(found, sizeof found);
    snprintf(why, len,
             "no libfabric provider of the default order (cxi efa opx psm3 "
             "verbs;ofi_rxm tcp;ofi_rxm udp;ofi_rxd) is available; found: %s (set "
             "LOOM_OFI_PROVIDER)",
             found);
    return -1;
}

static int ox_available(char *why, size_t len)
{
    const char *prov;
    return choose(&prov, why, len);
}

static loom_result_t open_endpoint(struct loom_tx *tx, const char *prov)
{
    struct ox_priv *vp = tx->priv;
    const char *node = tx->params.local_addr;
    char name[96];
    if (strncmp(prov, "shm", 3) == 0) {
        /* shm's addresses are names: one per instance (forked ranks, and
         * several communicators in one process, must not collide) */
        static unsigned serial;
        snprintf(name, sizeof name, "loom_%d_%016llx_%d_%u", (int)getpid(),
                 (unsigned long long)tx->params.comm_id, tx->params.rank,
                 __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED));
        node = name;
    }
    /* bound to this rank's address (tcp, udp, verbs) or name (shm) */
    int ret = node && node[0] ? getinfo(prov, node, &vp->info) : -FI_ENODATA;
    if (ret)
        ret = getinfo(prov, NULL, &vp->info);
    if (ret)
        return loom_link_errf(tx, LOOM_ERROR_NOT_SUPPORTED, "ofi: fi_getinfo for %s: %s", prov,
                              loom_fi.strerror(-ret));
    struct fi_info *fi = vp->info;
    vp->need_reg = !!(fi->domain_attr->mr_mode & FI_MR_LOCAL);
    const char *force = getenv("LOOM_TEST_OFI_REG");
    if (force && force[0] == '1')
        vp->need_reg = 1; /* tests: the registration path on every provider */
    vp->mr_endpoint = !!(fi->domain_attr->mr_mode & FI_MR_ENDPOINT);
    uint64_t maxmsg = fi->ep_attr->max_msg_size ? fi->ep_attr->max_msg_size : OX_CHUNK_MAX;
    vp->chunk = maxmsg < OX_CHUNK_MAX ? (size_t)maxmsg : (size_t)OX_CHUNK_MAX;
    const char *tc = getenv("LOOM_TEST_OFI_CHUNK");
    if (tc && atol(tc) > 0 && (size_t)atol(tc) < vp->chunk)
        vp->chunk = (size_t)atol(tc);

    if ((ret = loom_fi.fabric(fi->fabric_attr, &vp->fabric, NULL)))
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: fi_fabric (%s): %s", prov,
                              loom_fi.strerror(-ret));
    if ((ret = fi_domain(vp->fabric, fi, &vp->domain, NULL)))
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: fi_domain (%s): %s", prov,
                              loom_fi.strerror(-ret));
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD, .size = 0};
    ret = fi_cq_open(vp->domain, &ca, &vp->cq, NULL);
    if (ret) {
        /* no wait object: progress() polls in short sleeps instead */
        ca.wait_obj = FI_WAIT_NONE;
        ret = fi_cq_open(vp->domain, &ca, &vp->cq, NULL);
    }
    if (ret)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: fi_cq_open (%s): %s", prov,
                              loom_fi.strerror(-ret));
    vp->cq_fd = -1;
    if (ca.wait_obj == FI_WAIT_FD) {
        int fd = -1;
        if (fi_control(&vp->cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0)
            vp->cq_fd = fd;
    }
    struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = (size_t)tx->params.nranks};
    if ((ret = fi_av_open(vp->domain, &aa, &vp->av, NULL))) {
        aa.type = FI_AV_UNSPEC;
        ret = fi_av_open(vp->domain, &aa, &vp->av, NULL);
    }
    if (ret)
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: fi_av_open (%s): %s", prov,
                              loom_fi.strerror(-ret));
    if ((ret = fi_endpoint(vp->domain, fi, &vp->ep, NULL)))
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: fi_endpoint (%s): %s", prov,
                              loom_fi.strerror(-ret));
    if ((ret = fi_ep_bind(vp->ep, &vp->av->fid, 0)) ||
        (ret = fi_ep_bind(vp->ep, &vp->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (ret = fi_enable(vp->ep)))
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: endpoint set-up (%s): %s", prov,
                              loom_fi.strerror(-ret));
    vp->addrlen = sizeof vp->addr;
    if ((ret = fi_getname(&vp->ep->fid, vp->addr, &vp->addrlen)))
        return loom_link_errf(tx, LOOM_ERROR_SYSTEM, "ofi: fi_getname (%s): %s", prov,
                              loom_fi.strerror(-ret));
    /* the tcp provider's sockets, found by its addresses (see
     * loom_ofi_tune_sockets) */
    if (strncmp(prov, "tcp", 3) == 0 && (prov[3] == ';' || !prov[3]) &&
        (fi->addr_format == FI_SOCKADDR_IN || fi->addr_format == FI_SOCKADDR_IN6) &&
        vp->addrlen <= sizeof(struct sockaddr_storage))
        vp->sndbuf = loom_config()->socket_sndbuf;
    return loom_ofi_data_init(tx);
}

/* Same family, port and address; mine may be a wildcard address. */
static int same_sockaddr(const struct sockaddr_storage *a, const void *mine)
{
    const struct sockaddr *b = mine;
    if (a->ss_family != b->sa_family)
        return 0;
    if (b->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = mine;
        return x->sin_port == y->sin_port &&
               (x->sin_addr.s_addr == y->sin_addr.s_addr || y->sin_addr.s_addr == INADDR_ANY);
    }
    if (b->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = mine;
        return x->sin6_port == y->sin6_port &&
               (!memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) ||
                !memcmp(&y->sin6_addr, &in6addr_any, sizeof y->sin6_addr));
    }
    return 0;
}

/* libfabric 1.17's tcp provider leaves its sockets' send buffers to the
 * kernel's autotuning and has no setting for them, which is slower for
 * large messages than a fixed buffer (docs/ofi.md, "How it works"). Its
 * sockets are this
 * process's file descriptors, so once the provider has connected to peer r
 * (its first completion), they get LOOM_SOCKET_SNDBUF, as Loom's own tcp
 * sockets do: those connected to r's endpoint address, and those accepted
 * on this rank's (the listener itself has no peer). A hint: a socket the
 * provider opens later for r, or one that cannot be looked at, keeps the
 * kernel's tuning; nothing else about a socket is touched. */
void loom_ofi_tune_sockets(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    p->socks_tuned = 1;
    if (!vp->sndbuf || !p->salen)
        return;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || fd < 0 || fd == dirfd(d))
            continue;
        int type = 0;
        socklen_t len = sizeof type;
        struct sockaddr_storage mine, theirs;
        socklen_t ml = sizeof mine, tl = sizeof theirs;
        if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_STREAM ||
            getsockname((int)fd, (struct sockaddr *)&mine, &ml) ||
            getpeername((int)fd, (struct sockaddr *)&theirs, &tl))
            continue;
        if (same_sockaddr(&theirs, &p->sa) || same_sockaddr(&mine, vp->addr)) {
            loom_net_set_sndbuf((int)fd, vp->sndbuf);
            n++;
        }
    }
    closedir(d);
    vp->counts.socks_tuned += (uint64_t)n;
    LOOM_TRACE(LOOM_SUB_NET,
               "ofi: rank %d: SO_SNDBUF %zu on %d of the provider's sockets "
               "(rank %d's first completion)",
               tx->params.rank, vp->sndbuf, n, r);
}

static loom_result_t ox_init(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    const struct loom_tx_params *pr = &tx->params;
    vp->cq_fd = -1;
    LOOM_CHECK(loom_link_open(tx, &loom_ofi_link_ops, sizeof *vp->peers));
    vp->peers = vp->link.peers;
    const char *prov = NULL;
    char why[512];
    if (choose(&prov, why, sizeof why) != 0)
        return loom_link_errf(tx, LOOM_ERROR_NOT_SUPPORTED, "ofi is unavailable: %s", why);
    LOOM_CHECK(open_endpoint(tx, prov));
    if (vp->cq_fd >= 0)
        loom_link_epoll_add(tx, vp->cq_fd, EPOLLIN, OX_EP_CQ);
    snprintf(tx->info, sizeof tx->info, "ofi %s", vp->info->fabric_attr->prov_name);
    LOOM_INFO(LOOM_SUB_NET,
              "ofi: rank %d: provider %s (%s), domain %s, fabric %s; %s; "
              "messages up to %zu bytes per post; %s",
              pr->rank, vp->info->fabric_attr->prov_name,
              want_provider()[0] ? "LOOM_OFI_PROVIDER" : "the best available",
              vp->info->domain_attr->name, vp->info->fabric_attr->name,
              vp->cq_fd >= 0 ? "sleeps on the completion queue's fd" : "polls (no wait fd)",
              vp->chunk, vp->need_reg ? "buffers registered (FI_MR_LOCAL)" : "no registration");
    tx->caps = tx->ops->caps;
    return LOOM_SUCCESS;
}

/* refused posts are retried from progress */
static void retry_posts(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    if (vp->eagain) {
        vp->eagain = 0;
        for (int i = 0; i < vp->link.nlive; i++)
            loom_ofi_kick(tx, vp->link.live[i]);
    }
}

static uint64_t finished(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    return vp->counts.sends + vp->counts.recvs;
}

/* every 64th progress(0) (the completion queue's fd, OX_EP_CQ, is read by
 * the poll hook) */
static int look(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    return !(++vp->polls & 63);
}

/* sleep on the completion queue's fd once the provider agrees (fi_trywait);
 * a provider without one, a refused post, or work in flight on a provider
 * that retransmits from progress calls (rxd) are looked at again after a
 * short sleep, never spun on (*busy: refused trywaits in a row) */
static loom_result_t before_sleep(struct loom_tx *tx, int *ms, int *busy)
{
    struct ox_priv *vp = tx->priv;
    int cap = -1;
    if (vp->cq_fd < 0 || vp->eagain)
        cap = 1;
    else if (vp->inflight)
        cap = 10;
    if (vp->cq_fd >= 0) {
        struct fid *f = &vp->cq->fid;
        if (fi_trywait(vp->fabric, &f, 1) != FI_SUCCESS)
            cap = ++*busy > 100 ? 1 : 0;
        else
            *busy = 0;
    }
    if (cap >= 0 && (*ms < 0 || cap < *ms))
        *ms = cap;
    return LOOM_SUCCESS;
}

static const struct loom_link_wait ox_wait = {
    .finished = finished,
    .after_poll = retry_posts,
    .look = look,
    .before_sleep = before_sleep,
};

static loom_result_t ox_progress(struct loom_tx *tx, int timeout_us)
{
    return loom_link_progress(tx, timeout_us, &ox_wait);
}

static void ox_finalize(struct loom_tx *tx)
{
    struct ox_priv *vp = tx->priv;
    loom_link_finish(tx, loom_ofi_fail_reqs);
    /* the endpoint first: it may hold registrations and posted buffers */
    if (vp->ep)
        fi_close(&vp->ep->fid);
    vp->ep = NULL;
    loom_ofi_data_free(tx);
    if (vp->av)
        fi_close(&vp->av->fid);
    if (vp->cq)
        fi_close(&vp->cq->fid);
    if (vp->domain)
        fi_close(&vp->domain->fid);
    if (vp->fabric)
        fi_close(&vp->fabric->fid);
    vp->av = NULL;
    vp->cq = NULL;
    vp->domain = NULL;
    vp->fabric = NULL;
    if (vp->info)
        loom_fi.freeinfo(vp->info);
    vp->info = NULL;
}

const struct loom_transport loom_ofi_transport = {
    .struct_size = sizeof(struct loom_transport),
    .name = "ofi",
    .priv_size = sizeof(struct ox_priv),
    /* no LOOM_TX_CAP_FINGERPRINT: the core's envelope carries each call's
     * fingerprint (message k before the data, message k+1), checked first
     * because completions are handed back in order; lengths are checked
     * here as well */
    .caps = LOOM_TX_CAP_LIVENESS,
    /* A provider of tagged RDM endpoints: LOOM_OFI_PROVIDER's, else one of
     * the default order; else why, listing the providers found ("no
     * libfabric provider matches LOOM_OFI_PROVIDER=efa (...); found:
     * tcp;ofi_rxm shm udp;ofi_rxd"). */
    .available = ox_available,
    /* Choose the provider, open fabric, domain, completion queue (with a
     * wait fd where offered), address vector and endpoint (bound to
     * params.local_addr where the provider has addresses), the bounce
     * slots and registration cache when the provider needs registered
     * buffers. Touches no peer. */
    .init = ox_init,
    /* Send the peer this rank's endpoint address through the out-of-band
     * service; never blocks; the rest in progress(). */
    .connect = loom_link_connect,
    /* Queue; post the chunks at once when the peer's link is up (a post the
     * provider refuses with -FI_EAGAIN is retried from progress). A peer
     * that failed fails the request at once (done=1) with its error. */
    .isend = loom_link_isend,
    .irecv = loom_link_irecv,
    /* Read the completion queue and the out-of-band messages, drive the
     * control sockets; when no request finished and timeout_us != 0, sleep
     * on the completion queue's wait fd (after fi_trywait), the control
     * sockets and the wake and OOB eventfds, in sleeps of at most 10 ms
     * while operations are in flight (a provider may need progress calls to
     * retransmit) and 1 ms without a wait fd or after -FI_EAGAIN. A failed
     * link fails its requests and is returned once, errmsg naming the peer. */
    .progress = ox_progress,
    .wake = loom_link_wake,
    /* Registration is internal (bounce slots and the registration cache,
     * only for providers with FI_MR_LOCAL): the core registers nothing. */
    .mem_reg = NULL,
    .mem_dereg = NULL,
    /* Tell live peers (control channel), cancel posted receives, fail
     * every pending request with res. */
    .shutdown = loom_link_shutdown,
    /* Say goodbye on the control channels and free everything. */
    .finalize = ox_finalize,
};
