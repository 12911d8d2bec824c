/* life.c - communicators' life: creation (rank table, tcp://, env://, split),
 * destruction, abort, errors. */
#include "build_config.h"

#include <ctype.h>
#include <sched.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "coll/coll.h"
#include "comm/comm.h"
#include "core.h"
#include "base/config.h"
#include "launch.h"
#include "ranktable/ranktable_internal.h"
#include "shm/shm.h"
#include "base/util.h"

/* The error goes back to the caller, who reports it: logged at INFO, so
 * that it shows once on stderr (the program's line) and still takes its
 * place among the other lines of a LOOM_DEBUG=INFO log. */
static void comm_stop_and_free(struct loom_comm *comm);

static void comm_free(struct loom_comm *comm)
{
    if (!comm)
        return;
    if (comm->oob)
        loom_oob_set_receiver(comm->oob, LOOM_OOB_TAG_REVOKE, NULL, NULL);
    if (comm->hier_sub)
        comm_stop_and_free(comm->hier_sub);
    loom_shm_destroy(comm);
    loom_coll_ext_free(comm);
    if (comm->tx)
        loom_tx_close(comm->tx);
    loom_p2p_env_free(comm);
    if (comm->oob)
        loom_oob_close(comm->oob);
    if (comm->agree_oob)
        loom_oob_close(comm->agree_oob);
    free(comm->peer_used);
    if (comm->rank_desc) {
        for (int i = 0; i < comm->nranks; i++)
            free(comm->rank_desc[i]);
        free(comm->rank_desc);
    }
    free(comm->ring);
    free(comm->host_of);
    free(comm->local_ranks);
    free(comm->server_of);
    free(comm->scratch);
    free(comm->reqs);
    pthread_mutex_destroy(&comm->lock);
    pthread_cond_destroy(&comm->work_cv);
    pthread_cond_destroy(&comm->done_cv);
    free(comm);
}

static struct loom_comm *comm_alloc(int rank, int nranks)
{
    struct loom_comm *comm = calloc(1, sizeof *comm);
    if (!comm)
        return NULL;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->blame = -1;
    comm->device_id = -1;
    pthread_mutex_init(&comm->lock, NULL);
    pthread_cond_init(&comm->work_cv, NULL);
    pthread_cond_init(&comm->done_cv, NULL);
    comm->ring = calloc((size_t)nranks, sizeof *comm->ring);
    comm->rank_desc = calloc((size_t)nranks, sizeof *comm->rank_desc);
    comm->peer_used = calloc((size_t)nranks, 1);
    if (!comm->ring || !comm->rank_desc || !comm->peer_used) {
        comm_free(comm);
        return NULL;
    }
    for (int i = 0; i < nranks; i++)
        comm->ring[i] = i;
    return comm;
}

static int set_desc(struct loom_comm *comm, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_desc(struct loom_comm *comm, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&comm->rank_desc[r], fmt, ap);
    va_end(ap);
    if (rc < 0) {
        comm->rank_desc[r] = NULL;
        return -1;
    }
    return 0;
}

/* Configuration (opts, when given, where the user has not set the
 * variable), wake-up fd, position on the ring. */
static loom_result_t comm_setup(struct loom_comm *comm, const loom_comm_opts_t *opts)
{
    const struct loom_config *cfg = loom_config();
    comm->chunk_size = cfg->chunk_size ? cfg->chunk_size : 1 << 20;
    comm->spin_us = cfg->spin_us < 0 ? 50 : cfg->spin_us;
    comm->timeout = cfg->timeout;
    comm->bootstrap_timeout = cfg->bootstrap_timeout;
    if (opts && opts->timeout > 0) {
        if (!loom_config_is_set("LOOM_TIMEOUT"))
            comm->timeout = opts->timeout;
        if (!loom_config_is_set("LOOM_BOOTSTRAP_TIMEOUT"))
            comm->bootstrap_timeout = opts->timeout;
    }
    comm->stall_warn = cfg->stall_warn;
    char err[256];
    enum loom_algo forced[LOOM_OP_KIND_COUNT];
    if (loom_algo_parse(cfg->algo, forced, err, sizeof err) != 0) {
        loom_set_thread_error("%s", err);
        return LOOM_ERROR_CONFIG;
    }
    for (int k = 0; k < LOOM_OP_KIND_COUNT; k++)
        comm->algo_forced[k] = forced[k];
    for (int i = 0; i < comm->nranks; i++)
        if (comm->ring[i] == comm->rank)
            comm->ring_pos = i;
    return LOOM_SUCCESS;
}

/* A hash naming this host: its boot id (the same in every network
 * namespace of one kernel) and host name. */
