/* validate.c - HCCL's rules over a parsed rank table. Every violation is
 * reported (path + reason); nothing stops at the first. When the table is
 * valid the rank index (by_rank, server_of_rank, local_rank) is built. */
#include "build_config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable/set.h"

#define DEV_PATH "server_list[%zu].device[%zu]"

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
    int nomem;
    /* The first device with a device_ip, whose list length the rest follow. */
    int have_ref;
    size_t ref_server, ref_device, ref_nips;
};

static void check_top(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    if (t->version && strcmp(t->version, "1.0") != 0 &&
        strcmp(t->version, "1.2") != 0)
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
    char path[LOOM_RT_MAX_PATH];
    loom_rt_path(path, DEV_PATH ".device_ip", s, i);
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
        if (prev)
            loom_rt_error(c->d, path,
                          "\"%s\" is used twice (also " DEV_PATH
                          ".device_ip)", ip, prev->a, prev->b);
    }
    if (!c->have_ref) {
        c->have_ref = 1;
        c->ref_server = s, c->ref_device = i, c->ref_nips = dev->nips;
    } else if (dev->nips != c->ref_nips) {
        loom_rt_error(c->d, path,
                      "lists %zu address%s but " DEV_PATH ".device_ip lists "
                      "%zu; every device must list as many",
                      dev->nips, dev->nips == 1 ? "" : "es", c->ref_server,
                      c->ref_device, c->ref_nips);
    }
}

