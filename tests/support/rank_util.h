/* rank_util.h - what each rank of a multi-process test over loopback
 * does first: join the job at tcp://127.0.0.1:g_port, and report a failed
 * check or call with its rank, place and Loom's message. */
#ifndef LOOM_TEST_RANK_UTIL_H
#define LOOM_TEST_RANK_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "loom.h"

/* rank 0's port, chosen by the parent before the ranks are forked */
static int g_port;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "rank %d: %s:%d: ", rank, __func__, __LINE__);                             \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        return 1;                                                                                  \
    } while (0)

#define OK(call)                                                                                   \
    do {                                                                                           \
        loom_result_t r_ = (call);                                                                 \
        if (r_ != LOOM_SUCCESS)                                                                    \
            FAIL("%s: %s: %s", #call, loom_result_string(r_), loom_get_error_string(comm));        \
    } while (0)

static inline loom_comm_t join(int rank, int n)
{
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g_port);
    loom_comm_t comm = NULL;
    if (loom_comm_init_url(url, n, rank, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: init: %s\n", rank, loom_get_error_string(NULL));
        exit(3);
    }
    return comm;
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

#endif
