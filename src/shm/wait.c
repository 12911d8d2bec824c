/* wait.c - waiting on a peer's phase counter: spin, then sleep on it as a
 * futex in short slices so that abort, LOOM_TIMEOUT, a failed peer and a
 * dead peer are noticed; and reading a peer's memory. */
#include "build_config.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "shm_priv.h"
#include "comm/wait.h"
#include "util.h"

#define LOOM_SHM_SLICE_NS 10000000L /* futex sleep slice: 10 ms          */

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    /* not FUTEX_PRIVATE_FLAG: the word is in memory shared by processes */
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

static inline int reached(uint32_t v, uint32_t target)
{
    return (int32_t)(v - target) >= 0;
}

int loom_shm_spin_more(struct loom_shm_spin *sp)
{
    if (sp->yield) {
        sched_yield();
        return ++sp->i < LOOM_SHM_YIELDS;
    }
    loom_shm_cpu_relax();
    if ((++sp->i & 63) != 0)
        return 1;
    uint64_t now = loom_now_ns();
    if (!sp->start)
        sp->start = now;
    return now - sp->start <= sp->ns;
}

void loom_shm_bump(struct loom_shm *s)
{
    struct loom_shm_ctrl *c = &s->ctrl[s->me];
    s->epoch++;
    /* seq_cst store then load: pairs with the sleeper's increment of
     * waiters then load of epoch, so a wake-up is never lost */
    __atomic_store_n(&c->epoch, s->epoch, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST))
        futex(&c->epoch, FUTEX_WAKE, INT_MAX, NULL);
}

int loom_shm_pid_gone(pid_t pid)
{
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 1;
    /* a killed child stays a zombie until its parent reaps it */
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

int loom_shm_peer_failed(const struct loom_shm_ctx *x, int k)
{
    const struct loom_shm_ctrl *c = &x->s->ctrl[k];
    if (!__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE))
        return 0;
    uint64_t at = __atomic_load_n(&c->failed_seq, __ATOMIC_RELAXED);
    if (!x->op || !at || (at & LOOM_SEQ_INTERNAL) != (x->op->seq & LOOM_SEQ_INTERNAL))
        return 1;
    /* k returned from every call up to this op's last before it failed */
    return at <= x->op->seq + loom_op_nseqs(x->op) - 1;
}

static void describe(struct loom_shm_ctx *x, char *buf, size_t len)
{
    loom_op_format(loom_op_desc(x->op), x->op->count, x->op->seq, buf, len);
}

void loom_shm_mark_failed(struct loom_shm_ctx *x, int blame)
{
    struct loom_shm *s = x->s;
    struct loom_shm_ctrl *c = &s->ctrl[s->me];
    if (blame >= 0 && x->comm->blame < 0)
        x->comm->blame = blame;
    __atomic_store_n(&c->blame, blame, __ATOMIC_RELAXED);
    __atomic_store_n(&c->failed_seq, x->op ? x->op->seq : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->failed, 1, __ATOMIC_SEQ_CST);
    /* wake everyone: sleepers re-check the failed flags */
    __atomic_add_fetch(&c->epoch, 0x40000000u, __ATOMIC_SEQ_CST);
    futex(&c->epoch, FUTEX_WAKE, INT_MAX, NULL);
}

void loom_shm_publish_call(struct loom_shm *s, const struct loom_op *op)
{
    struct loom_shm_ctrl *c = &s->ctrl[s->me];
    int k = (int)(op->seq % LOOM_SHM_FPS);
    __atomic_store_n(&c->fp[k].seq, 0, __ATOMIC_RELEASE);
    c->fp[k].desc = loom_op_desc(op);
    c->fp[k].count = op->count;
    __atomic_store_n(&c->fp[k].seq, op->seq, __ATOMIC_RELEASE);
}

/* Peer j announced this call number with another call: name both. */
static loom_result_t check_call(struct loom_shm_ctx *x, int j)
{
    struct loom_shm *s = x->s;
    const struct loom_op *op = x->op;
    int k = (int)(op->seq % LOOM_SHM_FPS);
    if (__atomic_load_n(&s->ctrl[j].fp[k].seq, __ATOMIC_ACQUIRE) != op->seq)
        return LOOM_SUCCESS;
    uint32_t desc = s->ctrl[j].fp[k].desc;
    uint64_t count = s->ctrl[j].fp[k].count;
    if (__atomic_load_n(&s->ctrl[j].fp[k].seq, __ATOMIC_ACQUIRE) != op->seq ||
        (desc == loom_op_desc(op) && count == op->count))
        return LOOM_SUCCESS;
    return loom_shm_differ(x, j, desc, count);
}

