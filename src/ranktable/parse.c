/* parse.c - JSON text -> struct loom_ranktable, with type checks.
 *
 * Each object is walked once against a table of the fields it may hold: a
 * field of the wrong JSON type is an error naming its path, a field that
 * appears twice is an error, a required field that is absent is an error, and
 * a field nobody knows is a warning. HCCL rules about values (uniqueness,
 * ranges, addresses) are validate.c's job. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable/text.h"

enum rt_kind { RT_STRING, RT_ARRAY };

struct rt_field {
    const char *name;
    enum rt_kind kind;
    int v12_only; /* part of version 1.2 only */
    int required;
};

struct rt_walk {
    struct loom_diag *d;
    int is_v10;    /* version "1.0": 1.2 fields are warned about */
    int nomem;
};

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

static void path_key(char *out, const char *base, const char *key)
{
    if (base[0])
        loom_rt_path(out, "%s.%s", base, key);
    else
        loom_rt_path(out, "%s", key);
}

static void path_index(char *out, const char *base, size_t i)
{
    loom_rt_path(out, "%s[%zu]", base, i);
}

static void type_error(struct rt_walk *w, const char *path, const char *want,
                       const cJSON *item)
{
    if (cJSON_IsNumber(item) && strcmp(want, "a string") == 0) {
        /* The common mistake: HCCL wants "rank_id": "0", not 0. */
        char num[64];
        snprintf(num, sizeof num, "%.17g", item->valuedouble);
        loom_rt_error(w->d, path,
                      "expected a string, found the number %s (write \"%s\")",
                      num, num);
        return;
    }
    loom_rt_error(w->d, path, "expected %s, found %s", want,
                  json_type_name(item));
}

/* Match obj's members against fields[]; found[i] gets the member of the right
 * type or NULL. */
static void walk_object(struct rt_walk *w, const cJSON *obj, const char *path,
                        const struct rt_field *fields, size_t nfields,
                        const cJSON **found)
{
    char sub[LOOM_RT_MAX_PATH];
    int seen[16] = {0};

    for (size_t i = 0; i < nfields; i++)
        found[i] = NULL;
    for (const cJSON *m = obj->child; m; m = m->next) {
        const char *key = m->string ? m->string : "";
        size_t f;
        path_key(sub, path, key);
        for (f = 0; f < nfields; f++)
            if (strcmp(fields[f].name, key) == 0)
                break;
        if (f == nfields) {
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
        if (fields[f].kind == RT_STRING && !cJSON_IsString(m)) {
            type_error(w, sub, "a string", m);
            continue;
        }
        if (fields[f].kind == RT_ARRAY && !cJSON_IsArray(m)) {
            type_error(w, sub, "an array", m);
            continue;
        }
        found[f] = m;
    }
    for (size_t f = 0; f < nfields; f++) {
        if (fields[f].required && !seen[f]) {
            path_key(sub, path, fields[f].name);
            loom_rt_error(w->d, sub, "required field is missing");
        }
    }
}

/* strdup of a found string member (NULL stays NULL). */
static char *dup_member(struct rt_walk *w, const cJSON *m)
{
    if (!m)
        return NULL;
    char *s = strdup(m->valuestring);
    if (!s)
        w->nomem = 1;
    return s;
}

/* Items of an array that must be objects; NULL for the others (reported). */
static const cJSON *array_object(struct rt_walk *w, const cJSON *item,
                                 const char *path)
{
    if (cJSON_IsObject(item))
        return item;
    type_error(w, path, "an object", item);
    return NULL;
}

enum { D_ID, D_IP, D_PORT, D_RANK, D_SUPER, D_BIP, D_BPORT, D_NFIELDS };

static void parse_device(struct rt_walk *w, const cJSON *obj, const char *path,
                         int many_servers, struct loom_rt_device *dev)
{
    const struct rt_field fields[D_NFIELDS] = {
        [D_ID] = {"device_id", RT_STRING, 0, 1},
        [D_IP] = {"device_ip", RT_STRING, 0, many_servers},
        [D_PORT] = {"device_port", RT_STRING, 0, 0},
        [D_RANK] = {"rank_id", RT_STRING, 0, 1},
        [D_SUPER] = {"super_device_id", RT_STRING, 1, 0},
        [D_BIP] = {"backup_device_ip", RT_STRING, 1, 0},
        [D_BPORT] = {"backup_device_port", RT_STRING, 1, 0},
    };
    const cJSON *f[D_NFIELDS];

    dev->device_id = dev->device_port = dev->rank = -1;
    dev->backup_device_port = -1;
    walk_object(w, obj, path, fields, D_NFIELDS, f);
    dev->device_id_str = dup_member(w, f[D_ID]);
    dev->device_ip = dup_member(w, f[D_IP]);
    dev->device_port_str = dup_member(w, f[D_PORT]);
    dev->rank_id_str = dup_member(w, f[D_RANK]);
    dev->super_device_id = dup_member(w, f[D_SUPER]);
    dev->backup_device_ip = dup_member(w, f[D_BIP]);
    dev->backup_device_port_str = dup_member(w, f[D_BPORT]);
}

enum { S_ID, S_HOST, S_NIC, S_HPORT, S_DEV, S_NFIELDS };

static void parse_server(struct rt_walk *w, const cJSON *obj, const char *path,
                         int many_servers, struct loom_rt_server *srv)
{
    const struct rt_field fields[S_NFIELDS] = {
        [S_ID] = {"server_id", RT_STRING, 0, 1},
        [S_HOST] = {"host_ip", RT_STRING, 0, 0},
        [S_NIC] = {"host_nic_ip", RT_STRING, 0, 0},
        [S_HPORT] = {"host_port", RT_STRING, 1, 0},
        [S_DEV] = {"device", RT_ARRAY, 0, 1},
    };
    const cJSON *f[S_NFIELDS];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];

    srv->host_port = -1;
    walk_object(w, obj, path, fields, S_NFIELDS, f);
    srv->server_id = dup_member(w, f[S_ID]);
    srv->host_ip = dup_member(w, f[S_HOST]);
    srv->host_nic_ip = dup_member(w, f[S_NIC]);
    srv->host_port_str = dup_member(w, f[S_HPORT]);
    if (!f[S_DEV])
        return;
    srv->have_devices = 1;
    size_t n = (size_t)cJSON_GetArraySize(f[S_DEV]);
    path_key(sub, path, "device");
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
        path_index(item, sub, i);
        struct loom_rt_device *dev = &srv->devices[i];
        dev->device_id = dev->device_port = dev->rank = -1;
        dev->backup_device_port = -1;
        if (array_object(w, e, item))
            parse_device(w, e, item, many_servers, dev);
    }
}

