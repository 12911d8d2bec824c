/* trace.c - the flight recorder (see trace.h). */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "base/wire.h"
#include "base/config.h"
#include "trace.h"
#include "base/util.h"

static struct loom_trace_rec *slot(struct loom_comm *comm, uint64_t seq)
{
    struct loom_trace_rec *r = &comm->trace[seq % LOOM_TRACE_LEN];
    return r->seq == seq ? r : NULL;
}

/* Point-to-point calls have no call number of the communicator: not kept. */
void loom_trace_enqueue(struct loom_comm *comm, const struct loom_op *op, int running)
{
    if (!loom_op_nseqs(op))
        return;
    struct loom_trace_rec *r = &comm->trace[op->seq % LOOM_TRACE_LEN];
    uint64_t now = loom_tick_ns();
    *r = (struct loom_trace_rec){.seq = op->seq,
                                 .desc = loom_op_desc(op),
                                 .count = op->count,
                                 .state = running ? LOOM_TRACE_RUNNING : LOOM_TRACE_QUEUED,
                                 .t_enqueue_ns = now,
                                 .t_start_ns = running ? now : 0};
}

void loom_trace_start(struct loom_comm *comm, const struct loom_op *op)
{
    if (!loom_op_nseqs(op))
        return;
    pthread_mutex_lock(&comm->lock);
    struct loom_trace_rec *r = slot(comm, op->seq);
    if (r) {
        r->state = LOOM_TRACE_RUNNING;
        r->t_start_ns = loom_tick_ns();
    }
    pthread_mutex_unlock(&comm->lock);
}

void loom_trace_end_locked(struct loom_comm *comm, const struct loom_op *op, loom_result_t res)
{
    struct loom_trace_rec *r = loom_op_nseqs(op) ? slot(comm, op->seq) : NULL;
    if (r) {
        r->state = res < 0 ? LOOM_TRACE_FAILED : LOOM_TRACE_DONE;
        r->result = res;
        r->t_end_ns = loom_tick_ns();
    }
}

void loom_trace_end(struct loom_comm *comm, const struct loom_op *op,
                    loom_result_t res)
{
    if (!loom_op_nseqs(op))
        return;
    pthread_mutex_lock(&comm->lock);
    loom_trace_end_locked(comm, op, res);
    pthread_mutex_unlock(&comm->lock);
}

