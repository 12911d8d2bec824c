/* legacy.c - the group_list rank table that HCCL read before version 1.0
 * (and that Kubernetes device plugins and ModelArts still write):
 *
 *   {"status": "completed", "group_count": "1", "group_list": [{
 *      "group_name": "...", "device_count": "2", "instance_count": "2",
 *      "instance_list": [{"pod_name": "...", "server_id": "10.0.0.1",
 *          "devices": [{"device_id": "0", "device_ip": "192.168.0.1"}]}]}]}
 *
 * It is turned into the server_list form that validate.c checks: one server
 * per distinct server_id (instances of one server are merged), servers in
 * server_id order and devices in device_id order, and ranks numbered in that
 * order, as HCCL numbers them. When every instance carries a rank_id (the
 * "lab" variant, one device per instance) those ranks are kept instead.
 * Every device remembers the path it was written at, so that messages name
 * the file's group_list, not a server_list it does not have. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable/walk.h"

/* One device of some instance, before the servers are formed. */
struct legacy_dev {
    const char *server_id;  /* the instance's (owned by the server list) */
    const cJSON *dev;       /* the device object (NULL: not an object)  */
    const char *inst_rank;  /* the instance's rank_id, or NULL          */
    char path[LOOM_RT_MAX_PATH];
    char rank_path[LOOM_RT_MAX_PATH];
    char inst_path[LOOM_RT_MAX_PATH];
    size_t order;           /* position in the file, for stable sorting */
};

struct legacy {
    struct loom_rt_walk *w;
    struct legacy_dev *devs;
    size_t ndevs, cap;
    size_t with_rank, instances;
};

/* The decimal value of s for sorting; unparsable ones sort last (and are
 * reported by validate.c). */
static long sort_key(const char *s)
{
    int v;
    return s && loom_rt_decimal(s, &v) ? v : 1L << 40;
}

static const char *member_str(const cJSON *obj, const char *key)
{
    const cJSON *m = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    return cJSON_IsString(m) ? m->valuestring : NULL;
}

