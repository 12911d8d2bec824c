/* common.c - the driver every perf program shares: options, initialisation,
 * header, the sweep, timing, checking and the nccl-tests table (plus CSV and
 * JSON lines). See docs/perf.md for the options and the columns. */
#include "build_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "base/util.h"
#include "base/config.h"
#include "comm/algo.h"
#include "common.h"
#include "join.h"

/* Names in the type column: nccl-tests' spelling, so existing parsers work. */
static const char *const perf_type_names[] = {
    "int8", "uint8", "int32", "uint32", "int64",
    "uint64", "half", "bfloat16", "float", "double", "int16", "uint16"};
_Static_assert(sizeof perf_type_names / sizeof *perf_type_names == LOOM_DTYPE_COUNT,
               "a name for every Loom dtype");

enum perf_report { PERF_REPORT_RANK0 = 0, PERF_REPORT_AVG, PERF_REPORT_MIN,
                   PERF_REPORT_MAX };
static const char *const perf_report_names[] = {"rank0", "avg", "min", "max"};

struct perf_opts {
    size_t min_bytes, max_bytes;
    double factor;          /* > 1: multiply; 0: add step                    */
    size_t step;
    int iters, warmup;
    int check;
    loom_dtype_t dtypes[LOOM_DTYPE_COUNT];
    int ndtypes;
    loom_redop_t ops[LOOM_REDOP_COUNT];
    int nops;
    int root;
    int blocking;
    int report;
    const char *csv_path;   /* "-": CSV on stdout instead of the table        */
    const char *json_path;
    const char *ranktable;
    const char *url;        /* --url tcp://HOST:PORT                          */
    const char *algo;
    const char *transport;
    const char *timeout;    /* -T SECONDS: LOOM_TIMEOUT and LOOM_BOOTSTRAP_TIMEOUT */
};

/* One rank's result for one row, exchanged with an allgather. */
struct perf_rank_result {
    double time_us[2];      /* [0] out of place, [1] in place                */
    uint64_t wrong[2];
};

/* One rank's identity for the header. */
struct perf_peer {
    int32_t pid;
    char host[64];
    char addr[64];          /* the address its transport listens on          */
};

struct perf_state {
    const struct perf_coll *coll;
    struct perf_opts o;
    const char *prog;
    int speaks;             /* prints what every rank would print alike      */
    char how[256];          /* how the ranks met, for the header             */
    loom_comm_t comm;
    loom_comm_info_t info;  /* what comm runs on, for the header and JSON    */
    loom_stream_t stream;
    int rank, nranks;
    FILE *table;            /* the human table (NULL with -F -)              */
    FILE *csv;
    FILE *json;
    int corrupt;            /* LOOM_PERF_CORRUPT=1: test-only hook           */
    uint64_t total_wrong;
    double busbw_sum;
    int busbw_n;
};

double perf_factor_one(int nranks)
{
    (void)nranks;
    return 1.0;
}

double perf_factor_gather(int nranks)
{
    return (double)(nranks - 1) / nranks;
}

