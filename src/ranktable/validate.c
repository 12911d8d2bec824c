/* validate.c - HCCL's rules over a parsed rank table. Every violation is
 * reported (path + reason); nothing stops at the first. The rank rules
 * (0..N-1, in 1.x tables contiguous per server) and the rank index are
 * ranks.c's; what only 2.0 tables need, v2.c's. */
#include "build_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable/set.h"

int loom_rt_is_ip(const char *s)
{
    unsigned char buf[16];
    if (!s)
        return 0;
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

int loom_rt_decimal(const char *s, int *out)
{
    size_t n = 0;
    int v = 0;
    if (!s || !s[0])
        return 0;
    for (; s[n]; n++) {
        if (s[n] < '0' || s[n] > '9' || n >= 9)
            return 0;
        v = v * 10 + (s[n] - '0');
    }
    *out = v;
    return 1;
}

void loom_rt_server_path(const struct loom_ranktable *t, size_t s, char *out)
{
    if (t->servers[s].src_path)
        loom_rt_path(out, "%s", t->servers[s].src_path);
    else
        loom_rt_path(out, "server_list[%zu]", s);
}

void loom_rt_device_path(const struct loom_ranktable *t, size_t s, size_t i,
                         char *out)
{
    const struct loom_rt_device *dev = &t->servers[s].devices[i];
    if (dev->src_path)
        loom_rt_path(out, "%s", dev->src_path);
    else
        loom_rt_path(out, "server_list[%zu].device[%zu]", s, i);
}

/* A port "1".."65535", or -1 after reporting. */
static int check_port(struct loom_diag *d, const char *path, const char *s)
{
    int v;
    if (!loom_rt_decimal(s, &v) || v < 1 || v > 65535) {
        loom_rt_error(d, path, "\"%s\" is not a port number (1..65535)", s);
        return -1;
    }
    return v;
}

static int check_decimal(struct loom_diag *d, const char *path, const char *s)
{
    int v;
    if (!loom_rt_decimal(s, &v)) {
        loom_rt_error(d, path, "\"%s\" is not a decimal number", s);
        return -1;
    }
    return v;
}

static void check_ip(struct loom_diag *d, const char *path, const char *s)
{
    if (!loom_rt_is_ip(s))
        loom_rt_error(d, path, "\"%s\" is not an IPv4 or IPv6 address", s);
}

/* Split device_ip at commas into dev->ips; -1 when out of memory. */
static int split_ips(struct loom_rt_device *dev)
{
    size_t n = 1;
    for (const char *p = dev->device_ip; *p; p++)
        n += *p == ',';
    dev->ips = calloc(n, sizeof *dev->ips);
    if (!dev->ips)
        return -1;
    const char *p = dev->device_ip;
    for (size_t i = 0; i < n; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        dev->ips[i] = strndup(p, len);
        if (!dev->ips[i])
            return -1;
        dev->nips++;
        p += len + 1;
    }
    return 0;
}

struct rt_check {
    struct loom_ranktable *t;
    struct loom_diag *d;
    size_t ndevices;      /* in the whole table */
    size_t ndev_ip;       /* devices with a (non-empty) device_ip */
    size_t nsrv_host;     /* servers with a host_ip */
    int nomem;
    /* The first device with a device_ip, whose list length the rest follow. */
    int have_ref;
    size_t ref_server, ref_device, ref_nips;
};

static void check_top(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    if (t->shape == LOOM_RT_SHAPE_SERVER_LIST && t->version &&
        strcmp(t->version, "1.0") != 0 && strcmp(t->version, "1.2") != 0)
        loom_rt_error(c->d, "version",
                      "unsupported version \"%s\" (expected \"1.0\" or \"1.2\")",
                      t->version);
    if (t->status && strcmp(t->status, "completed") != 0)
        loom_rt_error(c->d, "status", "must be \"completed\", found \"%s\"",
                      t->status);
    if (t->server_count_str) {
        t->server_count = check_decimal(c->d, "server_count",
                                        t->server_count_str);
        if (t->server_count >= 0 && t->have_server_list &&
            (size_t)t->server_count != t->nservers)
            loom_rt_error(c->d, "server_count",
                          "says %d but server_list has %zu server%s",
                          t->server_count, t->nservers,
                          t->nservers == 1 ? "" : "s");
    }
}

static void check_device_ip(struct rt_check *c, struct loom_rt_set *ips,
                            size_t s, size_t i)
{
    struct loom_rt_device *dev = &c->t->servers[s].devices[i];
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    loom_rt_device_path(c->t, s, i, path);
    strncat(path, ".device_ip", sizeof path - strlen(path) - 1);
    if (!dev->device_ip[0]) {
        /* HCCL's own single-server tables write "": the device has none. */
        loom_rt_warning(c->d, path, "is empty: treated as absent");
        return;
    }
    c->ndev_ip++;
    if (split_ips(dev) < 0) {
        c->nomem = 1;
        return;
    }
    for (size_t k = 0; k < dev->nips; k++) {
        const char *ip = dev->ips[k];
        if (!loom_rt_is_ip(ip)) {
            if (dev->nips == 1)
                loom_rt_error(c->d, path,
                              "\"%s\" is not an IPv4 or IPv6 address", ip);
            else
                loom_rt_error(c->d, path, "item %zu, \"%s\", is not an IPv4 "
                                          "or IPv6 address", k + 1, ip);
            continue;
        }
        const struct loom_rt_slot *prev = loom_rt_set_put(ips, ip, s, i);
        if (prev) {
            loom_rt_device_path(c->t, prev->a, prev->b, other);
            loom_rt_error(c->d, path, "\"%s\" is used twice (also %s.device_ip)",
                          ip, other);
        }
    }
    if (!c->have_ref) {
        c->have_ref = 1;
        c->ref_server = s, c->ref_device = i, c->ref_nips = dev->nips;
    } else if (dev->nips != c->ref_nips) {
        loom_rt_device_path(c->t, c->ref_server, c->ref_device, other);
        loom_rt_error(c->d, path,
                      "lists %zu address%s but %s.device_ip lists %zu; every "
                      "device must list as many",
                      dev->nips, dev->nips == 1 ? "" : "es", other,
                      c->ref_nips);
    }
}

static void check_device(struct rt_check *c, struct loom_rt_set *ips,
                         struct loom_rt_set *ids, char (*canon)[16], size_t s,
                         size_t i)
{
    struct loom_rt_device *dev = &c->t->servers[s].devices[i];
    char path[LOOM_RT_MAX_PATH], base[LOOM_RT_MAX_PATH];
    char other[LOOM_RT_MAX_PATH];
    loom_rt_device_path(c->t, s, i, base);

    if (dev->device_id_str) {
        loom_rt_path(path, "%s.device_id", base);
        dev->device_id = check_decimal(c->d, path, dev->device_id_str);
        /* 2.0: a device_id may repeat in a net_layer 0 instance that spans
         * hosts (v2.c checks local_id instead) */
        if (dev->device_id >= 0 && c->t->shape != LOOM_RT_SHAPE_RANK_LIST) {
            snprintf(canon[i], sizeof canon[i], "%d", dev->device_id);
            const struct loom_rt_slot *prev =
                loom_rt_set_put(ids, canon[i], s, i);
            if (prev) {
                loom_rt_device_path(c->t, prev->a, prev->b, other);
                loom_rt_error(c->d, path, "\"%s\" is used twice on this "
                                          "server (also %s)",
                              dev->device_id_str, other);
            }
        }
    }
    if (dev->rank_id_str) {
        if (dev->rank_path)
            loom_rt_path(path, "%s", dev->rank_path);
        else
            loom_rt_path(path, "%s.rank_id", base);
        dev->rank = check_decimal(c->d, path, dev->rank_id_str);
    }
    if (dev->device_ip)
        check_device_ip(c, ips, s, i);
    if (dev->device_port_str) {
        loom_rt_path(path, "%s.device_port", base);
        dev->device_port = check_port(c->d, path, dev->device_port_str);
    }
    if (dev->host_port_str) {
        loom_rt_path(path, "%s.host_port", base);
        dev->host_port = check_port(c->d, path, dev->host_port_str);
    }
    if (dev->backup_device_ip) {
        loom_rt_path(path, "%s.backup_device_ip", base);
        check_ip(c->d, path, dev->backup_device_ip);
    }
    if (dev->backup_device_port_str) {
        loom_rt_path(path, "%s.backup_device_port", base);
        dev->backup_device_port =
            check_port(c->d, path, dev->backup_device_port_str);
    }
    if (dev->super_device_id) {
        loom_rt_path(path, "%s.super_device_id", base);
        check_decimal(c->d, path, dev->super_device_id);
    }
}

/* server_id: not empty, unique; spaces around it are flagged because HCCL
 * compares ids byte for byte (and " 10.0.0.1" is no address). */
static void check_server_id(struct rt_check *c, struct loom_rt_set *names,
                            size_t s)
{
    struct loom_rt_server *srv = &c->t->servers[s];
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    loom_rt_server_path(c->t, s, path);
    strncat(path, ".server_id", sizeof path - strlen(path) - 1);
    const struct loom_rt_slot *prev = loom_rt_set_put(names, srv->server_id, s, 0);
    size_t len = strlen(srv->server_id);
    if (len == 0) {
        loom_rt_error(c->d, path, "is empty");
        return;
    }
    if (prev) {
        loom_rt_server_path(c->t, prev->a, other);
        loom_rt_error(c->d, path, "\"%s\" is used twice (also %s.server_id)",
                      srv->server_id, other);
    }
    if (isspace((unsigned char)srv->server_id[0]) ||
        isspace((unsigned char)srv->server_id[len - 1]))
        loom_rt_warning(c->d, path, "\"%s\" has leading or trailing spaces: "
                                    "server ids are compared byte for byte, "
                                    "and with spaces it is not an address",
                        srv->server_id);
}

static void check_servers(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    struct loom_rt_set names = {0}, ips = {0};
    size_t nips = 0;
    char path[LOOM_RT_MAX_PATH];

    for (size_t s = 0; s < t->nservers; s++) {
        c->ndevices += t->servers[s].ndevices;
        for (size_t i = 0; i < t->servers[s].ndevices; i++) {
            const char *ip = t->servers[s].devices[i].device_ip;
            for (nips++; ip && *ip; ip++)
                nips += *ip == ',';
        }
    }
    if (loom_rt_set_init(&names, t->nservers) < 0 ||
        loom_rt_set_init(&ips, nips) < 0) {
        c->nomem = 1;
        goto out;
    }
    for (size_t s = 0; s < t->nservers; s++) {
        struct loom_rt_server *srv = &t->servers[s];
        if (srv->server_id && t->shape != LOOM_RT_SHAPE_RANK_LIST)
            check_server_id(c, &names, s);
        if (srv->host_ip) {
            c->nsrv_host++;
            loom_rt_server_path(t, s, path);
            strncat(path, ".host_ip", sizeof path - strlen(path) - 1);
            check_ip(c->d, path, srv->host_ip);
        }
        if (srv->host_port_str) {
            loom_rt_server_path(t, s, path);
            strncat(path, ".host_port", sizeof path - strlen(path) - 1);
            srv->host_port = check_port(c->d, path, srv->host_port_str);
        }
        struct loom_rt_set ids = {0};
        char (*canon)[16] = calloc(srv->ndevices + 1, sizeof *canon);
        if (!canon || loom_rt_set_init(&ids, srv->ndevices) < 0) {
            free(canon);
            c->nomem = 1;
            goto out;
        }
        for (size_t i = 0; i < srv->ndevices && !c->nomem; i++)
            check_device(c, &ips, &ids, canon, s, i);
        loom_rt_set_free(&ids);
        free(canon);
    }
out:
    loom_rt_set_free(&names);
    loom_rt_set_free(&ips);
}

/* With more than one server a device needs its own device_ip, unless the
 * table is a host-NIC table: no device_ip anywhere and a host_ip on every
 * server (HCCL then runs on the hosts' NICs; the ranks of a server share
 * its host_ip and differ by port). */
static void check_nic_form(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    char path[LOOM_RT_MAX_PATH];
    t->host_nic = t->nservers > 0 && c->ndev_ip == 0 &&
                  c->nsrv_host == t->nservers;
    if (t->nservers < 2 || t->host_nic)
        return;
    if (c->ndev_ip == 0 && c->nsrv_host > 0) {
        for (size_t s = 0; s < t->nservers; s++) {
            if (t->servers[s].host_ip)
                continue;
            loom_rt_server_path(t, s, path);
            strncat(path, ".host_ip", sizeof path - strlen(path) - 1);
            loom_rt_error(c->d, path, "required field is missing: no device "
                                      "has a device_ip, so every server needs "
                                      "a host_ip, the address its ranks share");
        }
        return;
    }
    for (size_t s = 0; s < t->nservers; s++) {
        for (size_t i = 0; i < t->servers[s].ndevices; i++) {
            const struct loom_rt_device *dev = &t->servers[s].devices[i];
            /* a group_list device without its device_ip was named when
             * the device was read (legacy.c) */
            if (dev->nips > 0 || !dev->device_id_str ||
                t->shape == LOOM_RT_SHAPE_GROUP_LIST)
                continue;
            loom_rt_device_path(t, s, i, path);
            strncat(path, ".device_ip", sizeof path - strlen(path) - 1);
            loom_rt_error(c->d, path,
                          "required field is missing: the table has %zu "
                          "servers, so every device needs a device_ip (or, "
                          "to run on the hosts' NICs, give every server a "
                          "host_ip and no device a device_ip)",
                          t->nservers);
        }
    }
}

/* The port a rank listens on when it uses its host address; -1: derived
 * from LOOM_PORT_BASE at run time. */
static int explicit_host_port(const struct loom_rt_device *dev)
{
    return dev->host_port > 0 ? dev->host_port : dev->device_port;
}

/* Ports that ranks sharing an address would both listen on: host_port is
 * unique per server always, and so is the explicit port of a host-NIC
 * table's ranks; host_ip is unique per server in a host-NIC table. */
static void check_shared_address(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    for (size_t s = 0; s < t->nservers; s++) {
        const struct loom_rt_server *srv = &t->servers[s];
        if (t->host_nic && srv->host_ip) {
            for (size_t q = 0; q < s; q++) {
                if (!t->servers[q].host_ip ||
                    strcmp(t->servers[q].host_ip, srv->host_ip) != 0)
                    continue;
                loom_rt_server_path(t, s, path);
                loom_rt_server_path(t, q, other);
                strncat(path, ".host_ip", sizeof path - strlen(path) - 1);
                loom_rt_error(c->d, path, "\"%s\" is used twice (also "
                                          "%s.host_ip): without device_ip a "
                                          "server's ranks use its host_ip, so "
                                          "servers need their own",
                              srv->host_ip, other);
                break;
            }
        }
        for (size_t i = 0; i < srv->ndevices; i++) {
            const struct loom_rt_device *dev = &srv->devices[i];
            int mine = t->host_nic ? explicit_host_port(dev) : dev->host_port;
            if (mine <= 0)
                continue;
            for (size_t j = 0; j < i; j++) {
                const struct loom_rt_device *o = &srv->devices[j];
                int theirs = t->host_nic ? explicit_host_port(o) : o->host_port;
                if (theirs != mine)
                    continue;
                loom_rt_device_path(t, s, i, path);
                loom_rt_device_path(t, s, j, other);
                const char *field = dev->host_port > 0 ? "host_port"
                                                       : "device_port";
                strncat(path, ".", sizeof path - strlen(path) - 1);
                strncat(path, field, sizeof path - strlen(path) - 1);
                loom_rt_error(c->d, path, "port %d is used twice on this "
                                          "server (also %s): ranks that share "
                                          "an address need their own ports",
                              mine, other);
                break;
            }
        }
    }
}

/* Each device's addresses: its device address (the first of device_ip)
 * and its host address (host_ip, else server_id when an IP); the table's
 * endpoint is the first of these. */
static void resolve_addresses(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    char path[LOOM_RT_MAX_PATH];
    for (size_t s = 0; s < t->nservers; s++) {
        struct loom_rt_server *srv = &t->servers[s];
        const char *host = srv->host_ip && loom_rt_is_ip(srv->host_ip)
                               ? srv->host_ip
                           : loom_rt_is_ip(srv->server_id) ? srv->server_id
                                                           : NULL;
        int loopback = 0;
        for (size_t i = 0; i < srv->ndevices; i++) {
            struct loom_rt_device *dev = &srv->devices[i];
            dev->device_address = dev->nips > 0 ? dev->ips[0] : NULL;
            dev->host_address = host;
            dev->address = dev->device_address ? dev->device_address : host;
            /* Several servers: check_nic_form has said what is missing. */
            if (dev->address || t->nservers > 1 || !srv->server_id ||
                (dev->device_ip && dev->device_ip[0]))
                continue;
            /* One server and no address (HCCL's own single-server examples
             * leave every device_ip ""): nobody from another host joins, so
             * its ranks meet on this host's loopback, as HCCL accepts it. */
            dev->host_address = dev->address = "127.0.0.1";
            if (loopback++)
                continue;
            loom_rt_server_path(t, s, path);
            loom_rt_warning(c->d, path, "no device gives an address and the "
                                        "server_id is not an IP address: the "
                                        "table's ranks all run on this host, "
                                        "over loopback and shared memory");
        }
    }
}

/* Ranks whose host address is shared and whose only port is one
 * device_port: fine while each uses its own device_ip, but a host that
 * cannot (on Ascend device_ip is the NPU's own port) puts both on one
 * address and port. Whether this host can is known only at run time
 * (loom_rt_endpoint_clash), so here it is a warning naming both. */
static void check_fallback_ports(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    if (t->host_nic)
        return; /* check_shared_address covers these */
    for (size_t s = 0; s < t->nservers; s++) {
        const struct loom_rt_server *srv = &t->servers[s];
        for (size_t i = 0; i < srv->ndevices; i++) {
            const struct loom_rt_device *dev = &srv->devices[i];
            if (dev->host_port > 0 || dev->device_port <= 0 || !dev->host_address ||
                !dev->device_address)
                continue;
            for (size_t j = 0; j < i; j++) {
                const struct loom_rt_device *o = &srv->devices[j];
                if (o->host_port > 0 || o->device_port != dev->device_port ||
                    !o->host_address || strcmp(o->host_address, dev->host_address))
                    continue;
                loom_rt_device_path(t, s, i, path);
                loom_rt_device_path(t, s, j, other);
                strncat(path, ".device_port", sizeof path - strlen(path) - 1);
                loom_rt_warning(c->d, path, "port %d is also %s.device_port: on a "
                                            "host that cannot use their device_ip "
                                            "both ranks would listen on %s:%d; "
                                            "give each device a host_port",
                                dev->device_port, other, dev->host_address,
                                dev->device_port);
                break;
            }
        }
    }
}

static void check_pods(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    struct loom_rt_set servers = {0}, pods = {0}, members = {0};
    char path[LOOM_RT_MAX_PATH];
    size_t nmembers = 0;

    if (!t->have_pods)
        return;
    for (size_t p = 0; p < t->npods; p++)
        nmembers += t->pods[p].nservers;
    /* servers also receives the unknown ids it is asked about. */
    if (loom_rt_set_init(&servers, t->nservers + nmembers) < 0 ||
        loom_rt_set_init(&pods, t->npods) < 0 ||
        loom_rt_set_init(&members, nmembers) < 0) {
        c->nomem = 1;
        goto out;
    }
    for (size_t s = 0; s < t->nservers; s++)
        if (t->servers[s].server_id)
            loom_rt_set_put(&servers, t->servers[s].server_id, s, 0);
    for (size_t p = 0; p < t->npods; p++) {
        struct loom_rt_pod *pod = &t->pods[p];
        if (pod->super_pod_id) {
            loom_rt_path(path, "super_pod_list[%zu].super_pod_id", p);
            const struct loom_rt_slot *prev =
                loom_rt_set_put(&pods, pod->super_pod_id, p, 0);
            if (prev)
                loom_rt_error(c->d, path, "\"%s\" is used twice (also "
                                          "super_pod_list[%zu])",
                              pod->super_pod_id, prev->a);
        }
        for (size_t i = 0; i < pod->nservers; i++) {
            const char *id = pod->server_ids[i];
            if (!id)
                continue;
            loom_rt_path(path,
                     "super_pod_list[%zu].server_list[%zu].server_id", p, i);
            const struct loom_rt_slot *prev =
                loom_rt_set_put(&members, id, p, i);
            if (prev)
                loom_rt_error(c->d, path, "\"%s\" is listed twice (also "
                                          "super_pod_list[%zu].server_list"
                                          "[%zu])",
                              id, prev->a, prev->b);
            else if (!loom_rt_set_put(&servers, id, 0, 0)) {
                /* The put inserted id: no such server. Keep the set honest
                 * for later lookups (id now counts as seen once). */
                loom_rt_error(c->d, path, "\"%s\" is not a server_id in "
                                          "server_list", id);
            }
        }
    }
out:
    loom_rt_set_free(&servers);
    loom_rt_set_free(&pods);
    loom_rt_set_free(&members);
}

loom_result_t loom_rt_validate(struct loom_ranktable *t, struct loom_diag *d)
{
    struct rt_check c = {.t = t, .d = d};
    check_top(&c);
    if (!c.nomem)
        check_servers(&c);
    if (!c.nomem && t->shape == LOOM_RT_SHAPE_RANK_LIST) {
        loom_rt_check_rank_list(t, d, &c.nomem);
        if (!c.nomem)
            loom_rt_check_ranks(t, d, c.ndevices, &c.nomem);
    } else if (!c.nomem) {
        check_nic_form(&c);
        check_shared_address(&c);
        resolve_addresses(&c);
        check_fallback_ports(&c);
        loom_rt_check_ranks(t, d, c.ndevices, &c.nomem);
    }
    if (!c.nomem)
        check_pods(&c);
    if (c.nomem) {
        d->out_of_memory = 1;
        return LOOM_ERROR_NO_MEMORY;
    }
    if (d->nerrors > 0)
        return LOOM_ERROR_INVALID_RANKTABLE;
    if (loom_rt_build_index(t) < 0) {
        d->out_of_memory = 1;
        return LOOM_ERROR_NO_MEMORY;
    }
    return LOOM_SUCCESS;
}
