/* util.h - small helpers every module uses: result propagation, time, EINTR. */
#ifndef LOOM_UTIL_H
#define LOOM_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include "loom.h"
#include "log.h"

/* Propagate a failure, logging where it passed at TRACE. */
#define LOOM_CHECK(call)                                                       \
    do {                                                                       \
        loom_result_t loom_res_ = (call);                                      \
        if (loom_res_ < 0) {                                                   \
            LOOM_TRACE(LOOM_SUB_ALL, "%s -> %s", #call,                        \
                       loom_result_string(loom_res_));                         \
            return loom_res_;                                                  \
        }                                                                      \
    } while (0)

#define LOOM_CHECK_GOTO(call, res, label)                                      \
    do {                                                                       \
        (res) = (call);                                                        \
        if ((res) < 0) {                                                       \
            LOOM_TRACE(LOOM_SUB_ALL, "%s -> %s", #call,                        \
                       loom_result_string(res));                               \
            goto label;                                                        \
        }                                                                      \
    } while (0)

/* Retry a system call while it fails with EINTR. */
#define LOOM_SYSCALL_RETRY(expr)                                               \
    ({                                                                         \
        __typeof__(expr) loom_rc_;                                             \
        do {                                                                   \
            loom_rc_ = (expr);                                                 \
        } while (loom_rc_ == -1 && errno == EINTR);                            \
        loom_rc_;                                                              \
    })

/* Monotonic time. */
/* Intrusive FIFO lists (elements linked through ->next, any struct, any
 * names for the head and tail pointers): append x; take the oldest into
 * out (NULL when empty); take x off from anywhere. */
#define LOOM_FIFO_PUSH(head, tail, x)                                                              \
    do {                                                                                           \
        (x)->next = NULL;                                                                          \
        if (tail)                                                                                  \
            (tail)->next = (x);                                                                    \
        else                                                                                       \
            (head) = (x);                                                                          \
        (tail) = (x);                                                                              \
    } while (0)
#define LOOM_FIFO_POP(head, tail, out)                                                             \
    do {                                                                                           \
        (out) = (head);                                                                            \
        if (out) {                                                                                 \
            (head) = (out)->next;                                                                  \
            if (!(head))                                                                           \
                (tail) = NULL;                                                                     \
            (out)->next = NULL;                                                                    \
        }                                                                                          \
    } while (0)

/* Take x, which follows prev (NULL: x is the head), off such a list. */
#define LOOM_FIFO_UNLINK(head, tail, prev, x)                                                      \
    do {                                                                                           \
        if (prev)                                                                                  \
            (prev)->next = (x)->next;                                                              \
        else                                                                                       \
            (head) = (x)->next;                                                                    \
        if ((tail) == (x))                                                                         \
            (tail) = (prev);                                                                       \
    } while (0)

static inline double loom_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t loom_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same clock as of the kernel's last tick (1-10 ms old): a few ns to
 * read instead of ~20, for stamps taken on every call. */
static inline uint64_t loom_tick_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The CLOCK_REALTIME instant ns nanoseconds from now, for
 * pthread_cond_timedwait (whose condition variables use that clock). */
static inline struct timespec loom_abstime_in(long ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ns % 1000000000L;
    ts.tv_sec += ns / 1000000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* FNV-1a, for stable hashes of content. */
static inline uint64_t loom_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}
#define LOOM_FNV_INIT 14695981039346656037ull

/* Thread-local error message for calls that have no communicator yet (init).
 * loom_get_error_string(NULL) returns it. */
void loom_set_thread_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
const char *loom_thread_error(void);

#endif