static int newer_first(const void *a, const void *b)
{
    const struct loom_trace_rec *x = a, *y = b;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

size_t loom_trace_answer(void *arg, int from, void *out, size_t cap)
{
    struct loom_comm *comm = arg;
    uint8_t *o = out;
    (void)from;
    if (cap < 4 + LOOM_TRACE_ANSWER * LOOM_TRACE_ANSWER_REC)
        return 0;
    struct loom_trace_rec all[LOOM_TRACE_LEN];
    int n = 0;
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < LOOM_TRACE_LEN; i++)
        if (comm->trace[i].seq)
            all[n++] = comm->trace[i];
    pthread_mutex_unlock(&comm->lock);
    qsort(all, (size_t)n, sizeof all[0], newer_first);
    if (n > LOOM_TRACE_ANSWER)
        n = LOOM_TRACE_ANSWER;
    loom_put_le32(o, (uint32_t)n);
    for (int k = 0; k < n; k++) {
        uint8_t *q = o + 4 + (size_t)k * LOOM_TRACE_ANSWER_REC;
        loom_put_le64(q, all[k].seq);
        loom_put_le32(q + 8, all[k].desc);
        loom_put_le32(q + 12, (uint32_t)all[k].state);
        loom_put_le64(q + 16, all[k].count);
    }
    return 4 + (size_t)n * LOOM_TRACE_ANSWER_REC;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void loom_trace_dump(struct loom_comm *comm, const char *reason)
{
    const char *dir = loom_config()->trace_dir;
    if (!dir[0])
        return;
    char host[64] = "host";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/loom-trace-%s-%d-rank%d-%016llx.json", dir, host,
             (int)getpid(), comm->rank, (unsigned long long)comm->comm_id);
    char tmp[520];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        LOOM_WARN(LOOM_SUB_INIT, "flight recorder: cannot write %s: %s", tmp,
                  strerror(errno));
        return;
    }
    struct loom_trace_rec recs[LOOM_TRACE_LEN];
    char err[sizeof comm->errmsg];
    pthread_mutex_lock(&comm->lock);
    memcpy(recs, comm->trace, sizeof recs);
    memcpy(err, comm->errmsg, sizeof err);
    uint64_t last = comm->next_seq;
    pthread_mutex_unlock(&comm->lock);
    uint64_t now = loom_tick_ns();
    struct timespec tick = {0, 0};
    clock_getres(CLOCK_MONOTONIC_COARSE, &tick);
    fprintf(f,
            "{\"rank\":%d,\"nranks\":%d,\"comm_id\":\"%016llx\",\"pid\":%d,"
            "\"tick_ms\":%.3f,\"reason\":",
            comm->rank, comm->nranks, (unsigned long long)comm->comm_id, (int)getpid(),
            (double)tick.tv_sec * 1e3 + (double)tick.tv_nsec / 1e6);
    json_string(f, reason);
    fprintf(f, ",\"error\":");
    json_string(f, err);
    fprintf(f, ",\"calls\":[");
    static const char *const states[] = {"queued", "running", "done", "failed"};
    int first = 1;
    uint64_t from = last > LOOM_TRACE_LEN ? last - LOOM_TRACE_LEN + 1 : 1;
    for (uint64_t seq = from; seq <= last; seq++) {
        const struct loom_trace_rec *r = &recs[seq % LOOM_TRACE_LEN];
        if (r->seq != seq)
            continue;
        char call[160];
        loom_op_format(r->desc, r->count, r->seq, call, sizeof call);
        fprintf(f, "%s\n {\"seq\":%llu,\"call\":", first ? "" : ",",
                (unsigned long long)r->seq);
        json_string(f, call);
        fprintf(f, ",\"state\":\"%s\",\"result\":", states[r->state & 3]);
        json_string(f, loom_result_string(r->result));
        fprintf(f, ",\"queued_ms_ago\":%.0f", (double)(now - r->t_enqueue_ns) / 1e6);
        if (r->t_start_ns)
            fprintf(f, ",\"wait_ms\":%.0f", (double)(r->t_start_ns - r->t_enqueue_ns) / 1e6);
        if (r->t_end_ns)
            fprintf(f, ",\"run_ms\":%.0f", (double)(r->t_end_ns - r->t_start_ns) / 1e6);
        else if (r->t_start_ns)
            fprintf(f, ",\"running_ms\":%.0f", (double)(now - r->t_start_ns) / 1e6);
        fputc('}', f);
        first = 0;
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        LOOM_WARN(LOOM_SUB_INIT, "flight recorder: cannot write %s: %s", path,
                  strerror(errno));
        unlink(tmp);
        return;
    }
    LOOM_WARN(LOOM_SUB_INIT, "flight recorder (%s): wrote %s", reason, path);
}

/* ---- SIGUSR1 ----------------------------------------------------------- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loom_comm **live;
static int nlive, cap_live;
static int sig_pipe[2] = {-1, -1};
static int sig_installed;

static void on_sigusr1(int sig)
{
    (void)sig;
    int saved = errno;
    char c = 1;
    if (write(sig_pipe[1], &c, 1) < 0) {
        /* the pipe is full: a dump is already due */
    }
    errno = saved;
}

static void *dumper(void *arg)
{
    (void)arg;
    char c;
    for (;;) {
        ssize_t n = read(sig_pipe[0], &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        pthread_mutex_lock(&reg_lock);
        for (int i = 0; i < nlive; i++)
            loom_trace_dump(live[i], "signal");
        pthread_mutex_unlock(&reg_lock);
    }
}

static void install_handler(void)
{
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
        return; /* the application handles SIGUSR1: leave it alone */
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return;
    /* the reader blocks; only the writer end must not */
    fcntl(sig_pipe[0], F_SETFL, 0);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &prev); /* the dumper takes no signals */
    int rc = pthread_create(&t, &attr, dumper, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sig_installed = 1;
}

void loom_trace_register(struct loom_comm *comm)
{
    if (!loom_config()->trace_dir[0])
        return;
    pthread_mutex_lock(&reg_lock);
    if (!sig_installed)
        install_handler();
    if (nlive == cap_live) {
        int cap = cap_live ? 2 * cap_live : 8;
        struct loom_comm **p = realloc(live, (size_t)cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&reg_lock);
            return;
        }
        live = p;
        cap_live = cap;
    }
    live[nlive++] = comm;
    pthread_mutex_unlock(&reg_lock);
}

void loom_trace_unregister(struct loom_comm *comm)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < nlive; i++)
        if (live[i] == comm) {
            live[i] = live[--nlive];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}
