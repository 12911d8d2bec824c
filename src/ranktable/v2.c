/* v2.c - version 2.0 rank tables (rank_list), as HCCL documents them:
 *
 *   {"version": "2.0", "status": "completed", "rank_count": 2,
 *    "rank_list": [{"rank_id": 0, "device_id": 0, "local_id": 0,
 *        "host_port": 60001,
 *        "level_list": [{"net_layer": 0, "net_instance_id": "srv0",
 *            "net_type": "TOPO_FILE_DESC", "net_attr": "",
 *            "rank_addr_list": [{"addr_type": "IPV4", "addr": "10.0.0.1",
 *                                "ports": ["0/0"]}]}]}, ...]}
 *
 * Numbers are JSON integers here. The table becomes the server_list form
 * that validate.c checks, as legacy.c does for group_list:
 * - a server is a net_layer 0 net_instance_id: the ranks that layer's
 *   links join (one host, or a super node's pod; the shared-memory engine
 *   still checks that ranks share a kernel), in the order of their lowest
 *   rank_id, each holding its ranks in file order; local_id is unique in it;
 * - a rank's address is the first IPV4 or IPV6 address of its net_layer 0
 *   rank_addr_list. HCCL gives IP addresses to host NICs only, so to Loom
 *   it is the rank's host address, and ranks may share one;
 * - its TCP port is host_port, else device_port, else LOOM_PORT_BASE +
 *   device_id + LOOM_PORT_OFFSET, as in 1.x tables. The "die/port" strings
 *   of ports name the NPU's physical ports: checked, not used.
 * EID addresses (UB endpoint ids) cannot carry TCP: a rank with nothing
 * else at net_layer 0 is refused. Higher layers are checked, not used. */
#include "build_config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable/set.h"
#include "ranktable/walk.h"

/* HCCL's documented bounds. */
#define V2_MAX_RANKS 65536
#define V2_MAX_LOCAL_ID 64
#define V2_MAX_LEVELS 8
#define V2_MAX_NET_LAYER 7
#define V2_MAX_ADDRS 24
#define V2_MAX_PORTS 16
#define V2_MAX_PORT_NAME 32
#define V2_MAX_INSTANCE_ID 1024
#define V2_MAX_ADDR 256

/* One rank as read, before the servers are formed. Strings are cJSON's. */
struct v2_rank {
    size_t index;            /* in rank_list */
    const char *instance;    /* net_layer 0 net_instance_id, or NULL */
    const char *addr;        /* first IP address at net_layer 0, or NULL */
    long rank_id, device_id, local_id, device_port, host_port; /* -1: none */
};

struct v2 {
    struct loom_rt_walk *w;
    struct v2_rank *ranks;
    size_t n;
};

/* m's integer value when in lo..hi; else -1, after "VALUE TAIL" at path. */
static long in_range(struct v2 *V, const cJSON *m, const char *path, long lo,
                     long hi, const char *tail)
{
    if (!m)
        return -1;
    double v = m->valuedouble;
    if (v >= (double)lo && v <= (double)hi)
        return (long)v;
    loom_rt_error(V->w->d, path, "%.15g %s", v, tail);
    return -1;
}

static int port_name_ok(const char *s)
{
    int die, port;
    const char *slash = strchr(s, '/');
    if (strcmp(s, "d2h") == 0) /* HCCL's name for a host NIC's port */
        return 1;
    if (!slash || slash == s || strlen(s) > V2_MAX_PORT_NAME)
        return 0;
    char head[V2_MAX_PORT_NAME + 1];
    memcpy(head, s, (size_t)(slash - s));
    head[slash - s] = '\0';
    return loom_rt_decimal(head, &die) && loom_rt_decimal(slash + 1, &port);
}

/* The ports of one level, for "bound twice" (a port maps to one address
 * in a net_layer). */
struct v2_ports {
    const char *name[V2_MAX_ADDRS * V2_MAX_PORTS];
    char path[V2_MAX_ADDRS * V2_MAX_PORTS][LOOM_RT_MAX_PATH];
    size_t n;
};

