/* harness.h - run N ranks as forked processes over loopback, bounded in
 * time, ended by PID. Each rank runs fn(rank, n, arg) and exits with its
 * return value (0 = pass). */
#ifndef LOOM_TEST_HARNESS_H
#define LOOM_TEST_HARNESS_H

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "net/net.h"

/* A port for rank 0 to listen on, outside the kernel's ephemeral range: a
 * port-0 probe would hand out one that any connection made meanwhile (by
 * this test or one running beside it) can take before rank 0 listens. */
static inline int harness_free_port(void)
{
    int port = loom_net_pick_port_base(1);
    if (port == 0) {
        fprintf(stderr, "harness_free_port: no free port on 127.0.0.1\n");
        exit(2);
    }
    return port;
}

typedef int (*harness_fn)(int rank, int n, void *arg);

static inline double harness_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A counter the forked ranks share (NULL if it cannot be mapped), for
 * ordering what Loom itself does not order: a rank that is to vanish
 * between two calls waits until the others are out of the earlier one. */
static inline atomic_int *harness_counter_new(void)
{
    atomic_int *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                         0);
    if (c == MAP_FAILED)
        return NULL;
    atomic_init(c, 0);
    return c;
}

static inline void harness_counter_free(atomic_int *c)
{
    munmap(c, sizeof *c);
}

/* Wait (1 ms naps) until *c reaches want or secs pass; 1 if it did. */
static inline int harness_counter_wait(atomic_int *c, int want, double secs)
{
    double until = harness_now() + secs;
    while (atomic_load(c) < want && harness_now() < until) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return atomic_load(c) >= want;
}

/* Returns 0 when every rank exited 0. status[r] gets each exit code (or
 * 128+signal, or -1 for killed at the timeout) when status != NULL. */
static inline int harness_run(int n, harness_fn fn, void *arg, double timeout_s, int *status)
{
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    int *st = status ? status : calloc((size_t)n, sizeof *st);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            exit(2);
        }
        if (pid == 0) {
            alarm((unsigned)timeout_s + 5); /* never outlive the harness */
            int rc = fn(r, n, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
        pids[r] = pid;
        st[r] = -2;
    }
    double deadline = harness_now() + timeout_s;
    int left = n, failed = 0;
    while (left > 0) {
        int ws;
        pid_t p = waitpid(-1, &ws, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p) {
                    st[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
                    if (st[r] != 0)
                        failed = 1;
                    pids[r] = 0;
                    left--;
                }
            continue;
        }
        if (harness_now() > deadline) {
            for (int r = 0; r < n; r++)
                if (pids[r] > 0) {
                    fprintf(stderr,
                            "harness: rank %d (pid %d) still running after %.0f s: killed\n", r,
                            (int)pids[r], timeout_s);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    st[r] = -1;
                    pids[r] = 0;
                    left--;
                }
            failed = 1;
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    free(pids);
    if (!status)
        free(st);
    return failed;
}

#endif
