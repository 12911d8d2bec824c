/* check_bootstrap.c - rendezvous through rank 0 over 127.0.0.1, with forked
 * ranks: success for 1, 2, 5 and 13 ranks (every rank learns every entry;
 * rank 0's bytes grow linearly), table mismatch (every rank fails at once),
 * missing ranks (named while waiting and at the timeout), no root, late
 * root, strangers, a taken port, abort; the out-of-band service's messages,
 * lookups and views; local address selection; port bases for jobs outside
 * the ephemeral range; the job key: same key, wrong key, key on one side
 * only, strangers with junk; agreement on failed ranks (a dead rank, a dead
 * coordinator, exclude lists that differ, a rank that never joins). */
#include "build_config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "loom.h"
#include "auth.h"
#include "config.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/boot_wire.h"
#include "bootstrap/oob.h"
#include "bootstrap/oob_wire.h"
#include "net/handshake.h"
#include "net/net.h"
#include "../support/mp_util.h"

#include "bootstrap/agree.h"

#define MAXR 32

struct result {
    int res;
    uint64_t comm_id;
    double elapsed;
    char err[512];
    uint64_t sent, received;          /* this rank's bootstrap bytes       */
    uint8_t entry[LOOM_OOB_ENTRY_LEN]; /* its own                          */
    uint8_t table[MAXR * LOOM_OOB_ENTRY_LEN]; /* what it learnt            */
    int decided;                              /* test_agree: it has its answer */
};

struct scenario {
    int port;
    double timeout;
    uint64_t hash_of[MAXR]; /* per rank; 0 = the common hash */
    int skip_rank;         /* this rank never runs its bootstrap (-1 none) */
    double root_delay;     /* seconds rank 0 waits before starting */
    double peer_timeout;   /* timeout of ranks > 0 (0: the same)      */
    double report;         /* rank 0 names missing ranks this often   */
    struct result *out;    /* shared, one per rank */
};

static const char *describe(void *ctx, int rank)
{
    static char buf[64];
    (void)ctx;
    snprintf(buf, sizeof buf, "rank %d (node-%d)", rank, rank);
    return buf;
}

static struct result *shared_results(void)
{
    void *m = mmap(NULL, MAXR * sizeof(struct result), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    memset(m, 0, MAXR * sizeof(struct result));
    return m;
}

/* Open this rank's out-of-band service (rank 0 at the job's port) and
 * rendezvous with params p; record what came out. */
static void run_bootstrap(struct scenario *sc, int rank, int nranks,
                          const struct loom_boot_params *p)
{
    struct result *out = &sc->out[rank];
    struct loom_oob *oob = NULL;
    double t0 = mp_now();
    out->res = loom_oob_open(rank, nranks, "127.0.0.1", rank == 0 ? sc->port : 0, &oob,
                             out->entry, out->err, sizeof out->err);
    if (out->res == LOOM_SUCCESS) {
        loom_put_le64(out->entry + LOOM_OOB_ENTRY_HOST, 0x100u + (unsigned)rank);
        loom_put_le32(out->entry + LOOM_OOB_ENTRY_FLAGS, (unsigned)rank * 3);
        struct loom_boot_stats st = {0};
        out->res = loom_bootstrap(p, oob, out->entry, &out->comm_id, &st, out->err,
                                  sizeof out->err);
        out->sent = st.sent;
        out->received = st.received;
        const uint8_t *t = loom_oob_table(oob);
        if (out->res == LOOM_SUCCESS && t && nranks <= MAXR)
            memcpy(out->table, t, (size_t)nranks * LOOM_OOB_ENTRY_LEN);
        loom_oob_close(oob);
    }
    out->elapsed = mp_now() - t0;
}

static int rank_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    if (rank == sc->skip_rank)
        return 0;
    if (rank == 0 && sc->root_delay > 0)
        usleep((useconds_t)(sc->root_delay * 1e6));
    struct loom_boot_params p = {
        .struct_size = sizeof p, .rank = rank, .nranks = nranks,
        .root_host = "127.0.0.1", .root_port = sc->port,
        .table_hash = sc->hash_of[rank] ? sc->hash_of[rank] : 0x1234abcdull,
        .timeout = rank && sc->peer_timeout > 0 ? sc->peer_timeout : sc->timeout,
        .describe = describe, .report_first = sc->report, .report_every = sc->report};
    run_bootstrap(sc, rank, nranks, &p);
    return 0;
}

static struct scenario *scenario_new(double timeout)
{
    struct scenario *sc = calloc(1, sizeof *sc);
    ck_assert_ptr_nonnull(sc);
    sc->port = mp_free_port();
    ck_assert_int_gt(sc->port, 0);
    sc->timeout = timeout;
    sc->skip_rank = -1;
    sc->out = shared_results();
    return sc;
}

static void scenario_free(struct scenario *sc)
{
    munmap(sc->out, MAXR * sizeof(struct result));
    free(sc);
}

static void check_all_ok(struct scenario *sc, int n)
{
    for (int r = 0; r < n; r++) {
        ck_assert_msg(sc->out[r].res == LOOM_SUCCESS, "rank %d: %d %s", r,
                      sc->out[r].res, sc->out[r].err);
        ck_assert_uint_ne(sc->out[r].comm_id, 0);
        ck_assert_uint_eq(sc->out[r].comm_id, sc->out[0].comm_id);
        /* every rank learnt every rank's own entry, address and host */
        for (int q = 0; q < n; q++)
            ck_assert_mem_eq(sc->out[r].table + q * LOOM_OOB_ENTRY_LEN, sc->out[q].entry,
                             LOOM_OOB_ENTRY_LEN);
    }
}

static const int exchange_sizes[] = {1, 2, 5, 13};