static uint64_t host_hash(void)
{
    char buf[256] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = 0;
        fclose(f);
    }
    uint64_t h = loom_fnv1a(LOOM_FNV_INIT, buf, strlen(buf));
    if (gethostname(buf, sizeof buf) == 0) {
        buf[sizeof buf - 1] = 0;
        h = loom_fnv1a(h, buf, strlen(buf));
    }
    return h;
}

/* Which ranks share this host, and whether they outnumber its CPUs: from
 * the host hashes every rank gave at bootstrap (no collective). */
static loom_result_t comm_topology(struct loom_comm *comm)
{
    uint64_t *all = calloc((size_t)comm->nranks, sizeof *all);
    if (!all)
        return LOOM_ERROR_NO_MEMORY;
    for (int r = 0; r < comm->nranks; r++)
        all[r] = loom_oob_host(comm->oob, r);
    uint64_t mine = all[comm->rank];
    comm->host_of = calloc((size_t)comm->nranks, sizeof *comm->host_of);
    comm->local_ranks = calloc((size_t)comm->nranks, sizeof *comm->local_ranks);
    if (!comm->host_of || !comm->local_ranks) {
        free(all);
        return LOOM_ERROR_NO_MEMORY;
    }
    /* hosts numbered in order of their lowest rank */
    comm->nhosts = 0;
    for (int r = 0; r < comm->nranks; r++) {
        int h = -1;
        for (int q = 0; q < r && h < 0; q++)
            if (all[q] == all[r])
                h = comm->host_of[q];
        comm->host_of[r] = h >= 0 ? h : comm->nhosts++;
    }
    comm->local_size = 0;
    for (int r = 0; r < comm->nranks; r++)
        if (all[r] == mine) {
            if (r == comm->rank)
                comm->local_index = comm->local_size;
            comm->local_ranks[comm->local_size++] = r;
        }
    free(all);
    cpu_set_t set;
    int ncpu = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        ncpu = CPU_COUNT(&set);
    if (ncpu <= 0)
        ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    comm->oversubscribed = ncpu > 0 && comm->local_size > ncpu;
    if (comm->oversubscribed && loom_config()->spin_us < 0)
        comm->spin_us = 0;
    LOOM_INFO(LOOM_SUB_INIT, "rank %d: %d of %d ranks on this host, %d CPUs%s", comm->rank,
              comm->local_size, comm->nranks, ncpu,
              comm->oversubscribed ? ": oversubscribed, waiting ranks yield" : "");
    return LOOM_SUCCESS;
}

/* Shared memory with several servers: do they all agree? (every rank) */
static loom_result_t shm_agree(struct loom_comm *comm, int32_t flags[2])
{
    return loom_comm_internal(comm, LOOM_OP_ALLREDUCE, flags, flags, 2, LOOM_INT32,
                              LOOM_MIN);
}

static loom_result_t comm_split(struct loom_comm *parent, int color, int key, int no_shm,
                                struct loom_comm **newcomm);

/* Shared memory, and with several servers the communicator of each local
 * index across them, which the hierarchical algorithms use between servers
 * (coll/hier.c). */
static loom_result_t comm_shared_memory(struct loom_comm *comm)
{
    if (comm->no_shm)
        return LOOM_SUCCESS;
    LOOM_CHECK(loom_shm_setup(comm, shm_agree));
    int server, index, size;
    if (loom_shm_servers(comm, &server, &index, &size) < 2)
        return LOOM_SUCCESS;
    loom_result_t res = comm_split(comm, index, server, 1, &comm->hier_sub);
    if (res < 0)
        loom_set_thread_error("rank %d: the communicator between servers: %s", comm->rank,
                              comm->errmsg);
    return res;
}

/* Once connected: learn the hosts (and set up shared memory), start the
 * progress thread, and join the flight recorder. */
static loom_result_t comm_finish(struct loom_comm *comm)
{
    LOOM_CHECK(comm_topology(comm));
    LOOM_CHECK(comm_shared_memory(comm));
    /* a stalled peer may ask which call this rank is in (coll/p2p.c) */
    loom_oob_set_handler(comm->oob, LOOM_OOB_TAG_CALL, loom_trace_answer, comm);
    /* another rank may revoke it while no thread of this one reads */
    loom_oob_set_receiver(comm->oob, LOOM_OOB_TAG_REVOKE, loom_comm_revoke_notice, comm);
    if (!comm->shm) /* one server in shared memory needs no network */
        loom_coll_warm(comm);
    LOOM_CHECK(loom_comm_start(comm));
    loom_trace_register(comm);
    return LOOM_SUCCESS;
}

