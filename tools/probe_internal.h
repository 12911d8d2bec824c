/* probe_internal.h - what the files of `loom-ranktable probe` share:
 *   probe.c         command line, table, listener, main
 *   probe_pair.c    sockets, the reachability sweep, one pair's measurement
 *   probe_rounds.c  the control protocol: join, sweep, rounds, end
 *   probe_cutoff.c  a rank that cannot join rank 0: what it reached, alone
 *   probe_stats.c   derived numbers: link states, medians, per-server summary
 *   probe_report.c  rank 0's text and JSON report
 *   probe_json.c    a saved JSON report read back (--from-json)
 *   probe_plot.c    the bandwidth heat map (--plot FILE.png, gnuplot)
 *
 * Every rank listens on its own table endpoint (address and port, as
 * `check` shows them): the ports the job uses. Rank 0's is also where the
 * others join.
 *
 * Wire (little-endian, fixed sizes):
 *   hello (on a new connection to a listener, 24 bytes): magic "LPRB" u32 |
 *         kind u32 (1 control, 2 pair) | rank u32 | round u32 | id u64
 *         (control: the table hash; pair: the run id rank 0 chose)
 *   control (rank 0 -> rank, 32 bytes): type u32 | round u32 | size u64 |
 *         iters u32 | timeout_ms u32 | status u32 | flags u32
 *         WELCOME: size = run id; REFUSE: followed by PROBE_WHY_MAX bytes of
 *         reason; SWEEP; GO (flags: PROBE_GO_SKIP); END (status)
 *   REACH (rank -> rank 0): type u32 (4) | 0 u32 | then n bytes, byte j =
 *         PROBE_R_* of this rank's connect to rank j
 *   DONE (rank -> rank 0, 32 + PROBE_ERR_MAX bytes): type u32 (3) | round
 *         u32 | peer u32 | ok u32 | latency ns u64 | bandwidth bytes/s u64 |
 *         error text, NUL padded
 * Every field read is checked (magic, kind, rank range, round) before use. */
#ifndef LOOM_PROBE_INTERNAL_H
#define LOOM_PROBE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loom.h"
#include "transport/net.h"

#define EXIT_UNREACHABLE 1
#define EXIT_USAGE 2

#define PROBE_MAGIC 0x4252504cu  /* "LPRB" */
#define PROBE_HELLO_LEN 24
#define PROBE_CTL_LEN 32
#define PROBE_DONE_HDR 32
#define PROBE_ERR_MAX 160
#define PROBE_WHY_MAX 512        /* a REFUSE's reason                         */
#define PROBE_DONE_LEN (PROBE_DONE_HDR + PROBE_ERR_MAX)
#define PROBE_REACH_HDR 8
#define PROBE_KIND_CONTROL 1
#define PROBE_KIND_PAIR 2
#define PROBE_MSG_GO 1
#define PROBE_MSG_END 2
#define PROBE_MSG_DONE 3
#define PROBE_MSG_REACH 4
#define PROBE_MSG_WELCOME 5
#define PROBE_MSG_REFUSE 6
#define PROBE_MSG_SWEEP 7
#define PROBE_GO_SKIP 1u         /* the sweep found the pair unreachable      */
#define PROBE_LAT_WARMUP 20
#define PROBE_LAT_ITERS 200
#define PROBE_MAX_SIZE (1ull << 30)
#define PROBE_MAX_ITERS 100000
#define PROBE_MAX_RANKS 4096

/* A rank's connect to another's endpoint, in the sweep. */
enum probe_reach {
    PROBE_R_UNKNOWN = 0,  /* not tried (the rank did not join)               */
    PROBE_R_OK = 1,       /* connected                                       */
    PROBE_R_REFUSED = 2,  /* connection refused: nothing listens, or REJECT  */
    PROBE_R_TIMEOUT = 3,  /* no answer within the timeout: dropped, or down  */
    PROBE_R_NOROUTE = 4,  /* no route to the host or network                 */
    PROBE_R_OTHER = 5,    /* another error                                   */
    PROBE_R_COUNT
};

