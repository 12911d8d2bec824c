/* loom-ranktable - check and generate HCCL rank tables.
 *
 *   loom-ranktable check FILE [--rank N] [--json] [--local]
 *   loom-ranktable probe [FILE] [--rank N] [--json] [--timeout S]
 *                  [--size BYTES] [--iters N] [--plot FILE.png]
 *                                                  (one process per rank)
 *   loom-ranktable probe --from-json SAVED.json [--json] [--plot FILE.png]
 *   loom-ranktable generate --servers HOST[,HOST...] --devices N
 *                  [--device-ips IP,...] [--host-ips IP,...]
 *                  [--version 1.0|1.2|2.0] [-o FILE]
 *
 * Exit status: 0 valid / written, 1 invalid or unreadable table (or a file
 * that cannot be written), 2 bad command line. Subcommands live in one table
 * (commands[] below) so more (probe) can be added beside these. */
#include "build_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"
#include "ranktable_local.h"
#include "ranktable_v2.h"
#include "probe.h"

#define EXIT_INVALID 1
#define EXIT_USAGE 2
#define GEN_MAX_DEVICES 1024

static const char usage_text[] =
    "usage: loom-ranktable COMMAND [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  check FILE [--rank N] [--json] [--local]\n"
    "      Validate an HCCL rank table (version 1.0, 1.2, 2.0 or group_list):\n"
    "      print a summary, each rank's endpoint, and every error and warning\n"
    "      with its JSON path. --rank N also requires rank N to exist and\n"
    "      shows only its endpoint. --json prints one JSON object instead.\n"
    "      --local also says which ranks belong to this host, whether it\n"
    "      owns their addresses, which one LOOM_ADDRESS makes each use and\n"
    "      whether its port is free (exit 1 when none belongs here or one\n"
    "      cannot run here).\n"
    "  probe [FILE] [--rank N] [--json] [--timeout S] [--size BYTES]\n"
    "        [--iters N] [--plot FILE.png]\n"
    "  probe --from-json SAVED.json [--json] [--plot FILE.png]\n"
    "      Live check, one process per rank (loom-run, mpirun, srun, or by\n"
    "      hand with --rank), on the table's own ports: every pair connects\n"
    "      both ways and measures latency and bandwidth; rank 0 prints both\n"
    "      matrices, a summary per server, hosts cut off, unreachable links\n"
    "      and slow links, and exits 1 when a link is unreachable or a rank\n"
    "      did not join; --plot draws the bandwidth heat map; --from-json\n"
    "      reports a saved run (docs/probe.md).\n"
    "  generate --servers HOST[,HOST...] --devices N [--device-ips IP,...]\n"
    "           [--host-ips IP,...] [--version 1.0|1.2|2.0] [-o FILE]\n"
    "      Write a valid table (to stdout, or FILE) with N devices on each\n"
    "      server, laid out as hccl_tools.py writes them. --device-ips gives\n"
    "      servers*N addresses, server by server. Without it, several\n"
    "      servers make a host-NIC table (each server's host_ip is its IP, or\n"
    "      its --host-ips entry; its ranks share it, ports from\n"
    "      LOOM_PORT_BASE + device_id). Servers may be host names where the\n"
    "      table then gives an address (--device-ips or --host-ips).\n"
    "      Version 1.2 adds a super_pod_list holding every server. Version\n"
    "      2.0 writes a rank_list: each server a net_layer 0 instance, each\n"
    "      rank's address its device IP, else its server's (at most 65\n"
    "      devices per server).\n"
    "  help\n"
    "      Print this text (also -h, --help); --version (-V): the version.\n"
    "\n"
    "Exit status: 0 valid (probe: every pair reachable), 1 invalid or\n"
    "unreadable (probe: a pair unreachable), 2 bad command line.\n"
    "Endpoint ports without device_port are LOOM_PORT_BASE + device_id +\n"
    "LOOM_PORT_OFFSET.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("loom-ranktable: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n\n", stderr);
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

static const char check_usage[] =
    "usage: loom-ranktable check FILE [--rank N] [--json] [--local]";
static const char generate_usage[] =
    "usage: loom-ranktable generate --servers HOST[,HOST...] --devices N\n"
    "       [--device-ips IP,...] [--host-ips IP,...] [--version 1.0|1.2|2.0]\n"
    "       [-o FILE]";

