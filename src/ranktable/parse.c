/* parse.c - JSON text -> struct loom_ranktable, with type checks.
 *
 * The layout is recognised first (server_list, legacy group_list, 2.0's
 * rank_list). Each object is then walked once against a table of the fields
 * it may hold (walk.h): a field of the wrong JSON type is an error naming its
 * path, a field that appears twice is an error, a required field that is
 * absent is an error, and a field nobody knows is a warning. HCCL rules about
 * values (uniqueness, ranges, addresses) are validate.c's job. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable/text.h"
#include "ranktable/walk.h"

static const char *json_type_name(const cJSON *item)
{
    if (cJSON_IsObject(item))
        return "an object";
    if (cJSON_IsArray(item))
        return "an array";
    if (cJSON_IsString(item))
        return "a string";
    if (cJSON_IsNumber(item))
        return "a number";
    if (cJSON_IsTrue(item))
        return "true";
    if (cJSON_IsFalse(item))
        return "false";
    if (cJSON_IsNull(item))
        return "null";
    return "an invalid value";
}

void loom_rt_path_key(char *out, const char *base, const char *key)
{
    if (base[0])
        loom_rt_path(out, "%s.%s", base, key);
    else
        loom_rt_path(out, "%s", key);
}

void loom_rt_path_index(char *out, const char *base, size_t i)
{
    loom_rt_path(out, "%s[%zu]", base, i);
}

static void type_error(struct loom_rt_walk *w, const char *path,
                       const char *want, const cJSON *item)
{
    if (cJSON_IsNumber(item) && strcmp(want, "a string") == 0) {
        /* The common mistake: HCCL wants "rank_id": "0", not 0. A version
         * is written with its point: 1 and 1.0 become "1.0". */
        char num[64];
        snprintf(num, sizeof num, "%.15g", item->valuedouble);
        if (strcmp(path, "version") == 0 && !strpbrk(num, ".eEn"))
            strcat(num, ".0");
        loom_rt_error(w->d, path,
                      "expected a string, found the number %s (write \"%s\")",
                      num, num);
        return;
    }
    loom_rt_error(w->d, path, "expected %s, found %s", want,
                  json_type_name(item));
}

/* Version 2.0 writes numbers as JSON integers: "0" is the mistake to name. */
static int is_integer(const cJSON *item)
{
    double v = item->valuedouble;
    return cJSON_IsNumber(item) && v > -1e15 && v < 1e15 &&
           v == (double)(long long)v;
}

static void integer_error(struct loom_rt_walk *w, const char *path,
                          const cJSON *item)
{
    int v;
    if (cJSON_IsString(item) && loom_rt_decimal(item->valuestring, &v))
        loom_rt_error(w->d, path, "expected an integer, found the string "
                                  "\"%s\" (write %s)",
                      item->valuestring, item->valuestring);
    else if (cJSON_IsNumber(item))
        loom_rt_error(w->d, path, "expected an integer, found the number %.15g",
                      item->valuedouble);
    else
        loom_rt_error(w->d, path, "expected an integer, found %s",
                      json_type_name(item));
}

void loom_rt_walk_object(struct loom_rt_walk *w, const cJSON *obj,
                         const char *path, const struct loom_rt_field *fields,
                         size_t nfields, const cJSON **found)
{
    char sub[LOOM_RT_MAX_PATH];
    int seen[16] = {0};

    for (size_t i = 0; i < nfields; i++)
        found[i] = NULL;
    for (const cJSON *m = obj->child; m; m = m->next) {
        const char *key = m->string ? m->string : "";
        size_t f;
        loom_rt_path_key(sub, path, key);
        for (f = 0; f < nfields; f++)
            if (strcmp(fields[f].name, key) == 0)
                break;
        if (f == nfields) {
            /* a near miss of a field this object takes: say which */
            size_t best = 3, near = nfields;
            for (size_t k = 0; k < nfields; k++) {
                size_t e = loom_rt_edit_distance(key, fields[k].name);
                if (e < best && e < strlen(fields[k].name) / 2) {
                    best = e;
                    near = k;
                }
            }
            if (near < nfields)
                loom_rt_warning(w->d, sub, "unknown field (ignored): did you mean "
                                           "\"%s\"?", fields[near].name);
            else
                loom_rt_warning(w->d, sub, "unknown field (ignored)");
            continue;
        }
        if (seen[f]++) {
            loom_rt_error(w->d, sub, "appears more than once");
            continue;
        }
        if (fields[f].v12_only && w->is_v10) {
            loom_rt_warning(w->d, sub,
                            "is a version 1.2 field; ignored in a 1.0 table");
            continue;
        }
        if (fields[f].kind == LOOM_RT_STRING && !cJSON_IsString(m)) {
            type_error(w, sub, "a string", m);
            continue;
        }
        if (fields[f].kind == LOOM_RT_ARRAY && !cJSON_IsArray(m)) {
            type_error(w, sub, "an array", m);
            continue;
        }
        if (fields[f].kind == LOOM_RT_INTEGER && !is_integer(m)) {
            integer_error(w, sub, m);
            continue;
        }
        found[f] = m;
    }
    for (size_t f = 0; f < nfields; f++) {
        if (fields[f].required && !seen[f]) {
            loom_rt_path_key(sub, path, fields[f].name);
            loom_rt_error(w->d, sub, "required field is missing");
        }
    }
}