/* What rank 0 knows about row -> column. */
enum probe_state {
    PROBE_UNKNOWN = 0,    /* not tested: the row's rank did not join         */
    PROBE_MEASURED,       /* reachable both ways, latency and bandwidth known */
    PROBE_CONNECTED,      /* the row connects to the column; not measured
                             (the pair fails the other way, or a peer is
                             missing)                                        */
    PROBE_FAILED,         /* the row cannot reach the column (reach), or the
                             pair's test failed (a text in errs)             */
};

struct probe_link {
    uint8_t state;        /* enum probe_state                                */
    uint8_t reach;        /* enum probe_reach of the sweep                   */
    float lat_us;         /* half round trip, median                         */
    float bw_gbps;        /* this rank -> peer                               */
};

/* The text of a failed measurement (rare: kept apart from the matrix). */
struct probe_err {
    int from, to;
    char text[PROBE_ERR_MAX];
};

struct probe_opts {
    const char *file;
    const char *plot;      /* --plot FILE.png                             */
    const char *from_json; /* --from-json FILE: report a saved run       */
    int rank;
    int json;
    double timeout;        /* seconds: connect, and each transfer's stall */
    uint64_t size;         /* bandwidth message bytes                     */
    uint32_t iters;        /* bandwidth messages per direction            */
};

/* What one rank measured in its pair of a round. */
struct probe_result {
    int ok;
    double lat_us;
    double bw_gbps;
    char err[PROBE_ERR_MAX];
};

struct probe {
    struct probe_opts o;
    loom_ranktable_t *table;              /* NULL with --from-json        */
    int n, rank, nservers;
    uint64_t hash, run_id;
    double join_timeout;                  /* seconds to wait for rank 0   */
    int lfd;                              /* listener; -1 closed          */
    struct sockaddr_storage *ep;          /* every rank's table endpoint  */
    socklen_t *ep_len;
    char (*ep_str)[LOOM_NET_ADDRSTR_MAX];
    int *server_of;                       /* rank -> server index         */
    char **server_name;                   /* server index -> server_id    */
    int *ctl;         /* rank 0: control fd of each rank; others: ctl[0] */
    uint8_t *joined;                      /* rank 0: 1 per rank that joined */
    uint8_t *myreach;                     /* this rank's sweep row (n)    */
    struct probe_link *links;             /* rank 0: n x n, row = measurer */
    struct probe_err *errs;               /* rank 0: failed measurements  */
    size_t nerrs, errs_cap;
    struct probe_result mine;             /* this round's measurement     */
    char describe_buf[256];
    uint8_t *buf;                         /* bandwidth payload (size)     */
};

#define PROBE_LINK(p, a, b) (&(p)->links[(size_t)(a) * (size_t)(p)->n + (size_t)(b)])

/* probe_pair.c */
int probe_cmp_double(const void *a, const void *b);
/* enum probe_reach of a connect's errno (0: PROBE_R_OK). */
int probe_reach_of_errno(int e);
/* Connect to ss within timeout seconds: the non-blocking fd, or -1 with the
 * reason in err and *reach (may be NULL) set. */
int probe_connect(const struct sockaddr_storage *ss, socklen_t sl, double timeout,
                  char *err, size_t errlen, int *reach);
void probe_put_hello(uint8_t *h, int kind, int rank, int round, uint64_t id);
/* Accept on p->lfd until a hello of (kind, from (any rank when < 0),
 * round, id) arrives; others are closed. The fd, or -1 at the deadline;
 * *who (may be NULL) = the rank. */
int probe_accept(struct probe *p, int kind, int from, int round, uint64_t id,
                 double deadline, int *who);
/* Accept and close whatever is waiting on the listener (the others' sweep
 * connections), without blocking. */
void probe_drain(struct probe *p);
/* Connect to every other rank's endpoint, many at once, each within the
 * timeout, while accepting and closing the others' connections; fills
 * p->myreach. Returns 0, or -1 when fds ran out (err). */