/* A bad command line of one command: why, that command's usage, and where
 * the rest is (not the whole help). */
static int usage_short(const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int usage_short(const char *usage, const char *fmt, ...)
{
    va_list ap;
    fputs("loom-ranktable: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s\n(loom-ranktable help describes every option)\n",
            usage);
    return EXIT_USAGE;
}

/* A decimal int in [lo, hi], else -1 (and *ok = 0). */
static int parse_int(const char *s, int lo, int hi, int *ok)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    *ok = s[0] && !*end && errno == 0 && v >= lo && v <= hi;
    return *ok ? (int)v : -1;
}

/* ------------------------------------------------------------------------ */
/* check                                                                     */
/* ------------------------------------------------------------------------ */

static size_t table_ndevices(const struct loom_ranktable *t)
{
    size_t n = 0;
    for (size_t s = 0; t && s < t->nservers; s++)
        n += t->servers[s].ndevices;
    return n;
}

static void print_devices_per_server(const struct loom_ranktable *t)
{
    int uniform = 1;
    for (size_t s = 1; s < t->nservers; s++)
        uniform &= t->servers[s].ndevices == t->servers[0].ndevices;
    printf("devices per server: ");
    for (size_t s = 0; s < t->nservers; s++) {
        printf("%s%zu", s ? " " : "", t->servers[s].ndevices);
        if (uniform)
            break;
    }
    printf("\n");
}

static void print_endpoint(const loom_ranktable_t *t, int rank)
{
    loom_rank_info_t ri;
    if (loom_ranktable_rank_info(t, rank, &ri) == LOOM_SUCCESS)
        printf("rank %d: server %s device %d -> %s:%d\n", ri.rank, ri.server_id,
               ri.device_id, ri.address, ri.port);
}

static cJSON *endpoint_json(const loom_ranktable_t *t, int rank)
{
    loom_rank_info_t ri;
    cJSON *o = cJSON_CreateObject();
    if (!o || loom_ranktable_rank_info(t, rank, &ri) != LOOM_SUCCESS)
        return o;
    cJSON_AddNumberToObject(o, "rank", ri.rank);
    cJSON_AddStringToObject(o, "server", ri.server_id);
    cJSON_AddNumberToObject(o, "server_index", ri.server_index);
    cJSON_AddNumberToObject(o, "device", ri.device_id);
    cJSON_AddStringToObject(o, "address", ri.address);
    cJSON_AddNumberToObject(o, "port", ri.port);
    cJSON_AddNumberToObject(o, "local_rank", ri.local_rank);
    cJSON_AddNumberToObject(o, "local_size", ri.local_size);
    return o;
}

static int check_json(const char *file, const struct loom_ranktable *t,
                      const loom_diag_t *diag, int valid, int rank, int local)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        fprintf(stderr, "loom-ranktable: out of memory\n");
        return EXIT_INVALID;
    }
    cJSON_AddStringToObject(root, "file", file);
    cJSON_AddBoolToObject(root, "valid", valid);
    if (t && t->version)
        cJSON_AddStringToObject(root, "version", t->version);
    else
        cJSON_AddNullToObject(root, "version");
    cJSON_AddNumberToObject(root, "servers", t ? (double)t->nservers : 0);
    cJSON_AddNumberToObject(root, "ranks", (double)table_ndevices(t));
    cJSON *errors = cJSON_AddArrayToObject(root, "errors");
    cJSON *warnings = cJSON_AddArrayToObject(root, "warnings");
    size_t n = 0;
    loom_diag_count(diag, &n);
    for (size_t i = 0; i < n; i++) {
        loom_diag_severity_t sev;
        const char *path, *msg;
        loom_diag_get(diag, i, &sev, &path, &msg);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", path);
        cJSON_AddStringToObject(e, "message", msg);
        cJSON_AddItemToArray(sev == LOOM_DIAG_ERROR ? errors : warnings, e);
    }
    if (valid && rank >= 0) {
        cJSON_AddItemToObject(root, "rank", endpoint_json(t, rank));
    } else if (valid) {
        cJSON *eps = cJSON_AddArrayToObject(root, "endpoints");
        for (int r = 0; r < t->nranks; r++)
            cJSON_AddItemToArray(eps, endpoint_json(t, r));
    }
    int local_status = valid && local ? loom_rt_local_json(t, rank, root) : 0;
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "loom-ranktable: out of memory\n");
        return EXIT_INVALID;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return valid && local_status == 0 ? 0 : EXIT_INVALID;
}

