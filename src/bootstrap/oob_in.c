/* oob_in.c - sockets peers open to this rank's OOB port: admission (the
 * preamble routes them; "LOOB" ones go through the handshake), messages in,
 * lookups answered (oob_priv.h). */
#include "build_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "bootstrap/oob_priv.h"

/* The handshake's payload check: the hello is for this rank of this job
 * (held while the job id is not known). */
static int hello_check(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen)
{
    struct oob_conn *c = arg;
    struct oob_job *j = c->job;
    struct loom_oob_hello h;
    loom_result_t res = loom_oob_hello_decode(payload, len, &h, why, whylen);
    if (res < 0)
        return res;
    int rc = loom_oob_hello_match(&h, j->rank, j->nranks, j->job_id, why, whylen);
    if (rc == LOOM_HS_ACCEPT)
        c->peer = (int)h.from;
    return rc;
}

const struct loom_hs_proto loom_oob_hs = LOOM_HS_PROTO(
    "oob", "oob", LOOM_OOB_CHAL_MAGIC, LOOM_OOB_HELLO_MAGIC, LOOM_OOB_PROOF_MAGIC,
    LOOM_OOB_HS_VERSION, LOOM_OOB_HELLO_LEN, hello_check);

struct oob_pub *loom_oob_find_pub(struct oob_job *j, uint64_t ns, uint32_t tag)
{
    for (struct oob_pub *p = j->pubs; p; p = p->next)
        if (p->ns == ns && p->tag == tag)
            return p;
    return NULL;
}

/* A lookup from job rank `from` (lock held; may drop it around a handler). */
void loom_oob_answer_get(struct oob_job *j, uint64_t ns, uint32_t tag, int from)
{
    if (tag == LOOM_OOB_TAG_PING) {
        struct oob_msg *m = loom_oob_msg_new(ns, j->rank, tag, LOOM_OOB_KIND_MSG, NULL, 0);
        if (m)
            loom_oob_enqueue(j, from, m);
        return;
    }
    struct oob_pub *p = loom_oob_find_pub(j, ns, tag);
    if (!p) {
        struct oob_get *g = malloc(sizeof *g);
        if (g) {
            *g = (struct oob_get){.next = j->gets, .ns = ns, .tag = tag, .from = from};
            j->gets = g;
        }
        return;
    }
    struct oob_msg *m;
    if (p->fn) {
        uint8_t out[256];
        size_t (*fn)(void *, int, void *, size_t) = p->fn;
        void *ctx = p->ctx;
        int vfrom = from;
        for (struct loom_oob *v = j->views; v; v = v->next)
            if (v->ns == ns)
                vfrom = loom_oob_view_rank(v, from);
        pthread_mutex_unlock(&j->lock);
        size_t n = fn(ctx, vfrom, out, sizeof out);
        pthread_mutex_lock(&j->lock);
        m = loom_oob_msg_new(ns, j->rank, tag, LOOM_OOB_KIND_MSG, out,
                             n > sizeof out ? sizeof out : n);
    } else {
        m = loom_oob_msg_new(ns, j->rank, tag, LOOM_OOB_KIND_MSG, p->blob, p->len);
    }
    if (m)
        loom_oob_enqueue(j, from, m);
}

void loom_oob_in_free(struct oob_job *j, struct oob_conn *c, int close_fd)
{
    struct oob_conn **pp = &j->ins;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = c->next;
        j->nins--;
    }
    if (close_fd && c->fd >= 0)
        close(c->fd);
    loom_hs_free(&c->hs);
    free(c->rx);
    free(c);
}

/* A whole message arrived on c (lock held). */
static void in_deliver(struct oob_job *j, struct oob_conn *c)
{
    struct oob_msg *m = c->rx;
    c->rx = NULL;
    if (m->kind == LOOM_OOB_KIND_GET) {
        loom_oob_answer_get(j, m->ns, m->tag, m->from);
        free(m);
        return;
    }
    for (struct loom_oob *v = j->views; v; v = v->next)
        if (v->ns == m->ns && v->recv_fn && v->recv_tag == m->tag &&
            loom_oob_view_rank(v, m->from) >= 0) {
            v->recv_fn(v->recv_ctx, loom_oob_view_rank(v, m->from), m->data, m->len);
            free(m);
            return;
        }
    if (j->inbox_tail)
        j->inbox_tail->next = m;
    else
        j->inbox = m;
    j->inbox_tail = m;
    loom_oob_notify_ns(j, m->ns);
}

/* The preamble is whole: route the socket. 1 go on (the handshake), -1 c
 * was freed or handed on. */
static int in_route(struct oob_job *j, struct oob_conn *c)
{
    struct loom_oob_pre p;
    char why[200];
    if (loom_oob_pre_decode(c->pre, &p, why, sizeof why) < 0) {
        LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d dropped a connection from %s: %s", j->rank, c->from,
                  why);
        loom_oob_in_free(j, c, 1);
        return -1;
    }
    if (p.kind == LOOM_OOB_MAGIC) {
        if (loom_hs_accept(&c->hs, &loom_oob_hs, &j->key, c->fd, c->from, c,
                           c->deadline - loom_now()) < 0) {
            LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d dropped a connection from %s: %s", j->rank,
                      c->from, c->hs.err);
            loom_oob_in_free(j, c, 1);
            return -1;
        }
        c->state = IN_HS;
        return 1;
    }
    struct oob_fd *f = malloc(sizeof *f);
    if (!f) {
        loom_oob_in_free(j, c, 1);
        return -1;
    }
    *f = (struct oob_fd){.ns = p.ns, .kind = p.kind, .fd = c->fd};
    memcpy(f->from, c->from, sizeof f->from);
    if (j->fds_tail)
        j->fds_tail->next = f;
    else
        j->fds = f;
    j->fds_tail = f;
    loom_oob_in_free(j, c, 0);
    loom_oob_notify_ns(j, p.ns);
    return -1;
}