char *loom_rt_dup_member(struct loom_rt_walk *w, const cJSON *m)
{
    if (!m)
        return NULL;
    char *s = strdup(m->valuestring);
    if (!s)
        w->nomem = 1;
    return s;
}

const cJSON *loom_rt_array_object(struct loom_rt_walk *w, const cJSON *item,
                                  const char *path)
{
    if (cJSON_IsObject(item))
        return item;
    type_error(w, path, "an object", item);
    return NULL;
}

enum { D_ID, D_IP, D_PORT, D_HPORT, D_RANK, D_SUPER, D_BIP, D_BPORT,
       D_NFIELDS };

/* device_ip is optional here: whether a device needs one depends on the
 * whole table (validate.c says why when it does). */
static void parse_device(struct loom_rt_walk *w, const cJSON *obj,
                         const char *path, struct loom_rt_device *dev)
{
    const struct loom_rt_field fields[D_NFIELDS] = {
        [D_ID] = {"device_id", LOOM_RT_STRING, 0, 1},
        [D_IP] = {"device_ip", LOOM_RT_STRING, 0, 0},
        [D_PORT] = {"device_port", LOOM_RT_STRING, 0, 0},
        [D_HPORT] = {"host_port", LOOM_RT_STRING, 1, 0},
        [D_RANK] = {"rank_id", LOOM_RT_STRING, 0, 1},
        [D_SUPER] = {"super_device_id", LOOM_RT_STRING, 1, 0},
        [D_BIP] = {"backup_device_ip", LOOM_RT_STRING, 1, 0},
        [D_BPORT] = {"backup_device_port", LOOM_RT_STRING, 1, 0},
    };
    const cJSON *f[D_NFIELDS];

    loom_rt_walk_object(w, obj, path, fields, D_NFIELDS, f);
    dev->device_id_str = loom_rt_dup_member(w, f[D_ID]);
    dev->device_ip = loom_rt_dup_member(w, f[D_IP]);
    dev->device_port_str = loom_rt_dup_member(w, f[D_PORT]);
    dev->host_port_str = loom_rt_dup_member(w, f[D_HPORT]);
    dev->rank_id_str = loom_rt_dup_member(w, f[D_RANK]);
    dev->super_device_id = loom_rt_dup_member(w, f[D_SUPER]);
    dev->backup_device_ip = loom_rt_dup_member(w, f[D_BIP]);
    dev->backup_device_port_str = loom_rt_dup_member(w, f[D_BPORT]);
}

enum { S_ID, S_HOST, S_NIC, S_HPORT, S_DEV, S_NFIELDS };

static void parse_server(struct loom_rt_walk *w, const cJSON *obj,
                         const char *path, struct loom_rt_server *srv)
{
    const struct loom_rt_field fields[S_NFIELDS] = {
        [S_ID] = {"server_id", LOOM_RT_STRING, 0, 1},
        [S_HOST] = {"host_ip", LOOM_RT_STRING, 0, 0},
        [S_NIC] = {"host_nic_ip", LOOM_RT_STRING, 0, 0},
        [S_HPORT] = {"host_port", LOOM_RT_STRING, 1, 0},
        [S_DEV] = {"device", LOOM_RT_ARRAY, 0, 1},
    };
    const cJSON *f[S_NFIELDS];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];

    srv->host_port = -1;
    loom_rt_walk_object(w, obj, path, fields, S_NFIELDS, f);
    srv->server_id = loom_rt_dup_member(w, f[S_ID]);
    srv->host_ip = loom_rt_dup_member(w, f[S_HOST]);
    srv->host_nic_ip = loom_rt_dup_member(w, f[S_NIC]);
    srv->host_port_str = loom_rt_dup_member(w, f[S_HPORT]);
    if (!f[S_DEV])
        return;
    srv->have_devices = 1;
    size_t n = (size_t)cJSON_GetArraySize(f[S_DEV]);
    loom_rt_path_key(sub, path, "device");
    if (n == 0) {
        loom_rt_error(w->d, sub, "a server needs at least one device");
        return;
    }
    srv->devices = calloc(n, sizeof *srv->devices);
    if (!srv->devices) {
        w->nomem = 1;
        return;
    }
    srv->ndevices = n;
    size_t i = 0;
    for (const cJSON *e = f[S_DEV]->child; e; e = e->next, i++) {
        loom_rt_path_index(item, sub, i);
        struct loom_rt_device *dev = &srv->devices[i];
        dev->device_id = dev->device_port = dev->host_port = dev->rank = -1;
        dev->backup_device_port = -1;
        if (loom_rt_array_object(w, e, item))
            parse_device(w, e, item, dev);
    }
}