START_TEST(test_exchange)
{
    int n = exchange_sizes[_i];
    struct scenario *sc = scenario_new(10.0);
    ck_assert_uint_eq(mp_run(n, rank_main, sc, 15.0, 0), 0);
    check_all_ok(sc, n);
    /* A second rendezvous gets a new communicator id. */
    uint64_t first = sc->out[0].comm_id;
    if (n > 1) {
        ck_assert_uint_eq(mp_run(n, rank_main, sc, 15.0, 0), 0);
        check_all_ok(sc, n);
        ck_assert_uint_ne(sc->out[0].comm_id, first);
    }
    scenario_free(sc);
}
END_TEST

/* Rank 0 sends and receives O(N) bytes: it answers each rank with a few
 * dozen bytes and hands the table to two children only. */
START_TEST(test_root_bytes_linear)
{
    uint64_t sent[2];
    const int n[2] = {9, 29}; /* both past the fan-out (8) */
    for (int k = 0; k < 2; k++) {
        struct scenario *sc = scenario_new(10.0);
        ck_assert_uint_eq(mp_run(n[k], rank_main, sc, 15.0, 0), 0);
        check_all_ok(sc, n[k]);
        sent[k] = sc->out[0].sent;
        /* per rank: challenge, proof and answer; the table to 8 children */
        ck_assert_uint_le(sent[k], (uint64_t)n[k] * (300 + 8 * LOOM_OOB_ENTRY_LEN));
        scenario_free(sc);
    }
    /* linear, not quadratic: 29/9 = 3.2 times the ranks, (29/9)^2 = 10.4 */
    ck_assert_uint_lt(sent[1], sent[0] * 4);
}
END_TEST

START_TEST(test_hash_mismatch_named)
{
    /* A rank of this job that loaded another table makes every rank fail at
     * once, with the reason: rank 0 refuses it and everyone who joined, and
     * tells latecomers too. */
    struct scenario *sc = scenario_new(8.0);
    sc->hash_of[2] = 0x99ull;
    ck_assert_uint_eq(mp_run(4, rank_main, sc, 12.0, 0), 0);
    const char *why = "rank 2 (node-2) loaded a different rank table (hash "
                      "0x0000000000000099, rank 0 has 0x000000001234abcd)";
    for (int r = 0; r < 4; r++) {
        ck_assert_msg(sc->out[r].res == LOOM_ERROR_MISMATCH && strstr(sc->out[r].err, why),
                      "rank %d said (%d): %s", r, sc->out[r].res, sc->out[r].err);
        ck_assert_double_lt(sc->out[r].elapsed, 4.0);
    }
    scenario_free(sc);
}
END_TEST

/* While ranks are missing rank 0 names them every so often (a log line),
 * long before the timeout. */
START_TEST(test_missing_rank_reported)
{
    char path[] = "/tmp/loom-boot-report-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    setenv("LOOM_DEBUG_FILE", path, 1);
    setenv("LOOM_DEBUG", "WARN", 1);
    loom_config_reset();
    struct scenario *sc = scenario_new(1.5);
    sc->peer_timeout = 3.0;
    sc->skip_rank = 2;
    sc->report = 0.4;
    ck_assert_uint_eq(mp_run(4, rank_main, sc, 10.0, 0), 0);
    unsetenv("LOOM_DEBUG_FILE");
    loom_config_reset();
    char buf[8192] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    unlink(path);
    ck_assert_msg(strstr(buf, "rank 0 is still waiting for 1 of 4 ranks after 0 s "
                              "(timeout 1.5 s): rank 2 (node-2)"),
                  "log: %s", buf);
    ck_assert_int_eq(sc->out[0].res, LOOM_ERROR_TIMEOUT);
    scenario_free(sc);
}
END_TEST

START_TEST(test_missing_rank_named)
{
    struct scenario *sc = scenario_new(1.0);
    sc->peer_timeout = 5.0;
    sc->skip_rank = 3;
    ck_assert_uint_eq(mp_run(4, rank_main, sc, 10.0, 0), 0);
    ck_assert_int_eq(sc->out[0].res, LOOM_ERROR_TIMEOUT);
    ck_assert_str_eq(sc->out[0].err, "rank 3 (node-3) did not join within 1 s");
    ck_assert_double_ge(sc->out[0].elapsed, 0.9);
    ck_assert_double_lt(sc->out[0].elapsed, 4.5); /* below the 5 s peer timeout */
    for (int r = 1; r <= 2; r++) {
        ck_assert_int_eq(sc->out[r].res, LOOM_ERROR_TIMEOUT);
        ck_assert_msg(strstr(sc->out[r].err, "rank 3 (node-3) did not join"),
                      "rank %d said: %s", r, sc->out[r].err);
    }
    scenario_free(sc);
}
END_TEST

START_TEST(test_no_root)
{
    struct scenario *sc = scenario_new(0.5);
    sc->skip_rank = 0;
    ck_assert_uint_eq(mp_run(2, rank_main, sc, 10.0, 0), 0);
    ck_assert_int_eq(sc->out[1].res, LOOM_ERROR_TIMEOUT);
    char want[128];
    snprintf(want, sizeof want, "could not reach rank 0 at 127.0.0.1:%d within "
             "0.5 s: Connection refused", sc->port);
    ck_assert_msg(strstr(sc->out[1].err, want), "said: %s", sc->out[1].err);
    ck_assert_double_ge(sc->out[1].elapsed, 0.45);
    ck_assert_double_lt(sc->out[1].elapsed, 2.0);
    scenario_free(sc);
}
END_TEST

START_TEST(test_late_root)
{
    struct scenario *sc = scenario_new(10.0);
    sc->root_delay = 0.3;
    ck_assert_uint_eq(mp_run(3, rank_main, sc, 15.0, 0), 0);
    check_all_ok(sc, 3);
    ck_assert_double_ge(sc->out[1].elapsed, 0.25);
    scenario_free(sc);
}
END_TEST

/* Rank 2 of this scenario is a stranger: garbage, a silent connection, and a
 * hello-sized block of junk, all to the root's port. */
