/* probe.c - `loom-ranktable probe [FILE]` (see probe.h, docs/probe.md).
 *
 * Steps, every one bounded in time:
 *  1. Load and validate the table; listen on this rank's table endpoint
 *     (address and port: the job's).
 *  2. Ranks 1..n-1 join rank 0 at its table endpoint with their table's
 *     hash (a different table is named); rank 0 waits for all, up to the
 *     join timeout, and goes on with those that came. A rank that cannot
 *     reach rank 0 goes on alone (probe_cutoff.c): it reports what it can
 *     reach itself.
 *  3. Sweep: every rank connects to every other rank's endpoint at once.
 *  4. Rounds (circle method): rank 0 sends GO r on every control connection;
 *     each rank tests its partner of round r (the lower rank connects, with a
 *     timeout) and answers DONE with its measurement; rank 0 waits for all
 *     DONEs before the next GO, so a dead pair delays the others by at most
 *     the timeout. Pairs the sweep found unreachable are skipped.
 *  5. Rank 0 prints the report (and the heat map with --plot), then sends
 *     END with the exit status, which every rank exits with.
 *
 * This file: the schedule, the command line, the table, the listener and
 * main; the wire format is in probe_internal.h. */
#include "build_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "base/util.h"
#include "base/config.h"
#include "net/net.h"
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
    "                            [--size BYTES] [--iters N] [--plot FILE.png]\n"
    "       loom-ranktable probe --from-json SAVED.json [--json] [--plot FILE.png]\n"
    "Run one per rank. FILE defaults to LOOM_RANK_TABLE, then RANK_TABLE_FILE;\n"
    "the rank to --rank, then LOOM_RANK, RANK_ID, RANK, OMPI_COMM_WORLD_RANK,\n"
    "PMI_RANK, SLURM_PROCID. Every rank listens on its table endpoint (the\n"
    "job's port) and joins rank 0 there within LOOM_BOOTSTRAP_TIMEOUT.\n"
    "--timeout: per-pair connect timeout (default 5 s); --size: bandwidth\n"
    "message size, K/M/G suffixes (default 4M); --iters: bandwidth messages\n"
    "each way (default 10); --plot: rank 0 draws the bandwidth heat map\n"
    "(gnuplot); --from-json: report (and plot) a run saved with --json.\n"
    "Rank 0 prints the report; a rank that cannot reach rank 0 prints what it\n"
    "reaches. Exit status: 0 all pairs reachable, 1 unreachable pair or\n"
    "failure, 2 bad command line. See docs/probe.md, loom-ranktable(1).\n";

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
        {"plot", required_argument, NULL, 'p'},
        {"from-json", required_argument, NULL, 'f'},
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
        case 'p':
            if (strlen(optarg) < 5 || strcmp(optarg + strlen(optarg) - 4, ".png") != 0)
                return probe_usage_error("--plot needs a file name ending in .png, not",
                                         optarg);
            o->plot = optarg;
            break;
        case 'f':
            o->from_json = optarg;
            break;
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
    if (o->from_json) {
        if (optind < argc || rank_arg)
            return probe_usage_error("--from-json reads a saved report: give no FILE "
                                     "and no --rank", NULL);
        o->file = o->from_json;
        return 0;
    }
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
    p->rank = p->o.rank;
    if (probe_alloc(p) < 0) {
        fprintf(stderr, "loom-ranktable probe: out of memory for %d ranks\n", p->n);
        return EXIT_UNREACHABLE;
    }
    /* every rank's table endpoint: where it listens, where the others
     * connect */
    for (int r = 0; r < p->n; r++) {
        loom_rank_info_t ri;
        char e[256];
        loom_ranktable_rank_info(p->table, r, &ri);
        p->server_of[r] = ri.server_index;
        if (!p->server_name[ri.server_index] &&
            !(p->server_name[ri.server_index] = strdup(ri.server_id))) {
            fprintf(stderr, "loom-ranktable probe: out of memory\n");
            return EXIT_UNREACHABLE;
        }
        if (!ri.address ||
            loom_net_resolve(ri.address, ri.port, &p->ep[r], &p->ep_len[r], e,
                             sizeof e) < 0) {
            fprintf(stderr, "loom-ranktable probe: rank %d's endpoint %s:%d: %s\n", r,
                    ri.address ? ri.address : "(no address)", ri.port,
                    ri.address ? e : "the table gives none");
            return EXIT_UNREACHABLE;
        }
        loom_net_format((struct sockaddr *)&p->ep[r], p->ep_str[r], sizeof p->ep_str[r]);
    }
    return 0;
}