/* Step c's handshake: 1 done (messages follow), 0 not yet, -1 c was freed. */
static int in_handshake(struct oob_job *j, struct oob_conn *c)
{
    int rc = loom_hs_step(&c->hs);
    if (rc == LOOM_HS_AGAIN)
        return 0;
    j->recvd += c->hs.received;
    if (rc < 0) {
        if (rc == LOOM_ERROR_REMOTE && c->hs.received == 0)
            LOOM_INFO(LOOM_SUB_BOOT, "oob: rank %d: %s", j->rank, c->hs.err);
        else
            LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d dropped a connection: %s", j->rank, c->hs.err);
        loom_oob_in_free(j, c, 1);
        return -1;
    }
    loom_hs_free(&c->hs);
    c->state = IN_MSGS;
    c->got = 0;
    return 1;
}

int loom_oob_in_read(struct oob_job *j, struct oob_conn *c)
{
    for (;;) {
        if (c->state == IN_HS) {
            int rc = in_handshake(j, c);
            if (rc <= 0)
                return rc;
        }
        uint8_t *dst;
        size_t want;
        if (c->state == IN_PREAMBLE) {
            dst = c->pre + c->got;
            want = LOOM_OOB_PREAMBLE_LEN - c->got;
        } else if (!c->rx) {
            dst = c->hdr + c->got;
            want = LOOM_OOB_HDR_LEN - c->got;
        } else {
            dst = c->rx->data + c->got;
            want = c->rx->len - c->got;
        }
        ssize_t n = want ? recv(c->fd, dst, want, 0) : 0;
        if (want && n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (want && n <= 0) {
            if (c->state != IN_MSGS || c->got || c->rx)
                LOOM_INFO(LOOM_SUB_BOOT, "oob: rank %d: connection from %s ended: %s", j->rank,
                          c->from, n == 0 ? "end of stream" : strerror(errno));
            loom_oob_in_free(j, c, 1);
            return -1;
        }
        c->got += (size_t)(want ? n : 0);
        j->recvd += (uint64_t)(want ? n : 0);
        if ((size_t)(want ? n : 0) < want)
            return 0;
        if (c->state == IN_PREAMBLE) {
            c->got = 0;
            if (in_route(j, c) < 0)
                return -1;
            continue;
        }
        if (!c->rx) {
            struct loom_oob_hdr h;
            char why[200];
            if (loom_oob_hdr_decode(c->hdr, &h, why, sizeof why) < 0) {
                LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d: rank %d sent a %s: dropped", j->rank,
                          c->peer, why);
                loom_oob_in_free(j, c, 1);
                return -1;
            }
            c->rx = loom_oob_msg_new(h.ns, c->peer, h.tag, h.kind, NULL, h.len);
            if (!c->rx) {
                loom_oob_in_free(j, c, 1);
                return -1;
            }
            c->got = 0;
            if (h.len)
                continue;
        }
        c->got = 0;
        in_deliver(j, c);
    }
}

void loom_oob_in_resume(struct oob_job *j)
{
    double now = loom_now();
    for (struct oob_conn *c = j->ins, *next; c; c = next) {
        next = c->next;
        if (c->state == IN_HS && c->hs.events == 0) {
            /* it waited for this rank, not the other way round */
            c->deadline = now + OOB_IN_DEADLINE;
            c->hs.deadline = c->deadline;
            loom_oob_in_read(j, c);
        }
    }
}

void loom_oob_in_expire(struct oob_job *j, double now)
{
    for (struct oob_conn *c = j->ins, *next; c; c = next) {
        next = c->next;
        if (c->state == IN_MSGS || now <= c->deadline)
            continue;
        if (c->state == IN_HS) {
            if (c->hs.events != 0)
                in_handshake(j, c); /* fails naming what it waited for */
            continue;
        }
        LOOM_WARN(LOOM_SUB_BOOT,
                  "oob: rank %d dropped a silent connection from %s (no "
                  "preamble within %g s)",
                  j->rank, c->from, OOB_IN_DEADLINE);
        loom_oob_in_free(j, c, 1);
    }
}

void loom_oob_accept_new(struct oob_job *j)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(j->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        /* every exchange here is a short request and its answer: without
         * this, Nagle holds an answer behind the peer's delayed ACK of the
         * last message (40 ms on Linux) */
        loom_net_set_nodelay(fd);
        if (j->nins >= OOB_INS_MAX) {
            struct oob_conn *old = j->ins;
            while (old->next)
                old = old->next;
            LOOM_WARN(LOOM_SUB_BOOT,
                      "oob: rank %d: too many silent connections; "
                      "dropped one from %s",
                      j->rank, old->from);
            loom_oob_in_free(j, old, 1);
        }
        struct oob_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        c->fd = fd;
        c->peer = -1;
        c->state = IN_PREAMBLE;
        c->deadline = loom_now() + OOB_IN_DEADLINE;
        c->job = j;
        loom_net_format((struct sockaddr *)&ss, c->from, sizeof c->from);
        c->next = j->ins;
        j->ins = c;
        j->nins++;
    }
}