static int dev_cmp(const void *pa, const void *pb)
{
    const struct legacy_dev *a = pa, *b = pb;
    int c = strcmp(a->server_id, b->server_id);
    if (c)
        return c;
    long ka = sort_key(member_str(a->dev, "device_id"));
    long kb = sort_key(member_str(b->dev, "device_id"));
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* "says N but LIST has M ITEMS" for group_count, instance_count and
 * device_count. */
static void check_count(struct legacy *L, const char *path, const char *str,
                        size_t actual, const char *list, const char *items)
{
    int v;
    if (!str)
        return;
    if (!loom_rt_decimal(str, &v))
        loom_rt_error(L->w->d, path, "\"%s\" is not a decimal number", str);
    else if ((size_t)v != actual)
        loom_rt_error(L->w->d, path, "says %d but %s has %zu %s", v, list,
                      actual, items);
}

static void add_instance(struct legacy *L, const cJSON *obj, const char *path)
{
    enum { I_POD, I_SERVER, I_RANK, I_DEVICES, I_NFIELDS };
    const struct loom_rt_field fields[I_NFIELDS] = {
        [I_POD] = {"pod_name", LOOM_RT_STRING, 0, 0},
        [I_SERVER] = {"server_id", LOOM_RT_STRING, 0, 1},
        [I_RANK] = {"rank_id", LOOM_RT_STRING, 0, 0},
        [I_DEVICES] = {"devices", LOOM_RT_ARRAY, 0, 1},
    };
    const cJSON *f[I_NFIELDS];
    char sub[LOOM_RT_MAX_PATH];

    loom_rt_walk_object(L->w, obj, path, fields, I_NFIELDS, f);
    L->instances++;
    L->with_rank += f[I_RANK] != NULL;
    if (!f[I_SERVER] || !f[I_DEVICES])
        return;
    size_t n = (size_t)cJSON_GetArraySize(f[I_DEVICES]);
    loom_rt_path_key(sub, path, "devices");
    if (n == 0) {
        loom_rt_error(L->w->d, sub, "an instance needs at least one device");
        return;
    }
    if (f[I_RANK] && n != 1) {
        loom_rt_error(L->w->d, sub, "an instance with a rank_id holds one "
                                    "device, found %zu", n);
        return;
    }
    if (L->ndevs + n > L->cap) {
        size_t cap = (L->ndevs + n) * 2;
        struct legacy_dev *d = realloc(L->devs, cap * sizeof *d);
        if (!d) {
            L->w->nomem = 1;
            return;
        }
        L->devs = d, L->cap = cap;
    }
    size_t i = 0;
    for (const cJSON *e = f[I_DEVICES]->child; e; e = e->next, i++) {
        struct legacy_dev *ld = &L->devs[L->ndevs];
        *ld = (struct legacy_dev){
            .server_id = f[I_SERVER]->valuestring,
            .inst_rank = f[I_RANK] ? f[I_RANK]->valuestring : NULL,
            .order = L->ndevs,
        };
        loom_rt_path_index(ld->path, sub, i);
        loom_rt_path_key(ld->rank_path, path, "rank_id");
        snprintf(ld->inst_path, sizeof ld->inst_path, "%s", path);
        ld->dev = loom_rt_array_object(L->w, e, ld->path);
        if (ld->dev) {
            /* A device is its id and its address: a rank with neither an
             * address nor an id would pass the table's checks unnamed (the
             * group format has no host_ip to fall back on). */
            enum { DV_ID, DV_IP, DV_NFIELDS };
            const struct loom_rt_field dfields[DV_NFIELDS] = {
                [DV_ID] = {"device_id", LOOM_RT_STRING, 0, 1},
                [DV_IP] = {"device_ip", LOOM_RT_STRING, 0, 1},
            };
            const cJSON *df[DV_NFIELDS];
            loom_rt_walk_object(L->w, ld->dev, ld->path, dfields, DV_NFIELDS, df);
        }
        L->ndevs++;
    }
}

static void add_group(struct legacy *L, const cJSON *obj, const char *path)
{
    enum { G_NAME, G_DCOUNT, G_DNUM, G_SNUM, G_ICOUNT, G_LIST, G_SERVERS,
           G_NFIELDS };
    /* device_num, server_num and server_list belong to the "lab" variant;
     * Loom takes the devices from instance_list and needs none of them. */
    const struct loom_rt_field fields[G_NFIELDS] = {
        [G_NAME] = {"group_name", LOOM_RT_STRING, 0, 0},
        [G_DCOUNT] = {"device_count", LOOM_RT_STRING, 0, 0},
        [G_DNUM] = {"device_num", LOOM_RT_STRING, 0, 0},
        [G_SNUM] = {"server_num", LOOM_RT_ANY, 0, 0},
        [G_ICOUNT] = {"instance_count", LOOM_RT_STRING, 0, 1},
        [G_LIST] = {"instance_list", LOOM_RT_ARRAY, 0, 1},
        [G_SERVERS] = {"server_list", LOOM_RT_ANY, 0, 0},
    };
    const cJSON *f[G_NFIELDS];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];

    loom_rt_walk_object(L->w, obj, path, fields, G_NFIELDS, f);
    if (!f[G_LIST])
        return;
    size_t n = (size_t)cJSON_GetArraySize(f[G_LIST]);
    loom_rt_path_key(sub, path, "instance_list");
    if (n == 0)
        loom_rt_error(L->w->d, sub, "is empty: a group needs at least one "
                                    "instance");
    size_t first = L->ndevs, i = 0;
    for (const cJSON *e = f[G_LIST]->child; e && !L->w->nomem; e = e->next, i++) {
        loom_rt_path_index(item, sub, i);
        if (loom_rt_array_object(L->w, e, item))
            add_instance(L, e, item);
    }
    loom_rt_path_key(item, path, "instance_count");
    check_count(L, item, f[G_ICOUNT] ? f[G_ICOUNT]->valuestring : NULL, n,
                "instance_list", n == 1 ? "instance" : "instances");
    for (int k = G_DCOUNT; k <= G_DNUM; k++) {
        loom_rt_path_key(item, path, fields[k].name);
        check_count(L, item, f[k] ? f[k]->valuestring : NULL,
                    L->ndevs - first, "instance_list",
                    L->ndevs - first == 1 ? "device" : "devices");
    }
}

static char *dup_or_null(struct legacy *L, const char *s)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    L->w->nomem |= !c;
    return c;
}