static void parse_ports(struct v2 *V, const cJSON *list, const char *path,
                        struct v2_ports *seen)
{
    char item[LOOM_RT_MAX_PATH];
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    if (n > V2_MAX_PORTS)
        loom_rt_error(V->w->d, path, "lists %zu ports; HCCL allows at most %d",
                      n, V2_MAX_PORTS);
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        loom_rt_path_index(item, path, i);
        if (!cJSON_IsString(e)) {
            loom_rt_error(V->w->d, item, "expected a string such as \"0/1\" "
                                         "(die/port), found %s",
                          cJSON_IsNumber(e) ? "a number" : "another type");
            continue;
        }
        if (!port_name_ok(e->valuestring)) {
            loom_rt_error(V->w->d, item, "\"%s\" is not a port name: "
                                         "\"die/port\" such as \"0/1\", or "
                                         "\"d2h\"",
                          e->valuestring);
            continue;
        }
        size_t k;
        for (k = 0; k < seen->n; k++)
            if (strcmp(seen->name[k], e->valuestring) == 0)
                break;
        if (k < seen->n) {
            loom_rt_error(V->w->d, item, "\"%s\" is bound twice in this "
                                         "net_layer (also %s): a port maps "
                                         "to one address",
                          e->valuestring, seen->path[k]);
        } else if (seen->n < sizeof seen->name / sizeof seen->name[0]) {
            seen->name[seen->n] = e->valuestring;
            snprintf(seen->path[seen->n++], LOOM_RT_MAX_PATH, "%s", item);
        }
    }
}

/* What net_layer 0 gave a rank: its first IP address, its first EID;
 * bad: an entry that might have been its address is wrong (and named). */
struct v2_layer0 {
    const char *addr;
    char eid_path[LOOM_RT_MAX_PATH];
    int bad;
};

static void parse_addr(struct v2 *V, const cJSON *obj, const char *path,
                       struct v2_ports *ports, struct v2_layer0 *l0)
{
    enum { A_TYPE, A_ADDR, A_PORTS, A_PLANE, A_NFIELDS };
    const struct loom_rt_field fields[A_NFIELDS] = {
        [A_TYPE] = {"addr_type", LOOM_RT_STRING, 0, 1},
        [A_ADDR] = {"addr", LOOM_RT_STRING, 0, 1},
        [A_PORTS] = {"ports", LOOM_RT_ARRAY, 0, 1},
        [A_PLANE] = {"plane_id", LOOM_RT_STRING, 0, 0},
    };
    const cJSON *f[A_NFIELDS];
    char sub[LOOM_RT_MAX_PATH];
    unsigned char buf[16];

    loom_rt_walk_object(V->w, obj, path, fields, A_NFIELDS, f);
    if (f[A_PORTS]) {
        loom_rt_path_key(sub, path, "ports");
        parse_ports(V, f[A_PORTS], sub, ports);
    }
    if (!f[A_TYPE]) {
        if (l0)
            l0->bad = 1;
        return;
    }
    const char *type = f[A_TYPE]->valuestring;
    int family = strcasecmp(type, "IPV4") == 0   ? AF_INET
                 : strcasecmp(type, "IPV6") == 0 ? AF_INET6
                                                 : 0;
    if (!family && strcasecmp(type, "EID") != 0) {
        loom_rt_path_key(sub, path, "addr_type");
        loom_rt_error(V->w->d, sub, "\"%s\" is not an address type (IPV4, "
                                    "IPV6 or EID)", type);
        if (l0)
            l0->bad = 1;
        return;
    }
    if (!family && l0 && !l0->eid_path[0])
        loom_rt_path_key(l0->eid_path, path, "addr_type");
    /* From here on an IP entry that fails is named: the rank's missing
     * address would only repeat it. */
    if (family && l0)
        l0->bad = 1;
    if (!f[A_ADDR])
        return;
    const char *addr = f[A_ADDR]->valuestring;
    loom_rt_path_key(sub, path, "addr");
    if (!addr[0]) {
        loom_rt_error(V->w->d, sub, "is empty");
        return;
    }
    if (strlen(addr) > V2_MAX_ADDR) {
        loom_rt_error(V->w->d, sub, "is longer than %d characters",
                      V2_MAX_ADDR);
        return;
    }
    if (!family)
        return;
    if (inet_pton(family, addr, buf) != 1) {
        loom_rt_error(V->w->d, sub, "\"%s\" is not an %s address", addr,
                      family == AF_INET ? "IPv4" : "IPv6");
        return;
    }
    if (l0 && !l0->addr)
        l0->addr = addr;
}

