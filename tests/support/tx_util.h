/* tx_util.h - what the suites that drive a transport's vtable directly
 * (check_transport, check_ofi, check_verbs) share: a job area the forked
 * ranks report into, joining through loom_tx_bootstrap, posting, waiting
 * and a first exchange. Header-only, for tests. */
#ifndef LOOM_TEST_TX_UTIL_H
#define LOOM_TEST_TX_UTIL_H

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "loom.h"
#include "bootstrap/oob.h"
#include "transport/transport.h"
#include "mp_util.h"

/* the rank's out-of-band service, kept for its teardown (and for
 * mp_before_exit = txu_close_oob: a rank that failed before its teardown
 * still lets its queued messages go) */
static struct loom_oob *txu_oob;

/* size zeroed bytes that ranks forked after this call share with it. */
static inline void *txu_shared_new(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memset(p, 0, size);
    return p;
}

/* Rank rank of n opens transport t, the job's root at 127.0.0.1:port: 0,
 * or 10 with err saying why. */
static inline int txu_setup(const struct loom_transport *t, int port, int rank, int n,
                            struct loom_tx **tx, char *err, size_t errlen)
{
    if (loom_tx_bootstrap(t, rank, n, "127.0.0.1", "127.0.0.1", port, 10.0, &txu_oob, tx, err,
                          errlen) != LOOM_SUCCESS)
        return 10;
    return 0;
}

static inline void txu_close_oob(void)
{
    loom_oob_close(txu_oob);
    txu_oob = NULL;
}

static inline void txu_teardown(struct loom_tx *tx)
{
    loom_tx_close(tx);
    txu_close_oob();
}

/* Progress until the n requests are done: the first failure among them,
 * the progress error, or LOOM_ERROR_TIMEOUT after secs (errmsg says so). */
static inline loom_result_t txu_wait(struct loom_tx *tx, struct loom_tx_req *r, int n, double secs)
{
    double until = mp_now() + secs;
    for (;;) {
        int done = 1;
        for (int i = 0; i < n; i++)
            done &= r[i].done;
        if (done) {
            for (int i = 0; i < n; i++)
                if (r[i].status < 0)
                    return r[i].status;
            return LOOM_SUCCESS;
        }
        loom_result_t res = tx->ops->progress(tx, 10000);
        if (res != LOOM_SUCCESS)
            return res;
        if (mp_now() > until) {
            snprintf(tx->errmsg, sizeof tx->errmsg, "(test) nothing completed in %.0f s", secs);
            return LOOM_ERROR_TIMEOUT;
        }
    }
}

/* Connect to peer, then isend (send) or irecv r: 0, or -1. */
static inline int txu_post(struct loom_tx *tx, struct loom_tx_req *r, int peer, int send, void *buf,
                           size_t len, uint32_t tag, uint32_t desc)
{
    *r = (struct loom_tx_req){
        .peer = peer, .buf = buf, .len = len, .tag = tag, .desc = desc, .count = len};
    if (tx->ops->connect(tx, peer) != LOOM_SUCCESS)
        return -1;
    return send ? tx->ops->isend(tx, r) : tx->ops->irecv(tx, r);
}

/* One message each way with peer within secs (the link is up after): 0,
 * or -1. */
static inline int txu_exchange(struct loom_tx *tx, int peer, void *sb, void *rb, size_t len,
                               uint32_t tag, uint32_t desc, double secs)
{
    struct loom_tx_req r[2];
    if (txu_post(tx, &r[0], peer, 0, rb, len, tag, desc) ||
        txu_post(tx, &r[1], peer, 1, sb, len, tag, desc))
        return -1;
    return txu_wait(tx, r, 2, secs) == LOOM_SUCCESS ? 0 : -1;
}

/* Open: a rank's transport (0, or the rank's exit code); body: the rank's
 * part over it (it tears tx down itself). */
struct txu_call {
    int (*open)(void *job, int rank, int n, struct loom_tx **tx);
    int (*body)(struct loom_tx *tx, int rank, void *job);
    void *job;
};

static inline int txu_rank_main(int rank, int n, void *arg)
{
    struct txu_call *c = arg;
    struct loom_tx *tx;
    int rc = c->open(c->job, rank, n, &tx);
    return rc ? rc : c->body(tx, rank, c->job);
}

/* mp_run over ranks that each open their transport, then run body. */
static inline unsigned txu_run(int nranks, int (*open)(void *, int, int, struct loom_tx **),
                               int (*body)(struct loom_tx *, int, void *), void *job,
                               double timeout_s, unsigned may_die)
{
    struct txu_call c = {open, body, job};
    return mp_run(nranks, txu_rank_main, &c, timeout_s, may_die);
}

/* main(): run suite s (a rank that fails early still lets its queued
 * out-of-band messages go); 0 when every case passed. */
static inline int txu_run_suite(Suite *s)
{
    mp_before_exit = txu_close_oob;
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
