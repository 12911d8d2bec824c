/* mp_util.h - forked multi-process helpers for the network unit tests.
 *
 * mp_run forks one child per rank, waits at most timeout_s for all of them,
 * kills any still running by PID, and returns a bitmask of the ranks that did
 * not exit 0 (a rank listed in may_die may also end by a signal). */
#ifndef LOOM_TEST_MP_UTIL_H
#define LOOM_TEST_MP_UTIL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "net/net.h"

typedef int (*mp_rank_fn)(int rank, int nranks, void *arg);

/* When set, each child calls it before it exits: a test closes there what a
 * process using the library would close on its way out (its out-of-band
 * service, which lets what it queued go before the process ends). */
static void (*mp_before_exit)(void) __attribute__((unused));

/* A port outside the kernel's ephemeral range (bootstrap.h), so that no
 * connection made meanwhile takes it before the test listens; -1 if none. */
static inline int mp_free_port(void)
{
    int port = loom_net_pick_port_base(1);
    return port ? port : -1;
}

static inline double mp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline unsigned mp_run(int nranks, mp_rank_fn fn, void *arg, double timeout_s,
                              unsigned may_die)
{
    pid_t pids[32];
    unsigned failed = 0;
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)timeout_s + 2); /* never outlive the test */
            int rc = fn(r, nranks, arg);
            if (mp_before_exit)
                mp_before_exit();
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
        if (pids[r] < 0)
            failed |= 1u << r;
    }
    double deadline = mp_now() + timeout_s;
    int left = nranks;
    while (left > 0 && mp_now() < deadline) {
        for (int r = 0; r < nranks; r++) {
            int st;
            if (pids[r] <= 0)
                continue;
            pid_t w = waitpid(pids[r], &st, WNOHANG);
            if (w != pids[r])
                continue;
            pids[r] = 0;
            left--;
            int ok = (WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
                     ((may_die >> r) & 1 && WIFSIGNALED(st));
            if (!ok) {
                fprintf(stderr, "rank %d ended with %s %d\n", r,
                        WIFEXITED(st) ? "exit code" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                failed |= 1u << r;
            }
        }
        usleep(2000);
    }
    for (int r = 0; r < nranks; r++) {
        if (pids[r] > 0) {
            fprintf(stderr, "rank %d still running after %.1f s: killed\n", r, timeout_s);
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
            failed |= 1u << r;
        }
    }
    return failed;
}

/* Deterministic bytes for (seed, i). */
static inline void mp_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)(x >> 24);
    }
}

/* Index of the first byte that differs from mp_fill(seed), or -1. */
static inline long mp_verify(const uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (buf[i] != (uint8_t)(x >> 24))
            return (long)i;
    }
    return -1;
}

#endif
