/* probe_json.c - `probe --from-json FILE`: read back what `probe --json`
 * printed, so a run can be reported and plotted again later, elsewhere, or
 * from a matrix made up for a test. Every array is checked against the rank
 * count before use; a missing optional part (reach, servers) reads as
 * unknown. */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "probe.h"
#include "probe_internal.h"

static int json_fail(const char *path, const char *what)
{
    fprintf(stderr, "loom-ranktable probe: %s: %s\n", path, what);
    return EXIT_UNREACHABLE;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *b = realloc(buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* An n-array (of n-arrays when rows), else NULL. */
static const cJSON *array_n(const cJSON *root, const char *key, int n, int rows)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return NULL;
    for (int r = 0; rows && r < n; r++) {
        const cJSON *row = cJSON_GetArrayItem(a, r);
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n)
            return NULL;
    }
    return a;
}

static int reach_of_name(const char *s)
{
    static const char *const names[] = {"", "ok", "refused", "timeout", "noroute", "failed"};
    for (int k = 1; k < PROBE_R_COUNT; k++)
        if (strcmp(s, names[k]) == 0)
            return k;
    return PROBE_R_OTHER;
}

static double num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* Servers: server_list[].server_id and server_of[], else one server. */
static int load_servers(struct probe *p, const cJSON *root)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "server_list");
    const cJSON *of = array_n(root, "server_of", p->n, 0);
    int ns = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (ns < 1 || ns > p->n || !of) {
        p->nservers = 1;
        return (p->server_name[0] = strdup("?")) ? 0 : -1;
    }
    p->nservers = ns;
    for (int s = 0; s < ns; s++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, s),
                                                           "server_id");
        char dflt[32];
        snprintf(dflt, sizeof dflt, "server%d", s);
        if (!(p->server_name[s] = strdup(cJSON_IsString(id) ? id->valuestring : dflt)))
            return -1;
    }
    for (int r = 0; r < p->n; r++) {
        const cJSON *v = cJSON_GetArrayItem(of, r);
        int s = cJSON_IsNumber(v) ? v->valueint : -1;
        if (s < 0 || s >= ns)
            return -2;
        p->server_of[r] = s;
    }
    return 0;
}

/* The matrices back into p->links. cJSON arrays are lists: walked, not
 * indexed (indexing each cell would be cubic in the ranks). */
static void load_links(struct probe *p, const cJSON *lat, const cJSON *bw, const cJSON *reach)
{
    const cJSON *lrow = lat->child, *brow = bw->child, *rrow = reach ? reach->child : NULL;
    for (int r = 0; r < p->n; r++) {
        const cJSON *lv = lrow->child, *bv = brow->child, *rv = rrow ? rrow->child : NULL;
        for (int j = 0; j < p->n; j++) {
            struct probe_link *l = PROBE_LINK(p, r, j);
            if (r != j) {
                l->reach = cJSON_IsString(rv) ? (uint8_t)reach_of_name(rv->valuestring)
                           : reach ? PROBE_R_UNKNOWN : PROBE_R_OK;
                if (cJSON_IsNumber(lv) && cJSON_IsNumber(bv)) {
                    l->state = PROBE_MEASURED;
                    l->lat_us = (float)lv->valuedouble;
                    l->bw_gbps = (float)bv->valuedouble;
                } else {
                    l->state = l->reach == PROBE_R_OK        ? PROBE_CONNECTED
                               : l->reach == PROBE_R_UNKNOWN ? PROBE_UNKNOWN
                                                             : PROBE_FAILED;
                }
            }
            lv = lv->next;
            bv = bv->next;
            rv = rv ? rv->next : NULL;
        }
        lrow = lrow->next;
        brow = brow->next;
        rrow = rrow ? rrow->next : NULL;
    }
}

int probe_json_load(struct probe *p, const char *path)
{
    size_t len = 0;
    char *text = read_all(path, &len);
    if (!text) {
        fprintf(stderr, "loom-ranktable probe: cannot read %s: %s\n", path, strerror(errno));
        return EXIT_UNREACHABLE;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root)
        return json_fail(path, "not JSON");
    int status = EXIT_UNREACHABLE;
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(root, "file");
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(root, "table_hash");
    p->n = (int)num(root, "ranks", 0);
    p->rank = 0;
    p->o.size = (uint64_t)num(root, "size", 0);
    p->o.iters = (uint32_t)num(root, "iters", 0);
    p->o.timeout = num(root, "timeout", 5);
    p->join_timeout = num(root, "join_timeout", 0);
    if (p->n < 1 || p->n > PROBE_MAX_RANKS) {
        json_fail(path, "\"ranks\" is not a rank count in 1..4096");
        goto out;
    }
    const cJSON *lat = array_n(root, "latency_us", p->n, 1);
    const cJSON *bw = array_n(root, "bandwidth_gbps", p->n, 1);
    const cJSON *reach = array_n(root, "reach", p->n, 1);
    const cJSON *eps = array_n(root, "endpoints", p->n, 0);
    const cJSON *joined = array_n(root, "joined", p->n, 0);
    if (!lat || !bw) {
        json_fail(path, "\"latency_us\" and \"bandwidth_gbps\" must be ranks x ranks");
        goto out;
    }
    if (probe_alloc(p) < 0) {
        json_fail(path, "out of memory");
        goto out;
    }
    int rc = load_servers(p, root);
    if (rc < 0) {
        json_fail(path, rc == -1 ? "out of memory" : "\"server_of\" names a server "
                                                     "\"server_list\" does not have");
        goto out;
    }
    for (int r = 0; r < p->n; r++) {
        const cJSON *e = eps ? cJSON_GetArrayItem(eps, r) : NULL;
        snprintf(p->ep_str[r], sizeof p->ep_str[r], "%s",
                 cJSON_IsString(e) ? e->valuestring : "?");
        const cJSON *jv = joined ? cJSON_GetArrayItem(joined, r) : NULL;
        p->joined[r] = (uint8_t)(jv ? cJSON_IsTrue(jv) : 1);
    }
    if (cJSON_IsString(hash))
        p->hash = strtoull(hash->valuestring, NULL, 16);
    p->o.file = NULL; /* set below, once root's strings are copied */
    load_links(p, lat, bw, reach);
    /* failed measurements carry their text in "unreachable" */
    const cJSON *un = cJSON_GetObjectItemCaseSensitive(root, "unreachable");
    const cJSON *u;
    cJSON_ArrayForEach(u, un)
    {
        int a = (int)num(u, "from", -1), b = (int)num(u, "to", -1);
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(u, "error");
        if (a < 0 || b < 0 || a >= p->n || b >= p->n || a == b)
            continue;
        struct probe_link *l = PROBE_LINK(p, a, b);
        if (l->reach == PROBE_R_OK || l->reach == PROBE_R_UNKNOWN) {
            l->state = PROBE_FAILED;
            probe_add_err(p, a, b, cJSON_IsString(err) ? err->valuestring : "failed");
        }
    }
    static char file_copy[1024];
    snprintf(file_copy, sizeof file_copy, "%s",
             cJSON_IsString(file) ? file->valuestring : path);
    p->o.file = file_copy;
    status = 0;
out:
    cJSON_Delete(root);
    return status;
}
