/* tcp_bench.c - point-to-point numbers for the tcp transport between two
 * processes on one host: ping-pong latency (half round trip), and
 * unidirectional and bidirectional bandwidth, at 8 B, 64 KiB, 1 MiB, 16 MiB.
 *
 *   tcp_bench [-s nsocks] [-a address] [-p progress_timeout_us] [-b size]
 *
 * -p 0 busy-polls; the default (-1) blocks in epoll when nothing moved.
 * LOOM_TRANSPORT=ofi (and LOOM_OFI_PROVIDER) measures the ofi transport. */
#include "build_config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loom.h"
#include "base/util.h"
#include "bootstrap/bootstrap.h"
#include "net/net.h"
#include "transport/transport.h"
#include "bootstrap/oob.h"
#include "base/config.h"

static int g_timeout_us = -1;
static size_t g_only_size; /* -b: run just this size */

static int wait_reqs(struct loom_tx *tx, struct loom_tx_req *r, int n)
{
    for (;;) {
        int done = 1;
        for (int i = 0; i < n; i++)
            done &= r[i].done;
        if (done)
            break;
        if (tx->ops->progress(tx, g_timeout_us) != LOOM_SUCCESS) {
            fprintf(stderr, "tcp_bench: %s\n", tx->errmsg);
            exit(1);
        }
    }
    for (int i = 0; i < n; i++)
        if (r[i].status != LOOM_SUCCESS) {
            fprintf(stderr, "tcp_bench: request failed: %s\n", tx->errmsg);
            exit(1);
        }
    return 0;
}

static void xfer(struct loom_tx *tx, int send, int peer, void *buf, size_t len,
                 struct loom_tx_req *r)
{
    *r = (struct loom_tx_req){.peer = peer, .buf = buf, .len = len};
    loom_result_t res = send ? tx->ops->isend(tx, r) : tx->ops->irecv(tx, r);
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "tcp_bench: post failed: %s\n", tx->errmsg);
        exit(1);
    }
}

static int iters_for(size_t len, size_t budget)
{
    size_t n = budget / (len ? len : 1);
    if (n < 4)
        n = 4;
    if (n > 20000)
        n = 20000;
    return (int)n;
}

static void bench(struct loom_tx *tx, int rank)
{
    static const size_t sizes[] = {8, 64 << 10, 1 << 20, 4 << 20, 16 << 20};
    int peer = 1 - rank;
    enum { WINDOW = 8 };
    size_t max = sizes[4];
    uint8_t *sb = malloc(max * WINDOW), *rb = malloc(max * WINDOW);
    if (!sb || !rb)
        exit(1);
    memset(sb, 1, max * WINDOW);
    memset(rb, 0, max * WINDOW);
    if (rank == 0)
        printf("%10s %12s %14s %14s\n", "size", "latency(us)", "uni(MB/s)",
               "bidir(MB/s)");
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t len = sizes[si];
        if (g_only_size && len != g_only_size)
            continue;
        struct loom_tx_req r[2 * WINDOW];
        /* Ping-pong. */
        int it = iters_for(len, 512u << 20);
        double t0 = 0;
        for (int i = -10; i < it; i++) {
            if (i == 0)
                t0 = loom_now();
            if (rank == 0) {
                xfer(tx, 1, peer, sb, len, &r[0]);
                xfer(tx, 0, peer, rb, len, &r[1]);
            } else {
                xfer(tx, 0, peer, rb, len, &r[1]);
                wait_reqs(tx, &r[1], 1);
                xfer(tx, 1, peer, sb, len, &r[0]);
            }
            wait_reqs(tx, r, 2);
        }
        double lat = (loom_now() - t0) / it / 2 * 1e6;
        /* Unidirectional: rank 0 streams windows, rank 1 acks each. */
        int rounds = iters_for(len * WINDOW, 1024u << 20);
        t0 = loom_now();
        for (int i = 0; i < rounds; i++) {
            for (int w = 0; w < WINDOW; w++)
                xfer(tx, rank == 0, peer, (rank == 0 ? sb : rb) + w * len, len,
                     &r[w]);
            wait_reqs(tx, r, WINDOW);
        }
        uint8_t ack = 0;
        xfer(tx, rank == 1, peer, &ack, 1, &r[0]);
        wait_reqs(tx, r, 1);
        double uni = (double)len * WINDOW * rounds / (loom_now() - t0) / 1e6;
        /* Bidirectional: both stream at once. */
        t0 = loom_now();
        for (int i = 0; i < rounds; i++) {
            for (int w = 0; w < WINDOW; w++) {
                xfer(tx, 0, peer, rb + w * len, len, &r[2 * w]);
                xfer(tx, 1, peer, sb + w * len, len, &r[2 * w + 1]);
            }
            wait_reqs(tx, r, 2 * WINDOW);
        }
        double bi = 2.0 * (double)len * WINDOW * rounds / (loom_now() - t0) / 1e6;
        if (rank == 0)
            printf("%10zu %12.2f %14.1f %14.1f\n", len, lat, uni, bi);
        fflush(stdout);
    }
    free(sb);
    free(rb);
}