static int check_text(const char *file, const struct loom_ranktable *t,
                      const loom_diag_t *diag, int valid, int rank, int local)
{
    printf("%s: %s\n", file, valid ? "valid rank table" : "INVALID rank table");
    if (t) {
        printf("version: %s\n", t->version ? t->version : "(none)");
        printf("servers: %zu\n", t->nservers);
        printf("ranks: %zu\n", table_ndevices(t));
        if (t->nservers)
            print_devices_per_server(t);
    }
    if (valid && rank >= 0)
        print_endpoint(t, rank);
    else if (valid)
        for (int r = 0; r < t->nranks; r++)
            print_endpoint(t, r);
    size_t n = 0, nerr = 0;
    loom_diag_count(diag, &n);
    for (size_t i = 0; i < n; i++) {
        loom_diag_severity_t sev;
        const char *path, *msg;
        loom_diag_get(diag, i, &sev, &path, &msg);
        nerr += sev == LOOM_DIAG_ERROR;
        printf("%s: %s%s%s\n", sev == LOOM_DIAG_ERROR ? "error" : "warning",
               path, path[0] ? ": " : "", msg);
    }
    printf("%zu error%s, %zu warning%s\n", nerr, nerr == 1 ? "" : "s",
           n - nerr, n - nerr == 1 ? "" : "s");
    if (valid && local)
        return loom_rt_local_text(t, rank) == 0 ? 0 : EXIT_INVALID;
    return valid ? 0 : EXIT_INVALID;
}

static int cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rank", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"local", no_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, local = 0, rank = -1, c, ok;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            rank = parse_int(optarg, 0, 1 << 30, &ok);
            if (!ok)
                return usage_short(check_usage, "check: --rank needs a rank "
                                                "number >= 0, not \"%s\"",
                                   optarg);
            break;
        case 'j':
            json = 1;
            break;
        case 'l':
            local = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage_short(check_usage, "check: unknown option \"%s\"",
                               argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_short(check_usage, "check: give exactly one FILE");
    const char *file = argv[optind];

    struct loom_ranktable *t = NULL;
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_rt_load_partial(file, &t, &diag);
    if (!diag) {
        fprintf(stderr, "loom-ranktable: %s: %s\n", file,
                loom_result_string(res));
        loom_ranktable_free(t);
        return EXIT_INVALID;
    }
    int valid = res == LOOM_SUCCESS;
    if (res == LOOM_ERROR_IO) {
        /* not a verdict on a table: there is none to judge */
        size_t n = 0;
        const char *msg = "cannot read it";
        loom_diag_severity_t sev;
        const char *path;
        if (loom_diag_count(diag, &n) == LOOM_SUCCESS && n > 0)
            loom_diag_get(diag, n - 1, &sev, &path, &msg);
        cJSON *o = json ? cJSON_CreateObject() : NULL;
        char *text = NULL;
        if (o && cJSON_AddStringToObject(o, "file", file) &&
            cJSON_AddFalseToObject(o, "readable") && cJSON_AddFalseToObject(o, "valid") &&
            cJSON_AddStringToObject(o, "error", msg))
            text = cJSON_Print(o);
        if (text)
            printf("%s\n", text);
        else
            fprintf(stderr, "loom-ranktable: cannot read the rank table: %s\n", msg);
        cJSON_free(text);
        cJSON_Delete(o);
        loom_diag_free(diag);
        loom_ranktable_free(t);
        return EXIT_INVALID;
    }
    if (valid && rank >= t->nranks) {
        /* a question about the table, not a fault in it */
        fprintf(stderr, "loom-ranktable: check --rank %d: out of range: %s is a valid "
                "rank table of %d rank%s (0..%d)\n", rank, file, t->nranks,
                t->nranks == 1 ? "" : "s", t->nranks - 1);
        loom_diag_free(diag);
        loom_ranktable_free(t);
        return EXIT_USAGE;
    }
    int status = json ? check_json(file, t, diag, valid, rank, local)
                      : check_text(file, t, diag, valid, rank, local);
    loom_diag_free(diag);
    loom_ranktable_free(t);
    return status;
}

/* ------------------------------------------------------------------------ */
/* generate                                                                  */
/* ------------------------------------------------------------------------ */

struct name_list {
    char **items;
    size_t n;
};