static void check_device(struct rt_check *c, struct loom_rt_set *ips,
                         struct loom_rt_set *ids, char (*canon)[16], size_t s,
                         size_t i)
{
    struct loom_rt_server *srv = &c->t->servers[s];
    struct loom_rt_device *dev = &srv->devices[i];
    char path[LOOM_RT_MAX_PATH], base[LOOM_RT_MAX_PATH];
    loom_rt_path(base, DEV_PATH, s, i);

    if (dev->device_id_str) {
        loom_rt_path(path, "%s.device_id", base);
        dev->device_id = check_decimal(c->d, path, dev->device_id_str);
        if (dev->device_id >= 0) {
            snprintf(canon[i], sizeof canon[i], "%d", dev->device_id);
            const struct loom_rt_slot *prev =
                loom_rt_set_put(ids, canon[i], s, i);
            if (prev)
                loom_rt_error(c->d, path, "\"%s\" is used twice on this "
                                          "server (also " DEV_PATH ")",
                              dev->device_id_str, prev->a, prev->b);
        }
    }
    if (dev->rank_id_str) {
        loom_rt_path(path, "%s.rank_id", base);
        dev->rank = check_decimal(c->d, path, dev->rank_id_str);
    }
    if (dev->device_ip)
        check_device_ip(c, ips, s, i);
    if (dev->device_port_str) {
        loom_rt_path(path, "%s.device_port", base);
        dev->device_port = check_port(c->d, path, dev->device_port_str);
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

    /* The endpoint address: device_ip, else host_ip, else server_id. */
    if (dev->nips > 0)
        dev->address = dev->ips[0];
    else if (srv->host_ip)
        dev->address = srv->host_ip;
    else if (loom_rt_is_ip(srv->server_id))
        dev->address = srv->server_id;
    else if (!dev->device_ip && srv->server_id)
        loom_rt_error(c->d, base, "no endpoint address: give device_ip, "
                                  "host_ip, or a server_id that is an IP "
                                  "address");
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
        if (srv->server_id) {
            loom_rt_path(path, "server_list[%zu].server_id", s);
            const struct loom_rt_slot *prev =
                loom_rt_set_put(&names, srv->server_id, s, 0);
            if (!srv->server_id[0])
                loom_rt_error(c->d, path, "is empty");
            else if (prev)
                loom_rt_error(c->d, path, "\"%s\" is used twice (also "
                                          "server_list[%zu].server_id)",
                              srv->server_id, prev->a);
        }
        if (srv->host_ip) {
            loom_rt_path(path, "server_list[%zu].host_ip", s);
            check_ip(c->d, path, srv->host_ip);
        }
        if (srv->host_port_str) {
            loom_rt_path(path, "server_list[%zu].host_port", s);
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

/* rank_id: exactly 0..N-1, no duplicates, no gaps, contiguous per server. */
static void check_ranks(struct rt_check *c)
{
    struct loom_ranktable *t = c->t;
    size_t n = c->ndevices;
    char path[LOOM_RT_MAX_PATH];
    if (n == 0 || n > (size_t)1 << 30)
        return;
    /* A server whose device list could not be read hides how many ranks
     * there are: range and gap messages would only mislead. */
    for (size_t s = 0; s < t->nservers; s++)
        if (!t->servers[s].have_devices)
            return;
    /* owner[r] = 1 + flat index of the (first) device holding rank r. */
    size_t *owner = calloc(n, sizeof *owner);
    size_t *srv_of = calloc(n, sizeof *srv_of);
    size_t *dev_of = calloc(n, sizeof *dev_of);
    if (!owner || !srv_of || !dev_of) {
        c->nomem = 1;
        goto out;
    }
    size_t flat = 0;
    for (size_t s = 0; s < t->nservers; s++) {
        for (size_t i = 0; i < t->servers[s].ndevices; i++, flat++) {
            struct loom_rt_device *dev = &t->servers[s].devices[i];
            srv_of[flat] = s, dev_of[flat] = i;
            if (dev->rank < 0)
                continue;
            loom_rt_path(path, DEV_PATH ".rank_id", s, i);
            if ((size_t)dev->rank >= n) {
                loom_rt_error(c->d, path, "%d is out of range: the table has "
                                          "%zu rank%s, so rank_id must be in "
                                          "0..%zu",
                              dev->rank, n, n == 1 ? "" : "s", n - 1);
            } else if (owner[dev->rank]) {
                size_t o = owner[dev->rank] - 1;
                loom_rt_error(c->d, path,
                              "\"%s\" is used twice (also " DEV_PATH ")",
                              dev->rank_id_str, srv_of[o], dev_of[o]);
            } else {
                owner[dev->rank] = flat + 1;
            }
        }
    }
    /* With every rank_id decoded, a gap means a duplicate or an out-of-range
     * rank took its place: name each missing rank. When some rank_id was
     * malformed (already reported) the gaps say nothing new. */
    size_t undecoded = 0;
    for (size_t s = 0; s < t->nservers; s++)
        for (size_t i = 0; i < t->servers[s].ndevices; i++)
            undecoded += t->servers[s].devices[i].rank < 0;
    for (size_t r = 0; r < n && !undecoded; r++)
        if (!owner[r])
            loom_rt_error(c->d, "server_list", "rank %zu is missing: rank_id "
                                               "must run from 0 to %zu "
                                               "without gaps",
                          r, n - 1);
    /* Contiguity: the ranks a server owns form one run. */
    for (size_t s = 0; s < t->nservers; s++) {
        int lo = -1, hi = -1;
        size_t count = 0;
        for (size_t i = 0; i < t->servers[s].ndevices; i++) {
            int r = t->servers[s].devices[i].rank;
            if (r < 0 || (size_t)r >= n || srv_of[owner[r] - 1] != s ||
                dev_of[owner[r] - 1] != i)
                continue;
            lo = lo < 0 || r < lo ? r : lo;
            hi = r > hi ? r : hi;
            count++;
        }
        if (count == 0 || (size_t)(hi - lo + 1) == count)
            continue;
        for (int r = lo + 1; r < hi; r++) {
            if (!owner[r] || srv_of[owner[r] - 1] == s)
                continue;
            loom_rt_path(path, "server_list[%zu]", s);
            loom_rt_error(c->d, path, "ranks are not contiguous: rank %d, "
                                      "between this server's ranks %d and %d, "
                                      "belongs to server_list[%zu]",
                          r, lo, hi, srv_of[owner[r] - 1]);
            break;
        }
    }
out:
    free(owner);
    free(srv_of);
    free(dev_of);
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

static int build_index(struct loom_ranktable *t)
{
    size_t n = 0;
    for (size_t s = 0; s < t->nservers; s++)
        n += t->servers[s].ndevices;
    t->by_rank = calloc(n, sizeof *t->by_rank);
    t->server_of_rank = calloc(n, sizeof *t->server_of_rank);
    t->local_rank = calloc(n, sizeof *t->local_rank);
    if (!t->by_rank || !t->server_of_rank || !t->local_rank)
        return -1;
    for (size_t s = 0; s < t->nservers; s++) {
        int lo = -1;
        for (size_t i = 0; i < t->servers[s].ndevices; i++) {
            int r = t->servers[s].devices[i].rank;
            lo = lo < 0 || r < lo ? r : lo;
        }
        for (size_t i = 0; i < t->servers[s].ndevices; i++) {
            struct loom_rt_device *dev = &t->servers[s].devices[i];
            t->by_rank[dev->rank] = dev;
            t->server_of_rank[dev->rank] = (int)s;
            t->local_rank[dev->rank] = dev->rank - lo;
        }
    }
    t->nranks = (int)n;
    return 0;
}

loom_result_t loom_rt_validate(struct loom_ranktable *t, struct loom_diag *d)
{
    struct rt_check c = {.t = t, .d = d};
    check_top(&c);
    if (!c.nomem)
        check_servers(&c);
    if (!c.nomem)
        check_ranks(&c);
    if (!c.nomem)
        check_pods(&c);
    if (c.nomem) {
        d->out_of_memory = 1;
        return LOOM_ERROR_NO_MEMORY;
    }
    if (d->nerrors > 0)
        return LOOM_ERROR_INVALID_RANKTABLE;
    if (build_index(t) < 0) {
        d->out_of_memory = 1;
        return LOOM_ERROR_NO_MEMORY;
    }
    return LOOM_SUCCESS;
}