loom_result_t loom_shm_differ(struct loom_shm_ctx *x, int j, uint32_t desc, uint64_t count)
{
    return loom_shm_differ_call(x, j, loom_op_desc(x->op), x->op->count, x->op->seq, desc, count);
}

loom_result_t loom_shm_differ_call(struct loom_shm_ctx *x, int j, uint32_t mine_desc,
                                   uint64_t mine_count, uint64_t seq, uint32_t desc, uint64_t count)
{
    struct loom_shm *s = x->s;
    char mine[160], theirs[160];
    loom_op_format(mine_desc, mine_count, seq, mine, sizeof mine);
    loom_op_format(desc, count, seq, theirs, sizeof theirs);
    x->comm->blame = s->ranks[j];
    loom_comm_set_error(x->comm, LOOM_ERROR_MISMATCH,
                        "collective calls differ: rank %d called %s; %s called %s",
                        x->comm->rank, mine, loom_comm_describe(x->comm, s->ranks[j]),
                        theirs);
    loom_shm_mark_failed(x, s->ranks[j]);
    return LOOM_ERROR_MISMATCH;
}

/* Any peer failed or died, or abort/timeout: set the error and return it. */
static loom_result_t check_peers(struct loom_shm_ctx *x, int j, uint32_t target,
                                 int check_pids, uint64_t start_ns)
{
    struct loom_shm *s = x->s;
    struct loom_comm *comm = x->comm;
    char what[160];
    if (__atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE)) {
        describe(x, what, sizeof what);
        loom_comm_set_error(comm, LOOM_ERROR_ABORTED, "%s: aborted", what);
        loom_shm_mark_failed(x, -1);
        return LOOM_ERROR_ABORTED;
    }
    /* a failed peer first: it names the cause, and may since have exited */
    for (int k = 0; k < s->n; k++)
        if (k != s->me && loom_shm_peer_failed(x, k)) {
            loom_result_t mres = check_call(x, k);
            if (mres == LOOM_SUCCESS && x->differs)
                mres = x->differs(x);
            if (mres < 0)
                return mres;
            int b = __atomic_load_n(&s->ctrl[k].blame, __ATOMIC_RELAXED);
            describe(x, what, sizeof what);
            if (b >= 0 && b != s->ranks[k])
                loom_comm_set_error(comm, LOOM_ERROR_REMOTE,
                                    "%s: %s failed, blaming %s", what,
                                    loom_comm_describe(comm, s->ranks[k]),
                                    loom_comm_describe(comm, b));
            else
                loom_comm_set_error(comm, LOOM_ERROR_REMOTE, "%s: %s failed", what,
                                    loom_comm_describe(comm, s->ranks[k]));
            loom_shm_mark_failed(x, b >= 0 ? b : s->ranks[k]);
            return LOOM_ERROR_REMOTE;
        }
    /* Only the peer waited for: another may have finished its part of the
     * call (or of the last call) and left in order; if it died instead, the
     * peer waited for notices and says so through its failed flag. */
    /* a peer that reached the phase and then left in order is no failure:
     * its last counter bump is visible once its process is gone */
    if (check_pids && j != s->me && loom_shm_pid_gone(s->pids[j]) &&
        !reached(__atomic_load_n(&s->ctrl[j].epoch, __ATOMIC_ACQUIRE), target)) {
        describe(x, what, sizeof what);
        loom_comm_set_error(comm, LOOM_ERROR_REMOTE,
                            "%s: %s died (process %d is gone) while rank %d "
                            "waited for it in shared memory",
                            what, loom_comm_describe(comm, s->ranks[j]),
                            (int)s->pids[j], comm->rank);
        loom_shm_mark_failed(x, s->ranks[j]);
        return LOOM_ERROR_REMOTE;
    }
    loom_result_t cres = check_call(x, j);
    if (cres < 0)
        return cres;
    char waiting[300];
    snprintf(waiting, sizeof waiting, "for %s in shared memory",
             loom_comm_describe(comm, s->ranks[j]));
    struct loom_wait lw = {.since_ns = start_ns, .stall_warned = x->stall_warned};
    loom_result_t tres = loom_wait_check(&lw, comm, x->op, loom_now_ns(), waiting,
                                         s->ranks[j]);
    x->stall_warned = lw.stall_warned;
    if (tres < 0) {
        loom_shm_mark_failed(x, s->ranks[j]);
        return tres;
    }
    return LOOM_SUCCESS;
}

static loom_result_t wait_phase(struct loom_shm_ctx *x, int j, uint32_t target, int spin);