enum { P_ID, P_SERVERS, P_NFIELDS };

static void parse_pod(struct loom_rt_walk *w, const cJSON *obj, const char *path,
                      struct loom_rt_pod *pod)
{
    const struct loom_rt_field fields[P_NFIELDS] = {
        [P_ID] = {"super_pod_id", LOOM_RT_STRING, 0, 1},
        [P_SERVERS] = {"server_list", LOOM_RT_ARRAY, 0, 1},
    };
    const struct loom_rt_field entry_fields[1] = {{"server_id", LOOM_RT_STRING, 0, 1}};
    const cJSON *f[P_NFIELDS], *ef[1];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];

    loom_rt_walk_object(w, obj, path, fields, P_NFIELDS, f);
    pod->super_pod_id = loom_rt_dup_member(w, f[P_ID]);
    if (!f[P_SERVERS])
        return;
    size_t n = (size_t)cJSON_GetArraySize(f[P_SERVERS]);
    loom_rt_path_key(sub, path, "server_list");
    if (n == 0) {
        loom_rt_error(w->d, sub, "a super pod needs at least one server");
        return;
    }
    pod->server_ids = calloc(n, sizeof *pod->server_ids);
    if (!pod->server_ids) {
        w->nomem = 1;
        return;
    }
    pod->nservers = n;
    size_t i = 0;
    for (const cJSON *e = f[P_SERVERS]->child; e; e = e->next, i++) {
        loom_rt_path_index(item, sub, i);
        if (!loom_rt_array_object(w, e, item))
            continue;
        loom_rt_walk_object(w, e, item, entry_fields, 1, ef);
        pod->server_ids[i] = loom_rt_dup_member(w, ef[0]);
    }
}

enum { T_VERSION, T_COUNT, T_SERVERS, T_STATUS, T_PODS, T_NFIELDS };

/* Which layout root has: 2.0 tables by their version or their rank_list
 * (HCCL writes rank_count, rank_list, level_list, numbers as integers),
 * legacy tables by a group_list in place of server_list. */
static enum loom_rt_shape recognise(const cJSON *root)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    if ((cJSON_IsString(v) && strcmp(v->valuestring, "2.0") == 0) ||
        (cJSON_IsNumber(v) && v->valuedouble == 2.0) ||
        cJSON_GetObjectItemCaseSensitive(root, "rank_list") ||
        cJSON_GetObjectItemCaseSensitive(root, "rank_count"))
        return LOOM_RT_SHAPE_RANK_LIST;
    if (cJSON_GetObjectItemCaseSensitive(root, "group_list") &&
        !cJSON_GetObjectItemCaseSensitive(root, "server_list"))
        return LOOM_RT_SHAPE_GROUP_LIST;
    return LOOM_RT_SHAPE_SERVER_LIST;
}