/* One entry of level_list; *prev is the net_layer before it (-1: none). */
static void parse_level(struct v2 *V, const cJSON *obj, const char *path,
                        size_t j, long *prev, struct v2_rank *r,
                        struct v2_layer0 *l0, char *l0_path)
{
    enum { L_LAYER, L_ID, L_TYPE, L_ATTR, L_ADDRS, L_NFIELDS };
    const struct loom_rt_field fields[L_NFIELDS] = {
        [L_LAYER] = {"net_layer", LOOM_RT_INTEGER, 0, 1},
        [L_ID] = {"net_instance_id", LOOM_RT_STRING, 0, 1},
        [L_TYPE] = {"net_type", LOOM_RT_STRING, 0, 1},
        [L_ATTR] = {"net_attr", LOOM_RT_STRING, 0, 0},
        [L_ADDRS] = {"rank_addr_list", LOOM_RT_ARRAY, 0, 1},
    };
    const cJSON *f[L_NFIELDS];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];

    loom_rt_walk_object(V->w, obj, path, fields, L_NFIELDS, f);
    loom_rt_path_key(sub, path, "net_layer");
    long layer = in_range(V, f[L_LAYER], sub, 0, V2_MAX_NET_LAYER,
                          "is out of range (0..7)");
    if (layer >= 0 && j == 0 && layer != 0)
        loom_rt_error(V->w->d, sub, "is %ld: level_list starts at net_layer "
                                    "0", layer);
    else if (layer >= 0 && *prev >= 0 && layer <= *prev)
        loom_rt_error(V->w->d, sub, "is %ld after net_layer %ld: levels go "
                                    "in ascending net_layer order",
                      layer, *prev);
    if (layer >= 0)
        *prev = layer;
    int layer0 = layer == 0 && !l0_path[0];
    if (layer0)
        snprintf(l0_path, LOOM_RT_MAX_PATH, "%s", path);
    if (f[L_ID]) {
        const char *id = f[L_ID]->valuestring;
        loom_rt_path_key(sub, path, "net_instance_id");
        if (!id[0])
            loom_rt_error(V->w->d, sub, "is empty");
        else if (strlen(id) > V2_MAX_INSTANCE_ID)
            loom_rt_error(V->w->d, sub, "is longer than %d characters",
                          V2_MAX_INSTANCE_ID);
        else if (layer0)
            r->instance = id;
    }
    if (f[L_TYPE]) {
        const char *type = f[L_TYPE]->valuestring;
        loom_rt_path_key(sub, path, "net_type");
        if (layer == 0 && strcmp(type, "TOPO_FILE_DESC") != 0)
            loom_rt_warning(V->w->d, sub, "\"%s\": HCCL takes only "
                                          "TOPO_FILE_DESC at net_layer 0 "
                                          "(Loom does not use it)", type);
        else if (layer > 0 && strcmp(type, "TOPO_FILE_DESC") != 0 &&
                 strcmp(type, "CLOS") != 0)
            loom_rt_warning(V->w->d, sub, "\"%s\" is not CLOS or "
                                          "TOPO_FILE_DESC (Loom does not use "
                                          "it)", type);
    }
    if (!f[L_ADDRS])
        return;
    loom_rt_path_key(sub, path, "rank_addr_list");
    size_t n = (size_t)cJSON_GetArraySize(f[L_ADDRS]), i = 0;
    if (n > V2_MAX_ADDRS)
        loom_rt_error(V->w->d, sub, "lists %zu addresses; HCCL allows at most "
                                    "%d", n, V2_MAX_ADDRS);
    struct v2_ports *ports = calloc(1, sizeof *ports);
    if (!ports) {
        V->w->nomem = 1;
        return;
    }
    for (const cJSON *e = f[L_ADDRS]->child; e; e = e->next, i++) {
        loom_rt_path_index(item, sub, i);
        if (loom_rt_array_object(V->w, e, item))
            parse_addr(V, e, item, ports, layer0 ? l0 : NULL);
    }
    free(ports);
}

