/* probe.c - `loom-ranktable probe [FILE]` (see probe.h, docs/probe.md).
 *
 * Steps, every one bounded in time:
 *  1. Load and validate the table; open a TCP listener on this rank's table
 *     address (ephemeral port).
 *  2. Rendezvous (loom_bootstrap) at rank 0's table endpoint with the
 *     table hash: every rank learns every listener; a different table is named.
 *  3. Ranks 1..n-1 open a control connection to rank 0's listener.
 *  4. Rounds (circle method): rank 0 sends GO r on every control connection;
 *     each rank tests its partner of round r (the lower rank connects, with a
 *     timeout) and answers DONE with its measurement; rank 0 waits for all
 *     DONEs before the next GO, so a dead pair delays the others by at most
 *     the timeout.
 *  5. Rank 0 prints the report, then sends END with the exit status, which
 *     every rank exits with.
 *
 * This file: the schedule, the command line, the table, the listener, the
 * rendezvous and main; the wire format is in probe_internal.h. */
#include "build_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "config.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/oob.h"
#include "transport/net.h"
#include "probe.h"
#include "probe_internal.h"

/* ------------------------------------------------------------- schedule */

int loom_probe_nrounds(int n)
{
    return n < 2 ? 0 : n + (n & 1) - 1;
}

int loom_probe_peer(int n, int round, int rank)
{
    if (n < 2 || round < 0 || round >= loom_probe_nrounds(n) || rank < 0 ||
        rank >= n)
        return -1;
    int m = n + (n & 1);    /* odd n: a phantom rank m-1; its partner idles */
    int peer;
    if (rank == m - 1)
        peer = round;
    else if (rank == round)
        peer = m - 1;
    else
        peer = ((2 * round - rank) % (m - 1) + (m - 1)) % (m - 1);
    return peer < n ? peer : -1;
}

/* ---------------------------------------------------------------- setup */

static const char probe_usage[] =
    "usage: loom-ranktable probe [FILE] [--rank N] [--json] [--timeout S]\n"
    "                            [--size BYTES] [--iters N]\n"
    "Run one per rank. FILE defaults to LOOM_RANK_TABLE, then RANK_TABLE_FILE;\n"
    "the rank to --rank, then LOOM_RANK, RANK_ID, RANK, OMPI_COMM_WORLD_RANK,\n"
    "PMI_RANK, SLURM_PROCID. --timeout: per-pair connect timeout (default 5 s);\n"
    "--size: bandwidth message size, K/M/G suffixes (default 4M); --iters:\n"
    "bandwidth messages each way (default 10). Rank 0 prints the report.\n"
    "Exit status: 0 all pairs reachable, 1 unreachable pair or failure,\n"
    "2 bad command line.\n";

static int probe_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "loom-ranktable probe: %s%s%s%s\n\n%s", what,
            arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "", probe_usage);
    return EXIT_USAGE;
}

/* "4M", "65536", "1G": bytes in 1..PROBE_MAX_SIZE, or 0. */
static uint64_t parse_size(const char *s)
{
    size_t v = 0;
    if (loom_parse_size(s, &v) < 0 || v < 1 || v > PROBE_MAX_SIZE)
        return 0;
    return v;
}

/* A decimal in lo..hi, else -1. */
static int parse_count(const char *s, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return s[0] && !*end && !errno && v >= lo && v <= hi ? (int)v : -1;
}

static int probe_parse(int argc, char **argv, struct probe_opts *o)
{
    static const struct option opts[] = {
        {"rank", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct probe_opts){.rank = -1, .timeout = 5.0, .size = 4u << 20,
                             .iters = 10};
    const char *rank_arg = NULL;
    int c;
    char *end;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            rank_arg = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 't':
            o->timeout = strtod(optarg, &end);
            if (end == optarg || *end || !(o->timeout >= 0.01) ||
                o->timeout > 3600)
                return probe_usage_error("--timeout needs seconds in 0.01..3600, "
                                         "not", optarg);
            break;
        case 's':
            o->size = parse_size(optarg);
            if (!o->size)
                return probe_usage_error("--size needs bytes in 1..1G (K/M/G "
                                         "suffixes), not", optarg);
            break;
        case 'i': {
            int v = parse_count(optarg, 1, PROBE_MAX_ITERS);
            if (v < 0)
                return probe_usage_error("--iters needs a count in 1..100000, not",
                                         optarg);
            o->iters = (uint32_t)v;
            break;
        }
        case 'h':
            fputs(probe_usage, stdout);
            return -1;
        default:
            return probe_usage_error("unknown option or missing value",
                                     argv[optind - 1]);
        }
    }
    if (optind < argc - 1)
        return probe_usage_error("give at most one FILE; extra argument",
                                 argv[optind + 1]);
    o->file = optind < argc ? argv[optind] : getenv("LOOM_RANK_TABLE");
    if (!o->file || !o->file[0])
        o->file = getenv("RANK_TABLE_FILE");
    if (!o->file || !o->file[0])
        return probe_usage_error("no rank table: give FILE or set "
                                 "LOOM_RANK_TABLE or RANK_TABLE_FILE", NULL);
    static const char *const rank_vars[] = {"LOOM_RANK", "RANK_ID", "RANK",
                                            "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "SLURM_PROCID"};
    for (size_t i = 0; !rank_arg && i < sizeof rank_vars / sizeof *rank_vars; i++)
        rank_arg = getenv(rank_vars[i]);
    if (!rank_arg)
        return probe_usage_error("no rank: give --rank N or run under a launcher "
                                 "(LOOM_RANK, RANK_ID, RANK, OMPI_COMM_WORLD_RANK, "
                                 "PMI_RANK, SLURM_PROCID)", NULL);
    o->rank = parse_count(rank_arg, 0, PROBE_MAX_RANKS - 1);
    if (o->rank < 0)
        return probe_usage_error("the rank must be a number in 0..4095, not", rank_arg);
    return 0;
}