static void perf_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [options]\n"
            "  -b, --minbytes SIZE     smallest size (K/M/G suffixes; default 32M)\n"
            "  -e, --maxbytes SIZE     largest size (default 32M)\n"
            "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
            "  -i, --stepbytes SIZE    add SIZE each step instead\n"
            "  -n, --iters N           timed iterations (default 20)\n"
            "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
            "  -c, --check 0|1         check results (default 1)\n"
            "  -d, --datatype T|all    int8 uint8 int16 uint16 int32 uint32 int64 uint64\n"
            "                          half bfloat16 float double (default float)\n"
            "  -o, --op OP|all         sum prod min max avg (default sum)\n"
            "  -r, --root R            root of broadcast/reduce (default 0)\n"
            "  -z, --blocking 0|1      1: blocking calls instead of a stream\n"
            "  -a, --average 0|1|2|3   time of rank 0 / avg / min / max over ranks\n"
            "  -F, --csv FILE          also write CSV rows to FILE ('-': CSV on\n"
            "                          stdout instead of the table)\n"
            "  -J, --json FILE         also write one JSON object per row to FILE\n"
            "  -A, --algo SPEC         LOOM_ALGO: 'ring' or 'allreduce=rd,...'\n"
            "  -T, --timeout SECONDS   bound bootstrap and each call (LOOM_TIMEOUT,\n"
            "                          LOOM_BOOTSTRAP_TIMEOUT); 0: calls never time out\n"
            "      --transport NAME    LOOM_TRANSPORT: tcp, ofi, verbs\n"
            "  -t, --nthreads 1        -g, --ngpus 1: nccl-tests' options; Loom runs\n"
            "                          one rank per process (start more with the\n"
            "                          launcher), so only 1 is accepted\n"
            "      --url tcp://H:P     meet at rank 0's host H, port P\n"
            "      --ranktable FILE    rank table (else LOOM_RANK_TABLE or\n"
            "                          RANK_TABLE_FILE)\n"
            "  -h, --help              -V, --version\n"
            "The ranks meet through --url, else a rank table, else MASTER_ADDR and\n"
            "MASTER_PORT, else (every rank on one host) 127.0.0.1 and a port derived\n"
            "from the launcher's job id; rank and size come from the launcher\n"
            "(mpirun, srun, torchrun-style RANK/WORLD_SIZE, loom-run). Without a\n"
            "launcher: one rank. See docs/launch.md.\n",
            prog);
}

static int perf_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int perf_parse_dtypes(struct perf_opts *o, const char *s)
{
    static const struct { const char *name; loom_dtype_t t; } aliases[] = {
        {"float16", LOOM_FLOAT16}, {"float32", LOOM_FLOAT32},
        {"float64", LOOM_FLOAT64}, {"bf16", LOOM_BFLOAT16},
        {"char", LOOM_INT8},       {"int", LOOM_INT32},
    };
    if (strcmp(s, "all") == 0) {
        for (int t = 0; t < LOOM_DTYPE_COUNT; t++)
            o->dtypes[t] = (loom_dtype_t)t;
        o->ndtypes = LOOM_DTYPE_COUNT;
        return 0;
    }
    o->ndtypes = 1;
    for (int t = 0; t < LOOM_DTYPE_COUNT; t++)
        if (strcmp(s, perf_type_names[t]) == 0) {
            o->dtypes[0] = (loom_dtype_t)t;
            return 0;
        }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(s, aliases[i].name) == 0) {
            o->dtypes[0] = aliases[i].t;
            return 0;
        }
    return -1;
}

static int perf_parse_ops(struct perf_opts *o, const char *s)
{
    if (strcmp(s, "all") == 0) {
        for (int op = 0; op < LOOM_REDOP_COUNT; op++)
            o->ops[op] = (loom_redop_t)op;
        o->nops = LOOM_REDOP_COUNT;
        return 0;
    }
    o->nops = 1;
    for (int op = 0; op < LOOM_REDOP_COUNT; op++)
        if (strcmp(s, loom_redop_name((loom_redop_t)op)) == 0) {
            o->ops[0] = (loom_redop_t)op;
            return 0;
        }
    return -1;
}

/* One line about a bad command line, printed once: every rank parses the
 * same arguments, so only rank 0 (or a process with no launcher) says it. */