static loom_result_t wait_checked(struct loom_shm_ctx *x, int j, uint32_t target, int spin)
{
    loom_result_t res = wait_phase(x, j, target, spin);
    /* the first phase of a call: the peer is in this call or the next */
    if (res == LOOM_SUCCESS && target == x->start + 1)
        res = check_call(x, j);
    return res;
}

loom_result_t loom_shm_wait(struct loom_shm_ctx *x, int j, uint32_t target)
{
    return wait_checked(x, j, target, 1);
}

loom_result_t loom_shm_wait_sleep(struct loom_shm_ctx *x, int j, uint32_t target)
{
    return wait_checked(x, j, target, 0);
}

static loom_result_t wait_phase(struct loom_shm_ctx *x, int j, uint32_t target, int spin)
{
    struct loom_shm *s = x->s;
    struct loom_comm *comm = x->comm;
    uint32_t *word = &s->ctrl[j].epoch;
    uint32_t v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (reached(v, target) && !loom_shm_peer_failed(x, j))
        return LOOM_SUCCESS;
    uint64_t start = loom_now_ns();
    /* spin: the peer is usually a few hundred nanoseconds away */
    struct loom_shm_spin sp;
    loom_shm_spin_init(&sp, comm);
    while (spin) {
        v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (reached(v, target) && !loom_shm_peer_failed(x, j))
            return LOOM_SUCCESS;
        if (loom_shm_peer_failed(x, j) || __atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE) ||
            !loom_shm_spin_more(&sp))
            break;
    }
    /* sleep on the counter in slices, checking peers between them */
    uint64_t last_check = 0;
    for (;;) {
        uint64_t now = loom_now_ns();
        int check_pids = now - last_check >= (uint64_t)LOOM_SHM_SLICE_NS;
        if (check_pids)
            last_check = now;
        loom_result_t res = check_peers(x, j, target, check_pids, start);
        if (res < 0)
            return res;
        __atomic_add_fetch(&s->ctrl[j].waiters, 1, __ATOMIC_SEQ_CST);
        v = __atomic_load_n(word, __ATOMIC_SEQ_CST);
        if (!reached(v, target)) {
            struct timespec ts = {0, LOOM_SHM_SLICE_NS};
            futex(word, FUTEX_WAIT, v, &ts);
            v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        }
        __atomic_sub_fetch(&s->ctrl[j].waiters, 1, __ATOMIC_SEQ_CST);
        if (reached(v, target) && !loom_shm_peer_failed(x, j))
            return LOOM_SUCCESS;
    }
}

loom_result_t loom_shm_wait_all(struct loom_shm_ctx *x, uint32_t target)
{
    for (int k = 1; k < x->s->n; k++) {
        int j = (x->s->me + k) % x->s->n;
        loom_result_t res = loom_shm_wait(x, j, target);
        if (res < 0)
            return res;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_shm_cma_xfer(struct loom_shm_ctx *x, int j, void *local_buf,
                                uint64_t addr, size_t len, int write)
{
    struct loom_shm *s = x->s;
    char *d = local_buf;
    while (len > 0) {
        struct iovec local = {.iov_base = d, .iov_len = len};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
        ssize_t got = write ? process_vm_writev(s->pids[j], &local, 1, &remote, 1, 0)
                            : process_vm_readv(s->pids[j], &local, 1, &remote, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            int err = got < 0 ? errno : EIO;
            char what[160];
            describe(x, what, sizeof what);
            if (err == ESRCH || loom_shm_pid_gone(s->pids[j])) {
                loom_comm_set_error(x->comm, LOOM_ERROR_REMOTE,
                                    "%s: %s died (process %d is gone) while rank %d "
                                    "%s its buffer",
                                    what, loom_comm_describe(x->comm, s->ranks[j]),
                                    (int)s->pids[j], x->comm->rank,
                                    write ? "wrote into" : "read");
                loom_shm_mark_failed(x, s->ranks[j]);
                return LOOM_ERROR_REMOTE;
            }
            loom_comm_set_error(x->comm, LOOM_ERROR_SYSTEM,
                                "%s: %s of %zu bytes at %#llx %s %s: %s", what,
                                write ? "process_vm_writev" : "process_vm_readv", len,
                                (unsigned long long)addr, write ? "in" : "from",
                                loom_comm_describe(x->comm, s->ranks[j]), strerror(err));
            loom_shm_mark_failed(x, -1);
            return LOOM_ERROR_SYSTEM;
        }
        d += got;
        addr += (uint64_t)got;
        len -= (size_t)got;
    }
    return LOOM_SUCCESS;
}
