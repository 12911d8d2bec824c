/* endpoint.c - which of a rank's addresses it uses (LOOM_ADDRESS).
 *
 * A rank table can give a rank two addresses: its device's (device_ip, on
 * Ascend the NPU's own RoCE port, which the host cannot bind) and its
 * host's (host_ip, else an IP server_id). Whether the device address is
 * usable is a fact of the host the rank runs on, so only that rank can
 * decide it (loom_rt_endpoint_local); the rendezvous address that every
 * rank must agree on is chosen from the table alone
 * (loom_rt_endpoint_agreed). */
#include "build_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "config.h"
#include "log.h"
#include "util.h"
#include "ranktable/ranktable_internal.h"

int loom_rt_addr_mode_parse(const char *s)
{
    if (!s || !*s || strcmp(s, "auto") == 0)
        return LOOM_RT_ADDR_AUTO;
    if (strcmp(s, "device") == 0)
        return LOOM_RT_ADDR_DEVICE;
    if (strcmp(s, "host") == 0)
        return LOOM_RT_ADDR_HOST;
    return -1;
}

const char *loom_rt_addr_mode_name(enum loom_rt_addr_mode mode)
{
    switch (mode) {
    case LOOM_RT_ADDR_DEVICE: return "device";
    case LOOM_RT_ADDR_HOST: return "host";
    default: return "auto";
    }
}

/* Does the kernel let sockets bind addresses that are not the host's
 * (net.ipv4.ip_nonlocal_bind, net.ipv6.ip_nonlocal_bind)? */
static int nonlocal_bind(int family)
{
    const char *path = family == AF_INET
                           ? "/proc/sys/net/ipv4/ip_nonlocal_bind"
                           : "/proc/sys/net/ipv6/ip_nonlocal_bind";
    char c = '0';
    FILE *f = fopen(path, "r");
    if (f) {
        if (fread(&c, 1, 1, f) != 1)
            c = '0';
        fclose(f);
    }
    return c != '0';
}

/* Is sa an address of an interface of this host (or loopback)? */
static int addr_on_interface(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET &&
        (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127)
        return 1;
    if (sa->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
        return 1;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return 0;
    int found = 0;
    for (const struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family)
            continue;
        if (sa->sa_family == AF_INET)
            found = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
                    ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
        else
            found = memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                           &((const struct sockaddr_in6 *)sa)->sin6_addr,
                           sizeof(struct in6_addr)) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

int loom_rt_addr_usable(const char *addr)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    struct sockaddr *sa = (struct sockaddr *)&v4;
    socklen_t sl = sizeof v4;
    if (!addr)
        return EINVAL;
    if (inet_pton(AF_INET, addr, &v4.sin_addr) != 1) {
        if (inet_pton(AF_INET6, addr, &v6.sin6_addr) != 1)
            return EINVAL;
        sa = (struct sockaddr *)&v6, sl = sizeof v6;
    }
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int rc = bind(fd, sa, sl) == 0 ? 0 : errno;
    close(fd);
    /* Bound only because non-local binding is allowed: peers would never
     * reach it, which is what EADDRNOTAVAIL says without that sysctl. */
    if (rc == 0 && nonlocal_bind(sa->sa_family) && !addr_on_interface(sa))
        rc = EADDRNOTAVAIL;
    return rc;
}

const char *loom_rt_host_field(const struct loom_ranktable *t, int rank)
{
    const struct loom_rt_server *srv = &t->servers[t->server_of_rank[rank]];
    if (t->shape == LOOM_RT_SHAPE_RANK_LIST)
        return "rank_addr_list";
    return srv->host_ip ? "host_ip" : "server_id";
}

static void set_ep(struct loom_rt_endpoint *ep, const char *addr, int port,
                   const char *field)
{
    snprintf(ep->address, sizeof ep->address, "%s", addr);
    ep->port = port;
    ep->field = field;
}

static int use_device(const struct loom_ranktable *t, int rank,
                      struct loom_rt_endpoint *ep)
{
    const struct loom_rt_device *dev = t->by_rank[rank];
    if (!dev->device_address)
        return 0;
    set_ep(ep, dev->device_address, loom_rt_device_port(dev, 0), "device_ip");
    return 1;
}

static int use_host(const struct loom_ranktable *t, int rank,
                    struct loom_rt_endpoint *ep)
{
    const struct loom_rt_device *dev = t->by_rank[rank];
    if (!dev->host_address)
        return 0;
    set_ep(ep, dev->host_address, loom_rt_device_port(dev, 1),
           loom_rt_host_field(t, rank));
    return 1;
}

static const char *server_name(const struct loom_ranktable *t, int rank)
{
    return t->servers[t->server_of_rank[rank]].server_id;
}

