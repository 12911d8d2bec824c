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
    char *host_port_str;    /* 1.2: the port when the rank uses host_ip */
    char *rank_id_str;
    char *super_device_id;
    char *backup_device_ip;
    char *backup_device_port_str;
    int device_id;
    int device_port;
    int host_port;
    int rank;
    int backup_device_port;
    char **ips;             /* device_ip split at commas (validate.c)  */
    size_t nips;            /* addresses in device_ip (0: absent or "") */
    const char *address;    /* the table's endpoint address: device
                               address, else host address (validate.c) */
    const char *device_address; /* ips[0], NULL when none             */
    const char *host_address;   /* host_ip, else server_id when an IP   */
    /* Where the device was written, for messages about tables that are
     * not server_list tables (group_list); NULL: server_list[s].device[i].
     * rank_path likewise names where its rank_id came from. */
    char *src_path;
    char *rank_path;
    char *rank_addr;        /* 2.0: its net_layer 0 IP address (v2.c) */
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
    char *src_path;         /* as for devices; NULL: server_list[s]     */
};

struct loom_rt_pod {
    char *super_pod_id;
    char **server_ids;      /* NULL entries: wrong type, reported */
    size_t nservers;
};

/* The layout a file was recognised by (parse.c). */
enum loom_rt_shape {
    LOOM_RT_SHAPE_SERVER_LIST = 0, /* versions 1.0 and 1.2                */
    LOOM_RT_SHAPE_GROUP_LIST,      /* legacy group_list (legacy.c)        */
    LOOM_RT_SHAPE_RANK_LIST,       /* version 2.0 rank_list (v2.c)        */
};