static void perf_say(const struct perf_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void perf_say(const struct perf_state *st, const char *fmt, ...)
{
    if (!st->speaks)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", st->prog, line);
}

/* Returns 0 to go on, 1 after --help or --version, -1 on a bad option
 * (message printed once). */
static int perf_parse_args(struct perf_state *st, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"stepbytes", required_argument, NULL, 'i'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"root", required_argument, NULL, 'r'},
        {"blocking", required_argument, NULL, 'z'},
        {"average", required_argument, NULL, 'a'},
        {"csv", required_argument, NULL, 'F'},
        {"json", required_argument, NULL, 'J'},
        {"algo", required_argument, NULL, 'A'},
        {"timeout", required_argument, NULL, 'T'},
        {"transport", required_argument, NULL, 'X'}, /* long only: -T is the timeout */
        {"ranktable", required_argument, NULL, 'R'},
        {"url", required_argument, NULL, 'U'},
        {"nthreads", required_argument, NULL, 't'},
        {"ngpus", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    struct perf_opts *o = &st->o;
    int c, one;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:z:a:F:J:A:T:t:g:hV",
                            longopts, NULL)) != -1) {
        const char *bad = NULL;
        switch (c) {
        case 'b':
            if (loom_parse_size(optarg, &o->min_bytes) != 0)
                bad = "-b wants a size such as 8, 1K, 4M or 1G";
            break;
        case 'e':
            if (loom_parse_size(optarg, &o->max_bytes) != 0)
                bad = "-e wants a size such as 8, 1K, 4M or 1G";
            break;
        case 'f': {
            char *end;
            o->factor = strtod(optarg, &end);
            if (end == optarg || *end || !(o->factor > 1.0))
                bad = "-f wants a factor greater than 1";
            break;
        }
        case 'i':
            if (loom_parse_size(optarg, &o->step) != 0 || o->step == 0)
                bad = "-i wants a step size greater than 0";
            else
                o->factor = 0;
            break;
        case 'n':
            if (perf_parse_int(optarg, 1, 1000000000, &o->iters))
                bad = "-n wants a number of iterations >= 1";
            break;
        case 'w':
            if (perf_parse_int(optarg, 0, 1000000000, &o->warmup))
                bad = "-w wants a number of iterations >= 0";
            break;
        case 'c':
            if (perf_parse_int(optarg, 0, 1, &o->check))
                bad = "-c wants 0 or 1";
            break;
        case 'd':
            if (perf_parse_dtypes(o, optarg))
                bad = "-d wants int8, uint8, int16, uint16, int32, uint32, int64, uint64, "
                      "half, bfloat16, float, double or all";
            break;
        case 'o':
            if (perf_parse_ops(o, optarg))
                bad = "-o wants sum, prod, min, max, avg or all";
            break;
        case 'r':
            if (perf_parse_int(optarg, 0, 1 << 30, &o->root))
                bad = "-r wants a rank >= 0";
            break;
        case 'z':
            if (perf_parse_int(optarg, 0, 1, &o->blocking))
                bad = "-z wants 0 or 1";
            break;
        case 'a':
            if (perf_parse_int(optarg, 0, 3, &o->report))
                bad = "-a wants 0 (rank 0), 1 (avg), 2 (min) or 3 (max)";
            break;
        case 'F': o->csv_path = optarg; break;
        case 'J': o->json_path = optarg; break;
        case 'A': o->algo = optarg; break;
        case 'T': {
            char *end;
            double t = strtod(optarg, &end);
            if (end == optarg || *end || !(t >= 0) || t > 1e9)
                bad = "-T wants a timeout in seconds >= 0 (0: never)";
            else
                o->timeout = optarg;
            break;
        }
        case 'X': o->transport = optarg; break;
        case 'R': o->ranktable = optarg; break;
        case 'U':
            if (strncmp(optarg, "tcp://", 6) != 0)
                bad = "--url wants tcp://HOST:PORT (rank 0's host and a free port)";
            else
                o->url = optarg;
            break;
        case 't':
            if (perf_parse_int(optarg, 0, 1 << 30, &one) || one != 1)
                bad = "-t: Loom runs one rank per process, without threads; start "
                      "more processes with the launcher (mpirun -np N) instead";
            break;
        case 'g':
            if (perf_parse_int(optarg, 0, 1 << 30, &one) || one != 1)
                bad = "-g: one device per rank; start one rank per device with the "
                      "launcher (mpirun -np N) instead";
            break;
        case 'h': perf_usage(stdout, st->prog); return 1;
        case 'V': printf("%s (Loom) %s\n", st->prog, PACKAGE_VERSION); return 1;
        case ':':
            perf_say(st, "option %s needs a value (see --help)", argv[optind - 1]);
            return -1;
        default:
            if (optopt)
                perf_say(st, "unknown option -%c (see --help)", optopt);
            else
                perf_say(st, "unknown option %s (see --help)", argv[optind - 1]);
            return -1;
        }
        if (bad) {
            perf_say(st, "%s (got '%s')", bad, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        perf_say(st, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (o->min_bytes > o->max_bytes) {
        perf_say(st, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
        return -1;
    }
    if (o->algo) {
        enum loom_algo forced[LOOM_OP_KIND_COUNT];
        char err[256];
        if (loom_algo_parse(o->algo, forced, err, sizeof err) != 0) {
            perf_say(st, "-A %s: %s", o->algo, err);
            return -1;
        }
    }
    return 0;
}

/* The environment is Loom's configuration: set what the options override
 * before the first Loom call reads it, then join the group. */
static int perf_init(struct perf_state *st)
{
    struct perf_opts *o = &st->o;
    if ((o->algo && setenv("LOOM_ALGO", o->algo, 1)) ||
        (o->transport && setenv("LOOM_TRANSPORT", o->transport, 1)) ||
        (o->timeout && setenv("LOOM_TIMEOUT", o->timeout, 1)) ||
        (o->timeout && strtod(o->timeout, NULL) > 0 &&
         setenv("LOOM_BOOTSTRAP_TIMEOUT", o->timeout, 1)) ||
        (o->ranktable && setenv("LOOM_RANK_TABLE", o->ranktable, 1))) {
        fprintf(stderr, "%s: setenv: %s\n", st->prog, strerror(errno));
        return -1;
    }
    if (perf_join(st->prog, o->url, &st->comm, st->how, sizeof st->how) != 0)
        return -1;
    loom_result_t res;
    loom_comm_rank(st->comm, &st->rank);
    loom_comm_size(st->comm, &st->nranks);
    st->info.struct_size = sizeof st->info;
    res = loom_comm_get_info(st->comm, &st->info);
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "%s: rank %d: loom_comm_get_info: %s: %s\n", st->prog, st->rank,
                loom_result_string(res), loom_get_error_string(st->comm));
        return -1;
    }
    if (st->coll->has_root && o->root >= st->nranks) {
        if (st->rank == 0)
            fprintf(stderr, "%s: -r %d: there are only %d ranks\n", st->prog, o->root,
                    st->nranks);
        else
            perf_quiet_wait();
        return -1;
    }
    if (!o->blocking) {
        res = loom_stream_create_host(&st->stream);
        if (res != LOOM_SUCCESS) {
            fprintf(stderr, "%s: rank %d: creating a host stream failed: %s\n",
                    st->prog, st->rank, loom_result_string(res));
            return -1;
        }
    }
    return 0;
}

/* A collective failed: say which and where, then end this rank (the others
 * see the failure through their own calls or their launcher). */
static void perf_die(struct perf_state *st, const char *what, loom_result_t res)
{
    const char *msg = loom_get_error_string(st->comm);
    fprintf(stderr, "%s: rank %d: %s failed: %s%s%s\n", st->prog, st->rank, what,
            loom_result_string(res), *msg ? ": " : "", msg);
    fflush(stdout);
    loom_comm_abort(st->comm);
    exit(2);
}

static size_t perf_next_size(const struct perf_opts *o, size_t size)
{
    if (o->factor > 1.0) {
        size_t next = (size_t)((double)size * o->factor);
        return next > size ? next : size + 1;
    }
    return size + o->step;
}

/* "8-4096 rd, 8192-67108864 ring": the algorithm Loom selects per size for
 * the first data type. */
/* Where an algorithm moves the data: the header names it per size, since
 * "transport tcp" alone reads wrong when every size ran in shared memory. */
static const char *perf_path(const struct perf_state *st, const char *a, char *buf, size_t len)
{
    const char *tx = st->info.transport;
    if (strcmp(a, "shm") == 0)
        return "shared memory";
    if (strcmp(a, "hier") == 0)
        snprintf(buf, len, "shared memory + %s", tx);
    else
        snprintf(buf, len, "%s", st->nranks > 1 ? tx : "none (one rank)");
    return buf;
}

static void perf_print_algos(struct perf_state *st)
{
    struct perf_case c = {.comm = st->comm, .rank = st->rank,
                          .nranks = st->nranks, .dtype = st->o.dtypes[0],
                          .esize = loom_dtype_size(st->o.dtypes[0])};
    char line[1024];
    size_t len = 0;
    size_t first = 0, last = 0;
    const char *cur = "";
    int have = 0, all_shm = 1;
    char pbuf[64];
    line[0] = '\0';
    for (size_t size = st->o.min_bytes;; size = perf_next_size(&st->o, size)) {
        int end = size > st->o.max_bytes;
        const char *a = "";
        if (!end) {
            c.size = size;
            st->coll->setup(&c);
            loom_result_t res = loom_comm_algo(st->comm, st->coll->kind, c.op_count, c.dtype,
                                               LOOM_SUM, &a);
            if (res != LOOM_SUCCESS)
                perf_die(st, "loom_comm_algo", res);
        }
        if (have && (end || strcmp(a, cur) != 0) && len < sizeof line) {
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%zu-%zu %s over %s",
                                    len ? ", " : "", first, last, cur,
                                    perf_path(st, cur, pbuf, sizeof pbuf));
            all_shm &= strcmp(cur, "shm") == 0;
            have = 0;
        }
        if (end)
            break;
        if (!have) {
            first = size;
            cur = a;
            have = 1;
        }
        last = size;
    }
    fprintf(st->table, "# algorithm per size (%s): %s\n",
            perf_type_names[st->o.dtypes[0]], line);
    if (all_shm)
        fprintf(st->table, "# path: shared memory for every size (the transport "
                "only set the job up)\n");
}

static void perf_header(struct perf_state *st)
{
    struct perf_peer me = {.pid = (int32_t)getpid()};
    if (gethostname(me.host, sizeof me.host - 1) != 0)
        snprintf(me.host, sizeof me.host, "?");
    snprintf(me.addr, sizeof me.addr, "%s", st->info.address);
    struct perf_peer *all = calloc((size_t)st->nranks, sizeof *all);
    if (!all) {
        fprintf(stderr, "%s: rank %d: out of memory for the header\n", st->prog,
                st->rank);
        exit(2);
    }
    loom_result_t res = loom_allgather(&me, all, sizeof me, LOOM_UINT8, st->comm,
                                       NULL);
    if (res != LOOM_SUCCESS)
        perf_die(st, "allgather of the ranks' identities", res);
    if (st->rank != 0 || !st->table) {
        free(all);
        return;
    }

    /* The table itself tells servers and endpoints. */
    const char *path = getenv("LOOM_RANK_TABLE");
    if (!path || !*path)
        path = getenv("RANK_TABLE_FILE");
    loom_ranktable_t *rt = NULL;
    int nservers = st->info.nhosts; /* without a table: the hosts the ranks found */
    if (!st->o.url && path && *path && loom_ranktable_load(path, &rt, NULL) == LOOM_SUCCESS)
        loom_ranktable_nservers(rt, &nservers);

    const char *version = "?";
    int code;
    loom_get_version(&code, &version);
    const struct perf_opts *o = &st->o;
    FILE *f = st->table;
    fprintf(f, "# Loom %s  nranks %d  servers %d  transport %s  chunk %zu\n", version, st->nranks,
            nservers, st->info.transport, st->info.chunk_size);
    if (st->info.transport_detail) /* "ofi tcp;ofi_rxm" */
        fprintf(f, "# transport: %s\n", st->info.transport_detail);
    fprintf(f, "# rendezvous: %s\n", st->how);
    if (o->factor > 1.0)
        fprintf(f, "# %s  minBytes %zu  maxBytes %zu  step: %g(factor)", st->coll->name,
                o->min_bytes, o->max_bytes, o->factor);
    else
        fprintf(f, "# %s  minBytes %zu  maxBytes %zu  step: %zu(bytes)", st->coll->name,
                o->min_bytes, o->max_bytes, o->step);
    fprintf(f, "  warmup iters: %d  iters: %d  validation: %d  blocking: %d  time: %s\n",
            o->warmup, o->iters, o->check, o->blocking,
            perf_report_names[o->report]);
    perf_print_algos(st);
    fprintf(f, "#\n# Using devices\n");
    for (int r = 0; r < st->nranks; r++) {
        all[r].host[sizeof all[r].host - 1] = '\0';
        all[r].addr[sizeof all[r].addr - 1] = '\0';
        loom_rank_info_t ri;
        if (rt && loom_ranktable_rank_info(rt, r, &ri) == LOOM_SUCCESS)
            fprintf(f, "#  Rank %2d Pid %6d on %10s  endpoint %s:%d  server %s  device %d\n",
                    r, (int)all[r].pid, all[r].host, ri.address, ri.port,
                    ri.server_id, ri.device_id);
        else
            fprintf(f, "#  Rank %2d Pid %6d on %10s  endpoint %s\n", r,
                    (int)all[r].pid, all[r].host, all[r].addr);
    }
    fprintf(f, "#\n");
    fprintf(f, "# %52s%-33s%s\n", "", "          out-of-place", "            in-place");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %8s %7s %7s  %6s  %8s %7s %7s  %6s\n",
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
            "#wrong", "time", "algbw", "busbw", "#wrong");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %8s %7s %7s  %6s  %8s %7s %7s  %6s\n",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
            "(us)", "(GB/s)", "(GB/s)", "");
    fflush(f);
    if (rt)
        loom_ranktable_free(rt);
    free(all);
}