static int stranger_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    if (rank == 1)
        usleep(300000); /* the strangers come first */
    if (rank < 2)
        return rank_main(rank, 2, arg);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        double until = mp_now() + 5;
        for (;;) {
            fds[i] = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in sin = {.sin_family = AF_INET,
                                      .sin_port = htons((uint16_t)sc->port),
                                      .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            if (connect(fds[i], (struct sockaddr *)&sin, sizeof sin) == 0)
                break;
            close(fds[i]);
            if (mp_now() > until)
                return 3;
            usleep(5000);
        }
    }
    static const char junk[] = "GET / HTTP/1.0\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxxxx";
    if (send(fds[0], junk, sizeof junk, MSG_NOSIGNAL) != sizeof junk)
        return 4;
    /* the bootstrap's preamble, then a hello claiming a rank out of range */
    uint8_t hello[16 + 40] = {0x42, 0x4f, 0x53, 0x54, 1, 0};
    uint8_t *h = hello + 16;
    h[0] = 0x42, h[1] = 0x4c, h[2] = 0x48, h[3] = 0x49, h[4] = 1;
    h[8] = 9; /* "rank 9" */
    if (send(fds[2], hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello)
        return 5;
    sleep(3); /* keep the silent one open past the rendezvous */
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    return 0;
}

START_TEST(test_stranger_ignored)
{
    struct scenario *sc = scenario_new(10.0);
    /* Rank 1 (the real one) arrives after the strangers. */
    ck_assert_uint_eq(mp_run(3, stranger_main, sc, 15.0, 0), 0);
    check_all_ok(sc, 2);
    scenario_free(sc);
}
END_TEST

START_TEST(test_port_taken)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    int port = ntohs(sin.sin_port);
    struct loom_oob *oob = NULL;
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    char err[512], want[64];
    ck_assert_int_eq(loom_oob_open(0, 2, "127.0.0.1", port, &oob, entry, err, sizeof err),
                     LOOM_ERROR_SYSTEM);
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    ck_assert_msg(strstr(err, want) && strstr(err, "port is taken"), "%s", err);
    close(fd);
}
END_TEST

