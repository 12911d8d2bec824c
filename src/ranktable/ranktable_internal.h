/* ranktable_internal.h - the rank table as parsed, and the helpers that the
 * parser (parse.c), the rule checker (validate.c), diagnostics (diag.c) and the
 * public getters (ranktable.c) share. Tools may include it for the partial view
 * of a table that failed validation. */
#ifndef LOOM_RANKTABLE_INTERNAL_H
#define LOOM_RANKTABLE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* Bounds on what a file may hold. */
#define LOOM_RT_MAX_FILE_SIZE (64u * 1024u * 1024u) /* bytes              */
#define LOOM_RT_MAX_DEPTH 64                        /* JSON nesting levels */
#define LOOM_RT_MAX_PATH 256                        /* JSON path length    */

/* ---- diagnostics (diag.c) ------------------------------------------------ */

struct loom_diag_entry {
    loom_diag_severity_t severity;
    char *path;
    char *message;
};

struct loom_diag {
    struct loom_diag_entry *entries;
    size_t count;
    size_t cap;
    size_t nerrors;
    int out_of_memory; /* an entry could not be stored */
};

struct loom_diag *loom_rt_diag_new(void);
/* Append one entry; a failed allocation only sets out_of_memory. */
void loom_rt_diag_add(struct loom_diag *d, loom_diag_severity_t sev,
                      const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void loom_rt_diag_vadd(struct loom_diag *d, loom_diag_severity_t sev,
                       const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* Format a JSON path into out (LOOM_RT_MAX_PATH bytes; cut if longer). */
void loom_rt_path(char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define loom_rt_error(d, path, ...) \
    loom_rt_diag_add((d), LOOM_DIAG_ERROR, (path), __VA_ARGS__)
#define loom_rt_warning(d, path, ...) \
    loom_rt_diag_add((d), LOOM_DIAG_WARNING, (path), __VA_ARGS__)

/* ---- the table --------------------------------------------------------- */

/* Every field is kept as the string the file had (NULL: absent or of the wrong
 * type, already reported); numbers are decoded by validate.c, -1 when absent
 * or malformed. */
struct loom_rt_device {
    char *device_id_str;
    char *device_ip;        /* as written: one address or a comma list */
    char *device_port_str;
    char *rank_id_str;
    char *super_device_id;
    char *backup_device_ip;
    char *backup_device_port_str;
    int device_id;
    int device_port;
    int rank;
    int backup_device_port;
    char **ips;             /* device_ip split at commas (validate.c)  */
    size_t nips;            /* addresses in device_ip (0 when absent)  */
    const char *address;    /* resolved endpoint address (validate.c)  */
};

struct loom_rt_server {
    char *server_id;
    char *host_ip;
    char *host_nic_ip;
    char *host_port_str;
    int host_port;
    struct loom_rt_device *devices;
    size_t ndevices;
    int have_devices;       /* "device" was an array */
};

struct loom_rt_pod {
    char *super_pod_id;
    char **server_ids;      /* NULL entries: wrong type, reported */
    size_t nservers;
};

struct loom_ranktable {
    char *name;             /* file name or the name given to parse  */
    char *version;
    char *status;
    char *server_count_str;
    int server_count;
    struct loom_rt_server *servers;
    size_t nservers;
    int have_server_list;
    struct loom_rt_pod *pods;
    size_t npods;
    int have_pods;
    /* Filled by validate.c when the table is valid. */
    int nranks;
    struct loom_rt_device **by_rank; /* [nranks] */
    int *server_of_rank;             /* [nranks] server index */
    int *local_rank;                 /* [nranks] */
};

/* parse.c: bytes -> table. Reports file-level problems (UTF-8, JSON syntax,
 * depth) and type/field problems to d. Returns NULL when the text is not a
 * JSON object at all (or memory ran out; d->out_of_memory says which). */
struct loom_ranktable *loom_rt_parse_text(const char *text, size_t len,
                                          const char *name,
                                          struct loom_diag *d);

/* validate.c: check HCCL's rules, decode numbers, resolve addresses and build
 * the rank index. Adds every violation to d. */
loom_result_t loom_rt_validate(struct loom_ranktable *t, struct loom_diag *d);

void loom_rt_table_free(struct loom_ranktable *t);

/* As loom_ranktable_load/_parse, but on a table that breaks rules *partial
 * keeps what could be parsed (for tools that summarise an invalid table);
 * NULL when the text was not a JSON object. Free with loom_ranktable_free. */
loom_result_t loom_rt_load_partial(const char *path,
                                   struct loom_ranktable **partial,
                                   loom_diag_t **diag);
loom_result_t loom_rt_parse_partial(const char *json, size_t len,
                                    const char *name,
                                    struct loom_ranktable **partial,
                                    loom_diag_t **diag);

/* Helpers shared by the module and the tool. */
int loom_rt_is_ip(const char *s);            /* IPv4 or IPv6 literal */
/* Decimal digits only, no sign, at most 9 digits: 1 and *out, else 0. */
int loom_rt_decimal(const char *s, int *out);

#endif
