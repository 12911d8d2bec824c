/* ranktable.c - the public rank-table API: load a file or a string, free,
 * the getters, and the content hash. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "config.h"
#include "ranktable/ranktable_internal.h"

void loom_rt_table_free(struct loom_ranktable *t)
{
    if (!t)
        return;
    for (size_t s = 0; s < t->nservers; s++) {
        struct loom_rt_server *srv = &t->servers[s];
        for (size_t i = 0; i < srv->ndevices; i++) {
            struct loom_rt_device *dev = &srv->devices[i];
            free(dev->device_id_str);
            free(dev->device_ip);
            free(dev->device_port_str);
            free(dev->host_port_str);
            free(dev->rank_id_str);
            free(dev->src_path);
            free(dev->rank_path);
            free(dev->rank_addr);
            free(dev->super_device_id);
            free(dev->backup_device_ip);
            free(dev->backup_device_port_str);
            for (size_t k = 0; k < dev->nips; k++)
                free(dev->ips[k]);
            free(dev->ips);
        }
        free(srv->devices);
        free(srv->server_id);
        free(srv->host_ip);
        free(srv->host_nic_ip);
        free(srv->host_port_str);
        free(srv->src_path);
    }
    free(t->servers);
    for (size_t p = 0; p < t->npods; p++) {
        for (size_t i = 0; i < t->pods[p].nservers; i++)
            free(t->pods[p].server_ids[i]);
        free(t->pods[p].server_ids);
        free(t->pods[p].super_pod_id);
    }
    free(t->pods);
    free(t->by_rank);
    free(t->server_of_rank);
    free(t->local_rank);
    free(t->name);
    free(t->version);
    free(t->status);
    free(t->server_count_str);
    free(t);
}

/* Hand diag to the caller, or free it. */
static void give_diag(struct loom_diag *d, loom_diag_t **out)
{
    if (out)
        *out = d;
    else
        loom_diag_free(d);
}

loom_result_t loom_rt_parse_partial(const char *json, size_t len,
                                    const char *name,
                                    struct loom_ranktable **partial,
                                    loom_diag_t **diag)
{
    if (partial)
        *partial = NULL;
    if (diag)
        *diag = NULL;
    if (!json && len)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct loom_diag *d = loom_rt_diag_new();
    if (!d)
        return LOOM_ERROR_NO_MEMORY;
    loom_result_t res;
    struct loom_ranktable *t = loom_rt_parse_text(json ? json : "", len,
                                                  name, d);
    if (!t)
        res = d->out_of_memory ? LOOM_ERROR_NO_MEMORY
                               : LOOM_ERROR_INVALID_RANKTABLE;
    else
        res = loom_rt_validate(t, d);
    if (res == LOOM_SUCCESS && d->nerrors > 0) /* parse-level errors */
        res = LOOM_ERROR_INVALID_RANKTABLE;
    if (res == LOOM_ERROR_NO_MEMORY)
        loom_rt_error(d, "", "out of memory while reading the rank table");
    if (res == LOOM_SUCCESS)
        LOOM_INFO(LOOM_SUB_RT, "rank table %s: version %s, %zu servers, %d "
                               "ranks, %zu warnings",
                  t->name, t->version, t->nservers, t->nranks, d->count);
    else
        LOOM_INFO(LOOM_SUB_RT, "rank table %s is not valid: %zu errors",
                  name ? name : "<string>", d->nerrors);
    if (partial)
        *partial = t;
    else
        loom_rt_table_free(t);
    give_diag(d, diag);
    return res;
}

LOOM_API loom_result_t loom_ranktable_parse(const char *json, size_t len,
                                            const char *name,
                                            loom_ranktable_t **table,
                                            loom_diag_t **diag)
{
    if (!table)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct loom_ranktable *t = NULL;
    loom_result_t res = loom_rt_parse_partial(json, len, name, &t, diag);
    if (res != LOOM_SUCCESS) {
        loom_rt_table_free(t);
        t = NULL;
    }
    *table = t;
    return res;
}

/* Read a whole file of at most LOOM_RT_MAX_FILE_SIZE bytes. File problems go
 * to d with LOOM_ERROR_IO. */