static void parse_rank(struct v2 *V, const cJSON *obj, const char *path,
                       struct v2_rank *r)
{
    enum { R_RANK, R_DEV, R_LOCAL, R_DPORT, R_HPORT, R_LEVELS, R_NFIELDS };
    const struct loom_rt_field fields[R_NFIELDS] = {
        [R_RANK] = {"rank_id", LOOM_RT_INTEGER, 0, 1},
        [R_DEV] = {"device_id", LOOM_RT_INTEGER, 0, 1},
        [R_LOCAL] = {"local_id", LOOM_RT_INTEGER, 0, 1},
        [R_DPORT] = {"device_port", LOOM_RT_INTEGER, 0, 0},
        [R_HPORT] = {"host_port", LOOM_RT_INTEGER, 0, 0},
        [R_LEVELS] = {"level_list", LOOM_RT_ARRAY, 0, 1},
    };
    const cJSON *f[R_NFIELDS];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];
    char l0_path[LOOM_RT_MAX_PATH] = "";
    struct v2_layer0 l0 = {0};

    loom_rt_walk_object(V->w, obj, path, fields, R_NFIELDS, f);
    loom_rt_path_key(sub, path, "rank_id");
    r->rank_id = in_range(V, f[R_RANK], sub, 0, 999999999,
                          "is out of range: rank_id counts from 0");
    loom_rt_path_key(sub, path, "device_id");
    r->device_id = in_range(V, f[R_DEV], sub, 0, V2_MAX_LOCAL_ID,
                            "is out of range (0..64)");
    loom_rt_path_key(sub, path, "local_id");
    r->local_id = in_range(V, f[R_LOCAL], sub, 0, V2_MAX_LOCAL_ID,
                           "is out of range (0..64)");
    loom_rt_path_key(sub, path, "device_port");
    r->device_port = in_range(V, f[R_DPORT], sub, 1, 65535,
                              "is not a port number (1..65535)");
    loom_rt_path_key(sub, path, "host_port");
    r->host_port = in_range(V, f[R_HPORT], sub, 1, 65535,
                            "is not a port number (1..65535)");
    if (!f[R_LEVELS])
        return;
    loom_rt_path_key(sub, path, "level_list");
    size_t n = (size_t)cJSON_GetArraySize(f[R_LEVELS]), j = 0;
    if (n == 0) {
        loom_rt_error(V->w->d, sub, "is empty: a rank needs its net_layer 0 "
                                    "level, which gives its address");
        return;
    }
    if (n > V2_MAX_LEVELS)
        loom_rt_error(V->w->d, sub, "lists %zu levels; HCCL allows at most %d",
                      n, V2_MAX_LEVELS);
    long prev = -1;
    for (const cJSON *e = f[R_LEVELS]->child; e && !V->w->nomem;
         e = e->next, j++) {
        loom_rt_path_index(item, sub, j);
        if (loom_rt_array_object(V->w, e, item))
            parse_level(V, e, item, j, &prev, r, &l0, l0_path);
    }
    r->addr = l0.addr;
    if (!l0_path[0])
        return; /* no net_layer 0: said where level_list starts */
    if (!l0.addr && l0.eid_path[0])
        loom_rt_error(V->w->d, l0.eid_path,
                      "is \"EID\": a UB endpoint id, which TCP hosts cannot "
                      "use; Loom needs an IPV4 or IPV6 address in net_layer "
                      "0's rank_addr_list");
    else if (!l0.addr && !l0.bad)
        loom_rt_error(V->w->d, l0_path, "has no IPV4 or IPV6 address in "
                                        "rank_addr_list: Loom takes a rank's "
                                        "address from net_layer 0");
    else if (l0.eid_path[0])
        loom_rt_warning(V->w->d, l0.eid_path, "is \"EID\", which TCP hosts "
                                              "cannot use: ignored (the rank "
                                              "uses %s)", l0.addr);
}