/* The transport parameters of comm. */
static struct loom_tx_params tx_params(struct loom_comm *comm)
{
    return (struct loom_tx_params){
        .struct_size = sizeof(struct loom_tx_params),
        .rank = comm->rank,
        .nranks = comm->nranks,
        .comm_id = comm->comm_id,
        .local_addr = comm->local_addr,
        .connect_timeout = comm->bootstrap_timeout,
        .describe = loom_comm_describe,
        .describe_ctx = comm,
        .timeout = comm->timeout,
        .oob = comm->oob,
    };
}

/* The transport LOOM_TRANSPORT names, or an error listing what is built
 * and why a built one cannot run here. */
/* The transport LOOM_TRANSPORT names; with one rank only the name is
 * checked (a misspelt one is an error even where nothing would connect). */
static const struct loom_transport *comm_transport(int nranks)
{
    const char *name = loom_config()->transport;
    const struct loom_transport *ops = loom_transport_find(name);
    char built[128] = "", why[256] = "";
    size_t off = 0;
    for (int i = 0; i < LOOM_TRANSPORT_SLOTS; i++)
        if (loom_transports[i] && off < sizeof built)
            off += (size_t)snprintf(built + off, sizeof built - off, "%s%s",
                                    off ? ", " : "", loom_transports[i]->name);
    if (!ops) {
        loom_set_thread_error("LOOM_TRANSPORT=%s: this Loom has no such transport "
                              "(built: %s; see loom-info)", name, built);
        return NULL;
    }
    if (nranks > 1 && ops->available && ops->available(why, sizeof why) != 0) {
        loom_set_thread_error("LOOM_TRANSPORT=%s: the %s transport cannot run on this "
                              "host: %s (built: %s)", name, ops->name, why, built);
        return NULL;
    }
    return ops;
}

/* Open the out-of-band service, rendezvous at root, open the transport
 * (connections come on first use), start. Rank 0 listens at root_host:
 * root_port (on lfd when a unique id holds it), the others at their
 * local_addr:port (port 0: any). */
static loom_result_t comm_connect(struct loom_comm *comm, const char *root_host,
                                  int root_port, int port, int lfd)
{
    const struct loom_config *cfg = loom_config();
    const struct loom_transport *ops = NULL;
    if (!(ops = comm_transport(comm->nranks))) {
        if (lfd >= 0)
            close(lfd);
        return LOOM_ERROR_NOT_SUPPORTED;
    }
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    char err[1024] = "";
    loom_result_t res;
    if (comm->rank == 0 && lfd >= 0) {
        res = loom_oob_open_fd(0, comm->nranks, lfd, &comm->oob, entry, err, sizeof err);
    } else {
        char addr[64];
        snprintf(addr, sizeof addr, "%s", comm->local_addr);
        if (comm->rank == 0 && comm->nranks > 1) {
            /* rank 0 is where the others look for it */
            struct sockaddr_storage ss;
            socklen_t sl;
            char e[256];
            if (loom_net_resolve(root_host, root_port, &ss, &sl, e, sizeof e) == 0) {
                loom_net_format((struct sockaddr *)&ss, addr, sizeof addr);
                char *colon = strrchr(addr, ':');
                if (colon)
                    *colon = '\0';
                if (addr[0] == '[') {
                    memmove(addr, addr + 1, strlen(addr));
                    addr[strlen(addr) - 1] = '\0';
                }
            }
            port = root_port;
        }
        res = loom_oob_open(comm->rank, comm->nranks, addr, port, &comm->oob, entry, err,
                            sizeof err);
    }
    if (res < 0) {
        loom_set_thread_error("rank %d: cannot open its out-of-band service: %s",
                              comm->rank, err);
        return res;
    }
    loom_put_le64(entry + LOOM_OOB_ENTRY_HOST, host_hash());
    loom_put_le32(entry + LOOM_OOB_ENTRY_FLAGS, cfg->shm ? LOOM_OOB_FLAG_SHM : 0);
    struct loom_boot_params bp = {
        .struct_size = sizeof bp,
        .rank = comm->rank,
        .nranks = comm->nranks,
        .root_host = root_host,
        .root_port = root_port,
        .table_hash = comm->table_hash,
        .timeout = comm->bootstrap_timeout,
        .describe = loom_comm_describe,
        .describe_ctx = comm,
    };
    struct loom_boot_stats st;
    res = loom_bootstrap(&bp, comm->oob, entry, &comm->comm_id, &st, err, sizeof err);
    if (res < 0) {
        loom_set_thread_error("rank %d: %s", comm->rank, err);
        return res;
    }
    LOOM_INFO(LOOM_SUB_BOOT, "rank %d: bootstrap took %.3f s, sent %llu and received "
              "%llu bytes", comm->rank, st.seconds, (unsigned long long)st.sent,
              (unsigned long long)st.received);
    if (comm->nranks > 1) {
        struct loom_tx_params tp = tx_params(comm);
        res = loom_tx_open(ops, &tp, &comm->tx);
        if (res < 0) {
            char why[600];
            snprintf(why, sizeof why, "%s", loom_thread_error());
            loom_set_thread_error("rank %d: cannot open the %s transport on %s: %s",
                                  comm->rank, ops->name, comm->local_addr, why);
            return res;
        }
    }
    res = comm_finish(comm);
    if (res < 0)
        return res;
    LOOM_INFO(LOOM_SUB_INIT, "communicator ready: rank %d of %d, %s, %s, comm id %016llx",
              comm->rank, comm->nranks, comm->local_addr,
              comm->tx ? comm->tx->info : "no transport",
              (unsigned long long)comm->comm_id);
    return LOOM_SUCCESS;
}