static loom_result_t read_file(const char *path, struct loom_diag *d,
                               char **text, size_t *len)
{
    int fd = LOOM_SYSCALL_RETRY(open(path, O_RDONLY | O_CLOEXEC));
    if (fd < 0) {
        loom_rt_error(d, "", "cannot open \"%s\": %s", path, strerror(errno));
        return LOOM_ERROR_IO;
    }
    loom_result_t res = LOOM_ERROR_IO;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) < 0) {
        loom_rt_error(d, "", "cannot stat \"%s\": %s", path, strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        loom_rt_error(d, "", "\"%s\" is a directory, not a rank table file",
                      path);
        goto out;
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > LOOM_RT_MAX_FILE_SIZE) {
        loom_rt_error(d, "", "\"%s\" is %llu bytes, more than the %u MiB a "
                             "rank table may have",
                      path, (unsigned long long)st.st_size,
                      LOOM_RT_MAX_FILE_SIZE >> 20);
        goto out;
    }
    /* Read up to one byte past the limit to catch growing or special files. */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536, n = 0;
    buf = malloc(cap + 1);
    if (!buf) {
        res = LOOM_ERROR_NO_MEMORY;
        loom_rt_error(d, "", "out of memory reading \"%s\"", path);
        goto out;
    }
    for (;;) {
        if (n == cap) {
            if (cap > LOOM_RT_MAX_FILE_SIZE) {
                loom_rt_error(d, "", "\"%s\" is more than the %u MiB a rank "
                                     "table may have",
                              path, LOOM_RT_MAX_FILE_SIZE >> 20);
                goto out;
            }
            size_t ncap = cap * 2 > LOOM_RT_MAX_FILE_SIZE + 1
                              ? (size_t)LOOM_RT_MAX_FILE_SIZE + 1
                              : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                res = LOOM_ERROR_NO_MEMORY;
                loom_rt_error(d, "", "out of memory reading \"%s\"", path);
                goto out;
            }
            buf = nb, cap = ncap;
        }
        ssize_t got = LOOM_SYSCALL_RETRY(read(fd, buf + n, cap - n));
        if (got < 0) {
            loom_rt_error(d, "", "cannot read \"%s\": %s", path,
                          strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (n > LOOM_RT_MAX_FILE_SIZE) {
        loom_rt_error(d, "", "\"%s\" is more than the %u MiB a rank table "
                             "may have",
                      path, LOOM_RT_MAX_FILE_SIZE >> 20);
        goto out;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    buf = NULL;
    res = LOOM_SUCCESS;
out:
    free(buf);
    close(fd);
    return res;
}

loom_result_t loom_rt_load_partial(const char *path,
                                   struct loom_ranktable **partial,
                                   loom_diag_t **diag)
{
    if (partial)
        *partial = NULL;
    if (diag)
        *diag = NULL;
    if (!path)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct loom_diag *d = loom_rt_diag_new();
    if (!d)
        return LOOM_ERROR_NO_MEMORY;
    char *text = NULL;
    size_t len = 0;
    loom_result_t res = read_file(path, d, &text, &len);
    if (res != LOOM_SUCCESS) {
        /* returned to the caller with diag: INFO, not a second WARN line */
        LOOM_INFO(LOOM_SUB_RT, "rank table %s: %s", path,
                  d->count ? d->entries[0].message : "cannot be read");
        give_diag(d, diag);
        return res;
    }
    loom_diag_free(d);
    res = loom_rt_parse_partial(text, len, path, partial, diag);
    free(text);
    return res;
}

LOOM_API loom_result_t loom_ranktable_load(const char *path,
                                           loom_ranktable_t **table,
                                           loom_diag_t **diag)
{
    if (!table)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct loom_ranktable *t = NULL;
    loom_result_t res = loom_rt_load_partial(path, &t, diag);
    if (res != LOOM_SUCCESS) {
        loom_rt_table_free(t);
        t = NULL;
    }
    *table = t;
    return res;
}

LOOM_API loom_result_t loom_ranktable_free(loom_ranktable_t *table)
{
    loom_rt_table_free(table);
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_ranktable_version(const loom_ranktable_t *table,
                                              const char **version)
{
    if (!table || !version)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *version = table->version;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_ranktable_nranks(const loom_ranktable_t *table,
                                             int *nranks)
{
    if (!table || !nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *nranks = table->nranks;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_ranktable_nservers(const loom_ranktable_t *table,
                                               int *nservers)
{
    if (!table || !nservers)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *nservers = (int)table->nservers;
    return LOOM_SUCCESS;
}

int loom_rt_device_port(const struct loom_rt_device *dev, int host)
{
    if (host && dev->host_port > 0)
        return dev->host_port;
    if (dev->device_port > 0)
        return dev->device_port;
    /* Read at each call so LOOM_PORT_BASE/OFFSET changes are seen. */
    const struct loom_config *cfg = loom_config();
    return cfg->port_base + dev->device_id + cfg->port_offset;
}

LOOM_API loom_result_t loom_ranktable_rank_info(const loom_ranktable_t *table,
                                                int rank,
                                                loom_rank_info_t *info)
{
    if (!table || !info || rank < 0 || rank >= table->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    const struct loom_rt_device *dev = table->by_rank[rank];
    int s = table->server_of_rank[rank];
    *info = (loom_rank_info_t){
        .rank = rank,
        .server_index = s,
        .server_id = table->servers[s].server_id,
        .device_id = dev->device_id,
        .address = dev->address,
        .port = loom_rt_device_port(dev, !dev->device_address),
        .local_rank = table->local_rank[rank],
        .local_size = (int)table->servers[s].ndevices,
    };
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_ranktable_rank_addrs(const loom_ranktable_t *table,
                                                 int rank,
                                                 loom_rank_addrs_t *addrs)
{
    if (!table || !addrs || rank < 0 || rank >= table->nranks ||
        addrs->struct_size < sizeof(loom_rank_addrs_t))
        return LOOM_ERROR_INVALID_ARGUMENT;
    const struct loom_rt_device *dev = table->by_rank[rank];
    *addrs = (loom_rank_addrs_t){
        .struct_size = sizeof(loom_rank_addrs_t),
        .device_address = dev->device_address,
        .device_port = loom_rt_device_port(dev, 0),
        .host_address = dev->host_address,
        .host_port = loom_rt_device_port(dev, 1),
    };
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_ranktable_server_ranks(const loom_ranktable_t *table,
                                                   int server_index, int *ranks,
                                                   int max, int *count)
{
    if (!table || !count || server_index < 0 ||
        (size_t)server_index >= table->nservers || max < 0 ||
        (max > 0 && !ranks))
        return LOOM_ERROR_INVALID_ARGUMENT;
    /* local_rank is each rank's place among its server's, ascending (a
     * 2.0 server's ranks need not be contiguous). */
    const struct loom_rt_server *srv = &table->servers[server_index];
    for (size_t i = 0; i < srv->ndevices; i++) {
        int r = srv->devices[i].rank;
        if (table->local_rank[r] < max)
            ranks[table->local_rank[r]] = r;
    }
    *count = (int)srv->ndevices;
    return LOOM_SUCCESS;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    /* Length first, so ("ab","c") and ("a","bc") differ; NULL differs from "". */
    uint64_t len = s ? (uint64_t)strlen(s) + 1 : 0;
    h = loom_fnv1a(h, &len, sizeof len);
    return s ? loom_fnv1a(h, s, len - 1) : h;
}

static uint64_t hash_int(uint64_t h, int64_t v)
{
    return loom_fnv1a(h, &v, sizeof v);
}

LOOM_API loom_result_t loom_ranktable_hash(const loom_ranktable_t *table,
                                           uint64_t *hash)
{
    if (!table || !hash)
        return LOOM_ERROR_INVALID_ARGUMENT;
    uint64_t h = LOOM_FNV_INIT;
    h = hash_str(h, table->version);
    h = hash_int(h, (int64_t)table->nservers);
    for (size_t s = 0; s < table->nservers; s++) {
        const struct loom_rt_server *srv = &table->servers[s];
        h = hash_str(h, srv->server_id);
        h = hash_str(h, srv->host_ip);
        h = hash_int(h, srv->host_port);
        h = hash_int(h, (int64_t)srv->ndevices);
        for (size_t i = 0; i < srv->ndevices; i++) {
            const struct loom_rt_device *dev = &srv->devices[i];
            h = hash_int(h, dev->device_id);
            h = hash_int(h, dev->rank);
            h = hash_str(h, dev->device_ip);
            h = hash_int(h, dev->device_port);
            h = hash_int(h, dev->host_port);
            h = hash_str(h, dev->backup_device_ip);
            h = hash_int(h, dev->backup_device_port);
            h = hash_str(h, dev->address);
        }
    }
    h = hash_int(h, (int64_t)table->npods);
    for (size_t p = 0; p < table->npods; p++) {
        h = hash_str(h, table->pods[p].super_pod_id);
        h = hash_int(h, (int64_t)table->pods[p].nservers);
        for (size_t i = 0; i < table->pods[p].nservers; i++)
            h = hash_str(h, table->pods[p].server_ids[i]);
    }
    *hash = h;
    return LOOM_SUCCESS;
}