/* Servers: ranks with the same instance (NULL: unreadable, together), by
 * lowest rank_id, then file order. Sorted as pointers: no shared state, as
 * threads may load tables at once. */
static int by_instance(const void *pa, const void *pb)
{
    const struct v2_rank *a = *(const struct v2_rank *const *)pa;
    const struct v2_rank *b = *(const struct v2_rank *const *)pb;
    if (!a->instance || !b->instance) {
        if (a->instance != b->instance)
            return a->instance ? -1 : 1;
    } else {
        int c = strcmp(a->instance, b->instance);
        if (c)
            return c;
    }
    return a->index < b->index ? -1 : a->index > b->index;
}

static int same_instance(const struct v2_rank *a, const struct v2_rank *b)
{
    if (!a->instance || !b->instance)
        return a->instance == b->instance;
    return strcmp(a->instance, b->instance) == 0;
}

struct v2_group {
    size_t first, end; /* into the sorted order */
    long key;          /* lowest rank_id (LONG_MAX: none read) */
    size_t index;      /* first rank in the file */
};

static int by_key(const void *pa, const void *pb)
{
    const struct v2_group *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static char *dup_num(struct v2 *V, long v)
{
    if (v < 0)
        return NULL;
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    char *s = strdup(buf);
    V->w->nomem |= !s;
    return s;
}

static char *dup_str(struct v2 *V, const char *s)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    V->w->nomem |= !c;
    return c;
}

static char *dup_path(struct v2 *V, size_t i, const char *field)
{
    char path[LOOM_RT_MAX_PATH];
    loom_rt_path(path, "rank_list[%zu]%s", i, field);
    return dup_str(V, path);
}

/* local_id unique in a server: "5 is used twice in ... (also ...)". */
static void check_local_ids(struct v2 *V, const struct v2_rank **order,
                            size_t first, size_t end)
{
    size_t seen[V2_MAX_LOCAL_ID + 1] = {0}; /* 1 + rank_list index */
    char path[LOOM_RT_MAX_PATH];
    for (size_t k = first; k < end; k++) {
        const struct v2_rank *r = order[k];
        if (r->local_id < 0)
            continue;
        if (seen[r->local_id]) {
            loom_rt_path(path, "rank_list[%zu].local_id", r->index);
            loom_rt_error(V->w->d, path, "%ld is used twice in net_layer 0 "
                                         "instance \"%s\" (also "
                                         "rank_list[%zu])",
                          r->local_id, r->instance ? r->instance : "",
                          seen[r->local_id] - 1);
        } else {
            seen[r->local_id] = r->index + 1;
        }
    }
}