loom_result_t loom_rt_endpoint_agreed(const struct loom_ranktable *t, int rank,
                                      enum loom_rt_addr_mode mode,
                                      struct loom_rt_endpoint *ep, char *err,
                                      size_t errlen)
{
    if (!t || rank < 0 || rank >= t->nranks || !ep)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (mode == LOOM_RT_ADDR_DEVICE && !use_device(t, rank, ep)) {
        snprintf(err, errlen, "LOOM_ADDRESS=device, but rank %d (server %s) "
                              "has no device_ip in the table: use "
                              "LOOM_ADDRESS=auto or host",
                 rank, server_name(t, rank));
        return LOOM_ERROR_CONFIG;
    }
    if (mode == LOOM_RT_ADDR_HOST && !use_host(t, rank, ep)) {
        snprintf(err, errlen, "LOOM_ADDRESS=host, but rank %d's server %s has "
                              "no host_ip and its server_id is not an IP "
                              "address: give it a host_ip, or use "
                              "LOOM_ADDRESS=auto or device",
                 rank, server_name(t, rank));
        return LOOM_ERROR_CONFIG;
    }
    if (mode == LOOM_RT_ADDR_AUTO && !use_host(t, rank, ep) &&
        !use_device(t, rank, ep)) {
        snprintf(err, errlen, "rank %d (server %s) has no address in the "
                              "table", rank, server_name(t, rank));
        return LOOM_ERROR_INVALID_RANKTABLE;
    }
    return LOOM_SUCCESS;
}

/* "device_ip 192.168.1.1: Cannot assign requested address" */
static void describe_unusable(const struct loom_rt_endpoint *ep, int e,
                              char *out, size_t len)
{
    snprintf(out, len, "%s %s: %s", ep->field, ep->address, strerror(e));
}

loom_result_t loom_rt_endpoint_local(const struct loom_ranktable *t, int rank,
                                     enum loom_rt_addr_mode mode,
                                     struct loom_rt_endpoint *ep, char *err,
                                     size_t errlen)
{
    loom_result_t res = loom_rt_endpoint_agreed(t, rank, mode, ep, err, errlen);
    if (res < 0)
        return res;
    const char *server = server_name(t, rank);
    char why[256];
    struct loom_rt_endpoint dev, host;
    int have_dev = use_device(t, rank, &dev), have_host = use_host(t, rank, &host);
    if (mode == LOOM_RT_ADDR_DEVICE || mode == LOOM_RT_ADDR_HOST) {
        int e = loom_rt_addr_usable(ep->address);
        if (e == 0)
            return LOOM_SUCCESS;
        describe_unusable(ep, e, why, sizeof why);
        if (mode == LOOM_RT_ADDR_DEVICE)
            snprintf(err, errlen, "rank %d: LOOM_ADDRESS=device, but this host "
                                  "cannot use %s. On Ascend servers device_ip "
                                  "is the NPU's own port, which the host "
                                  "cannot bind: run rank %d on server %s with "
                                  "its NPU, or set LOOM_ADDRESS=auto or host "
                                  "to use the host's address%s%s",
                     rank, why, rank, server, have_host ? " " : "",
                     have_host ? host.address : " (the table gives none)");
        else
            snprintf(err, errlen, "rank %d: LOOM_ADDRESS=host, but this host "
                                  "cannot use %s: run rank %d on server %s, "
                                  "or fix its %s in the table",
                     rank, why, rank, server, ep->field);
        return LOOM_ERROR_SYSTEM;
    }
    /* auto: the device address when this host owns it, else the host's. */
    int edev = have_dev ? loom_rt_addr_usable(dev.address) : 0;
    if (have_dev && edev == 0) {
        *ep = dev;
        LOOM_INFO(LOOM_SUB_RT, "rank %d: LOOM_ADDRESS=auto: using device_ip "
                               "%s (this host owns it)", rank, dev.address);
        return LOOM_SUCCESS;
    }
    int ehost = have_host ? loom_rt_addr_usable(host.address) : 0;
    if (have_host && ehost == 0) {
        *ep = host;
        if (have_dev) {
            describe_unusable(&dev, edev, why, sizeof why);
            LOOM_INFO(LOOM_SUB_RT, "rank %d: LOOM_ADDRESS=auto: using %s %s, "
                                   "as this host cannot use %s",
                      rank, host.field, host.address, why);
        } else {
            LOOM_INFO(LOOM_SUB_RT, "rank %d: LOOM_ADDRESS=auto: using %s %s "
                                   "(the table gives no device_ip)",
                      rank, host.field, host.address);
        }
        return LOOM_SUCCESS;
    }
    char dwhy[256] = "", hwhy[256] = "";
    if (have_dev)
        describe_unusable(&dev, edev, dwhy, sizeof dwhy);
    if (have_host)
        describe_unusable(&host, ehost, hwhy, sizeof hwhy);
    snprintf(err, errlen, "rank %d: this host can use none of the rank's "
                          "addresses (%s%s%s): run rank %d on server %s, or "
                          "fix the table",
             rank, dwhy, have_dev && have_host ? "; " : "", hwhy, rank, server);
    return LOOM_ERROR_SYSTEM;
}

