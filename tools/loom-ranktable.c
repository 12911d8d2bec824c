/* loom-ranktable - check and generate HCCL rank tables.
 *
 *   loom-ranktable check FILE [--rank N] [--json]
 *   loom-ranktable probe [FILE] [--rank N] [--json] [--timeout S]
 *                  [--size BYTES] [--iters N] [--plot FILE.png]
 *                                                  (one process per rank)
 *   loom-ranktable probe --from-json SAVED.json [--json] [--plot FILE.png]
 *   loom-ranktable generate --servers IP[,IP...] --devices N
 *                  [--device-ips IP,...] [--version 1.0|1.2] [-o FILE]
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
#include "probe.h"

#define EXIT_INVALID 1
#define EXIT_USAGE 2
#define GEN_MAX_DEVICES 1024

static const char usage_text[] =
    "usage: loom-ranktable COMMAND [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  check FILE [--rank N] [--json]\n"
    "      Validate an HCCL rank table (version 1.0 or 1.2): print a summary,\n"
    "      each rank's endpoint, and every error and warning with its JSON\n"
    "      path. --rank N also requires rank N to exist and shows only its\n"
    "      endpoint. --json prints one JSON object instead.\n"
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
    "  generate --servers IP[,IP...] --devices N [--device-ips IP,...]\n"
    "           [--version 1.0|1.2] [-o FILE]\n"
    "      Write a valid table (to stdout, or FILE) with N devices on each\n"
    "      server. --device-ips gives servers*N addresses, server by server;\n"
    "      without it one server needs none (its id is the address) and\n"
    "      several servers need --devices 1 (the server IP is the device IP).\n"
    "      Version 1.2 adds a super_pod_list holding every server.\n"
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
                      const loom_diag_t *diag, int valid, int rank)
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
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "loom-ranktable: out of memory\n");
        return EXIT_INVALID;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return valid ? 0 : EXIT_INVALID;
}

static int check_text(const char *file, const struct loom_ranktable *t,
                      const loom_diag_t *diag, int valid, int rank)
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
    return valid ? 0 : EXIT_INVALID;
}

static int cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rank", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, rank = -1, c, ok;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            rank = parse_int(optarg, 0, 1 << 30, &ok);
            if (!ok)
                return usage_error("check: --rank needs a rank number >= 0, "
                                   "not \"%s\"", optarg);
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage_error("check: unknown option \"%s\"",
                               argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_error("check: give exactly one FILE");
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
    if (valid && rank >= t->nranks) {
        loom_rt_error(diag, "", "rank %d does not exist: the table has %d "
                                "rank%s (0..%d)",
                      rank, t->nranks, t->nranks == 1 ? "" : "s",
                      t->nranks - 1);
        valid = 0;
    }
    int status = json ? check_json(file, t, diag, valid, rank)
                      : check_text(file, t, diag, valid, rank);
    loom_diag_free(diag);
    loom_ranktable_free(t);
    return status;
}

/* ------------------------------------------------------------------------ */
/* generate                                                                  */
/* ------------------------------------------------------------------------ */

struct ip_list {
    char **items;
    size_t n;
};