enum { P_ID, P_SERVERS, P_NFIELDS };

static void parse_pod(struct rt_walk *w, const cJSON *obj, const char *path,
                      struct loom_rt_pod *pod)
{
    const struct rt_field fields[P_NFIELDS] = {
        [P_ID] = {"super_pod_id", RT_STRING, 0, 1},
        [P_SERVERS] = {"server_list", RT_ARRAY, 0, 1},
    };
    const struct rt_field entry_fields[1] = {{"server_id", RT_STRING, 0, 1}};
    const cJSON *f[P_NFIELDS], *ef[1];
    char sub[LOOM_RT_MAX_PATH], item[LOOM_RT_MAX_PATH];

    walk_object(w, obj, path, fields, P_NFIELDS, f);
    pod->super_pod_id = dup_member(w, f[P_ID]);
    if (!f[P_SERVERS])
        return;
    size_t n = (size_t)cJSON_GetArraySize(f[P_SERVERS]);
    path_key(sub, path, "server_list");
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
        path_index(item, sub, i);
        if (!array_object(w, e, item))
            continue;
        walk_object(w, e, item, entry_fields, 1, ef);
        pod->server_ids[i] = dup_member(w, ef[0]);
    }
}

enum { T_VERSION, T_COUNT, T_SERVERS, T_STATUS, T_PODS, T_NFIELDS };

static void parse_top(struct rt_walk *w, const cJSON *root,
                      struct loom_ranktable *t)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    const char *version = cJSON_IsString(v) ? v->valuestring : NULL;
    /* An unknown version is reported by validate.c; read it leniently. */
    w->is_v10 = version && strcmp(version, "1.0") == 0;

    const struct rt_field fields[T_NFIELDS] = {
        [T_VERSION] = {"version", RT_STRING, 0, 1},
        [T_COUNT] = {"server_count", RT_STRING, 0, w->is_v10},
        [T_SERVERS] = {"server_list", RT_ARRAY, 0, 1},
        [T_STATUS] = {"status", RT_STRING, 0, 1},
        [T_PODS] = {"super_pod_list", RT_ARRAY, 1, 0},
    };
    const cJSON *f[T_NFIELDS];
    char item[LOOM_RT_MAX_PATH];

    walk_object(w, root, "", fields, T_NFIELDS, f);
    t->version = dup_member(w, f[T_VERSION]);
    t->status = dup_member(w, f[T_STATUS]);
    t->server_count_str = dup_member(w, f[T_COUNT]);

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
            path_index(item, "server_list", i);
            t->servers[i].host_port = -1;
            if (array_object(w, e, item))
                parse_server(w, e, item, n > 1, &t->servers[i]);
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
            path_index(item, "super_pod_list", i);
            if (array_object(w, e, item))
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
                                 "column %zu", line, col);
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
    struct rt_walk w = {.d = d, .nomem = !t->name};
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