static void build_servers(struct v2 *V, struct loom_ranktable *t)
{
    const struct v2_rank **order = malloc((V->n ? V->n : 1) * sizeof *order);
    struct v2_group *g = malloc((V->n ? V->n : 1) * sizeof *g);
    size_t ng = 0;
    if (!order || !g) {
        V->w->nomem = 1;
        goto out;
    }
    for (size_t i = 0; i < V->n; i++)
        order[i] = &V->ranks[i];
    qsort(order, V->n, sizeof *order, by_instance);
    for (size_t k = 0; k < V->n; k++) {
        const struct v2_rank *r = order[k];
        if (k == 0 || !same_instance(r, order[k - 1]))
            g[ng++] = (struct v2_group){.first = k, .key = LONG_MAX,
                                        .index = r->index};
        struct v2_group *cur = &g[ng - 1];
        cur->end = k + 1;
        if (r->rank_id >= 0 && r->rank_id < cur->key)
            cur->key = r->rank_id;
        if (r->index < cur->index)
            cur->index = r->index;
    }
    qsort(g, ng, sizeof *g, by_key);
    t->servers = ng ? calloc(ng, sizeof *t->servers) : NULL;
    if (ng && !t->servers) {
        V->w->nomem = 1;
        goto out;
    }
    t->nservers = ng;
    for (size_t s = 0; s < ng && !V->w->nomem; s++) {
        struct loom_rt_server *srv = &t->servers[s];
        const struct v2_rank *head = order[g[s].first];
        check_local_ids(V, order, g[s].first, g[s].end);
        srv->host_port = -1;
        srv->have_devices = 1;
        srv->server_id = dup_str(V, head->instance);
        srv->src_path = dup_path(V, g[s].index, "");
        srv->ndevices = g[s].end - g[s].first;
        srv->devices = calloc(srv->ndevices, sizeof *srv->devices);
        if (!srv->devices) {
            srv->ndevices = 0;
            V->w->nomem = 1;
            break;
        }
        for (size_t i = 0; i < srv->ndevices; i++) {
            const struct v2_rank *r = order[g[s].first + i];
            struct loom_rt_device *dev = &srv->devices[i];
            dev->device_id = dev->device_port = dev->host_port = -1;
            dev->rank = dev->backup_device_port = -1;
            dev->device_id_str = dup_num(V, r->device_id);
            dev->rank_id_str = dup_num(V, r->rank_id);
            dev->device_port_str = dup_num(V, r->device_port);
            dev->host_port_str = dup_num(V, r->host_port);
            dev->rank_addr = dup_str(V, r->addr);
            dev->src_path = dup_path(V, r->index, "");
            dev->rank_path = dup_path(V, r->index, ".rank_id");
        }
    }
    t->server_count = (int)t->nservers;
out:
    free(order);
    free(g);
}

void loom_rt_parse_rank_list(const void *root_v, struct loom_ranktable *t,
                             struct loom_diag *d, int *nomem)
{
    const cJSON *root = root_v;
    enum { T_VERSION, T_COUNT, T_LIST, T_STATUS, T_SERVERS, T_NFIELDS };
    const struct loom_rt_field fields[T_NFIELDS] = {
        [T_VERSION] = {"version", LOOM_RT_STRING, 0, 1},
        [T_COUNT] = {"rank_count", LOOM_RT_INTEGER, 0, 1},
        [T_LIST] = {"rank_list", LOOM_RT_ARRAY, 0, 1},
        [T_STATUS] = {"status", LOOM_RT_STRING, 0, 0},
        /* named below when a 2.0 table has it */
        [T_SERVERS] = {"server_list", LOOM_RT_ANY, 0, 0},
    };
    const cJSON *f[T_NFIELDS];
    char item[LOOM_RT_MAX_PATH];
    struct loom_rt_walk w = {.d = d};
    struct v2 V = {.w = &w};

