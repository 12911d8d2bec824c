/* oob.c - the out-of-band service's calls on a view (oob.h): messages,
 * published blobs and lookups, sockets for transports. The service itself
 * lives in the other oob_*.c files (oob_priv.h). */
#include "build_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"
#include "wire.h"
#include "bootstrap/oob_priv.h"

/* ---- messages ---------------------------------------------------------------- */

static loom_result_t view_error(struct loom_oob *v, int peer)
{
    struct oob_job *j = v->job;
    if (peer >= 0 && j->peer_err[loom_oob_job_rank(v, peer)] < 0) {
        snprintf(v->err, sizeof v->err, "%s", j->peer_msg[loom_oob_job_rank(v, peer)]);
        return j->peer_err[loom_oob_job_rank(v, peer)];
    }
    if (j->err_res < 0) {
        snprintf(v->err, sizeof v->err, "%s", j->err);
        return j->err_res;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_oob_send(struct loom_oob *v, int peer, uint32_t tag, const void *buf,
                            size_t len)
{
    if (peer < 0 || peer >= v->nranks || len > LOOM_OOB_MSG_MAX) {
        snprintf(v->err, sizeof v->err, "oob: cannot send %zu bytes to rank %d of %d",
                 len, peer, v->nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct oob_job *j = v->job;
    struct oob_msg *m = loom_oob_msg_new(v->ns, j->rank, tag, LOOM_OOB_KIND_MSG, buf, len);
    if (!m)
        return LOOM_ERROR_NO_MEMORY;
    pthread_mutex_lock(&j->lock);
    loom_result_t res = view_error(v, peer);
    if (res == LOOM_SUCCESS)
        res = loom_oob_enqueue(j, loom_oob_job_rank(v, peer), m);
    else
        free(m);
    pthread_mutex_unlock(&j->lock);
    return res;
}

/* Ask (view) rank peer for its blob under tag (lock held). */
static loom_result_t ask(struct loom_oob *v, int peer, uint32_t tag)
{
    struct oob_job *j = v->job;
    struct oob_msg *m = loom_oob_msg_new(v->ns, j->rank, tag, LOOM_OOB_KIND_GET, NULL, 0);
    if (!m)
        return LOOM_ERROR_NO_MEMORY;
    return loom_oob_enqueue(j, loom_oob_job_rank(v, peer), m);
}

loom_result_t loom_oob_lookup(struct loom_oob *v, int peer, uint32_t tag)
{
    if (peer < 0 || peer >= v->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    loom_result_t res = view_error(v, peer);
    if (res == LOOM_SUCCESS)
        res = ask(v, peer, tag);
    pthread_mutex_unlock(&j->lock);
    return res;
}

/* Take a matching message from the inbox (lock held): 1 taken, 0 none. */
static int take(struct loom_oob *v, uint32_t tag, int peer, int *from, void **buf,
                size_t *len)
{
    struct oob_job *j = v->job;
    int want = peer >= 0 ? loom_oob_job_rank(v, peer) : -1;
    struct oob_msg *prev = NULL;
    for (struct oob_msg *m = j->inbox; m; prev = m, m = m->next) {
        if (m->ns != v->ns || m->tag != tag || (want >= 0 && m->from != want) ||
            loom_oob_view_rank(v, m->from) < 0)
            continue;
        LOOM_FIFO_UNLINK(j->inbox, j->inbox_tail, prev, m);
        void *data = malloc(m->len ? m->len : 1);
        if (!data) {
            free(m);
            return LOOM_ERROR_NO_MEMORY;
        }
        memcpy(data, m->data, m->len);
        if (from)
            *from = loom_oob_view_rank(v, m->from);
        if (len)
            *len = m->len;
        *buf = data;
        free(m);
        return 1;
    }
    return 0;
}

int loom_oob_poll(struct loom_oob *v, uint32_t tag, int peer, int *from, void **buf,
                  size_t *len)
{
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    int rc = take(v, tag, peer, from, buf, len);
    if (rc == 0)
        rc = view_error(v, peer);
    pthread_mutex_unlock(&j->lock);
    return rc;
}

loom_result_t loom_oob_recv(struct loom_oob *v, uint32_t tag, int peer, double timeout,
                            int *from, void **buf, size_t *len)
{
    struct oob_job *j = v->job;
    double now = loom_now(), until = now + timeout, next_ping = now + OOB_RECV_PING;
    pthread_mutex_lock(&j->lock);
    for (;;) {
        int rc = take(v, tag, peer, from, buf, len);
        if (rc == 1) {
            pthread_mutex_unlock(&j->lock);
            return LOOM_SUCCESS;
        }
        /* A peer that died sends nothing and is sent nothing: only a
         * connection to its port finds it gone (ping answers are dropped). */
        if (rc == 0 && peer >= 0 && tag != LOOM_OOB_TAG_PING && j->complete) {
            void *p;
            while (take(v, LOOM_OOB_TAG_PING, peer, NULL, &p, NULL) == 1)
                free(p);
            /* a refused connection sets its error; the answer says only yes */
            if ((now = loom_now()) >= next_ping) {
                ask(v, peer, LOOM_OOB_TAG_PING);
                next_ping = now + OOB_RECV_PING;
            }
        }
        loom_result_t res = rc < 0 ? rc : view_error(v, peer);
        if (res == LOOM_SUCCESS && j->aborted) {
            snprintf(v->err, sizeof v->err, "aborted");
            res = LOOM_ERROR_ABORTED;
        }
        if (res == LOOM_SUCCESS && loom_now() >= until) {
            snprintf(v->err, sizeof v->err, "no message from %s%d within %g s",
                     peer >= 0 ? "rank " : "any rank; ", peer, timeout);
            res = LOOM_ERROR_TIMEOUT;
        }
        if (res < 0) {
            pthread_mutex_unlock(&j->lock);
            return res;
        }
        struct timespec ts = loom_abstime_in(20000000);
        pthread_cond_timedwait(&j->cv, &j->lock, &ts);
    }
}

static loom_result_t set_pub(struct loom_oob *v, uint32_t tag, const void *buf, size_t len,
                             size_t (*fn)(void *, int, void *, size_t), void *ctx)
{
    struct oob_job *j = v->job;
    void *copy = NULL;
    if (!fn) {
        copy = malloc(len ? len : 1);
        if (!copy)
            return LOOM_ERROR_NO_MEMORY;
        memcpy(copy, buf, len);
    }
    pthread_mutex_lock(&j->lock);
    struct oob_pub *p = loom_oob_find_pub(j, v->ns, tag);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&j->lock);
            free(copy);
            return LOOM_ERROR_NO_MEMORY;
        }
        p->ns = v->ns;
        p->tag = tag;
        p->next = j->pubs;
        j->pubs = p;
    }
    free(p->blob);
    p->blob = copy;
    p->len = len;
    p->fn = fn;
    p->ctx = ctx;
    /* lookups that came first */
    for (struct oob_get **gp = &j->gets; *gp;) {
        struct oob_get *g = *gp;
        if (g->ns == v->ns && g->tag == tag) {
            *gp = g->next;
            loom_oob_answer_get(j, g->ns, g->tag, g->from);
            free(g);
            gp = &j->gets; /* the list may have changed while unlocked */
        } else {
            gp = &g->next;
        }
    }
    pthread_mutex_unlock(&j->lock);
    return LOOM_SUCCESS;
}

loom_result_t loom_oob_publish(struct loom_oob *v, uint32_t tag, const void *buf,
                               size_t len)
{
    return set_pub(v, tag, buf, len, NULL, NULL);
}

void loom_oob_set_handler(struct loom_oob *v, uint32_t tag,
                          size_t (*fn)(void *ctx, int from, void *out, size_t cap),
                          void *ctx)
{
    set_pub(v, tag, NULL, 0, fn, ctx);
}

void loom_oob_set_notify(struct loom_oob *v, void (*fn)(void *ctx), void *ctx)
{
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    v->notify = fn;
    v->notify_ctx = ctx;
    pthread_mutex_unlock(&j->lock);
}

void loom_oob_set_receiver(struct loom_oob *v, uint32_t tag,
                           void (*fn)(void *ctx, int from, const void *buf, size_t len),
                           void *ctx)
{
    struct oob_job *j = v->job;
    pthread_mutex_lock(&j->lock);
    v->recv_tag = tag;
    v->recv_fn = fn;
    v->recv_ctx = ctx;
    pthread_mutex_unlock(&j->lock);
}

const char *loom_oob_error(struct loom_oob *v)
{
    return v->err;
}

/* ---- sockets for transports --------------------------------------------------- */

loom_result_t loom_oob_connect_fd(struct loom_oob *v, int peer, int *fd, char *err,
                                  size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (loom_oob_addr(v, peer, &ss, &sl) < 0) {
        snprintf(err, errlen, "rank %d's address is not known", peer);
        return LOOM_ERROR_INTERNAL;
    }
    *fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0) {
        snprintf(err, errlen, "socket(): %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    loom_net_set_nodelay(*fd);
    if (connect(*fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS ||
        errno == EINTR)
        return LOOM_SUCCESS;
    int e = errno;
    close(*fd);
    *fd = -1;
    char a[LOOM_NET_ADDRSTR_MAX];
    loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    snprintf(err, errlen, "cannot connect to %s: %s", a, strerror(e));
    return e == ECONNREFUSED || e == ENETUNREACH || e == EHOSTUNREACH ? LOOM_ERROR_REMOTE
                                                                       : LOOM_ERROR_SYSTEM;
}

void loom_oob_preamble(const struct loom_oob *v, uint32_t kind,
                       uint8_t out[LOOM_OOB_PREAMBLE_LEN])
{
    struct loom_oob_pre p = {.kind = kind, .version = LOOM_OOB_VERSION, .ns = v->ns};
    loom_oob_pre_encode(&p, out);
}

int loom_oob_take_fd(struct loom_oob *v, uint32_t kind, int *fd, char *from,
                     size_t fromlen)
{
    struct oob_job *j = v->job;
    int got = 0;
    pthread_mutex_lock(&j->lock);
    struct oob_fd *prev = NULL;
    for (struct oob_fd *f = j->fds; f; prev = f, f = f->next) {
        if (f->ns != v->ns || f->kind != kind)
            continue;
        if (prev)
            prev->next = f->next;
        else
            j->fds = f->next;
        if (j->fds_tail == f)
            j->fds_tail = prev;
        *fd = f->fd;
        if (from)
            snprintf(from, fromlen, "%s", f->from);
        free(f);
        got = 1;
        break;
    }
    pthread_mutex_unlock(&j->lock);
    return got;
}

loom_result_t loom_oob_addr(const struct loom_oob *v, int r, struct sockaddr_storage *ss,
                            socklen_t *sl)
{
    struct oob_job *j = v->job;
    if (r < 0 || r >= v->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    int jr = loom_oob_job_rank(v, r);
    pthread_mutex_lock(&j->lock);
    int have = j->have[jr];
    if (have)
        loom_oob_entry_addr(j, jr, ss, sl);
    pthread_mutex_unlock(&j->lock);
    return have && *sl ? LOOM_SUCCESS : LOOM_ERROR_INTERNAL;
}

int loom_oob_rank(const struct loom_oob *v)
{
    return v->rank;
}

int loom_oob_size(const struct loom_oob *v)
{
    return v->nranks;
}

uint64_t loom_oob_ns(const struct loom_oob *v)
{
    return v->ns;
}

loom_result_t loom_oob_peer_error(struct loom_oob *v, int peer, char *why, size_t len)
{
    struct oob_job *j = v->job;
    if (peer < 0 || peer >= v->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&j->lock);
    int jr = loom_oob_job_rank(v, peer);
    loom_result_t res = j->peer_err[jr];
    if (res < 0 && why)
        snprintf(why, len, "%s", j->peer_msg[jr] ? j->peer_msg[jr] : "");
    pthread_mutex_unlock(&j->lock);
    return res;
}