START_TEST(test_bad_arguments)
{
    struct loom_boot_params p = {.struct_size = sizeof p, .rank = 2, .nranks = 2,
                                 .root_host = "127.0.0.1", .root_port = 1,
                                 .timeout = 1.0};
    struct loom_oob *oob = NULL;
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    uint64_t id;
    char err[256];
    ck_assert_int_eq(loom_oob_open(1, 2, "127.0.0.1", 0, &oob, entry, err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_bootstrap(&p, oob, entry, &id, NULL, err, sizeof err),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "bootstrap: rank 2 of 2 ranks is out of range");
    p.rank = 1;
    p.root_port = 0;
    ck_assert_int_eq(loom_bootstrap(&p, oob, entry, &id, NULL, err, sizeof err),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "bootstrap: rank 0's address 127.0.0.1:0 is not valid");
    loom_oob_close(oob);
    ck_assert_int_eq(loom_oob_open(0, 2, "no-such-address", 0, &oob, entry, err,
                                   sizeof err),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "\"no-such-address\" is not a numeric IPv4/IPv6 address");
}
END_TEST

START_TEST(test_wake_aborts)
{
    for (int rank = 1; rank >= 0; rank--) {
        struct loom_boot_params p = {.struct_size = sizeof p, .rank = rank, .nranks = 2,
                                     .root_host = "127.0.0.1",
                                     .root_port = mp_free_port(), .timeout = 10.0};
        struct loom_oob *oob = NULL;
        uint8_t entry[LOOM_OOB_ENTRY_LEN];
        uint64_t id;
        char err[256];
        ck_assert_int_eq(loom_oob_open(rank, 2, "127.0.0.1", rank ? 0 : p.root_port, &oob,
                                       entry, err, sizeof err),
                         LOOM_SUCCESS);
        loom_oob_abort(oob);
        double t0 = mp_now();
        ck_assert_int_eq(loom_bootstrap(&p, oob, entry, &id, NULL, err, sizeof err),
                         LOOM_ERROR_ABORTED);
        ck_assert_double_lt(mp_now() - t0, 1.0);
        loom_oob_close(oob);
    }
}
END_TEST

/* The out-of-band service between two forked ranks: messages both ways in
 * order, a lookup of a blob published later, a handler, a view with its own
 * namespace, and a dead peer named while a receive waits on it. */
static int oob_main(int rank, int n, void *arg)
{
    struct scenario *sc = arg;
    struct result *out = &sc->out[rank];
    struct loom_oob *oob = NULL, *view = NULL;
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    struct loom_boot_params p = {.struct_size = sizeof p, .rank = rank, .nranks = n,
                                 .root_host = "127.0.0.1", .root_port = sc->port,
                                 .timeout = 10};
    if (loom_oob_open(rank, n, "127.0.0.1", rank ? 0 : sc->port, &oob, entry, out->err,
                      sizeof out->err) ||
        loom_bootstrap(&p, oob, entry, &out->comm_id, NULL, out->err, sizeof out->err))
        return 10;
    int peer = 1 - rank;
    char msg[64];
    for (int i = 0; i < 50; i++) {
        snprintf(msg, sizeof msg, "message %d from %d", i, rank);
        if (loom_oob_send(oob, peer, 0x500, msg, strlen(msg) + 1))
            return 11;
    }
    for (int i = 0; i < 50; i++) {
        void *buf = NULL;
        int from = -1;
        char want[64];
        snprintf(want, sizeof want, "message %d from %d", i, peer);
        if (loom_oob_recv(oob, 0x500, -1, 5, &from, &buf, NULL) || from != peer ||
            strcmp(buf, want) != 0) {
            snprintf(out->err, sizeof out->err, "message %d: %s", i,
                     buf ? (char *)buf : loom_oob_error(oob));
            return 12;
        }
        free(buf);
    }
    /* a lookup that comes before the blob is answered once it is published */
    if (rank == 0 && loom_oob_lookup(oob, 1, 0x501))
        return 13;
    if (rank == 1) {
        usleep(200000);
        if (loom_oob_publish(oob, 0x501, "blob", 5))
            return 14;
    }
    void *buf = NULL;
    if (rank == 0 && (loom_oob_recv(oob, 0x501, 1, 5, NULL, &buf, NULL) ||
                      strcmp(buf, "blob") != 0))
        return 15;
    free(buf);
    buf = NULL;
    /* a view (namespace 77) sees its own messages only */
    int ranks[2] = {1, 0};
    if (loom_oob_view(oob, ranks, 2, 1 - rank, 77, &view))
        return 16;
    if (loom_oob_send(view, rank, 0x500, "in the view", 12)) /* view rank = 1 - own */
        return 17;
    int from = -1;
    if (loom_oob_recv(view, 0x500, -1, 5, &from, &buf, NULL) || from != rank ||
        strcmp(buf, "in the view") != 0)
        return 18;
    free(buf);
    buf = NULL;
    if (loom_oob_poll(oob, 0x500, -1, NULL, &buf, NULL) != 0)
        return 19; /* nothing leaked into namespace 0 */
    /* rank 1 leaves; rank 0, waiting for a message from it that will never
     * come, finds it gone, named, long before its timeout (the wait pings
     * the rank it waits on) */
    if (rank == 1) {
        loom_oob_close(view);
        loom_oob_close(oob);
        usleep(100000);
        return 0;
    }
    double t0 = mp_now();
    loom_result_t res = loom_oob_recv(oob, 0x502, 1, 20, NULL, &buf, NULL);
    snprintf(out->err, sizeof out->err, "after %.1f s: %s", mp_now() - t0, loom_oob_error(oob));
    if (res != LOOM_ERROR_REMOTE || !strstr(out->err, "rank 1 is gone") || mp_now() - t0 > 10)
        return 20;
    char why[512] = "";
    if (loom_oob_peer_error(oob, 1, why, sizeof why) != LOOM_ERROR_REMOTE ||
        !strstr(why, "rank 1 is gone"))
        return 21;
    out->err[0] = 0;
    loom_oob_close(view);
    loom_oob_close(oob);
    return 0;
}

START_TEST(test_oob_service)
{
    struct scenario *sc = scenario_new(10.0);
    unsigned failed = mp_run(2, oob_main, sc, 20.0, 0);
    ck_assert_msg(failed == 0, "failed 0x%x: rank 0: %s; rank 1: %s", failed, sc->out[0].err,
                  sc->out[1].err);
    scenario_free(sc);
}
END_TEST

START_TEST(test_local_addr)
{
    char out[64], err[256];
    ck_assert_int_eq(loom_net_local_addr("127.0.0.1", 80, NULL, out, sizeof out,
                                         err, sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(out, "127.0.0.1");
    ck_assert_int_eq(loom_net_local_addr(NULL, 0, "=lo", out, sizeof out, err,
                                         sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(out, "127.0.0.1");
    ck_assert_int_eq(loom_net_local_addr(NULL, 0, "l", out, sizeof out, err,
                                         sizeof err),
                     LOOM_SUCCESS);
    ck_assert_str_eq(out, "127.0.0.1");
    ck_assert_int_eq(loom_net_local_addr(NULL, 0, "=l", out, sizeof out, err,
                                         sizeof err),
                     LOOM_ERROR_CONFIG);
    ck_assert_str_eq(err, "no interface that is up matches \"=l\"");
    ck_assert_int_eq(loom_net_local_addr(NULL, 0, "nosuchif0,=nosuch1", out,
                                         sizeof out, err, sizeof err),
                     LOOM_ERROR_CONFIG);
    ck_assert_int_eq(loom_net_local_addr("127.0.0.1", 80, NULL, out, 4, err,
                                         sizeof err),
                     LOOM_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* Ports chosen for a job (loom-run, the tests) lie outside the kernel's
 * ephemeral range, where no connection's local port can take them first,
 * and can be bound; a region that cannot fit is refused. */
START_TEST(test_pick_port_base)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        ck_assert_int_eq(fscanf(f, "%d %d", &lo, &hi), 2);
        fclose(f);
    }
    int room = lo - 10000 >= 16 || hi <= 65535 - 16; /* else nothing is outside */
    for (int n = 1; n <= 16; n *= 4) {
        for (int i = 0; i < 40; i++) {
            int base = loom_net_pick_port_base(n);
            ck_assert_int_gt(base, 1023);
            ck_assert_int_le(base + n - 1, 65535);
            if (room)
                ck_assert_msg(base + n - 1 < lo || base > hi,
                              "ports %d..%d are inside the ephemeral range %d..%d",
                              base, base + n - 1, lo, hi);
        }
        int base = loom_net_pick_port_base(n);
        for (int p = 0; p < n; p++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in sa = {.sin_family = AF_INET,
                                     .sin_port = htons((uint16_t)(base + p)),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                              listen(fd, 1) == 0,
                          "picked port %d cannot be listened on: %s", base + p,
                          strerror(errno));
            close(fd);
        }
    }
    ck_assert_int_eq(loom_net_pick_port_base(0), 0);
    ck_assert_int_eq(loom_net_pick_port_base(70000), 0);
}
END_TEST

/* ---------------------------------------------------------- job key tests */

/* Per-rank job keys for key_rank_main (NULL: no key); set before mp_run. */
static const char *key_of[MAXR];

static int key_rank_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    struct loom_auth_key key;
    loom_auth_key_set(&key, key_of[rank], key_of[rank] ? strlen(key_of[rank]) : 0);
    struct loom_boot_params p = {
        .struct_size = sizeof p, .rank = rank, .nranks = nranks,
        .root_host = "127.0.0.1", .root_port = sc->port, .table_hash = 0x1234abcdull,
        .timeout = rank && sc->peer_timeout > 0 ? sc->peer_timeout : sc->timeout,
        .describe = describe, .key = &key};
    run_bootstrap(sc, rank, nranks, &p);
    return 0;
}

START_TEST(test_key_same)
{
    struct scenario *sc = scenario_new(10.0);
    for (int r = 0; r < MAXR; r++)
        key_of[r] = "the-job-key";
    ck_assert_uint_eq(mp_run(3, key_rank_main, sc, 15.0, 0), 0);
    check_all_ok(sc, 3);
    scenario_free(sc);
}
END_TEST

/* _i = 0: rank 2 has another key; 1: rank 2 has none; 2: only rank 2 has
 * one. Rank 2 is refused and told why; rank 0 names it when it times out. */
START_TEST(test_key_refused)
{
    static const char *const why[] = {
        "rank 0 rejected this rank's job key: job key does not match (another "
        "job, or another key) (LOOM_JOB_KEY",
        "rank 0 rejected this rank's job key: job key does not match (it has a "
        "job key, this side has none)",
        "rank 0 rejected this rank's job key: job key does not match (it has no "
        "job key, this side has one)"};
    struct scenario *sc = scenario_new(1.5);
    sc->peer_timeout = 3.0;
    for (int r = 0; r < MAXR; r++)
        key_of[r] = _i == 2 ? NULL : "the-job-key";
    key_of[2] = _i == 0 ? "another-key" : _i == 1 ? NULL : "the-job-key";
    ck_assert_uint_eq(mp_run(3, key_rank_main, sc, 10.0, 0), 0);
    ck_assert_int_eq(sc->out[2].res, LOOM_ERROR_MISMATCH);
    ck_assert_msg(strstr(sc->out[2].err, "refused rank 2: ") &&
                      strstr(sc->out[2].err, why[_i]),
                  "rank 2 said: %s", sc->out[2].err);
    ck_assert_double_lt(sc->out[2].elapsed, 1.0);
    ck_assert_int_eq(sc->out[0].res, LOOM_ERROR_TIMEOUT);
    ck_assert_msg(strstr(sc->out[0].err, "rank 2 (node-2) did not join within "
                                         "1.5 s"),
                  "root said: %s", sc->out[0].err);
    ck_assert_int_lt(sc->out[1].res, 0);
    scenario_free(sc);
}
END_TEST

/* A socket to rank 0's bootstrap: its port, then the preamble that hands
 * the socket to the bootstrap, and len bytes of more in the same send. */
static int connect_root_with(int port, const void *more, size_t len)
{
    uint8_t pre[16 + 256] = {0x42, 0x4f, 0x53, 0x54, 1, 0};
    ck_assert_uint_le(len, sizeof pre - 16);
    if (len)
        memcpy(pre + 16, more, len);
    double until = mp_now() + 5;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
            send(fd, pre, 16 + len, MSG_NOSIGNAL) == (ssize_t)(16 + len))
            return fd;
        close(fd);
        if (mp_now() > until)
            return -1;
        usleep(5000);
    }
}

static int connect_root(int port)
{
    return connect_root_with(port, NULL, 0);
}

/* Rank 1 sends its whole hello with the preamble, before rank 0's challenge
 * (without a job key the hello does not depend on it), so rank 0 finds it
 * complete as it adopts the socket and takes the last rank right there.
 * Rank 1 then acks the table as a real rank does, so rank 0 finishes. */
static int quick_rank_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    if (rank == 0)
        return rank_main(rank, nranks, arg);
    struct result *out = &sc->out[1];
    struct loom_oob *oob = NULL;
    if (loom_oob_open(1, 2, "127.0.0.1", 0, &oob, out->entry, out->err, sizeof out->err) < 0)
        return 3;
    uint8_t payload[LOOM_BOOT_HELLO_LEN + LOOM_OOB_ENTRY_LEN];
    struct loom_boot_hello h = {.rank = 1,
                                .nranks = 2,
                                .table_hash = 0x1234abcdull,
                                .entry = out->entry,
                                .entry_len = LOOM_OOB_ENTRY_LEN};
    loom_boot_hello_encode(&h, payload);
    struct loom_auth_key nokey;
    loom_auth_key_set(&nokey, NULL, 0);
    static const uint8_t chal[LOOM_AUTH_CHAL_LEN];
    uint8_t hello[LOOM_HS_HEAD_LEN + sizeof payload + LOOM_HS_TRAILER_LEN];
    if (loom_hs_hello_make(&loom_boot_hs, &nokey, chal, chal, payload, sizeof payload, hello) < 0)
        return 4;
    int fd = connect_root_with(sc->port, hello, sizeof hello);
    if (fd < 0)
        return 5;
    /* challenge and proof, then the answer, which rank 0 sends once every
     * rank joined: at once here, not at its first report (sc->report) */
    uint8_t in[2 * LOOM_AUTH_MSG_LEN + LOOM_BOOT_ANSWER_LEN + 16 + LOOM_OOB_ENTRY_LEN];
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    double t0 = mp_now();
    ssize_t n = recv(fd, in, sizeof in, MSG_WAITALL);
    out->elapsed = mp_now() - t0;
    close(fd);
    if (n != (ssize_t)sizeof in ||
        loom_get_le32(in + 2 * LOOM_AUTH_MSG_LEN) != LOOM_BOOT_ANSWER_MAGIC)
        return 6;
    out->comm_id = loom_get_le64(in + 2 * LOOM_AUTH_MSG_LEN + 8);
    loom_oob_set_entry(oob, 0, in + 2 * LOOM_AUTH_MSG_LEN + 24);
    loom_oob_start(oob, out->comm_id);
    out->res = loom_oob_send(oob, 0, LOOM_OOB_TAG_TABLE_ACK, "", 0);
    loom_oob_close(oob);
    return 0;
}

START_TEST(test_last_rank_taken_on_arrival)
{
    unsetenv("LOOM_JOB_KEY");
    unsetenv("LOOM_JOB_KEY_FILE");
    struct scenario *sc = scenario_new(60.0);
    sc->report = 30.0;
    ck_assert_uint_eq(mp_run(2, quick_rank_main, sc, 25.0, 0), 0);
    ck_assert_msg(sc->out[0].res == LOOM_SUCCESS, "%s", sc->out[0].err);
    ck_assert_int_eq(sc->out[1].res, LOOM_SUCCESS);
    ck_assert_uint_eq(sc->out[1].comm_id, sc->out[0].comm_id);
    /* milliseconds when right; the first report (30 s) when rank 0 waited
     * with nothing pending */
    ck_assert_double_lt(sc->out[1].elapsed, 10.0);
    scenario_free(sc);
}
END_TEST

/* Ranks 0 and 1 are the job (rank 1 arrives last). Rank 2 claims to be rank
 * 1 with a wrong key; rank 3 sends random bytes, a truncated hello, a hello
 * with a huge length and a hello with a forged mac. */
static int key_stranger_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    (void)nranks;
    if (rank == 1)
        usleep(500000);
    if (rank < 2)
        return key_rank_main(rank, 2, arg);
    if (rank == 2) {
        key_of[1] = "wrong-key";
        key_rank_main(1, 2, arg);
        sc->out[2] = sc->out[1];
        return 0;
    }
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_root(sc->port);
        if (fds[i] < 0)
            return 3;
    }
    uint8_t junk[200];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    /* handshake hellos (net/handshake.h) under the bootstrap's magic */
    uint8_t h[LOOM_HS_HEAD_LEN + LOOM_BOOT_HELLO_LEN + 8 + LOOM_HS_TRAILER_LEN];
    memset(h, 0, sizeof h);
    loom_put_le32(h, LOOM_BOOT_HELLO_MAGIC);
    loom_put_le16(h + 4, LOOM_BOOT_VERSION);
    loom_put_le16(h + 6, LOOM_AUTH_FLAG_KEYED);
    loom_put_le32(h + 8, 0xffffffffu);
    struct loom_boot_hello hh = {.rank = 1,
                                 .nranks = 2,
                                 .table_hash = 0x1234abcdull,
                                 .entry = (const uint8_t *)"12345678",
                                 .entry_len = 8};
    loom_boot_hello_encode(&hh, h + LOOM_HS_HEAD_LEN);
    int bad = 0;
    bad |= send(fds[0], junk, sizeof junk, MSG_NOSIGNAL) != sizeof junk;
    bad |= send(fds[1], h, 8, MSG_NOSIGNAL) != 8; /* truncated, then closed */
    close(fds[1]);
    bad |= send(fds[2], h, LOOM_HS_HEAD_LEN, MSG_NOSIGNAL) != LOOM_HS_HEAD_LEN;
    loom_put_le32(h + 8, LOOM_BOOT_HELLO_LEN + 8);
    bad |= send(fds[3], h, sizeof h, MSG_NOSIGNAL) != sizeof h; /* zero mac */
    sleep(2);
    close(fds[0]);
    close(fds[2]);
    close(fds[3]);
    return bad ? 4 : 0;
}