    loom_rt_walk_object(&w, root, "", fields, T_NFIELDS, f);
    t->version = strdup(f[T_VERSION] ? f[T_VERSION]->valuestring : "2.0");
    w.nomem |= !t->version;
    if (f[T_VERSION] && strcmp(f[T_VERSION]->valuestring, "2.0") != 0)
        loom_rt_error(d, "version", "is \"%s\", but rank_list tables are "
                                    "version \"2.0\"",
                      f[T_VERSION]->valuestring);
    if (f[T_SERVERS] && !f[T_LIST])
        loom_rt_error(d, "server_list", "belongs to versions 1.0 and 1.2: a "
                                        "version \"2.0\" table lists its "
                                        "ranks in rank_list");
    t->status = loom_rt_dup_member(&w, f[T_STATUS]);
    t->have_server_list = 1;
    long count = in_range(&V, f[T_COUNT], "rank_count", 1, V2_MAX_RANKS,
                          "is out of range (1..65536)");
    if (f[T_LIST]) {
        V.n = (size_t)cJSON_GetArraySize(f[T_LIST]);
        if (V.n == 0)
            loom_rt_error(d, "rank_list", "is empty: a table needs at least "
                                          "one rank");
        else if (V.n > V2_MAX_RANKS)
            loom_rt_error(d, "rank_list", "lists %zu ranks; HCCL allows at "
                                          "most %d", V.n, V2_MAX_RANKS);
        else if (count > 0 && (size_t)count != V.n)
            loom_rt_error(d, "rank_count", "says %ld but rank_list has %zu "
                                           "rank%s",
                          count, V.n, V.n == 1 ? "" : "s");
    }
    if (V.n > V2_MAX_RANKS)
        V.n = 0;
    V.ranks = V.n ? calloc(V.n, sizeof *V.ranks) : NULL;
    if (V.n && !V.ranks) {
        w.nomem = 1;
        V.n = 0;
    }
    size_t i = 0;
    for (const cJSON *e = V.n ? f[T_LIST]->child : NULL; e && !w.nomem;
         e = e->next, i++) {
        struct v2_rank *r = &V.ranks[i];
        *r = (struct v2_rank){.index = i, .rank_id = -1, .device_id = -1,
                              .local_id = -1, .device_port = -1,
                              .host_port = -1};
        loom_rt_path_index(item, "rank_list", i);
        if (loom_rt_array_object(&w, e, item))
            parse_rank(&V, e, item, r);
    }
    if (!w.nomem)
        build_servers(&V, t);
    free(V.ranks);
    *nomem |= w.nomem;
}

void loom_rt_check_rank_list(struct loom_ranktable *t, struct loom_diag *d,
                             int *nomem)
{
    struct loom_rt_set used = {0};
    size_t n = 0, k = 0;
    char path[LOOM_RT_MAX_PATH], other[LOOM_RT_MAX_PATH];
    for (size_t s = 0; s < t->nservers; s++)
        n += t->servers[s].ndevices;
    /* One key per rank: its address and explicit port, or its address and
     * device_id when the port is LOOM_PORT_BASE + device_id. */
    char (*keys)[LOOM_RT_MAX_PATH] = calloc(n ? n : 1, sizeof *keys);
    if (!keys || loom_rt_set_init(&used, n) < 0) {
        *nomem = 1;
        goto out;
    }
    for (size_t s = 0; s < t->nservers; s++) {
        for (size_t i = 0; i < t->servers[s].ndevices; i++, k++) {
            struct loom_rt_device *dev = &t->servers[s].devices[i];
            dev->host_address = dev->address = dev->rank_addr;
            if (!dev->rank_addr)
                continue;
            int port = dev->host_port > 0 ? dev->host_port : dev->device_port;
            if (port > 0)
                snprintf(keys[k], sizeof keys[k], "%s port %d", dev->rank_addr,
                         port);
            else if (dev->device_id >= 0)
                snprintf(keys[k], sizeof keys[k], "%s device %d",
                         dev->rank_addr, dev->device_id);
            else
                continue;
            const struct loom_rt_slot *prev = loom_rt_set_put(&used, keys[k],
                                                              s, i);
            if (!prev)
                continue;
            loom_rt_device_path(t, s, i, path);
            loom_rt_device_path(t, prev->a, prev->b, other);
            if (port > 0) {
                strncat(path, dev->host_port > 0 ? ".host_port"
                                                 : ".device_port",
                        sizeof path - strlen(path) - 1);
                loom_rt_error(d, path, "%s port %d is also %s's: ranks that "
                                       "share an address need their own "
                                       "ports",
                              dev->rank_addr, port, other);
            } else {
                strncat(path, ".device_id", sizeof path - strlen(path) - 1);
                loom_rt_error(d, path, "%s port LOOM_PORT_BASE + %d is also "
                                       "%s's: ranks that share an address "
                                       "need their own device_id or a "
                                       "host_port each",
                              dev->rank_addr, dev->device_id, other);
            }
        }
    }
out:
    free(keys);
    loom_rt_set_free(&used);
}