static loom_result_t perf_issue(struct perf_state *st, struct perf_case *c, int n)
{
    for (int i = 0; i < n; i++) {
        loom_result_t res = st->coll->run(c, st->stream);
        if (res != LOOM_SUCCESS)
            return res;
    }
    return st->stream ? loom_stream_synchronize(st->stream) : LOOM_SUCCESS;
}

/* Time one variant (out of place or in place) and check it. */
static void perf_measure(struct perf_state *st, struct perf_case *c,
                         double *time_us, uint64_t *wrong)
{
    loom_result_t res;
    st->coll->setup(c);
    st->coll->fill(c);
    if ((res = perf_issue(st, c, st->o.warmup)) != LOOM_SUCCESS)
        perf_die(st, "warm-up", res);
    if ((res = loom_barrier(st->comm, NULL)) != LOOM_SUCCESS)
        perf_die(st, "barrier", res);
    double t0 = loom_now();
    if ((res = perf_issue(st, c, st->o.iters)) != LOOM_SUCCESS)
        perf_die(st, st->coll->name, res);
    *time_us = (loom_now() - t0) * 1e6 / st->o.iters;

    *wrong = 0;
    if (!st->o.check)
        return;
    /* The timed calls may have changed the inputs (in place): start again. */
    st->coll->fill(c);
    if ((res = perf_issue(st, c, 1)) != LOOM_SUCCESS)
        perf_die(st, "checked call", res);
    if (st->corrupt && st->rank == 0) {
        size_t bytes;
        unsigned char *p = st->coll->result(c, &bytes);
        if (p && bytes >= c->esize)
            p[c->esize - 1] ^= 0x40; /* sign/exponent byte: always a wrong value */
    }
    *wrong = st->coll->check(c);
}