START_TEST(test_key_strangers_dropped)
{
    struct scenario *sc = scenario_new(10.0);
    for (int r = 0; r < MAXR; r++)
        key_of[r] = "the-job-key";
    ck_assert_uint_eq(mp_run(4, key_stranger_main, sc, 15.0, 0), 0);
    check_all_ok(sc, 2);
    /* The impostor was told its key was rejected. */
    ck_assert_int_eq(sc->out[2].res, LOOM_ERROR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(sc->out[2].err, "rejected this rank's job key"));
    scenario_free(sc);
}
END_TEST

/* A key file that cannot be read fails the bootstrap, naming the file. */
START_TEST(test_key_file_missing)
{
    setenv("LOOM_JOB_KEY_FILE", "/nonexistent/job.key", 1);
    unsetenv("LOOM_JOB_KEY");
    loom_config_reset();
    struct loom_oob *oob = NULL;
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    char err[512];
    ck_assert_int_eq(loom_oob_open(0, 1, "127.0.0.1", 0, &oob, entry, err, sizeof err),
                     LOOM_ERROR_IO);
    ck_assert_str_eq(err, "job key file /nonexistent/job.key: No such file or directory");
    unsetenv("LOOM_JOB_KEY_FILE");
    loom_config_reset();
}
END_TEST