static loom_result_t ranktable_error(const char *path, loom_result_t res,
                                     loom_diag_t *diag)
{
    char msg[1024];
    size_t used = (size_t)snprintf(msg, sizeof msg, "rank table %s: %s", path,
                                   loom_result_string(res));
    size_t n = 0;
    loom_diag_count(diag, &n);
    for (size_t i = 0; i < n && used < sizeof msg; i++) {
        loom_diag_severity_t sev;
        const char *p, *m;
        if (loom_diag_get(diag, i, &sev, &p, &m) == LOOM_SUCCESS && sev == LOOM_DIAG_ERROR)
            used += (size_t)snprintf(msg + used, sizeof msg - used, "; %s%s%s", p,
                                     *p ? ": " : "", m);
    }
    loom_set_thread_error("%s", msg);
    return res;
}

/* Join the table at path as rank. When the caller was told the job's size
 * (nranks > 0, from size_from: "the caller's world size",
 * "OMPI_COMM_WORLD_SIZE=2, from mpirun (Open MPI)"), a table of another
 * size fails before any wait: the ranks it names beyond the job would never
 * come. opts: checked by the caller (struct_size), or NULL. */
static loom_result_t ranktable_init(const char *path, int rank, int nranks,
                                    const char *size_from, const loom_comm_opts_t *opts,
                                    loom_comm_t *out)
{
    if (!path || !out) {
        loom_set_thread_error("loom_comm_init_ranktable: path and comm must not be NULL");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    *out = NULL;
    loom_ranktable_t *rt = NULL;
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_ranktable_load(path, &rt, &diag);
    if (res < 0) {
        ranktable_error(path, res, diag);
        loom_diag_free(diag);
        return res;
    }
    loom_diag_free(diag);
    int n = 0;
    loom_ranktable_nranks(rt, &n);
    if (nranks > 0 && nranks != n) {
        loom_set_thread_error("rank table %s has %d ranks but the job has %d (%s): "
                              "start %d ranks, or give a table of %d", path, n, nranks,
                              size_from, n, nranks);
        loom_ranktable_free(rt);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (rank < 0 || rank >= n) {
        loom_set_thread_error("rank %d is not in rank table %s, which has ranks 0..%d",
                              rank, path, n - 1);
        loom_ranktable_free(rt);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct loom_comm *comm = comm_alloc(rank, n);
    if (!comm) {
        loom_ranktable_free(rt);
        return LOOM_ERROR_NO_MEMORY;
    }
    loom_ranktable_hash(rt, &comm->table_hash);
    /* ring order: by server, then rank, so a server's ranks are adjacent */
    int k = 0, nservers = 0;
    loom_ranktable_nservers(rt, &nservers);
    for (int s = 0; s < nservers; s++) {
        int cnt = 0;
        loom_ranktable_server_ranks(rt, s, comm->ring + k, n - k, &cnt);
        k += cnt;
    }
    res = LOOM_SUCCESS;
    comm->server_of = calloc((size_t)n, sizeof *comm->server_of);
    if (!comm->server_of)
        res = LOOM_ERROR_NO_MEMORY;
    for (int r = 0; r < n && res == LOOM_SUCCESS; r++) {
        loom_rank_info_t ri;
        loom_ranktable_rank_info(rt, r, &ri);
        comm->server_of[r] = ri.server_index;
        if (set_desc(comm, r, "rank %d (server %s, %s:%d)", r, ri.server_id,
                     ri.address ? ri.address : "?", ri.port) < 0)
            res = LOOM_ERROR_NO_MEMORY;
    }
    if (k != n && res == LOOM_SUCCESS) {
        loom_set_thread_error("rank table %s: servers hold %d ranks, expected %d",
                              path, k, n);
        res = LOOM_ERROR_INVALID_RANKTABLE;
    }
    /* LOOM_ADDRESS picks this rank's address and port and the rendezvous */
    char root_host[64] = "";
    int root_port = 0, my_port = 0;
    if (res == LOOM_SUCCESS)
        res = loom_rt_comm_endpoints(rt, rank, comm->local_addr,
                                     sizeof comm->local_addr, &my_port,
                                     root_host, sizeof root_host, &root_port);
    if (res == LOOM_SUCCESS) {
        loom_rank_info_t me;
        loom_ranktable_rank_info(rt, rank, &me);
        comm->device_id = me.device_id;
        res = comm_setup(comm, opts);
    }
    loom_ranktable_free(rt);
    if (res == LOOM_SUCCESS)
        res = comm_connect(comm, root_host, root_port, my_port, -1);
    if (res < 0) {
        comm_free(comm);
        return res;
    }
    *out = comm;
    return LOOM_SUCCESS;
}

/* NULL for NULL; an error for a struct_size this library cannot read. */
static loom_result_t opts_check(const char *fn, const loom_comm_opts_t *opts)
{
    if (opts && opts->struct_size < offsetof(loom_comm_opts_t, nranks) + sizeof(int)) {
        loom_set_thread_error("%s: opts->struct_size is %zu, expected %zu "
                              "(sizeof(loom_comm_opts_t))", fn, opts->struct_size,
                              sizeof(loom_comm_opts_t));
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (opts && (opts->timeout < 0 || opts->nranks < 0)) {
        loom_set_thread_error("%s: opts->timeout (%g) and opts->nranks (%d) must not be "
                              "negative", fn, opts->timeout, opts->nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_init_ranktable(const char *path, int rank,
                                                loom_comm_t *out)
{
    return ranktable_init(path, rank, 0, NULL, NULL, out);
}

LOOM_API loom_result_t loom_comm_init_ranktable_opts(const char *path, int rank,
                                                     const loom_comm_opts_t *opts,
                                                     loom_comm_t *out)
{
    LOOM_CHECK(opts_check("loom_comm_init_ranktable_opts", opts));
    return ranktable_init(path, rank, opts ? opts->nranks : 0, "the caller's world size",
                          opts, out);
}

/* Parse a decimal int fully; -1 on anything else. */
static int parse_int(const char *s, int *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > 1 << 30)
        return -1;
    *out = (int)v;
    return 0;
}

/* A communicator whose rank 0 listens at host:port (tcp://, env://, unique
 * id). what names the rendezvous in messages; hash must match on every rank
 * (0 when nothing identifies the job). */
static loom_result_t comm_init_root(const char *what, const char *host, int port,
                                    int nranks, int rank, uint64_t hash, int lfd,
                                    const loom_comm_opts_t *opts, loom_comm_t *out)
{
    struct loom_comm *comm = comm_alloc(rank, nranks);
    if (!comm) {
        if (lfd >= 0)
            close(lfd);
        return LOOM_ERROR_NO_MEMORY;
    }
    comm->table_hash = hash;
    loom_result_t res = LOOM_SUCCESS;
    for (int r = 0; r < nranks && res == LOOM_SUCCESS; r++)
        if (set_desc(comm, r, r == 0 ? "rank %d (rendezvous address %s:%d)" : "rank %d", r,
                     host, port) < 0)
            res = LOOM_ERROR_NO_MEMORY;
    if (res == LOOM_SUCCESS) {
        char err[512] = "";
        res = loom_net_local_addr(host, port, loom_config()->socket_ifname,
                                  comm->local_addr, sizeof comm->local_addr, err,
                                  sizeof err);
        if (res < 0)
            loom_set_thread_error("%s: %s", what, err);
    }
    if (res == LOOM_SUCCESS)
        res = comm_setup(comm, opts);
    if (res == LOOM_SUCCESS) {
        res = comm_connect(comm, host, port, 0, lfd);
        lfd = -1;
    }
    if (lfd >= 0)
        close(lfd);
    if (res < 0) {
        comm_free(comm);
        return res;
    }
    *out = comm;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_init_url(const char *url, int nranks, int rank,
                                          loom_comm_t *out)
{
    if (!url || !out) {
        loom_set_thread_error("loom_comm_init_url: url and comm must not be NULL");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    *out = NULL;
    char host[256];
    int port = 0;
    if (strcmp(url, "env://") == 0) {
        const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
        if (!a || !*a || parse_int(p, &port) < 0) {
            loom_set_thread_error("env://: MASTER_ADDR and MASTER_PORT must be set "
                                  "(MASTER_ADDR=%s, MASTER_PORT=%s)",
                                  a ? a : "(unset)", p ? p : "(unset)");
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
        snprintf(host, sizeof host, "%s", a);
    } else if (strncmp(url, "tcp://", 6) == 0) {
        const char *h = url + 6, *colon;
        size_t hl;
        if (*h == '[') {
            const char *close = strchr(h, ']');
            if (!close || close[1] != ':') {
                loom_set_thread_error("%s: expected tcp://[IPv6]:port", url);
                return LOOM_ERROR_INVALID_ARGUMENT;
            }
            h++;
            hl = (size_t)(close - h);
            colon = close + 1;
        } else {
            colon = strrchr(h, ':');
            if (!colon) {
                loom_set_thread_error("%s: expected tcp://host:port", url);
                return LOOM_ERROR_INVALID_ARGUMENT;
            }
            hl = (size_t)(colon - h);
        }
        if (hl == 0 || hl >= sizeof host || parse_int(colon + 1, &port) < 0) {
            loom_set_thread_error("%s: expected tcp://host:port", url);
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
        memcpy(host, h, hl);
        host[hl] = 0;
    } else {
        loom_set_thread_error("%s: the URL must be tcp://host:port or env://", url);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (port < 1 || port > 65535) {
        loom_set_thread_error("%s: port %d is not in 1..65535", url, port);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (nranks < 0 || rank < 0) {
        /* -1: what the launcher says (launch.h: RANK and WORLD_SIZE,
         * OMPI_COMM_WORLD_RANK and _SIZE, ...) */
        struct loom_launch l;
        char err[256];
        if (loom_launch_read(&l, err, sizeof err) < 0) {
            loom_set_thread_error("%s: %s", url, err);
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
        if (rank < 0 && l.rank < 0) {
            loom_set_thread_error("%s: rank -1 and no launcher gives one: set RANK "
                                  "and WORLD_SIZE (or %s)", url, loom_launch_rank_vars);
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
        if (nranks < 0 && l.nranks < 0) {
            loom_set_thread_error("%s: nranks -1 and %s gives rank %d but %s is not set",
                                  url, l.rank_var, l.rank, l.size_var);
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
        if (rank < 0)
            rank = l.rank;
        if (nranks < 0)
            nranks = l.nranks;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        loom_set_thread_error("%s: rank %d is not in 0..%d (nranks %d)", url, rank,
                              nranks - 1, nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    return comm_init_root(url, host, port, nranks, rank, 0, -1, NULL, out);
}

LOOM_API loom_result_t loom_get_unique_id(loom_unique_id_t *id)
{
    const char *m = getenv("MASTER_ADDR");
    return loom_get_unique_id_toward(m && *m ? m : NULL, id);
}

LOOM_API loom_result_t loom_get_unique_id_toward(const char *host, loom_unique_id_t *id)
{
    if (!id) {
        loom_set_thread_error("loom_get_unique_id: id must not be NULL");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    char err[512] = "";
    loom_result_t res = loom_boot_uid_create((uint8_t *)id->internal, host, err,
                                             sizeof err);
    if (res < 0)
        loom_set_thread_error("loom_get_unique_id: %s", err);
    return res;
}

LOOM_API loom_result_t loom_comm_init_rank(loom_comm_t *out, int nranks,
                                           const loom_unique_id_t *id, int rank)
{
    return loom_comm_init_rank_opts(out, nranks, id, rank, NULL);
}

LOOM_API loom_result_t loom_comm_init_rank_opts(loom_comm_t *out, int nranks,
                                                const loom_unique_id_t *id, int rank,
                                                const loom_comm_opts_t *opts)
{
    LOOM_CHECK(opts_check("loom_comm_init_rank", opts));
    if (opts && opts->nranks > 0 && opts->nranks != nranks) {
        loom_set_thread_error("loom_comm_init_rank: nranks %d but opts->nranks %d", nranks,
                              opts->nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (!out || !id) {
        loom_set_thread_error("loom_comm_init_rank: comm and id must not be NULL");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    *out = NULL;
    char host[64], err[512] = "", what[128];
    int port = 0;
    uint64_t nonce = 0;
    loom_result_t res = loom_boot_uid_parse((const uint8_t *)id->internal, host,
                                            sizeof host, &port, &nonce, err, sizeof err);
    if (res < 0) {
        loom_set_thread_error("loom_comm_init_rank: %s", err);
        return res;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        loom_set_thread_error("loom_comm_init_rank: rank %d is not in 0..%d (nranks %d)",
                              rank, nranks - 1, nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    snprintf(what, sizeof what, "unique id (rank 0's rendezvous address %s:%d)", host, port);
    /* the nonce stands in for a table hash: ranks of another id are refused */
    int lfd = rank == 0 ? loom_boot_uid_take_listener(port) : -1;
    return comm_init_root(what, host, port, nranks, rank, nonce, lfd, opts, out);
}

LOOM_API loom_result_t loom_comm_init_env(loom_comm_t *out)
{
    if (!out)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    const char *path = getenv("LOOM_RANK_TABLE");
    if (!path || !*path)
        path = getenv("RANK_TABLE_FILE");
    if (!path || !*path) {
        /* no table: a torchrun-style rendezvous when one is given */
        const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
        if (a && *a && p && *p)
            return loom_comm_init_url("env://", -1, -1, out);
        loom_set_thread_error("loom_comm_init_env: set LOOM_RANK_TABLE (or "
                              "RANK_TABLE_FILE) to the rank table's path, or "
                              "MASTER_ADDR and MASTER_PORT to rank 0's address "
                              "(env://, with RANK and WORLD_SIZE)");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct loom_launch l;
    char err[256];
    if (loom_launch_read(&l, err, sizeof err) < 0) {
        loom_set_thread_error("loom_comm_init_env: %s", err);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (l.rank < 0) {
        loom_set_thread_error("loom_comm_init_env: no rank given: set %s",
                              loom_launch_rank_vars);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    char from[160];
    snprintf(from, sizeof from, "%s=%d, from %s", l.size_var, l.nranks, l.launcher);
    return ranktable_init(path, l.rank, l.nranks, from, NULL, out);
}

LOOM_API loom_result_t loom_comm_abort(loom_comm_t comm)
{
    if (!comm)
        return LOOM_ERROR_INVALID_ARGUMENT;
    __atomic_store_n(&comm->aborted, 1, __ATOMIC_RELEASE);
    loom_comm_set_error_sub(comm, LOOM_SUB_INIT, LOOM_ERROR_ABORTED,
                            "rank %d: aborted by loom_comm_abort", comm->rank);
    if (comm->oob)
        loom_oob_abort(comm->oob);
    if (comm->tx && comm->tx->ops->wake)
        comm->tx->ops->wake(comm->tx);
    pthread_mutex_lock(&comm->lock);
    pthread_cond_broadcast(&comm->work_cv);
    pthread_mutex_unlock(&comm->lock);
    loom_trace_dump(comm, "abort");
    return LOOM_SUCCESS;
}

/* Stop the progress thread, then free (the hierarchical sub-communicator's
 * too). */
static void comm_stop_and_free(struct loom_comm *comm)
{
    loom_trace_unregister(comm);
    if (comm->thread_started) {
        pthread_mutex_lock(&comm->lock);
        __atomic_store_n(&comm->stop, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&comm->work_cv);
        pthread_mutex_unlock(&comm->lock);
        pthread_join(comm->thread, NULL);
    }
    comm_free(comm);
}

LOOM_API loom_result_t loom_comm_destroy(loom_comm_t comm)
{
    if (!comm)
        return LOOM_ERROR_INVALID_ARGUMENT;
    comm_stop_and_free(comm);
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_rank(loom_comm_t comm, int *rank)
{
    if (!comm || !rank)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *rank = comm->rank;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_size(loom_comm_t comm, int *size)
{
    if (!comm || !size)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *size = comm->nranks;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_local_rank(loom_comm_t comm, int *local_rank)
{
    if (!comm || !local_rank)
        return LOOM_ERROR_INVALID_ARGUMENT;
    int size;
    loom_comm_local_place(comm, local_rank, &size);
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_local_size(loom_comm_t comm, int *local_size)
{
    if (!comm || !local_size)
        return LOOM_ERROR_INVALID_ARGUMENT;
    int index;
    loom_comm_local_place(comm, &index, local_size);
    return LOOM_SUCCESS;
}

LOOM_API const char *loom_get_error_string(loom_comm_t comm)
{
    /* a copy per thread: the communicator's message may be written by its
     * progress thread meanwhile */
    static __thread char copy[sizeof comm->errmsg];
    if (!comm)
        return loom_thread_error();
    pthread_mutex_lock(&comm->lock);
    memcpy(copy, comm->errmsg, sizeof copy);
    pthread_mutex_unlock(&comm->lock);
    return copy;
}

/* ---- split ------------------------------------------------------------- */

struct split_entry {
    int32_t color, key, rank;
};

static int split_cmp(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

LOOM_API loom_result_t loom_comm_split(loom_comm_t parent, int color, int key,
                                       loom_comm_t *newcomm)
{
    if (!parent || !newcomm)
        return LOOM_ERROR_INVALID_ARGUMENT;
    return comm_split(parent, color, key, 0, newcomm);
}

static loom_result_t comm_split(struct loom_comm *parent, int color, int key, int no_shm,
                                struct loom_comm **newcomm)
{
    *newcomm = NULL;
    if (color < 0)
        color = LOOM_SPLIT_NOCOLOR;
    int n = parent->nranks;
    loom_result_t res;
    int32_t mine[2] = {color, key};
    int32_t *all = calloc((size_t)n, sizeof mine);
    struct split_entry *members = calloc((size_t)n, sizeof *members);
    int *member_ranks = calloc((size_t)n, sizeof *member_ranks);
    if (!all || !members || !member_ranks) {
        res = LOOM_ERROR_NO_MEMORY;
        goto out;
    }
    /* the one collective a split costs: everyone's color and key */
    res = loom_comm_internal(parent, LOOM_OP_ALLGATHER, mine, all, 2, LOOM_INT32,
                             LOOM_SUM);
    if (res < 0)
        goto out;
    int nm = 0;
    for (int r = 0; r < n; r++)
        if (all[2 * r] == color && color != LOOM_SPLIT_NOCOLOR)
            members[nm++] = (struct split_entry){all[2 * r], all[2 * r + 1], r};
    qsort(members, (size_t)nm, sizeof *members, split_cmp);
    int newrank = -1;
    for (int i = 0; i < nm; i++) {
        member_ranks[i] = members[i].rank;
        if (members[i].rank == parent->rank)
            newrank = i;
    }
    parent->split_count++;
    if (newrank < 0)
        goto out; /* LOOM_SPLIT_NOCOLOR */
    uint64_t h = parent->comm_id;
    h = loom_fnv1a(h ? h : LOOM_FNV_INIT, &parent->split_count,
                   sizeof parent->split_count);
    h = loom_fnv1a(h, &color, sizeof color);
    res = loom_comm_sub(parent, member_ranks, nm, newrank, h, no_shm, 0, newcomm);
out:
    free(all);
    free(members);
    free(member_ranks);
    return res;
}

loom_result_t loom_comm_sub(struct loom_comm *parent, const int *member_ranks, int nm,
                            int newrank, uint64_t comm_id, int no_shm, int keep_servers,
                            struct loom_comm **newcomm)
{
    *newcomm = NULL;
    loom_result_t res = LOOM_SUCCESS;
    struct loom_comm *comm = comm_alloc(newrank, nm);
    if (!comm)
        return LOOM_ERROR_NO_MEMORY;
    for (int i = 0; i < nm && res == LOOM_SUCCESS; i++)
        if (set_desc(comm, i, "rank %d (%s in the parent)", i,
                     loom_comm_describe(parent, member_ranks[i])) < 0)
            res = LOOM_ERROR_NO_MEMORY;
    /* keep the parent's ring order among the members */
    int k = 0;
    for (int p = 0; p < parent->nranks; p++)
        for (int i = 0; i < nm; i++)
            if (member_ranks[i] == parent->ring[p])
                comm->ring[k++] = i;
    memcpy(comm->local_addr, parent->local_addr, sizeof comm->local_addr);
    /* the parent's device: its table's device_id, else its local rank */
    comm->device_id = parent->device_id;
    if (comm->device_id < 0) {
        int psize;
        loom_comm_local_place(parent, &comm->device_id, &psize);
    }
    if (keep_servers && parent->server_of && res == LOOM_SUCCESS) {
        comm->server_of = calloc((size_t)nm, sizeof *comm->server_of);
        if (!comm->server_of)
            res = LOOM_ERROR_NO_MEMORY;
        for (int i = 0; comm->server_of && i < nm; i++)
            comm->server_of[i] = parent->server_of[member_ranks[i]];
    }
    comm->comm_id = comm_id;
    comm->no_shm = no_shm;
    if (res == LOOM_SUCCESS)
        res = comm_setup(comm, NULL);
    if (res == LOOM_SUCCESS) { /* a child keeps the parent's timeouts */
        comm->timeout = parent->timeout;
        comm->bootstrap_timeout = parent->bootstrap_timeout;
    }
    /* its own namespace of the job's out-of-band service: it meets its
     * members' transports there, on first use */
    if (res == LOOM_SUCCESS)
        res = loom_oob_view(parent->oob, member_ranks, nm, newrank, comm->comm_id,
                            &comm->oob);
    if (res == LOOM_SUCCESS && nm > 1) {
        struct loom_tx_params tp = tx_params(comm);
        res = loom_tx_open(parent->tx ? parent->tx->ops : &loom_tcp_transport, &tp,
                           &comm->tx);
        if (res < 0)
            loom_comm_set_error_sub(parent, LOOM_SUB_INIT, res, "a new communicator's "
                                    "transport: %s", loom_thread_error());
    }
    if (res == LOOM_SUCCESS)
        res = comm_finish(comm);
    if (res == LOOM_SUCCESS)
        *newcomm = comm;
    else
        comm_free(comm);
    return res;
}