/* Sorted devices -> t->servers. */
static void build_servers(struct legacy *L, struct loom_ranktable *t)
{
    size_t ns = 0;
    for (size_t k = 0; k < L->ndevs; k++)
        ns += k == 0 || strcmp(L->devs[k].server_id, L->devs[k - 1].server_id);
    t->servers = ns ? calloc(ns, sizeof *t->servers) : NULL;
    if (ns && !t->servers) {
        L->w->nomem = 1;
        return;
    }
    t->nservers = ns;
    /* Ranks: the instances' rank_id when every instance has one, else the
     * sorted position (HCCL's order). */
    int given = L->with_rank == L->instances && L->instances > 0;
    size_t s = 0, k = 0;
    while (k < L->ndevs && !L->w->nomem) {
        size_t end = k + 1;
        while (end < L->ndevs &&
               strcmp(L->devs[end].server_id, L->devs[k].server_id) == 0)
            end++;
        struct loom_rt_server *srv = &t->servers[s];
        srv->host_port = -1;
        srv->have_devices = 1;
        srv->server_id = dup_or_null(L, L->devs[k].server_id);
        srv->src_path = dup_or_null(L, L->devs[k].inst_path);
        srv->devices = calloc(end - k, sizeof *srv->devices);
        if (!srv->devices) {
            L->w->nomem = 1;
            return;
        }
        srv->ndevices = end - k;
        for (size_t i = 0; k < end; i++, k++) {
            struct legacy_dev *ld = &L->devs[k];
            struct loom_rt_device *dev = &srv->devices[i];
            dev->device_id = dev->device_port = dev->host_port = -1;
            dev->rank = dev->backup_device_port = -1;
            dev->src_path = dup_or_null(L, ld->path);
            if (!ld->dev)
                continue;
            dev->device_id_str = dup_or_null(L, member_str(ld->dev, "device_id"));
            dev->device_ip = dup_or_null(L, member_str(ld->dev, "device_ip"));
            if (given) {
                dev->rank_id_str = dup_or_null(L, ld->inst_rank);
                dev->rank_path = dup_or_null(L, ld->rank_path);
            } else {
                char num[32];
                snprintf(num, sizeof num, "%zu", k);
                dev->rank_id_str = dup_or_null(L, num);
            }
        }
        s++;
    }
}

void loom_rt_parse_group_list(const void *root_v, struct loom_ranktable *t,
                              struct loom_diag *d, int *nomem)
{
    const cJSON *root = root_v;
    enum { T_STATUS, T_GCOUNT, T_GLIST, T_DEPLOY, T_CHIP, T_BOARD, T_NICLOC,
           T_NICNUM, T_NICNAME, T_NFIELDS };
    const struct loom_rt_field fields[T_NFIELDS] = {
        [T_STATUS] = {"status", LOOM_RT_STRING, 0, 1},
        [T_GCOUNT] = {"group_count", LOOM_RT_STRING, 0, 1},
        [T_GLIST] = {"group_list", LOOM_RT_ARRAY, 0, 1},
        /* The lab variant's description of the hardware. */
        [T_DEPLOY] = {"deploy_mode", LOOM_RT_ANY, 0, 0},
        [T_CHIP] = {"chip_info", LOOM_RT_ANY, 0, 0},
        [T_BOARD] = {"board_id", LOOM_RT_ANY, 0, 0},
        [T_NICLOC] = {"para_plane_nic_location", LOOM_RT_ANY, 0, 0},
        [T_NICNUM] = {"para_plane_nic_num", LOOM_RT_ANY, 0, 0},
        [T_NICNAME] = {"para_plane_nic_name", LOOM_RT_ANY, 0, 0},
    };
    const cJSON *f[T_NFIELDS];
    char item[LOOM_RT_MAX_PATH];
    struct loom_rt_walk w = {.d = d};
    struct legacy L = {.w = &w};

    loom_rt_walk_object(&w, root, "", fields, T_NFIELDS, f);
    t->version = strdup("group_list");
    w.nomem |= !t->version;
    t->status = loom_rt_dup_member(&w, f[T_STATUS]);
    if (f[T_GLIST]) {
        size_t n = (size_t)cJSON_GetArraySize(f[T_GLIST]);
        if (n == 0)
            loom_rt_error(d, "group_list", "is empty: a table needs at least "
                                           "one group");
        size_t i = 0;
        for (const cJSON *e = f[T_GLIST]->child; e && !w.nomem; e = e->next, i++) {
            loom_rt_path_index(item, "group_list", i);
            if (loom_rt_array_object(&w, e, item))
                add_group(&L, e, item);
        }
        check_count(&L, "group_count",
                    f[T_GCOUNT] ? f[T_GCOUNT]->valuestring : NULL, n,
                    "group_list", n == 1 ? "group" : "groups");
        t->have_server_list = 1;
    }
    if (L.with_rank > 0 && L.with_rank < L.instances)
        loom_rt_error(d, "group_list", "%zu of %zu instances give a rank_id: "
                                       "give it on every instance or on none",
                      L.with_rank, L.instances);
    if (!w.nomem) {
        qsort(L.devs, L.ndevs, sizeof *L.devs, dev_cmp);
        build_servers(&L, t);
    }
    t->server_count = (int)t->nservers;
    free(L.devs);
    *nomem |= w.nomem;
}