int probe_sweep(struct probe *p, char *err, size_t errlen);
/* Test the pair (p->rank, peer) of round; the result goes to p->mine. */
void probe_pair(struct probe *p, int round, int peer);

/* probe_rounds.c. Each returns 0, or -1 with the reason in err. */
/* Rank 0: let the others join (table hash checked) until all have or the
 * join timeout ends; p->joined says who. A rank with a different table
 * is an error naming it. */
int probe_root_join(struct probe *p, char *err, size_t errlen);
/* Rank 0: the sweep, then every round, filling p->links. */
int probe_root_rounds(struct probe *p, char *err, size_t errlen);
/* Rank 0: tell every joined rank the exit status. */
void probe_root_end(struct probe *p, int status);
/* Ranks 1..n-1: join rank 0, then follow it; returns the exit status rank
 * 0 sent, -1 on an error, or -2 when rank 0 could not be reached (err says
 * why; the caller goes on alone, probe_cutoff). */
int probe_rank_run(struct probe *p, char *err, size_t errlen);

/* probe_cutoff.c: a rank that could not join: sweep, print what it
 * reached, keep its listener open while the others sweep; returns 1. */
int probe_cutoff(struct probe *p, const char *why);

/* probe_stats.c */
const char *probe_reach_text(int reach, double timeout, char *buf, size_t len);
/* Why row -> column failed, as text. */
const char *probe_fail_text(const struct probe *p, int from, int to, char *buf,
                            size_t len);
/* 1 when a and b were measured both ways. */
int probe_pair_ok(const struct probe *p, int a, int b);
/* 1 when a -> b or b -> a failed. */
int probe_pair_failed(const struct probe *p, int a, int b);
/* The slower direction of a measured pair. */
double probe_link_bw(const struct probe *p, int a, int b);
/* Median bandwidth over measured pairs; 0 when none. */
double probe_median_bw(const struct probe *p);
/* Median of v[0..n-1] (sorts v); 0 for n == 0. */
double probe_median(double *v, size_t n);
void probe_add_err(struct probe *p, int from, int to, const char *text);
/* "0-3", "0, 2, 5-7": ranks whose flag is set, into buf. */
const char *probe_rank_list(const int *ranks, int count, char *buf, size_t len);

/* Per server (a == b) or per pair of servers (a < b). */
struct probe_group {
    int a, b;
    int links;              /* pairs of ranks                            */
    int measured, failed;   /* pairs measured both ways; pairs failed     */
    double lat_med, bw_med, bw_min;
    int slow_from, slow_to; /* the slowest measured pair, -1 when none   */
};
/* Groups for every server (a == b, servers with more than one rank) and
 * every pair of servers; *count of them. NULL on no memory. */
struct probe_group *probe_groups(const struct probe *p, int *count);

/* Pairs within a server and between servers, all together. */
struct probe_class {
    int links, measured, failed;
    double lat_med, bw_med;
};
void probe_class_medians(const struct probe *p, struct probe_class *intra,
                         struct probe_class *inter);

/* probe_report.c: print rank 0's report; return the exit status. */
int probe_report_text(const struct probe *p);
int probe_report_json(const struct probe *p);

/* probe_json.c: fill p (n, servers, endpoints, links, ...) from a JSON
 * report that --json wrote; 0, or -1 with the reason printed. */
int probe_json_load(struct probe *p, const char *path);

/* probe_plot.c: the heat map of p's bandwidth matrix; 0, or -1 with the
 * reason printed. */
int probe_plot(const struct probe *p, const char *png);

/* probe.c: LOOM_TEST_PROBE_REFUSE=R closes rank R's listener. */
void probe_test_refuse(struct probe *p);
/* probe.c: allocate the per-rank arrays for p->n ranks (links when
 * rank 0). 0, or -1 when out of memory. */
int probe_alloc(struct probe *p);

#endif