struct loom_ranktable {
    char *name;             /* file name or the name given to parse  */
    enum loom_rt_shape shape;
    char *version;          /* "1.0", "1.2"; "group_list" for legacy   */
    char *status;
    char *server_count_str;
    int server_count;
    struct loom_rt_server *servers;
    size_t nservers;
    int have_server_list;
    struct loom_rt_pod *pods;
    size_t npods;
    int have_pods;
    /* Filled by validate.c. host_nic: every server has host_ip and no
     * device has device_ip, so a server's ranks share its host_ip. */
    int host_nic;
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

/* legacy.c: a group_list table (root is the top-level cJSON object, passed
 * as void * so that this header needs no cJSON) -> t's server_list form:
 * servers in server_id order, devices by device_id, ranks numbered in that
 * order as HCCL does (or the instances' rank_id when every one has one). */
void loom_rt_parse_group_list(const void *root, struct loom_ranktable *t,
                              struct loom_diag *d, int *nomem);

/* v2.c: a version 2.0 rank_list table (root as for legacy.c) -> t's
 * server_list form: one server per net_layer 0 net_instance_id, in the
 * order of their lowest rank_id; every device remembers its rank_list path.
 * Checks types, ranges and the rules of one rank as it goes. */
void loom_rt_parse_rank_list(const void *root, struct loom_ranktable *t,
                             struct loom_diag *d, int *nomem);
/* v2.c, from validate.c once ports are decoded: each rank's endpoint (its
 * rank_addr as its host address) and no two ranks on one address and port. */
void loom_rt_check_rank_list(struct loom_ranktable *t, struct loom_diag *d,
                             int *nomem);

/* validate.c: check HCCL's rules, decode numbers, resolve addresses and build
 * the rank index. Adds every violation to d. */
loom_result_t loom_rt_validate(struct loom_ranktable *t, struct loom_diag *d);

/* ranks.c: rank_id exactly 0..N-1 (ndevices), contiguous per server in
 * 1.x tables. */
void loom_rt_check_ranks(struct loom_ranktable *t, struct loom_diag *d,
                         size_t ndevices, int *nomem);
/* ranks.c: by_rank, server_of_rank, local_rank of a valid table; -1 when
 * out of memory. */
int loom_rt_build_index(struct loom_ranktable *t);

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

/* JSON paths of a parsed server and device, as the file wrote them
 * (LOOM_RT_MAX_PATH bytes). */
void loom_rt_server_path(const struct loom_ranktable *t, size_t s, char *out);
void loom_rt_device_path(const struct loom_ranktable *t, size_t s, size_t i,
                         char *out);

/* ---- endpoints (endpoint.c) ---------------------------------------------- */

/* LOOM_ADDRESS: which of a rank's addresses it uses. */
enum loom_rt_addr_mode {
    LOOM_RT_ADDR_AUTO = 0, /* device address when this host owns it, else host */
    LOOM_RT_ADDR_DEVICE,   /* device_ip                                     */
    LOOM_RT_ADDR_HOST,     /* host_ip (else server_id when an IP)           */
};

/* "auto", "device", "host" ("" and NULL: auto); -1 for anything else. */
int loom_rt_addr_mode_parse(const char *s);
const char *loom_rt_addr_mode_name(enum loom_rt_addr_mode mode);

struct loom_rt_endpoint {
    char address[64];
    int port;
    const char *field;     /* "device_ip", "host_ip" or "server_id" */
};

/* 0 when addr is this host's and a TCP socket can bind it (port 0, so a
 * port in use does not matter), else the errno that bind (or socket) gave;
 * EADDRNOTAVAIL also for an address the kernel would bind only because
 * non-local binding is allowed. */
int loom_rt_addr_usable(const char *addr);

/* The endpoint every rank agrees rank uses under mode, from the table
 * alone (no look at this host): device and host take that address; auto
 * takes the host address when the table gives one (the host network that
 * HCCL's own control plane uses too; whether a device address is usable is
 * known only on its own host), else the device address. For the
 * rendezvous. err: why not (the rank has no such address). */
loom_result_t loom_rt_endpoint_agreed(const struct loom_ranktable *t, int rank,
                                      enum loom_rt_addr_mode mode,
                                      struct loom_rt_endpoint *ep, char *err,
                                      size_t errlen);

/* The endpoint rank uses when it runs on this host: device and host take
 * that address, which this host must be able to use; auto takes the device
 * address when this host can use it, else the host address, and logs the
 * choice. err: the address, the errno text and the fix. */
loom_result_t loom_rt_endpoint_local(const struct loom_ranktable *t, int rank,
                                     enum loom_rt_addr_mode mode,
                                     struct loom_rt_endpoint *ep, char *err,
                                     size_t errlen);
/* Another rank of rank's server (so of this host) that would listen on
 * ep's address and port here: that rank, with a message naming both ranks
 * and the JSON paths of both ports in msg; -1 when none. */
int loom_rt_endpoint_clash(const struct loom_ranktable *t, int rank,
                           enum loom_rt_addr_mode mode,
                           const struct loom_rt_endpoint *ep, char *msg, size_t len);

/* For loom_comm_init_ranktable: under LOOM_ADDRESS, the address and port
 * rank listens on here (loom_rt_endpoint_local) and the rendezvous every
 * rank connects to (rank 0's loom_rt_endpoint_agreed). A one-rank job, which
 * nobody connects to, gets the table's address when this host can use it,
 * else 0.0.0.0, and port 0: it runs on any host, even one with no network.
 * On failure the thread's error (loom_get_error_string(NULL)) says why. */
loom_result_t loom_rt_comm_endpoints(const struct loom_ranktable *t, int rank,
                                     char *local, size_t locallen,
                                     int *local_port, char *root,
                                     size_t rootlen, int *root_port);

/* The table field a rank's host address comes from: "host_ip",
 * "server_id", or in 2.0 tables "rank_addr_list". */
const char *loom_rt_host_field(const struct loom_ranktable *t, int rank);

/* The port of a device when it uses its host address (host != 0:
 * host_port, else device_port) or its device address (device_port);
 * else LOOM_PORT_BASE + device_id + LOOM_PORT_OFFSET. */
int loom_rt_device_port(const struct loom_rt_device *dev, int host);

/* Helpers shared by the module and the tool. */
int loom_rt_is_ip(const char *s);            /* IPv4 or IPv6 literal */
/* Decimal digits only, no sign, at most 9 digits: 1 and *out, else 0. */
int loom_rt_decimal(const char *s, int *out);

#endif