static double perf_pick_time(const struct perf_state *st,
                             const struct perf_rank_result *all, int v)
{
    double t = all[0].time_us[v];
    for (int r = 1; r < st->nranks; r++) {
        double x = all[r].time_us[v];
        switch (st->o.report) {
        case PERF_REPORT_AVG: t += x; break;
        case PERF_REPORT_MIN: t = x < t ? x : t; break;
        case PERF_REPORT_MAX: t = x > t ? x : t; break;
        default: break;
        }
    }
    return st->o.report == PERF_REPORT_AVG ? t / st->nranks : t;
}

static void perf_fmt_time(char *buf, size_t len, double us)
{
    if (us < 10000.0)
        snprintf(buf, len, "%8.2f", us);
    else if (us < 1e5)
        snprintf(buf, len, "%8.1f", us);
    else
        snprintf(buf, len, "%8.0f", us);
}

static void perf_row(struct perf_state *st, struct perf_case *c)
{
    struct perf_rank_result mine, *all;
    c->in_place = 0;
    perf_measure(st, c, &mine.time_us[0], &mine.wrong[0]);
    c->in_place = 1;
    perf_measure(st, c, &mine.time_us[1], &mine.wrong[1]);

    all = calloc((size_t)st->nranks, sizeof *all);
    if (!all) {
        fprintf(stderr, "%s: rank %d: out of memory for results\n", st->prog, st->rank);
        exit(2);
    }
    loom_result_t res = loom_allgather(&mine, all, sizeof mine, LOOM_UINT8,
                                       st->comm, NULL);
    if (res != LOOM_SUCCESS)
        perf_die(st, "allgather of the results", res);

    double t[2], algbw[2], busbw[2];
    uint64_t wrong[2] = {0, 0};
    double factor = st->coll->bus_factor(st->nranks);
    for (int v = 0; v < 2; v++) {
        for (int r = 0; r < st->nranks; r++)
            wrong[v] += all[r].wrong[v];
        t[v] = perf_pick_time(st, all, v);
        algbw[v] = t[v] > 0 ? (double)c->size / (t[v] * 1e3) : 0.0;
        busbw[v] = algbw[v] * factor;
        st->total_wrong += wrong[v];
        st->busbw_sum += busbw[v];
        st->busbw_n++;
    }
    free(all);
    if (st->rank != 0)
        return;

    const char *type = perf_type_names[c->dtype];
    const char *redop = st->coll->has_op ? loom_redop_name(c->op) : "none";
    int root = st->coll->has_root ? c->root : -1;
    if (st->table) {
        char ts[2][32], ws[2][32];
        for (int v = 0; v < 2; v++) {
            perf_fmt_time(ts[v], sizeof ts[v], t[v]);
            if (st->o.check)
                snprintf(ws[v], sizeof ws[v], "%llu", (unsigned long long)wrong[v]);
            else
                snprintf(ws[v], sizeof ws[v], "N/A");
        }
        fprintf(st->table,
                "  %10zu  %12llu  %8s  %6s  %6d  %s %7.2f %7.2f  %6s  %s %7.2f %7.2f  %6s\n",
                c->size, (unsigned long long)c->count, type, redop, root, ts[0],
                algbw[0], busbw[0], ws[0], ts[1], algbw[1], busbw[1], ws[1]);
        fflush(st->table);
    }
    if (st->csv) {
        fprintf(st->csv, "%zu,%llu,%s,%s,%d", c->size, (unsigned long long)c->count,
                type, redop, root);
        for (int v = 0; v < 2; v++) {
            fprintf(st->csv, ",%.3f,%.4f,%.4f,", t[v], algbw[v], busbw[v]);
            if (st->o.check)
                fprintf(st->csv, "%llu", (unsigned long long)wrong[v]);
            else
                fprintf(st->csv, "N/A");
        }
        fprintf(st->csv, ",%s,%d\n", st->coll->name, st->nranks);
        fflush(st->csv);
    }
    if (st->json) {
        const char *a = "?";
        res = loom_comm_algo(st->comm, st->coll->kind, c->op_count, c->dtype, c->op, &a);
        if (res != LOOM_SUCCESS)
            perf_die(st, "loom_comm_algo", res);
        fprintf(st->json,
                "{\"collective\":\"%s\",\"nranks\":%d,\"algorithm\":\"%s\","
                "\"size\":%zu,\"count\":%llu,\"type\":\"%s\",\"redop\":\"%s\","
                "\"root\":%d",
                st->coll->name, st->nranks, a, c->size, (unsigned long long)c->count, type, redop,
                root);
        static const char *const pre[2] = {"oop", "ip"};
        for (int v = 0; v < 2; v++) {
            fprintf(st->json, ",\"%s_time_us\":%.3f,\"%s_algbw\":%.4f,\"%s_busbw\":%.4f",
                    pre[v], t[v], pre[v], algbw[v], pre[v], busbw[v]);
            if (st->o.check)
                fprintf(st->json, ",\"%s_wrong\":%llu", pre[v],
                        (unsigned long long)wrong[v]);
            else
                fprintf(st->json, ",\"%s_wrong\":null", pre[v]);
        }
        fprintf(st->json, ",\"library\":\"Loom %s\",\"transport\":\"%s\"}\n", PACKAGE_VERSION,
                st->info.transport);
        fflush(st->json);
    }
}