/* Agreement on the failed ranks (agree.h), 4 forked ranks: a dead rank
 * (its service closed: its port refuses), the dead coordinator-to-be,
 * exclude lists that differ (every rank fails, naming the one that
 * differs), a live rank that never joins (every rank fails within the
 * timeout, naming it). out->table[0..3] holds each rank's failed set. */
static int agree_main(int rank, int n, void *arg)
{
    struct scenario *sc = arg;
    struct result *out = &sc->out[rank];
    int mode = (int)sc->report;
    struct loom_oob *oob = NULL;
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    struct loom_boot_params p = {.struct_size = sizeof p, .rank = rank, .nranks = n,
                                 .root_host = "127.0.0.1", .root_port = sc->port,
                                 .timeout = 10};
    if (loom_oob_open(rank, n, "127.0.0.1", rank ? 0 : sc->port, &oob, entry, out->err,
                      sizeof out->err) ||
        loom_bootstrap(&p, oob, entry, &out->comm_id, NULL, out->err, sizeof out->err))
        return 10;
    int gone = mode == 0 ? 3 : mode == 1 ? 0 : -1;
    if (rank == gone) {
        loom_oob_close(oob); /* as a process that died: its port refuses */
        return 0;
    }
    if (mode == 3 && rank == 3) {
        sleep(4); /* alive (its service answers) but never joins */
        loom_oob_close(oob);
        return 0;
    }
    uint8_t exclude[4] = {0}, suspect[4] = {0}, failed[4] = {0};
    if (mode == 2 && rank == 2)
        exclude[1] = 1;
    if (gone >= 0 && rank == 1)
        suspect[gone] = 1; /* one rank saw it fail: a hint */
    struct loom_agree_params ap = {.struct_size = sizeof ap, .oob = oob,
                                   .suspect = suspect, .exclude = exclude,
                                   .timeout = 1.5, .describe = describe};
    double t0 = mp_now();
    out->res = loom_agree_failed(&ap, failed, NULL, out->err, sizeof out->err);
    out->elapsed = mp_now() - t0;
    memcpy(out->table, failed, sizeof failed);
    /* Every rank stays until all have their answer, as ranks that go on to
     * the shrunk communicator do: a rank that left at once would take the
     * decision with it from a slower rank that had yet to ask for it, which
     * then rightly finds every other rank gone and decides alone. */
    __atomic_store_n(&out->decided, 1, __ATOMIC_RELEASE);
    for (double until = mp_now() + 10; mode == 2 && mp_now() < until; usleep(1000)) {
        int all = 1;
        for (int r = 0; r < n; r++)
            all &= __atomic_load_n(&sc->out[r].decided, __ATOMIC_ACQUIRE);
        if (all)
            break;
    }
    loom_oob_close(oob);
    return 0;
}