/* "server_list[0].device[1].device_port": the field rank's endpoint ep
 * takes its port from (device_id when LOOM_PORT_BASE derives it). */
static void port_path(const struct loom_ranktable *t, int rank,
                      const struct loom_rt_endpoint *ep, char *out)
{
    const struct loom_rt_device *dev = t->by_rank[rank];
    size_t s = (size_t)t->server_of_rank[rank];
    loom_rt_device_path(t, s, (size_t)(dev - t->servers[s].devices), out);
    int host = strcmp(ep->field, "device_ip") != 0;
    const char *field = host && dev->host_port > 0 ? ".host_port"
                        : dev->device_port > 0     ? ".device_port"
                                                   : ".device_id";
    strncat(out, field, LOOM_RT_MAX_PATH - strlen(out) - 1);
}

int loom_rt_endpoint_clash(const struct loom_ranktable *t, int rank,
                           enum loom_rt_addr_mode mode,
                           const struct loom_rt_endpoint *ep, char *msg, size_t len)
{
    for (int r = 0; r < t->nranks; r++) {
        if (r == rank || t->server_of_rank[r] != t->server_of_rank[rank])
            continue;
        struct loom_rt_endpoint o;
        char e[256];
        if (loom_rt_endpoint_local(t, r, mode, &o, e, sizeof e) != LOOM_SUCCESS ||
            o.port != ep->port || strcmp(o.address, ep->address) != 0)
            continue;
        char mine[LOOM_RT_MAX_PATH], theirs[LOOM_RT_MAX_PATH];
        port_path(t, rank, ep, mine);
        port_path(t, r, &o, theirs);
        snprintf(msg, len, "ranks %d and %d would both listen on %s:%d (%s %s, "
                           "ports from %s and %s): give each device its own port "
                           "(1.2: host_port)",
                 rank, r, ep->address, ep->port, ep->field, ep->address, mine, theirs);
        return r;
    }
    return -1;
}

loom_result_t loom_rt_comm_endpoints(const struct loom_ranktable *t, int rank,
                                     char *local, size_t locallen,
                                     int *local_port, char *root,
                                     size_t rootlen, int *root_port)
{
    if (!t || rank < 0 || rank >= t->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (t->nranks == 1) {
        /* Nobody to reach this rank: it listens where this host can (the
         * table's address, else any), on a port of the kernel's choosing,
         * so that a one-rank job runs on any host, even with no network
         * (the seeds' rank_table_1p_0.json names an NPU's address). */
        const char *addr = t->by_rank[rank]->address;
        if (loom_rt_addr_usable(addr) != 0)
            addr = "0.0.0.0";
        snprintf(local, locallen, "%s", addr);
        snprintf(root, rootlen, "%s", addr);
        *local_port = *root_port = 0;
        return LOOM_SUCCESS;
    }
    const char *name = loom_config()->address;
    int mode = loom_rt_addr_mode_parse(name);
    if (mode < 0) {
        loom_set_thread_error("LOOM_ADDRESS=%s: expected auto, device or host",
                              name);
        return LOOM_ERROR_CONFIG;
    }
    char err[768];
    struct loom_rt_endpoint me, r0;
    loom_result_t res = loom_rt_endpoint_agreed(t, 0, mode, &r0, err, sizeof err);
    if (res == LOOM_SUCCESS)
        res = loom_rt_endpoint_local(t, rank, mode, &me, err, sizeof err);
    if (res == LOOM_SUCCESS && loom_rt_endpoint_clash(t, rank, mode, &me, err,
                                                      sizeof err) >= 0)
        res = LOOM_ERROR_INVALID_RANKTABLE;
    if (res < 0) {
        loom_set_thread_error("rank table %s: %s", t->name, err);
        return res;
    }
    snprintf(local, locallen, "%s", me.address);
    snprintf(root, rootlen, "%s", r0.address);
    *local_port = me.port;
    *root_port = r0.port;
    LOOM_INFO(LOOM_SUB_RT, "rank %d: listening on %s (%s) port %d, rendezvous "
                           "at rank 0's %s %s:%d (LOOM_ADDRESS=%s)",
              rank, me.address, me.field, me.port, r0.field, r0.address,
              r0.port, loom_rt_addr_mode_name(mode));
    return LOOM_SUCCESS;
}
