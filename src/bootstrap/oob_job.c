/* oob_job.c - an out-of-band job's life (its listener, thread, table of
 * entries) and its views (oob_priv.h). */
#include "build_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "util.h"
#include "bootstrap/oob_priv.h"

void loom_oob_kick(struct oob_job *j)
{
    uint64_t one = 1;
    if (write(j->kick, &one, sizeof one) < 0) {
        /* saturated: the thread is awake anyway */
    }
}

/* Notify the views of namespace ns (with the job lock held). */
void loom_oob_notify_ns(struct oob_job *j, uint64_t ns)
{
    for (struct loom_oob *v = j->views; v; v = v->next)
        if (v->ns == ns && v->notify)
            v->notify(v->notify_ctx);
    pthread_cond_broadcast(&j->cv);
}

void loom_oob_notify_all(struct oob_job *j)
{
    for (struct loom_oob *v = j->views; v; v = v->next)
        if (v->notify)
            v->notify(v->notify_ctx);
    pthread_cond_broadcast(&j->cv);
}

struct oob_msg *loom_oob_msg_new(uint64_t ns, int from, uint32_t tag, uint8_t kind,
                                 const void *data, size_t len)
{
    struct oob_msg *m = malloc(sizeof *m + len);
    if (!m)
        return NULL;
    *m = (struct oob_msg){.ns = ns, .from = from, .tag = tag, .kind = kind, .len = len};
    if (len && data)
        memcpy(m->data, data, len);
    return m;
}

void loom_oob_entry_addr(const struct oob_job *j, int r, struct sockaddr_storage *ss, socklen_t *sl)
{
    if (loom_net_from_wire(j->table + (size_t)r * LOOM_OOB_ENTRY_LEN, ss, sl) != 0)
        *sl = 0;
}