START_TEST(test_agree)
{
    struct scenario *sc = scenario_new(10.0);
    sc->report = _i; /* the mode */
    unsigned failed = mp_run(4, agree_main, sc, 20.0, 0);
    ck_assert_msg(failed == 0, "mode %d: ranks 0x%x failed: %s %s %s %s", _i, failed,
                  sc->out[0].err, sc->out[1].err, sc->out[2].err, sc->out[3].err);
    int gone = _i == 0 ? 3 : _i == 1 ? 0 : -1;
    for (int r = 0; r < 4; r++) {
        struct result *o = &sc->out[r];
        if (r == gone || (_i == 3 && r == 3))
            continue;
        if (gone >= 0) {
            ck_assert_msg(o->res == LOOM_SUCCESS, "mode %d rank %d: %s", _i, r, o->err);
            for (int q = 0; q < 4; q++)
                ck_assert_msg(o->table[q] == (q == gone), "mode %d rank %d: rank %d %s",
                              _i, r, q, o->table[q] ? "failed" : "alive");
            ck_assert_msg(o->elapsed < 5, "mode %d rank %d: %.2f s", _i, r, o->elapsed);
        } else if (_i == 2) {
            ck_assert_msg(o->res == LOOM_ERROR_MISMATCH &&
                              strstr(o->err, "rank 2 (node-2) excludes {1}"),
                          "mode 2 rank %d: %d %s", r, o->res, o->err);
        } else {
            ck_assert_msg(o->res == LOOM_ERROR_TIMEOUT &&
                              strstr(o->err, "rank 3 (node-3) is alive but did not join"),
                          "mode 3 rank %d: %d %s", r, o->res, o->err);
            ck_assert_msg(o->elapsed < 3.5, "mode 3 rank %d: %.2f s", r, o->elapsed);
        }
    }
    scenario_free(sc);
}
END_TEST

/* Two OOB services with different job keys: a message from one names the
 * key as the reason the other cannot be reached, at once (not after the
 * connect timeout), and nothing is delivered. */
START_TEST(test_oob_key_named)
{
    struct loom_oob *a = NULL, *b = NULL;
    uint8_t ea[LOOM_OOB_ENTRY_LEN], eb[LOOM_OOB_ENTRY_LEN];
    char err[256];
    setenv("LOOM_JOB_KEY", "key-a", 1);
    loom_config_reset();
    ck_assert_int_eq(loom_oob_open(0, 2, "127.0.0.1", 0, &a, ea, err, sizeof err), LOOM_SUCCESS);
    setenv("LOOM_JOB_KEY", "key-b", 1);
    loom_config_reset();
    ck_assert_int_eq(loom_oob_open(1, 2, "127.0.0.1", 0, &b, eb, err, sizeof err), LOOM_SUCCESS);
    unsetenv("LOOM_JOB_KEY");
    loom_config_reset();
    loom_oob_set_entry(a, 1, eb);
    loom_oob_set_entry(b, 0, ea);
    loom_oob_start(a, 42);
    loom_oob_start(b, 42);
    ck_assert_int_eq(loom_oob_send(b, 0, 0x600, "x", 1), LOOM_SUCCESS);
    char why[512] = "";
    loom_result_t res = LOOM_SUCCESS;
    double t0 = mp_now();
    while (mp_now() - t0 < 5 && (res = loom_oob_peer_error(b, 0, why, sizeof why)) == 0)
        usleep(10000);
    ck_assert_int_eq(res, LOOM_ERROR_MISMATCH);
    ck_assert_msg(strstr(why, "oob handshake with rank 0 (127.0.0.1:") &&
                      strstr(why, "refused this side's hello: job key does not match"),
                  "rank 1 said: %s", why);
    void *buf = NULL;
    ck_assert_int_eq(loom_oob_poll(a, 0x600, -1, NULL, &buf, NULL), 0);
    loom_oob_close(a);
    loom_oob_close(b);
}
END_TEST