static int run_rank(int rank, int port, int nsocks, const char *addr)
{
    struct loom_oob *oob;
    struct loom_tx *tx;
    char err[1024], n[16];
    snprintf(n, sizeof n, "%d", nsocks);
    setenv("LOOM_NSOCKS", n, 1);
    loom_config_reset();
    /* LOOM_TRANSPORT picks another transport of the registry (ofi) */
    const struct loom_transport *ops = loom_transport_find(loom_config()->transport);
    if (!ops) {
        fprintf(stderr, "tcp_bench: no transport %s\n", loom_config()->transport);
        return 1;
    }
    if (loom_tx_bootstrap(ops, rank, 2, addr, addr, port, 10, &oob, &tx,
                          err, sizeof err) != LOOM_SUCCESS) {
        fprintf(stderr, "tcp_bench: %s\n", err);
        return 1;
    }
    bench(tx, rank);
    loom_tx_close(tx);
    loom_oob_close(oob);
    return 0;
}

int main(int argc, char **argv)
{
    int nsocks = 2, opt;
    const char *addr = "127.0.0.1";
    while ((opt = getopt(argc, argv, "s:a:p:b:h")) != -1) {
        switch (opt) {
        case 's': nsocks = atoi(optarg); break;
        case 'a': addr = optarg; break;
        case 'p': g_timeout_us = atoi(optarg); break;
        case 'b': g_only_size = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: %s [-s nsocks] [-a address] "
                    "[-p progress_timeout_us] [-b 8|65536|1048576|4194304|16777216]\n", argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    /* Rank 0's bootstrap port: one the kernel just handed out. */
    struct sockaddr_storage ss;
    socklen_t sl;
    int port = -1, fd = -1;
    if (loom_net_parse(addr, 0, &ss, &sl) == LOOM_SUCCESS &&
        (fd = socket(ss.ss_family, SOCK_STREAM, 0)) >= 0 &&
        bind(fd, (struct sockaddr *)&ss, sl) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &(socklen_t){sizeof ss}) == 0)
        port = loom_net_port((struct sockaddr *)&ss);
    if (fd >= 0)
        close(fd);
    if (port <= 0) {
        fprintf(stderr, "tcp_bench: \"%s\" is not a usable numeric address\n",
                addr);
        return 2;
    }
    printf("# tcp_bench: 2 processes, %d socket(s) per peer, %s, progress %d us\n",
           nsocks, addr, g_timeout_us);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0)
        _exit(run_rank(1, port, nsocks, addr));
    int rc = run_rank(0, port, nsocks, addr);
    int st = 0;
    if (rc != 0)
        kill(child, SIGKILL);
    waitpid(child, &st, 0);
    return rc ? rc : (WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}