/* Load and validate; print every error as `check` does. */
static int probe_load(struct probe *p)
{
    loom_diag_t *diag = NULL;
    loom_result_t res = loom_ranktable_load(p->o.file, &p->table, &diag);
    if (res != LOOM_SUCCESS) {
        size_t n = 0;
        loom_diag_count(diag, &n);
        fprintf(stderr, "loom-ranktable probe: %s: %s\n", p->o.file,
                res == LOOM_ERROR_INVALID_RANKTABLE ? "INVALID rank table"
                                                    : loom_result_string(res));
        for (size_t i = 0; i < n; i++) {
            loom_diag_severity_t sev;
            const char *path, *msg;
            loom_diag_get(diag, i, &sev, &path, &msg);
            if (sev == LOOM_DIAG_ERROR)
                fprintf(stderr, "error: %s%s%s\n", path, path[0] ? ": " : "", msg);
        }
        loom_diag_free(diag);
        return EXIT_UNREACHABLE;
    }
    loom_diag_free(diag);
    loom_ranktable_nranks(p->table, &p->n);
    loom_ranktable_nservers(p->table, &p->nservers);
    loom_ranktable_hash(p->table, &p->hash);
    if (p->o.rank >= p->n) {
        fprintf(stderr, "loom-ranktable probe: rank %d does not exist: %s has "
                "%d rank%s (0..%d)\n", p->o.rank, p->o.file, p->n,
                p->n == 1 ? "" : "s", p->n - 1);
        return EXIT_USAGE;
    }
    return 0;
}

/* A listener on this rank's table address, any port; its wire address goes
 * into ep (PROBE_EP_LEN bytes). */
static int probe_listen(struct probe *p, uint8_t *ep, char *err, size_t errlen)
{
    loom_rank_info_t ri;
    struct sockaddr_storage ss;
    socklen_t sl;
    char e[256];
    loom_ranktable_rank_info(p->table, p->rank, &ri);
    if (loom_net_resolve(ri.address, 0, &ss, &sl, e, sizeof e) < 0) {
        snprintf(err, errlen, "cannot use this rank's address: %s", e);
        return -1;
    }
    p->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&ss, sl) < 0 ||
        listen(p->lfd, p->n + 16) < 0 ||
        getsockname(p->lfd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errlen, "cannot listen on %s (this rank's table address): "
                 "%s", ri.address, strerror(errno));
        return -1;
    }
    loom_net_to_wire((struct sockaddr *)&ss, ep);
    return 0;
}

static const char *probe_describe(void *ctx, int rank)
{
    struct probe *p = ctx;
    loom_rank_info_t ri;
    if (loom_ranktable_rank_info(p->table, rank, &ri) != LOOM_SUCCESS)
        return NULL;
    snprintf(p->describe_buf, sizeof p->describe_buf, "rank %d (server %s, "
             "%s:%d)", rank, ri.server_id, ri.address, ri.port);
    return p->describe_buf;
}

/* Step 2: learn every rank's listener: rendezvous at rank 0's table
 * endpoint (the job's bootstrap and out-of-band service), then each rank
 * publishes its listener and looks up everyone else's. */
