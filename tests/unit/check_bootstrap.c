/* check_bootstrap.c - rendezvous through rank 0 over 127.0.0.1, with forked
 * ranks: success for 1, 2 and 5 ranks, table mismatch, missing ranks, no
 * root, late root, strangers, a taken port; local address selection; port
 * bases for jobs outside the ephemeral range; the job
 * key: same key, wrong key, key on one side only, strangers with junk. */
#include "build_config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "loom.h"
#include "auth.h"
#include "config.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/boot_wire.h"
#include "transport/transport.h"
#include "mp_util.h"

#define EP_STRIDE 64

struct result {
    int res;
    uint64_t comm_id;
    double elapsed;
    char err[512];
    uint8_t eps[8 * EP_STRIDE];
};

struct scenario {
    int port;
    double timeout;
    uint64_t hash_of[8];   /* per rank; 0 = the common hash */
    int skip_rank;         /* this rank never runs its bootstrap (-1 none) */
    double root_delay;     /* seconds rank 0 waits before starting */
    double peer_timeout;   /* timeout of ranks > 0 (0: the same)      */
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
    void *m = mmap(NULL, 8 * sizeof(struct result), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    memset(m, 0, 8 * sizeof(struct result));
    return m;
}

static void my_ep(int rank, char *ep, size_t *len)
{
    /* Different lengths per rank, so offsets and lengths are exercised. */
    *len = (size_t)snprintf(ep, EP_STRIDE, "endpoint-of-rank-%d%.*s", rank, rank,
                            "xxxxxxxx") + 1;
}

static int rank_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    struct result *out = &sc->out[rank];
    if (rank == sc->skip_rank)
        return 0;
    if (rank == 0 && sc->root_delay > 0)
        usleep((useconds_t)(sc->root_delay * 1e6));
    char ep[EP_STRIDE];
    size_t ep_len;
    my_ep(rank, ep, &ep_len);
    struct loom_boot_params p = {
        .struct_size = sizeof p, .rank = rank, .nranks = nranks,
        .root_host = "127.0.0.1", .root_port = sc->port,
        .table_hash = sc->hash_of[rank] ? sc->hash_of[rank] : 0x1234abcdull,
        .timeout = rank && sc->peer_timeout > 0 ? sc->peer_timeout : sc->timeout,
        .wake_fd = -1, .describe = describe};
    double t0 = mp_now();
    out->res = loom_bootstrap_exchange(&p, ep, ep_len, out->eps, EP_STRIDE,
                                       &out->comm_id, out->err, sizeof out->err);
    out->elapsed = mp_now() - t0;
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
    munmap(sc->out, 8 * sizeof(struct result));
    free(sc);
}

static void check_all_ok(struct scenario *sc, int n)
{
    for (int r = 0; r < n; r++) {
        ck_assert_msg(sc->out[r].res == LOOM_SUCCESS, "rank %d: %d %s", r,
                      sc->out[r].res, sc->out[r].err);
        ck_assert_uint_ne(sc->out[r].comm_id, 0);
        ck_assert_uint_eq(sc->out[r].comm_id, sc->out[0].comm_id);
        for (int q = 0; q < n; q++) {
            char ep[EP_STRIDE];
            size_t len;
            my_ep(q, ep, &len);
            ck_assert_mem_eq(sc->out[r].eps + q * EP_STRIDE, ep, len);
        }
    }
}

static const int exchange_sizes[] = {1, 2, 5};

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