static int perf_open_outputs(struct perf_state *st)
{
    st->table = stdout;
    if (st->rank != 0)
        return 0;
    if (st->o.csv_path) {
        if (strcmp(st->o.csv_path, "-") == 0) {
            st->csv = stdout;
            st->table = NULL;
        } else if (!(st->csv = fopen(st->o.csv_path, "w"))) {
            fprintf(stderr, "%s: cannot write %s: %s\n", st->prog, st->o.csv_path,
                    strerror(errno));
            return -1;
        }
        fprintf(st->csv, "size,count,type,redop,root,oop_time_us,oop_algbw,"
                         "oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,"
                         "collective,nranks\n");
    }
    if (st->o.json_path && !(st->json = fopen(st->o.json_path, "w"))) {
        fprintf(stderr, "%s: cannot write %s: %s\n", st->prog, st->o.json_path,
                strerror(errno));
        return -1;
    }
    return 0;
}

static int perf_close_file(struct perf_state *st, FILE *f, const char *path)
{
    if (!f || f == stdout)
        return 0;
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: writing %s failed: %s\n", st->prog, path, strerror(errno));
        return -1;
    }
    return 0;
}

int perf_main(const struct perf_coll *coll, int argc, char **argv)
{
    struct perf_state st = {
        .coll = coll,
        .prog = argv[0],
        .o = {.min_bytes = 32u << 20, .max_bytes = 32u << 20, .factor = 2.0,
              .iters = 20, .warmup = 5, .check = 1,
              .dtypes = {LOOM_FLOAT32}, .ndtypes = 1,
              .ops = {LOOM_SUM}, .nops = 1},
    };
    const char *slash = strrchr(argv[0], '/');
    if (slash)
        st.prog = slash + 1;
    st.speaks = perf_speaks();
    int pr = perf_parse_args(&st, argc, argv);
    if (pr < 0 && !st.speaks)
        perf_quiet_wait();
    if (pr != 0)
        return pr > 0 ? 0 : 2;
    const char *corrupt = getenv("LOOM_PERF_CORRUPT");
    st.corrupt = corrupt && strcmp(corrupt, "1") == 0;
    if (perf_init(&st) != 0)
        return 2;
    if (perf_open_outputs(&st) != 0) {
        loom_comm_abort(st.comm);
        loom_comm_destroy(st.comm);
        return 2;
    }
    if (!coll->has_op)
        st.o.nops = 1; /* one pass; the operation is not used */

    /* Buffers for the largest size: every collective fits in two of these. */
    size_t max_bytes = st.o.max_bytes + 64;
    void *a = NULL, *b = NULL;
    if (posix_memalign(&a, 4096, max_bytes) || posix_memalign(&b, 4096, max_bytes)) {
        fprintf(stderr, "%s: rank %d: cannot allocate 2 x %zu bytes\n", st.prog,
                st.rank, max_bytes);
        return 2;
    }
    memset(a, 0, max_bytes);
    memset(b, 0, max_bytes);

    perf_header(&st);
    uint64_t row = 0;
    for (int ti = 0; ti < st.o.ndtypes; ti++) {
        for (int oi = 0; oi < st.o.nops; oi++) {
            for (size_t size = st.o.min_bytes; size <= st.o.max_bytes;
                 size = perf_next_size(&st.o, size)) {
                struct perf_case c = {
                    .comm = st.comm, .rank = st.rank, .nranks = st.nranks,
                    .dtype = st.o.dtypes[ti], .op = st.o.ops[oi],
                    .root = st.o.root, .seed = 1000 + row++,
                    .esize = loom_dtype_size(st.o.dtypes[ti]), .size = size,
                    .buf_a = a, .buf_b = b, .max_bytes = max_bytes};
                perf_row(&st, &c);
            }
        }
    }

    int status = st.total_wrong ? 1 : 0;
    if (st.rank == 0 && st.table) {
        fprintf(st.table, "# Out of bounds values : %llu %s\n",
                (unsigned long long)st.total_wrong, status ? "FAILED" : "OK");
        fprintf(st.table, "# Avg bus bandwidth    : %g \n",
                st.busbw_n ? st.busbw_sum / st.busbw_n : 0.0);
        fprintf(st.table, "#\n");
    }
    if (perf_close_file(&st, st.csv, st.o.csv_path) ||
        perf_close_file(&st, st.json, st.o.json_path))
        status = 2;
    fflush(stdout);
    /* Every rank is done printing before any of them leaves (a launcher may
     * end the job when the first rank exits non-zero). */
    loom_result_t res = loom_barrier(st.comm, NULL);
    if (res != LOOM_SUCCESS)
        perf_die(&st, "final barrier", res);
    if (st.stream)
        loom_stream_destroy(st.stream);
    loom_comm_destroy(st.comm);
    free(a);
    free(b);
    return status;
}