#define PROBE_OOB_TAG_EP 0x0020u
static int probe_bootstrap(struct probe *p, const uint8_t *my_ep, char *err,
                           size_t errlen)
{
    uint8_t *all = calloc((size_t)p->n, PROBE_EP_LEN);
    if (!all) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    loom_rank_info_t r0, me;
    loom_ranktable_rank_info(p->table, 0, &r0);
    loom_ranktable_rank_info(p->table, p->rank, &me);
    struct loom_boot_params bp = {
        .struct_size = sizeof bp,
        .rank = p->rank,
        .nranks = p->n,
        .root_host = r0.address,
        .root_port = r0.port,
        .table_hash = p->hash,
        .timeout = loom_config()->bootstrap_timeout,
        .describe = probe_describe,
        .describe_ctx = p,
    };
    char e[1024] = "";
    int rc = 0;
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    struct loom_oob *oob = NULL;
    memcpy(all + (size_t)p->rank * PROBE_EP_LEN, my_ep, PROBE_EP_LEN);
    if (loom_oob_open(p->rank, p->n, p->rank == 0 ? r0.address : me.address,
                      p->rank == 0 ? r0.port : 0, &oob, entry, e, sizeof e) < 0 ||
        loom_bootstrap(&bp, oob, entry, &p->comm_id, NULL, e, sizeof e) < 0 ||
        loom_oob_publish(oob, PROBE_OOB_TAG_EP, my_ep, PROBE_EP_LEN) < 0) {
        /* e names rank 0's endpoint, or the rank whose table differs. */
        snprintf(err, errlen, "%s%s", strncmp(e, "bootstrap", 9) ? "bootstrap: "
                                                                 : "", e);
        rc = -1;
    }
    for (int r = 0; rc == 0 && r < p->n; r++)
        if (r != p->rank && loom_oob_lookup(oob, r, PROBE_OOB_TAG_EP) < 0)
            rc = -1;
    for (int r = 0; rc == 0 && r < p->n; r++) {
        void *buf = NULL;
        size_t len = 0;
        if (r != p->rank) {
            if (loom_oob_recv(oob, PROBE_OOB_TAG_EP, r, bp.timeout, NULL, &buf, &len) < 0 ||
                len != PROBE_EP_LEN) {
                snprintf(err, errlen, "rank %d's listener was not learnt: %s", r,
                         loom_oob_error(oob));
                free(buf);
                rc = -1;
                break;
            }
            memcpy(all + (size_t)r * PROBE_EP_LEN, buf, PROBE_EP_LEN);
            free(buf);
        }
        if (loom_net_from_wire(all + (size_t)r * PROBE_EP_LEN, &p->ep[r],
                               &p->ep_len[r]) < 0) {
            snprintf(err, errlen, "rank %d sent a malformed endpoint", r);
            rc = -1;
            break;
        }
        loom_net_format((struct sockaddr *)&p->ep[r], p->ep_str[r],
                        sizeof p->ep_str[r]);
    }
    p->oob = oob;
    free(all);
    return rc;
}

static int probe_alloc(struct probe *p)
{
    size_t n = (size_t)p->n;
    p->ep = calloc(n, sizeof *p->ep);
    p->ep_len = calloc(n, sizeof *p->ep_len);
    p->ep_str = calloc(n, sizeof *p->ep_str);
    p->ctl = malloc(n * sizeof *p->ctl);
    p->links = calloc(p->rank == 0 ? n * n : 1, sizeof *p->links);
    p->buf = calloc(1, p->o.size);
    if (!p->ep || !p->ep_len || !p->ep_str || !p->ctl || !p->links || !p->buf)
        return -1;
    for (size_t r = 0; r < n; r++)
        p->ctl[r] = -1;
    return 0;
}

static void probe_free(struct probe *p)
{
    for (int r = 0; p->ctl && r < p->n; r++)
        if (p->ctl[r] >= 0)
            close(p->ctl[r]);
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->oob)
        loom_oob_close(p->oob);
    free(p->ep);
    free(p->ep_len);
    free(p->ep_str);
    free(p->ctl);
    free(p->links);
    free(p->buf);
    loom_ranktable_free(p->table);
}

/* For tests: LOOM_TEST_PROBE_REFUSE=R makes rank R close its listener once
 * the bootstrap is done (rank 0: once the control connections are in), so
 * every pair in which R accepts (R is the higher rank) is refused. */
void probe_test_refuse(struct probe *p)
{
    const char *s = getenv("LOOM_TEST_PROBE_REFUSE");
    if (s && parse_count(s, 0, PROBE_MAX_RANKS - 1) == p->rank && p->lfd >= 0) {
        close(p->lfd);
        p->lfd = -1;
    }
}

int loom_probe_main(int argc, char **argv)
{
    struct probe p = {.lfd = -1};
    char err[1200] = "";
    uint8_t my_ep[PROBE_EP_LEN];
    int status = probe_parse(argc, argv, &p.o);
    if (status)
        return status < 0 ? 0 : status;
    p.rank = p.o.rank;
    status = probe_load(&p);
    if (status)
        goto out;
    status = EXIT_UNREACHABLE;
    if (probe_alloc(&p) < 0) {
        snprintf(err, sizeof err, "out of memory for %d ranks", p.n);
        goto fail;
    }
    if (probe_listen(&p, my_ep, err, sizeof err) < 0 ||
        probe_bootstrap(&p, my_ep, err, sizeof err) < 0)
        goto fail;
    if (p.rank != 0) {
        int rc = probe_rank_run(&p, err, sizeof err);
        if (rc < 0)
            goto fail;
        status = rc;
        goto out;
    }
    if (probe_root_controls(&p, err, sizeof err) < 0)
        goto fail;
    probe_test_refuse(&p);
    if (probe_root_rounds(&p, err, sizeof err) < 0) {
        probe_root_end(&p, EXIT_UNREACHABLE);
        goto fail;
    }
    status = p.o.json ? probe_report_json(&p) : probe_report_text(&p);
    fflush(stdout);
    probe_root_end(&p, status);
    goto out;
fail:
    fprintf(stderr, "loom-ranktable probe: rank %d: %s\n", p.rank, err);
out:
    probe_free(&p);
    return status;
}