START_TEST(test_hash_mismatch_named)
{
    /* A rank of another job (different table) is refused by name, and rank 0
     * keeps waiting for the right one: its timeout repeats why. */
    struct scenario *sc = scenario_new(2.0);
    sc->peer_timeout = 3.0;
    sc->hash_of[2] = 0x99ull;
    ck_assert_uint_eq(mp_run(3, rank_main, sc, 10.0, 0), 0);
    ck_assert_int_eq(sc->out[0].res, LOOM_ERROR_TIMEOUT);
    ck_assert_msg(strstr(sc->out[0].err, "rank 2 (node-2) did not join within 2 s "
                                         "(refused: rank 2 (node-2) loaded a "
                                         "different rank table (hash "
                                         "0x0000000000000099, root has "
                                         "0x000000001234abcd))"),
                  "root said: %s", sc->out[0].err);
    ck_assert_int_eq(sc->out[2].res, LOOM_ERROR_MISMATCH);
    ck_assert_msg(strstr(sc->out[2].err, "refused rank 2") &&
                      strstr(sc->out[2].err, "different rank table"),
                  "rank 2 said: %s", sc->out[2].err);
    /* Rank 1 either joined before and is told why, or never got in. */
    ck_assert_int_lt(sc->out[1].res, 0);
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
    ck_assert_double_lt(sc->out[0].elapsed, 3.0);
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
    uint8_t hello[40] = {0x42, 0x4c, 0x48, 0x49, 1, 0};
    hello[8] = 9; /* "rank 9" */
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
    struct loom_boot_params p = {
        .struct_size = sizeof p, .rank = 0, .nranks = 2, .root_host = "127.0.0.1",
        .root_port = port, .timeout = 1.0, .wake_fd = -1};
    uint8_t eps[2 * EP_STRIDE];
    uint64_t id;
    char err[512], want[64];
    ck_assert_int_eq(loom_bootstrap_exchange(&p, "x", 1, eps, EP_STRIDE, &id, err,
                                             sizeof err),
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
                                 .timeout = 1.0, .wake_fd = -1};
    uint8_t eps[2 * EP_STRIDE];
    uint64_t id;
    char err[256];
    ck_assert_int_eq(loom_bootstrap_exchange(&p, "x", 1, eps, EP_STRIDE, &id, err,
                                             sizeof err),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "bootstrap: rank 2 of 2 ranks is out of range");
    p.rank = 1;
    ck_assert_int_eq(loom_bootstrap_exchange(&p, eps, LOOM_EP_MAX + 1, eps,
                                             EP_STRIDE, &id, err, sizeof err),
                     LOOM_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_wake_aborts)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    ck_assert_int_eq(write(pfd[1], "x", 1), 1);
    struct loom_boot_params p = {.struct_size = sizeof p, .rank = 1, .nranks = 2,
                                 .root_host = "127.0.0.1",
                                 .root_port = mp_free_port(), .timeout = 10.0,
                                 .wake_fd = pfd[0]};
    uint8_t eps[2 * EP_STRIDE];
    uint64_t id;
    char err[256];
    double t0 = mp_now();
    ck_assert_int_eq(loom_bootstrap_exchange(&p, "x", 1, eps, EP_STRIDE, &id, err,
                                             sizeof err),
                     LOOM_ERROR_ABORTED);
    ck_assert_double_lt(mp_now() - t0, 1.0);
    p.rank = 0;
    ck_assert_int_eq(loom_bootstrap_exchange(&p, "x", 1, eps, EP_STRIDE, &id, err,
                                             sizeof err),
                     LOOM_ERROR_ABORTED);
    close(pfd[0]);
    close(pfd[1]);
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
static const char *key_of[8];

static int key_rank_main(int rank, int nranks, void *arg)
{
    struct scenario *sc = arg;
    struct result *out = &sc->out[rank];
    char ep[EP_STRIDE];
    size_t ep_len;
    my_ep(rank, ep, &ep_len);
    struct loom_auth_key key;
    loom_auth_key_set(&key, key_of[rank], key_of[rank] ? strlen(key_of[rank]) : 0);
    struct loom_boot_params p = {
        .struct_size = sizeof p, .rank = rank, .nranks = nranks,
        .root_host = "127.0.0.1", .root_port = sc->port, .table_hash = 0x1234abcdull,
        .timeout = rank && sc->peer_timeout > 0 ? sc->peer_timeout : sc->timeout,
        .wake_fd = -1, .describe = describe, .key = &key};
    double t0 = mp_now();
    out->res = loom_bootstrap_exchange(&p, ep, ep_len, out->eps, EP_STRIDE,
                                       &out->comm_id, out->err, sizeof out->err);
    out->elapsed = mp_now() - t0;
    return 0;
}

START_TEST(test_key_same)
{
    struct scenario *sc = scenario_new(10.0);
    for (int r = 0; r < 8; r++)
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
        "rank 0 rejected this rank's job key: job key does not match "
        "(LOOM_JOB_KEY",
        "rank 0 rejected this rank's job key: job key does not match (it has no "
        "job key, rank 0 has one)",
        "rank 0 rejected this rank's job key: job key does not match (it has a "
        "job key, rank 0 has none)"};
    struct scenario *sc = scenario_new(1.5);
    sc->peer_timeout = 3.0;
    for (int r = 0; r < 8; r++)
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

static int connect_root(int port)
{
    double until = mp_now() + 5;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0)
            return fd;
        close(fd);
        if (mp_now() > until)
            return -1;
        usleep(5000);
    }
}

/* Ranks 0 and 1 are the job (rank 1 arrives last). Rank 2 claims to be rank
 * 1 with a wrong key; rank 3 sends random bytes, a truncated hello, a hello
 * with a huge endpoint length and a hello with a forged mac. */
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
    uint8_t h[LOOM_BOOT_HELLO_LEN + 8 + LOOM_BOOT_AUTH_LEN];
    memset(h, 0, sizeof h);
    struct loom_boot_hello hh = {.magic = LOOM_BOOT_HELLO_MAGIC,
                                 .version = LOOM_BOOT_VERSION,
                                 .flags = LOOM_AUTH_FLAG_KEYED, .rank = 1,
                                 .nranks = 2, .table_hash = 0x1234abcdull,
                                 .ep_len = 0xffffffffu};
    loom_boot_hello_encode(&hh, h);
    int bad = 0;
    bad |= send(fds[0], junk, sizeof junk, MSG_NOSIGNAL) != sizeof junk;
    bad |= send(fds[1], h, 12, MSG_NOSIGNAL) != 12; /* truncated, then closed */
    close(fds[1]);
    bad |= send(fds[2], h, LOOM_BOOT_HELLO_LEN, MSG_NOSIGNAL) != LOOM_BOOT_HELLO_LEN;
    hh.ep_len = 8;
    loom_boot_hello_encode(&hh, h);
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
    for (int r = 0; r < 8; r++)
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
    char ep[8] = "x", all[EP_STRIDE], err[512];
    uint64_t id;
    struct loom_boot_params p = {.struct_size = sizeof p, .rank = 0, .nranks = 1,
                                 .timeout = 1, .wake_fd = -1};
    ck_assert_int_eq(loom_bootstrap_exchange(&p, ep, 2, all, EP_STRIDE, &id, err,
                                             sizeof err),
                     LOOM_ERROR_IO);
    ck_assert_str_eq(err, "bootstrap: rank 0: job key file /nonexistent/job.key: "
                          "No such file or directory");
    unsetenv("LOOM_JOB_KEY_FILE");
    loom_config_reset();
}
END_TEST

static Suite *bootstrap_suite(void)
{
    Suite *s = suite_create("bootstrap");
    TCase *tc = tcase_create("rendezvous");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_exchange, 0, 3);
    tcase_add_test(tc, test_hash_mismatch_named);
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
    suite_add_tcase(s, tc);
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