static void ip_list_free(struct ip_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* Split "a,b,c"; each item must be an IP address and appear once. Returns 0,
 * or prints why and returns -1. */
static int ip_list_parse(const char *opt, const char *s, struct ip_list *l)
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
        if (!loom_rt_is_ip(l->items[i])) {
            usage_error("generate: %s: \"%s\" is not an IPv4 or IPv6 address",
                        opt, l->items[i]);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(l->items[j], l->items[i]) == 0) {
                usage_error("generate: %s: \"%s\" is given twice", opt,
                            l->items[i]);
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

/* The table as MindSpore's hccl_tools.py lays it out. NULL: out of memory. */
static cJSON *generate_table(const struct ip_list *servers, size_t ndev,
                             const struct ip_list *dev_ips, int v12)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    int ok = add_str(root, "version", v12 ? "1.2" : "1.0") &&
             add_int_str(root, "server_count", servers->n);
    cJSON *list = cJSON_AddArrayToObject(root, "server_list");
    ok = ok && list;
    size_t rank = 0;
    for (size_t s = 0; ok && s < servers->n; s++) {
        cJSON *srv = cJSON_CreateObject();
        ok = srv && cJSON_AddItemToArray(list, srv) &&
             add_str(srv, "server_id", servers->items[s]);
        cJSON *devs = ok ? cJSON_AddArrayToObject(srv, "device") : NULL;
        ok = ok && devs;
        for (size_t d = 0; ok && d < ndev; d++, rank++) {
            cJSON *dev = cJSON_CreateObject();
            ok = dev && cJSON_AddItemToArray(devs, dev) &&
                 add_int_str(dev, "device_id", d);
            if (ok && dev_ips->n)
                ok = add_str(dev, "device_ip", dev_ips->items[rank]) != NULL;
            else if (ok && servers->n > 1)
                ok = add_str(dev, "device_ip", servers->items[s]) != NULL;
            if (ok && v12)
                ok = add_int_str(dev, "super_device_id", rank) != NULL;
            ok = ok && add_int_str(dev, "rank_id", rank);
        }
        ok = ok && add_str(srv, "host_nic_ip", "reserve");
    }
    if (ok && v12) {
        cJSON *pods = cJSON_AddArrayToObject(root, "super_pod_list");
        cJSON *pod = cJSON_CreateObject();
        ok = pods && pod && cJSON_AddItemToArray(pods, pod) &&
             add_str(pod, "super_pod_id", "0");
        cJSON *members = ok ? cJSON_AddArrayToObject(pod, "server_list") : NULL;
        ok = ok && members;
        for (size_t s = 0; ok && s < servers->n; s++) {
            cJSON *m = cJSON_CreateObject();
            ok = m && cJSON_AddItemToArray(members, m) &&
                 add_str(m, "server_id", servers->items[s]);
        }
    }
    ok = ok && add_str(root, "status", "completed");
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"servers", required_argument, NULL, 's'},
        {"devices", required_argument, NULL, 'd'},
        {"device-ips", required_argument, NULL, 'i'},
        {"version", required_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *servers_arg = NULL, *ips_arg = NULL, *out = NULL;
    int ndev = -1, v12 = 0, c, ok;
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
                return usage_error("generate: --devices needs a number in "
                                   "1..%d, not \"%s\"", GEN_MAX_DEVICES,
                                   optarg);
            break;
        case 'i':
            ips_arg = optarg;
            break;
        case 'v':
            if (strcmp(optarg, "1.0") != 0 && strcmp(optarg, "1.2") != 0)
                return usage_error("generate: --version is 1.0 or 1.2, not "
                                   "\"%s\"", optarg);
            v12 = strcmp(optarg, "1.2") == 0;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage_error("generate: unknown option or missing value "
                               "\"%s\"", argv[optind - 1]);
        }
    }
    if (optind != argc)
        return usage_error("generate: unexpected argument \"%s\"",
                           argv[optind]);
    if (!servers_arg)
        return usage_error("generate: --servers is required");
    if (ndev < 0)
        return usage_error("generate: --devices is required");

    struct ip_list servers = {0}, dev_ips = {0};
    int status = EXIT_USAGE;
    cJSON *root = NULL;
    char *text = NULL;
    if (ip_list_parse("--servers", servers_arg, &servers) < 0)
        goto out;
    if (ips_arg && ip_list_parse("--device-ips", ips_arg, &dev_ips) < 0)
        goto out;
    if (ips_arg && dev_ips.n != servers.n * (size_t)ndev) {
        usage_error("generate: --device-ips has %zu addresses; %zu servers x "
                    "%d devices need %zu",
                    dev_ips.n, servers.n, ndev, servers.n * (size_t)ndev);
        goto out;
    }
    if (!ips_arg && servers.n > 1 && ndev > 1) {
        usage_error("generate: with several servers every device needs its "
                    "own device_ip: give --device-ips (%zu addresses)",
                    servers.n * (size_t)ndev);
        goto out;
    }

    status = EXIT_INVALID;
    root = generate_table(&servers, (size_t)ndev, &dev_ips, v12);
    text = root ? cJSON_Print(root) : NULL;
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
    int werr = fprintf(f, "%s\n", text) < 0;
    werr |= out ? fclose(f) != 0 : fflush(f) != 0;
    if (werr) {
        fprintf(stderr, "loom-ranktable: cannot write \"%s\": %s\n",
                out ? out : "stdout", strerror(errno));
        goto out;
    }
    status = 0;
out:
    cJSON_free(text);
    cJSON_Delete(root);
    ip_list_free(&servers);
    ip_list_free(&dev_ips);
    return status;
}

/* ------------------------------------------------------------------------ */

static int cmd_help(int argc, char **argv)
{
    fputs(usage_text, stdout);
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    printf("loom-ranktable (Loom) %s\n", PACKAGE_VERSION);
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