/* Listen on this rank's table endpoint: its address and port. */
static int probe_listen(struct probe *p, char *err, size_t errlen)
{
    const struct sockaddr_storage *ss = &p->ep[p->rank];
    int one = 1;
    p->lfd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0 ||
        setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(p->lfd, (const struct sockaddr *)ss, p->ep_len[p->rank]) < 0 ||
        listen(p->lfd, p->n + 64) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot listen on %s (this rank's table endpoint): %s%s",
                 p->ep_str[p->rank], strerror(e),
                 e == EADDRINUSE ? " (is a job or another probe using it?)"
                 : e == EADDRNOTAVAIL ? " (this host does not own the address: "
                                        "run the rank on the host the table names)"
                                      : "");
        return -1;
    }
    return 0;
}

int probe_alloc(struct probe *p)
{
    size_t n = (size_t)p->n;
    p->ep = calloc(n, sizeof *p->ep);
    p->ep_len = calloc(n, sizeof *p->ep_len);
    p->ep_str = calloc(n, sizeof *p->ep_str);
    p->server_of = calloc(n, sizeof *p->server_of);
    p->server_name = calloc(n, sizeof *p->server_name);
    p->ctl = malloc(n * sizeof *p->ctl);
    p->joined = calloc(n, 1);
    p->myreach = calloc(n, 1);
    p->links = calloc(p->rank == 0 ? n * n : 1, sizeof *p->links);
    p->buf = calloc(1, p->o.size ? p->o.size : 1);
    if (!p->ep || !p->ep_len || !p->ep_str || !p->server_of || !p->server_name ||
        !p->ctl || !p->joined || !p->myreach || !p->links || !p->buf)
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
    for (int s = 0; p->server_name && s < p->n; s++)
        free(p->server_name[s]);
    free(p->server_name);
    free(p->server_of);
    free(p->ep);
    free(p->ep_len);
    free(p->ep_str);
    free(p->ctl);
    free(p->joined);
    free(p->myreach);
    free(p->links);
    free(p->errs);
    free(p->buf);
    loom_ranktable_free(p->table);
}

/* For tests: LOOM_TEST_PROBE_REFUSE=R makes rank R close its listener just
 * before it joins (rank 0: once the others have joined), so every connect
 * to R, in the sweep and in its pairs, is refused. */
void probe_test_refuse(struct probe *p)
{
    const char *s = getenv("LOOM_TEST_PROBE_REFUSE");
    if (s && parse_count(s, 0, PROBE_MAX_RANKS - 1) == p->rank && p->lfd >= 0) {
        close(p->lfd);
        p->lfd = -1;
    }
}

/* Rank 0's report, its heat map, and the verdict. */
static int probe_report(struct probe *p)
{
    int status = p->o.json ? probe_report_json(p) : probe_report_text(p);
    fflush(stdout);
    if (p->o.plot && probe_plot(p, p->o.plot) < 0 && status == 0)
        status = EXIT_UNREACHABLE;
    return status;
}

/* --from-json: the report and heat map of a saved run. */
static int probe_saved(struct probe *p)
{
    int status = probe_json_load(p, p->o.from_json);
    if (status == 0)
        status = probe_report(p);
    probe_free(p);
    return status;
}

int loom_probe_main(int argc, char **argv)
{
    struct probe p = {.lfd = -1};
    char err[1200] = "";
    int status = probe_parse(argc, argv, &p.o);
    if (status)
        return status < 0 ? 0 : status;
    if (p.o.from_json)
        return probe_saved(&p);
    status = probe_load(&p);
    if (status)
        goto out;
    p.join_timeout = loom_config()->bootstrap_timeout;
    status = EXIT_UNREACHABLE;
    if (probe_listen(&p, err, sizeof err) < 0)
        goto fail;
    if (p.rank != 0) {
        int rc = probe_rank_run(&p, err, sizeof err);
        if (rc == -2) {
            status = probe_cutoff(&p, err);
            goto out;
        }
        if (rc < 0)
            goto fail;
        status = rc;
        goto out;
    }
    if (probe_root_join(&p, err, sizeof err) < 0)
        goto fail;
    probe_test_refuse(&p);
    if (probe_root_rounds(&p, err, sizeof err) < 0) {
        probe_root_end(&p, EXIT_UNREACHABLE);
        goto fail;
    }
    status = probe_report(&p);
    probe_root_end(&p, status);
    goto out;
fail:
    fprintf(stderr, "loom-ranktable probe: rank %d: %s\n", p.rank, err);
out:
    probe_free(&p);
    return status;
}
