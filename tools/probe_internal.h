/* probe_internal.h - what the files of `loom-ranktable probe` share:
 * probe.c (command line, table, listener, rendezvous, main), probe_pair.c
 * (sockets and one pair's measurement), probe_rounds.c (the control
 * protocol that keeps rounds in lock step), probe_report.c (text and JSON).
 *
 * Wire (little-endian, fixed sizes):
 *   hello (on a new connection to a listener, 24 bytes): magic "LPRB" u32 |
 *         kind u32 (1 control, 2 pair) | rank u32 | round u32 | comm_id u64
 *   GO/END (rank 0 -> rank, 32 bytes): type u32 (1 GO, 2 END) | round u32 |
 *         size u64 | iters u32 | timeout_ms u32 | exit status u32 | 0 u32
 *   DONE (rank -> rank 0, 32 + PROBE_ERR_MAX bytes): type u32 (3) | round
 *         u32 | peer u32 | ok u32 | latency ns u64 | bandwidth bytes/s u64 |
 *         error text, NUL padded
 * Every field read is checked (magic, kind, rank range, round) before use. */
#ifndef LOOM_PROBE_INTERNAL_H
#define LOOM_PROBE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/net.h"

#define EXIT_UNREACHABLE 1
#define EXIT_USAGE 2

#define PROBE_MAGIC 0x4252504cu  /* "LPRB" */
#define PROBE_HELLO_LEN 24
#define PROBE_GO_LEN 32
#define PROBE_DONE_HDR 32
#define PROBE_ERR_MAX 160
#define PROBE_DONE_LEN (PROBE_DONE_HDR + PROBE_ERR_MAX)
#define PROBE_KIND_CONTROL 1
#define PROBE_KIND_PAIR 2
#define PROBE_MSG_GO 1
#define PROBE_MSG_END 2
#define PROBE_MSG_DONE 3
#define PROBE_LAT_WARMUP 20
#define PROBE_LAT_ITERS 200
#define PROBE_MAX_SIZE (1ull << 30)
#define PROBE_MAX_ITERS 100000
#define PROBE_MAX_RANKS 4096
#define PROBE_EP_LEN LOOM_NET_WIRE_ADDR_LEN

struct probe_opts {
    const char *file;
    int rank;
    int json;
    double timeout;        /* seconds: connect, and each transfer's stall */
    uint64_t size;         /* bandwidth message bytes                     */
    uint32_t iters;        /* bandwidth messages per direction            */
};

/* What one rank measured towards one peer. */
struct probe_link {
    int ok;
    double lat_us;         /* half round trip, median                     */
    double bw_gbps;        /* this rank -> peer                           */
    char err[PROBE_ERR_MAX];
};

struct loom_oob;

struct probe {
    struct probe_opts o;
    loom_ranktable_t *table;
    int n, rank, nservers;
    uint64_t hash, comm_id;
    struct loom_oob *oob;     /* the job's out-of-band service (bootstrap) */
    int lfd;                              /* pair listener; -1 closed    */
    struct sockaddr_storage *ep;          /* every rank's listener       */
    socklen_t *ep_len;
    char (*ep_str)[LOOM_NET_ADDRSTR_MAX];
    int *ctl;         /* rank 0: control fd of each rank; others: ctl[0] */
    struct probe_link *links;             /* rank 0: n x n, row = measurer */
    struct probe_link mine;               /* this round's measurement    */
    char describe_buf[256];
    uint8_t *buf;                         /* bandwidth payload (size)    */
};

/* probe_pair.c */
int probe_cmp_double(const void *a, const void *b);
/* Connect to ss within timeout seconds: the non-blocking fd, or -1 with the
 * reason in err. */
int probe_connect(const struct sockaddr_storage *ss, socklen_t sl,
                  double timeout, char *err, size_t errlen);
void probe_put_hello(uint8_t *h, int kind, int rank, int round, uint64_t id);
/* Accept on p->lfd until a hello of (kind, from (any rank >= 1 when < 0),
 * round) of this job arrives; others are closed. The fd, or -1 at the
 * deadline; *who (may be NULL) = the rank. */
int probe_accept(struct probe *p, int kind, int from, int round,
                 double deadline, int *who);
/* Test the pair (p->rank, peer) of round; the result goes to p->mine. */
void probe_pair(struct probe *p, int round, int peer);

/* probe_rounds.c. Each returns 0, or -1 with the reason in err. */
/* Rank 0: accept a control connection from every other rank. */
int probe_root_controls(struct probe *p, char *err, size_t errlen);
/* Rank 0: run every round, filling p->links. */
int probe_root_rounds(struct probe *p, char *err, size_t errlen);
/* Rank 0: tell every rank the exit status. */
void probe_root_end(struct probe *p, int status);
/* Ranks 1..n-1: everything after the rendezvous; returns the exit status
 * rank 0 sent, or -1. */
int probe_rank_run(struct probe *p, char *err, size_t errlen);

/* probe_report.c: print rank 0's report; return the exit status. */
int probe_report_text(const struct probe *p);
int probe_report_json(const struct probe *p);

/* probe.c: LOOM_TEST_PROBE_REFUSE=R closes rank R's listener. */
void probe_test_refuse(struct probe *p);

#endif