static void name_list_free(struct name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* A host name as DNS writes them: labels of letters, digits and '-', not
 * starting or ending with '-', joined by dots, at most 253 characters. */
static int is_host_name(const char *s)
{
    size_t len = strlen(s), label = 0;
    if (len == 0 || len > 253)
        return 0;
    for (size_t i = 0; i <= len; i++) {
        char c = s[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || s[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || (c == '-' && label > 0);
        if (!ok)
            return 0;
        label++;
    }
    return 1;
}

/* Split "a,b,c"; each item must be an IP address (or, when names is set, a
 * host name) and appear once. Returns 0, or prints why and returns -1. */
static int name_list_parse(const char *opt, const char *s, int names,
                           struct name_list *l)
{
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    l->items = calloc(n, sizeof *l->items);
    if (!l->items)
        return -1;
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        l->items[i] = strndup(p, len);
        if (!l->items[i])
            return -1;
        l->n++;
        p += len + 1;
        if (!loom_rt_is_ip(l->items[i]) &&
            !(names && is_host_name(l->items[i]))) {
            usage_short(generate_usage, "generate: %s: \"%s\" is not an IPv4 "
                                        "or IPv6 address%s", opt, l->items[i],
                        names ? " or a host name" : "");
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(l->items[j], l->items[i]) == 0) {
                usage_short(generate_usage, "generate: %s: \"%s\" is given "
                                            "twice", opt, l->items[i]);
                return -1;
            }
        }
    }
    return 0;
}

static cJSON *add_str(cJSON *obj, const char *key, const char *val)
{
    return cJSON_AddStringToObject(obj, key, val);
}

static cJSON *add_int_str(cJSON *obj, const char *key, size_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", v);
    return cJSON_AddStringToObject(obj, key, buf);
}

struct gen_spec {
    const struct name_list *servers;
    size_t ndev;
    const struct name_list *dev_ips;   /* servers*ndev, or empty */
    const struct name_list *host_ips;  /* one per server, or empty */
    int host_nic;                      /* host_ip for every server */
    int v12;
};

/* The table as MindSpore's hccl_tools.py lays it out. NULL: out of memory. */
static cJSON *generate_table(const struct gen_spec *g)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    int ok = add_str(root, "version", g->v12 ? "1.2" : "1.0") &&
             add_int_str(root, "server_count", g->servers->n);
    cJSON *list = cJSON_AddArrayToObject(root, "server_list");
    ok = ok && list;
    size_t rank = 0;
    for (size_t s = 0; ok && s < g->servers->n; s++) {
        cJSON *srv = cJSON_CreateObject();
        ok = srv && cJSON_AddItemToArray(list, srv) &&
             add_str(srv, "server_id", g->servers->items[s]);
        if (ok && g->host_ips->n)
            ok = add_str(srv, "host_ip", g->host_ips->items[s]) != NULL;
        else if (ok && g->host_nic)
            ok = add_str(srv, "host_ip", g->servers->items[s]) != NULL;
        cJSON *devs = ok ? cJSON_AddArrayToObject(srv, "device") : NULL;
        ok = ok && devs;
        for (size_t d = 0; ok && d < g->ndev; d++, rank++) {
            cJSON *dev = cJSON_CreateObject();
            ok = dev && cJSON_AddItemToArray(devs, dev) &&
                 add_int_str(dev, "device_id", d);
            if (ok && g->dev_ips->n)
                ok = add_str(dev, "device_ip", g->dev_ips->items[rank]) != NULL;
            if (ok && g->v12)
                ok = add_int_str(dev, "super_device_id", rank) != NULL;
            ok = ok && add_int_str(dev, "rank_id", rank);
        }
        ok = ok && add_str(srv, "host_nic_ip", "reserve");
    }
    if (ok && g->v12) {
        cJSON *pods = cJSON_AddArrayToObject(root, "super_pod_list");
        cJSON *pod = cJSON_CreateObject();
        ok = pods && pod && cJSON_AddItemToArray(pods, pod) &&
             add_str(pod, "super_pod_id", "0");
        cJSON *members = ok ? cJSON_AddArrayToObject(pod, "server_list") : NULL;
        ok = ok && members;
        for (size_t s = 0; ok && s < g->servers->n; s++) {
            cJSON *m = cJSON_CreateObject();
            ok = m && cJSON_AddItemToArray(members, m) &&
                 add_str(m, "server_id", g->servers->items[s]);
        }
    }
    ok = ok && add_str(root, "status", "completed");
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---- output as Python's json.dump(indent=4), which hccl_tools.py uses -- */

struct out_buf {
    char *p;
    size_t len, cap;
    int nomem;
};

static void out_add(struct out_buf *b, const char *s, size_t n)
{
    if (b->nomem)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->nomem = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void out_str(struct out_buf *b, const char *s)
{
    out_add(b, s, strlen(s));
}

static void out_indent(struct out_buf *b, int level)
{
    for (int i = 0; i < level; i++)
        out_str(b, "    ");
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void out_quoted(struct out_buf *b, const char *s)
{
    out_str(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
        } else {
            esc[0] = (char)c, esc[1] = 0;
        }
        out_str(b, esc);
    }
    out_str(b, "\"");
}

/* Strings, integers, objects and arrays: all the generators write. */
static void out_value(struct out_buf *b, const cJSON *v, int level)
{
    if (cJSON_IsString(v)) {
        out_quoted(b, v->valuestring);
        return;
    }
    if (cJSON_IsNumber(v)) {
        char num[32];
        snprintf(num, sizeof num, "%.0f", v->valuedouble);
        out_str(b, num);
        return;
    }
    int obj = cJSON_IsObject(v);
    if (!v->child) {
        out_str(b, obj ? "{}" : "[]");
        return;
    }
    out_str(b, obj ? "{\n" : "[\n");
    for (const cJSON *c = v->child; c; c = c->next) {
        out_indent(b, level + 1);
        if (obj) {
            out_quoted(b, c->string);
            out_str(b, ": ");
        }
        out_value(b, c, level + 1);
        out_str(b, c->next ? ",\n" : "\n");
    }
    out_indent(b, level);
    out_str(b, obj ? "}" : "]");
}

static char *print_table(const cJSON *root)
{
    struct out_buf b = {0};
    out_value(&b, root, 0);
    out_str(&b, "\n");
    if (b.nomem) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"servers", required_argument, NULL, 's'},
        {"devices", required_argument, NULL, 'd'},
        {"device-ips", required_argument, NULL, 'i'},
        {"host-ips", required_argument, NULL, 'H'},
        {"version", required_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *servers_arg = NULL, *ips_arg = NULL, *hosts_arg = NULL;
    const char *out = NULL;
    int ndev = -1, v12 = 0, v2 = 0, c, ok;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            servers_arg = optarg;
            break;
        case 'd':
            ndev = parse_int(optarg, 1, GEN_MAX_DEVICES, &ok);
            if (!ok)
                return usage_short(generate_usage, "generate: --devices needs "
                                                   "a number in 1..%d, not "
                                                   "\"%s\"",
                                   GEN_MAX_DEVICES, optarg);
            break;
        case 'i':
            ips_arg = optarg;
            break;
        case 'H':
            hosts_arg = optarg;
            break;
        case 'v':
            if (strcmp(optarg, "1.0") != 0 && strcmp(optarg, "1.2") != 0 &&
                strcmp(optarg, "2.0") != 0)
                return usage_short(generate_usage, "generate: --version is "
                                                   "1.0, 1.2 or 2.0, not "
                                                   "\"%s\"",
                                   optarg);
            v12 = strcmp(optarg, "1.2") == 0;
            v2 = strcmp(optarg, "2.0") == 0;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage_short(generate_usage, "generate: unknown option or "
                                               "missing value \"%s\"",
                               argv[optind - 1]);
        }
    }
    if (optind != argc)
        return usage_short(generate_usage, "generate: unexpected argument "
                                           "\"%s\"", argv[optind]);
    if (!servers_arg)
        return usage_short(generate_usage, "generate: --servers is required");
    if (ndev < 0)
        return usage_short(generate_usage, "generate: --devices is required");
    if (v2 && ndev > LOOM_RT_V2_MAX_DEVICES)
        return usage_short(generate_usage, "generate: --devices is at most "
                                           "%d in a version 2.0 table "
                                           "(device_id and local_id 0..%d)",
                           LOOM_RT_V2_MAX_DEVICES, LOOM_RT_V2_MAX_DEVICES - 1);

    struct name_list servers = {0}, dev_ips = {0}, host_ips = {0};
    int status = EXIT_USAGE;
    cJSON *root = NULL;
    char *text = NULL;
    if (name_list_parse("--servers", servers_arg, 1, &servers) < 0)
        goto out;
    if (ips_arg && name_list_parse("--device-ips", ips_arg, 0, &dev_ips) < 0)
        goto out;
    if (hosts_arg && name_list_parse("--host-ips", hosts_arg, 0, &host_ips) < 0)
        goto out;
    if (ips_arg && dev_ips.n != servers.n * (size_t)ndev) {
        usage_short(generate_usage, "generate: --device-ips has %zu "
                                    "addresses; %zu servers x %d devices need "
                                    "%zu",
                    dev_ips.n, servers.n, ndev, servers.n * (size_t)ndev);
        goto out;
    }
    if (hosts_arg && host_ips.n != servers.n) {
        usage_short(generate_usage, "generate: --host-ips has %zu addresses "
                                    "for %zu servers", host_ips.n, servers.n);
        goto out;
    }
    /* Without device_ip the servers' addresses are the endpoints: a host
     * name among them needs its address from --host-ips. */
    for (size_t s = 0; !ips_arg && !hosts_arg && s < servers.n; s++) {
        if (loom_rt_is_ip(servers.items[s]))
            continue;
        usage_short(generate_usage, "generate: server \"%s\" is a host name "
                                    "and no device has a device_ip: give its "
                                    "address with --host-ips (or give "
                                    "--device-ips)",
                    servers.items[s]);
        goto out;
    }

    status = EXIT_INVALID;
    struct gen_spec spec = {
        .servers = &servers,
        .ndev = (size_t)ndev,
        .dev_ips = &dev_ips,
        .host_ips = &host_ips,
        /* several servers and no device_ip: run on the hosts' NICs */
        .host_nic = !ips_arg && servers.n > 1,
        .v12 = v12,
    };
    root = v2 ? loom_rt_generate_v2((const char *const *)servers.items,
                                    servers.n, (size_t)ndev,
                                    ips_arg ? (const char *const *)dev_ips.items
                                            : NULL,
                                    hosts_arg
                                        ? (const char *const *)host_ips.items
                                        : NULL)
              : generate_table(&spec);
    text = root ? print_table(root) : NULL;
    if (!text) {
        fprintf(stderr, "loom-ranktable: out of memory\n");
        goto out;
    }
    /* What we write must pass check. */
    loom_ranktable_t *t = NULL;
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_ranktable_parse(text, strlen(text), "generated",
                                             &t, &diag);
    if (res != LOOM_SUCCESS) {
        const char *path = "", *msg = loom_result_string(res);
        loom_diag_get(diag, 0, NULL, &path, &msg);
        fprintf(stderr, "loom-ranktable: generated table is not valid: %s: "
                        "%s\n", path, msg);
        loom_diag_free(diag);
        goto out;
    }
    loom_ranktable_free(t);
    loom_diag_free(diag);

    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "loom-ranktable: cannot create \"%s\": %s\n", out,
                strerror(errno));
        goto out;
    }
    int werr = fputs(text, f) < 0;
    werr |= out ? fclose(f) != 0 : fflush(f) != 0;
    if (werr) {
        fprintf(stderr, "loom-ranktable: cannot write \"%s\": %s\n",
                out ? out : "stdout", strerror(errno));
        goto out;
    }
    status = 0;
out:
    free(text);
    cJSON_Delete(root);
    name_list_free(&servers);
    name_list_free(&dev_ips);
    name_list_free(&host_ips);
    return status;
}

/* ------------------------------------------------------------------------ */

static int cmd_help(int argc, char **argv)
{
    fputs(usage_text, stdout);
    return 0;
}

/* With the features, which name the transports and so link them in: the
 * probe and the checks know their LOOM_* rows (config.h). */
static int cmd_version(int argc, char **argv)
{
    const char *features = "";
    loom_get_features(&features);
    printf("loom-ranktable (Loom) %s\nfeatures: %s\n", PACKAGE_VERSION, features);
    return 0;
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
} commands[] = {
    {"check", cmd_check},
    {"probe", loom_probe_main},
    {"generate", cmd_generate},
    {"help", cmd_help},
    {"--help", cmd_help},
    {"-h", cmd_help},
    {"--version", cmd_version},
    {"-V", cmd_version},
};

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("give a command");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    return usage_error("unknown command \"%s\"", argv[1]);
}