static void job_free(struct oob_job *j)
{
    if (j->thread_started) {
        pthread_mutex_lock(&j->lock);
        j->stop = 1;
        loom_oob_kick(j);
        pthread_mutex_unlock(&j->lock);
        pthread_join(j->thread, NULL);
    }
    while (j->ins)
        loom_oob_in_free(j, j->ins, 1);
    for (int r = 0; j->outs && r < j->nranks; r++) {
        if (j->outs[r])
            loom_oob_out_free(j->outs[r]);
    }
    while (j->inbox) {
        struct oob_msg *m = j->inbox;
        j->inbox = m->next;
        free(m);
    }
    while (j->pubs) {
        struct oob_pub *p = j->pubs;
        j->pubs = p->next;
        free(p->blob);
        free(p);
    }
    while (j->gets) {
        struct oob_get *g = j->gets;
        j->gets = g->next;
        free(g);
    }
    while (j->fds) {
        struct oob_fd *f = j->fds;
        j->fds = f->next;
        close(f->fd);
        free(f);
    }
    if (j->lfd >= 0)
        close(j->lfd);
    if (j->kick >= 0)
        close(j->kick);
    loom_auth_key_clear(&j->key);
    free(j->outs);
    for (int r = 0; j->peer_msg && r < j->nranks; r++)
        free(j->peer_msg[r]);
    free(j->peer_msg);
    free(j->peer_err);
    free(j->table);
    free(j->have);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Many ranks on one host open many short-lived sockets at once (rank 0 at
 * bootstrap, a local leader): lift the soft limit on open files to the hard
 * one, once. */
static void raise_nofile(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static loom_result_t job_new(int rank, int nranks, struct oob_job **out, char *err, size_t errlen)
{
    raise_nofile();
    struct oob_job *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->rank = rank;
    j->nranks = nranks;
    j->lfd = j->kick = -1;
    j->connect_timeout = loom_config()->bootstrap_timeout;
    *out = j;
    j->table = calloc((size_t)nranks, LOOM_OOB_ENTRY_LEN);
    j->have = calloc((size_t)nranks, 1);
    j->outs = calloc((size_t)nranks, sizeof *j->outs);
    j->peer_err = calloc((size_t)nranks, sizeof *j->peer_err);
    j->peer_msg = calloc((size_t)nranks, sizeof *j->peer_msg);
    if (!j->table || !j->have || !j->outs || !j->peer_err || !j->peer_msg) {
        snprintf(err, errlen, "out of memory for %d ranks", nranks);
        return LOOM_ERROR_NO_MEMORY;
    }
    loom_result_t res = loom_auth_key_from_config(&j->key, err, errlen);
    if (res < 0)
        return res;
    j->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (j->kick < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    return LOOM_SUCCESS;
}

/* With j->lfd listening: this rank's entry, the thread, the root view. */
static loom_result_t job_begin(struct oob_job *j, struct loom_oob **out, uint8_t *entry, char *err,
                               size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    struct loom_oob *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    if (getsockname(j->lfd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errlen, "getsockname: %s", strerror(errno));
        free(v);
        return LOOM_ERROR_SYSTEM;
    }
    memset(entry, 0, LOOM_OOB_ENTRY_LEN);
    loom_net_to_wire((struct sockaddr *)&ss, entry);
    memcpy(j->table + (size_t)j->rank * LOOM_OOB_ENTRY_LEN, entry, LOOM_NET_WIRE_ADDR_LEN);
    j->have[j->rank] = 1;
    /* the root view before the thread: it reads j->views (notify_ns) */
    v->job = j;
    v->rank = j->rank;
    v->nranks = j->nranks;
    j->views = v;
    j->nviews = 1;
    if (pthread_create(&j->thread, NULL, loom_oob_main, j) != 0) {
        snprintf(err, errlen, "cannot start the out-of-band thread");
        j->views = NULL;
        j->nviews = 0;
        free(v);
        return LOOM_ERROR_SYSTEM;
    }
    j->thread_started = 1;
    *out = v;
    return LOOM_SUCCESS;
}

loom_result_t loom_oob_open(int rank, int nranks, const char *local_addr, int port,
                            struct loom_oob **out, uint8_t *entry, char *err, size_t errlen)
{
    *out = NULL;
    struct oob_job *j = NULL;
    loom_result_t res = job_new(rank, nranks, &j, err, errlen);
    if (res < 0)
        goto fail;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (loom_net_parse(local_addr, port, &ss, &sl) != 0) {
        snprintf(err, errlen, "\"%s\" is not a numeric IPv4/IPv6 address",
                 local_addr ? local_addr : "(null)");
        res = LOOM_ERROR_INVALID_ARGUMENT;
        goto fail;
    }
    char a[LOOM_NET_ADDRSTR_MAX];
    loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    j->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (j->lfd >= 0 && port)
        (void)setsockopt(j->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (j->lfd < 0 || bind(j->lfd, (struct sockaddr *)&ss, sl) < 0 ||
        listen(j->lfd, nranks + 64 > 4096 ? 4096 : nranks + 64) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot listen on %s: %s%s", a, strerror(e),
                 e == EADDRNOTAVAIL ? " (this host does not own that address)"
                 : e == EADDRINUSE  ? " (the port is taken: another job or a previous "
                                      "run still holds it)"
                                    : "");
        res = LOOM_ERROR_SYSTEM;
        goto fail;
    }
    res = job_begin(j, out, entry, err, errlen);
    if (res == LOOM_SUCCESS)
        return res;
fail:
    if (j)
        job_free(j);
    return res;
}

loom_result_t loom_oob_open_fd(int rank, int nranks, int lfd, struct loom_oob **out, uint8_t *entry,
                               char *err, size_t errlen)
{
    *out = NULL;
    struct oob_job *j = NULL;
    loom_result_t res = job_new(rank, nranks, &j, err, errlen);
    if (j)
        j->lfd = lfd;
    else
        close(lfd);
    if (res == LOOM_SUCCESS)
        res = job_begin(j, out, entry, err, errlen);
    if (res < 0 && j)
        job_free(j);
    return res;
}

loom_result_t loom_oob_start(struct loom_oob *v, uint64_t job_id)
{
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    j->job_id = job_id;
    loom_oob_in_resume(j);
    loom_oob_kick(j);
    pthread_mutex_unlock(&j->lock);
    return LOOM_SUCCESS;
}

loom_result_t loom_oob_set_entry(struct loom_oob *v, int rank, const uint8_t *entry)
{
    struct oob_job *j = v->job;
    if (rank < 0 || rank >= j->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&j->lock);
    memcpy(j->table + (size_t)rank * LOOM_OOB_ENTRY_LEN, entry, LOOM_OOB_ENTRY_LEN);
    j->have[rank] = 1;
    loom_oob_kick(j);
    pthread_mutex_unlock(&j->lock);
    return LOOM_SUCCESS;
}

loom_result_t loom_oob_set_table(struct loom_oob *v, const uint8_t *table)
{
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    memcpy(j->table, table, (size_t)j->nranks * LOOM_OOB_ENTRY_LEN);
    memset(j->have, 1, (size_t)j->nranks);
    j->complete = 1;
    loom_oob_kick(j);
    pthread_mutex_unlock(&j->lock);
    return LOOM_SUCCESS;
}

const uint8_t *loom_oob_table(const struct loom_oob *v)
{
    return v->job->complete ? v->job->table : NULL;
}

uint64_t loom_oob_host(const struct loom_oob *v, int r)
{
    return loom_get_le64(v->job->table + (size_t)loom_oob_job_rank(v, r) * LOOM_OOB_ENTRY_LEN +
                         LOOM_OOB_ENTRY_HOST);
}

uint32_t loom_oob_flags(const struct loom_oob *v, int r)
{
    return loom_get_le32(v->job->table + (size_t)loom_oob_job_rank(v, r) * LOOM_OOB_ENTRY_LEN +
                         LOOM_OOB_ENTRY_FLAGS);
}

loom_result_t loom_oob_view(struct loom_oob *parent, const int *ranks, int n, int me, uint64_t ns,
                            struct loom_oob **out)
{
    struct oob_job *j = parent->job;
    struct loom_oob *v = calloc(1, sizeof *v);
    int *map = calloc((size_t)n, sizeof *map);
    int *rmap = malloc(sizeof *rmap * (size_t)j->nranks);
    if (!v || !map || !rmap) {
        free(v);
        free(map);
        free(rmap);
        return LOOM_ERROR_NO_MEMORY;
    }
    for (int r = 0; r < j->nranks; r++)
        rmap[r] = -1;
    for (int i = 0; i < n; i++) {
        map[i] = loom_oob_job_rank(parent, ranks[i]);
        rmap[map[i]] = i;
    }
    v->job = j;
    v->ns = ns;
    v->rank = me;
    v->nranks = n;
    v->map = map;
    v->rmap = rmap;
    pthread_mutex_lock(&j->lock);
    v->next = j->views;
    j->views = v;
    j->nviews++;
    pthread_mutex_unlock(&j->lock);
    *out = v;
    return LOOM_SUCCESS;
}

void loom_oob_close(struct loom_oob *v)
{
    if (!v)
        return;
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    struct loom_oob **pp = &j->views;
    while (*pp && *pp != v)
        pp = &(*pp)->next;
    if (*pp)
        *pp = v->next;
    /* what this view published (a handler's context dies with it) */
    for (struct oob_pub **qp = &j->pubs; *qp;) {
        struct oob_pub *pb = *qp;
        int shared = 0;
        for (struct loom_oob *o = j->views; o; o = o->next)
            shared |= o->ns == v->ns;
        if (pb->ns == v->ns && !shared) {
            *qp = pb->next;
            free(pb->blob);
            free(pb);
        } else {
            qp = &pb->next;
        }
    }
    int last = --j->nviews == 0;
    if (last) {
        /* let what is queued go, for a second at most */
        double until = loom_now() + 1.0;
        for (;;) {
            int pending = 0;
            for (int r = 0; r < j->nranks; r++)
                if (j->outs[r] && j->outs[r]->q && j->outs[r]->state != OUT_IDLE)
                    pending = 1;
            if (!pending || loom_now() > until || j->aborted)
                break;
            struct timespec ts = loom_abstime_in(10000000);
            pthread_cond_timedwait(&j->cv, &j->lock, &ts);
        }
    }
    pthread_mutex_unlock(&j->lock);
    free(v->map);
    free(v->rmap);
    free(v);
    if (last)
        job_free(j);
}

void loom_oob_abort(struct loom_oob *v)
{
    struct oob_job *j = v->job;
    __atomic_store_n(&j->aborted, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&j->lock);
    loom_oob_notify_all(j); /* waits on the views' notifications learn it */
    pthread_mutex_unlock(&j->lock);
}

int loom_oob_aborted(const struct loom_oob *v)
{
    return __atomic_load_n(&v->job->aborted, __ATOMIC_ACQUIRE);
}

void loom_oob_counters(const struct loom_oob *v, uint64_t *sent, uint64_t *received)
{
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    *sent = j->sent;
    *received = j->recvd;
    pthread_mutex_unlock(&j->lock);
}