/* The OOB codec: every field survives a round trip. */
START_TEST(test_oob_wire_round_trip)
{
    char why[200] = "";
    uint8_t buf[LOOM_OOB_HDR_LEN];
    const uint32_t kinds[] = {LOOM_OOB_MAGIC, LOOM_OOB_KIND_TCP, LOOM_OOB_KIND_BOOT,
                              LOOM_OOB_KIND_VERBS, LOOM_OOB_KIND_OFI};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        struct loom_oob_pre p = {.kind = kinds[i],
                                 .version = LOOM_OOB_VERSION,
                                 .flags = (uint16_t)(i * 3),
                                 .ns = 0x0102030405060708ull + i},
                            q;
        loom_oob_pre_encode(&p, buf);
        ck_assert_int_eq(loom_oob_pre_decode(buf, &q, why, sizeof why), LOOM_SUCCESS);
        ck_assert_uint_eq(q.kind, p.kind);
        ck_assert_uint_eq(q.flags, p.flags);
        ck_assert_uint_eq(q.ns, p.ns);
    }
    struct loom_oob_hello h = {.job_id = 0xfeedfacecafebeefull, .from = 6, .to = 2, .nranks = 7}, g;
    loom_oob_hello_encode(&h, buf);
    ck_assert_int_eq(loom_oob_hello_decode(buf, LOOM_OOB_HELLO_LEN, &g, why, sizeof why),
                     LOOM_SUCCESS);
    ck_assert_uint_eq(g.job_id, h.job_id);
    ck_assert_uint_eq(g.from, 6);
    ck_assert_uint_eq(g.to, 2);
    ck_assert_uint_eq(g.nranks, 7);
    ck_assert_int_eq(loom_oob_hello_match(&g, 2, 7, h.job_id, why, sizeof why), LOOM_HS_ACCEPT);
    ck_assert_int_eq(loom_oob_hello_match(&g, 2, 7, 0, why, sizeof why), LOOM_HS_HOLD);
    const uint32_t lens[] = {0, 1, 4096, LOOM_OOB_MSG_MAX};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        struct loom_oob_hdr m = {.kind = i % 2 ? LOOM_OOB_KIND_GET : LOOM_OOB_KIND_MSG,
                                 .tag = 0x300u + (uint32_t)i,
                                 .len = lens[i],
                                 .ns = 99 + i},
                            n;
        loom_oob_hdr_encode(&m, buf);
        ck_assert_int_eq(loom_oob_hdr_decode(buf, &n, why, sizeof why), LOOM_SUCCESS);
        ck_assert_uint_eq(n.kind, m.kind);
        ck_assert_uint_eq(n.tag, m.tag);
        ck_assert_uint_eq(n.len, m.len);
        ck_assert_uint_eq(n.ns, m.ns);
    }
}
END_TEST

/* Malformed OOB bytes are refused with a sentence saying what was wrong. */
START_TEST(test_oob_wire_malformed)
{
    char why[200] = "";
    uint8_t buf[LOOM_OOB_HDR_LEN];
    struct loom_oob_pre p = {.kind = 0x20544547u /* "GET " */, .version = LOOM_OOB_VERSION}, q;
    loom_oob_pre_encode(&p, buf);
    ck_assert_int_eq(loom_oob_pre_decode(buf, &q, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "not a Loom socket (preamble 0x20544547)");
    p = (struct loom_oob_pre){.kind = LOOM_OOB_KIND_TCP, .version = LOOM_OOB_VERSION + 1};
    loom_oob_pre_encode(&p, buf);
    ck_assert_int_eq(loom_oob_pre_decode(buf, &q, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(why, "a Loom socket of OOB version 2, this rank speaks 1"));
    struct loom_oob_hello h = {.job_id = 5, .from = 7, .to = 2, .nranks = 7}, g;
    loom_oob_hello_encode(&h, buf);
    ck_assert_int_eq(loom_oob_hello_decode(buf, LOOM_OOB_HELLO_LEN, &g, why, sizeof why),
                     LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "OOB hello from rank 7 of 7");
    ck_assert_int_eq(loom_oob_hello_decode(buf, LOOM_OOB_HELLO_LEN - 1, &g, why, sizeof why),
                     LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "OOB hello of 19 bytes, expected 20");
    h.from = 1;
    loom_oob_hello_encode(&h, buf);
    ck_assert_int_eq(loom_oob_hello_decode(buf, LOOM_OOB_HELLO_LEN, &g, why, sizeof why),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_oob_hello_match(&g, 3, 7, 5, why, sizeof why), LOOM_HS_DROP);
    ck_assert_str_eq(why, "it is for rank 2 of 7, this is rank 3 of 7");
    ck_assert_int_eq(loom_oob_hello_match(&g, 2, 7, 6, why, sizeof why), LOOM_HS_DROP);
    ck_assert_str_eq(why, "it is for job 0000000000000005, this is job 0000000000000006 "
                          "(another job)");
    struct loom_oob_hdr m = {.kind = 3, .len = 1}, n;
    loom_oob_hdr_encode(&m, buf);
    ck_assert_int_eq(loom_oob_hdr_decode(buf, &n, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "bad message header: kind 3");
    m = (struct loom_oob_hdr){.kind = LOOM_OOB_KIND_MSG, .len = LOOM_OOB_MSG_MAX + 1};
    loom_oob_hdr_encode(&m, buf);
    ck_assert_int_eq(loom_oob_hdr_decode(buf, &n, why, sizeof why), LOOM_ERROR_PROTOCOL);
    ck_assert_str_eq(why, "bad message header: 67108865 bytes exceed the limit of 67108864");
}
END_TEST

static Suite *bootstrap_suite(void)
{
    Suite *s = suite_create("bootstrap");
    TCase *tc = tcase_create("rendezvous");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_exchange, 0, 4);
    tcase_add_test(tc, test_root_bytes_linear);
    tcase_add_test(tc, test_hash_mismatch_named);
    tcase_add_test(tc, test_missing_rank_reported);
    tcase_add_test(tc, test_oob_service);
    tcase_add_test(tc, test_oob_key_named);
    tcase_add_test(tc, test_missing_rank_named);
    tcase_add_test(tc, test_no_root);
    tcase_add_test(tc, test_late_root);
    tcase_add_test(tc, test_stranger_ignored);
    tcase_add_test(tc, test_port_taken);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_wake_aborts);
    tcase_add_test(tc, test_local_addr);
    tcase_add_test(tc, test_pick_port_base);
    tcase_add_test(tc, test_key_same);
    tcase_add_loop_test(tc, test_key_refused, 0, 3);
    tcase_add_test(tc, test_key_strangers_dropped);
    tcase_add_test(tc, test_key_file_missing);
    tcase_add_test(tc, test_last_rank_taken_on_arrival);
    tcase_add_loop_test(tc, test_agree, 0, 4);
    suite_add_tcase(s, tc);
    TCase *wire = tcase_create("oob_wire");
    tcase_add_test(wire, test_oob_wire_round_trip);
    tcase_add_test(wire, test_oob_wire_malformed);
    suite_add_tcase(s, wire);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bootstrap_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