static void parse_top(struct loom_rt_walk *w, const cJSON *root,
                      struct loom_ranktable *t)
{
    t->shape = recognise(root);
    if (t->shape == LOOM_RT_SHAPE_RANK_LIST) {
        loom_rt_parse_rank_list(root, t, w->d, &w->nomem);
        return;
    }
    if (t->shape == LOOM_RT_SHAPE_GROUP_LIST) {
        loom_rt_parse_group_list(root, t, w->d, &w->nomem);
        return;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    const char *version = cJSON_IsString(v) ? v->valuestring : NULL;
    /* An unknown version is reported by validate.c; read it leniently. */
    w->is_v10 = version && strcmp(version, "1.0") == 0;

    const struct loom_rt_field fields[T_NFIELDS] = {
        [T_VERSION] = {"version", LOOM_RT_STRING, 0, 1},
        [T_COUNT] = {"server_count", LOOM_RT_STRING, 0, w->is_v10},
        [T_SERVERS] = {"server_list", LOOM_RT_ARRAY, 0, 1},
        [T_STATUS] = {"status", LOOM_RT_STRING, 0, 1},
        [T_PODS] = {"super_pod_list", LOOM_RT_ARRAY, 1, 0},
    };
    const cJSON *f[T_NFIELDS];
    char item[LOOM_RT_MAX_PATH];

    loom_rt_walk_object(w, root, "", fields, T_NFIELDS, f);
    t->version = loom_rt_dup_member(w, f[T_VERSION]);
    t->status = loom_rt_dup_member(w, f[T_STATUS]);
    t->server_count_str = loom_rt_dup_member(w, f[T_COUNT]);

    if (f[T_SERVERS]) {
        t->have_server_list = 1;
        size_t n = (size_t)cJSON_GetArraySize(f[T_SERVERS]);
        if (n == 0)
            loom_rt_error(w->d, "server_list", "is empty: a table needs at "
                                               "least one server");
        t->servers = n ? calloc(n, sizeof *t->servers) : NULL;
        if (n && !t->servers) {
            w->nomem = 1;
            return;
        }
        t->nservers = n;
        size_t i = 0;
        for (const cJSON *e = f[T_SERVERS]->child; e; e = e->next, i++) {
            loom_rt_path_index(item, "server_list", i);
            t->servers[i].host_port = -1;
            if (loom_rt_array_object(w, e, item))
                parse_server(w, e, item, &t->servers[i]);
        }
    }
    if (f[T_PODS]) {
        t->have_pods = 1;
        size_t n = (size_t)cJSON_GetArraySize(f[T_PODS]);
        if (n == 0)
            loom_rt_error(w->d, "super_pod_list", "is empty");
        t->pods = n ? calloc(n, sizeof *t->pods) : NULL;
        if (n && !t->pods) {
            w->nomem = 1;
            return;
        }
        t->npods = n;
        size_t i = 0;
        for (const cJSON *e = f[T_PODS]->child; e; e = e->next, i++) {
            loom_rt_path_index(item, "super_pod_list", i);
            if (loom_rt_array_object(w, e, item))
                parse_pod(w, e, item, &t->pods[i]);
        }
    }
}

static int only_space(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return 0;
    return 1;
}

struct loom_ranktable *loom_rt_parse_text(const char *text, size_t len,
                                          const char *name,
                                          struct loom_diag *d)
{
    size_t line, col;

    if (len > LOOM_RT_MAX_FILE_SIZE) {
        loom_rt_error(d, "", "is %zu bytes, more than the %u MiB a rank "
                             "table may have", len,
                      LOOM_RT_MAX_FILE_SIZE >> 20);
        return NULL;
    }
    /* A UTF-8 byte-order mark is allowed and skipped. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    if (only_space(text, text + len)) {
        loom_rt_error(d, "", len ? "holds only white space: not a rank table"
                                 : "is empty: not a rank table");
        return NULL;
    }
    if (loom_rt_check_utf8(text, len, d) < 0 ||
        loom_rt_check_depth(text, len, d) < 0)
        return NULL;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text)
                                                          : len;
        loom_rt_position(text, len, off, &line, &col);
        if (off >= len)
            loom_rt_error(d, "", "not valid JSON: the text ends early "
                                 "(line %zu, column %zu)", line, col);
        else
            loom_rt_error(d, "", "not valid JSON: syntax error at line %zu, "
                                 "column %zu%s", line, col,
                          loom_rt_json_hint(text, len, off));
        return NULL;
    }
    if (end && !only_space(end, text + len)) {
        loom_rt_position(text, len, (size_t)(end - text), &line, &col);
        loom_rt_error(d, "", "not valid JSON: unexpected text after the end "
                             "at line %zu, column %zu", line, col);
        cJSON_Delete(root);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        loom_rt_error(d, "", "expected a JSON object at the top level, "
                             "found %s", json_type_name(root));
        cJSON_Delete(root);
        return NULL;
    }

    struct loom_ranktable *t = calloc(1, sizeof *t);
    if (!t) {
        d->out_of_memory = 1;
        cJSON_Delete(root);
        return NULL;
    }
    t->server_count = -1;
    t->name = strdup(name ? name : "<string>");
    struct loom_rt_walk w = {.d = d, .nomem = !t->name};
    if (!w.nomem)
        parse_top(&w, root, t);
    cJSON_Delete(root);
    if (w.nomem) {
        d->out_of_memory = 1;
        loom_rt_table_free(t);
        return NULL;
    }
    return t;
}
