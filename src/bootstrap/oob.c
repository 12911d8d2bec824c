/* oob.c - the out-of-band service (see oob.h).
 *
 * One thread per job serves one listener and the job's short-lived
 * sockets. Every socket a peer opens starts with a 16-byte preamble:
 *   magic u32 | version u16 | flags u16 | namespace u64
 * "LOOB" continues with the authenticated exchange below; any other known
 * kind (a transport's data socket) is handed to that transport as is.
 *   acceptor -> connector: challenge (auth.h message, magic "OBCH")
 *   connector -> acceptor: hello (32 bytes) | cC | mac       (ctx "oob")
 *   acceptor -> connector: proof ("OBPR")
 *   connector -> acceptor: messages, each a 24-byte header
 *       kind u8 | pad u8[3] | tag u32 | len u32 | pad u32 | namespace u64
 *     and len bytes (kind 1: a message, 2: a lookup of tag).
 * hello: magic "OBHL" u32 | version u16 | flags u16 | job id u64 | from u32 |
 *        to u32 | nranks u32 | pad u32.
 * Sockets carry one direction: answers go back on a socket of their own.
 * An outgoing socket idle for OOB_IDLE_CLOSE is closed; one that cannot be
 * connected is retried with backoff for the connect timeout, then the job
 * records an error naming the peer. Every length read is bounded first. */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "bootstrap/oob.h"
#include "config.h"
#include "log.h"
#include "net/net.h"
#include "util.h"

#define OOB_MAGIC 0x424f4f4cu       /* "LOOB" */
#define OOB_CHAL_MAGIC 0x48434f42u  /* "BOCH" */
#define OOB_PROOF_MAGIC 0x52504f42u /* "BOPR" */
#define OOB_HELLO_MAGIC 0x4c484f42u /* "BOHL" */
#define OOB_VERSION 1
#define OOB_HELLO_LEN 32
#define OOB_SIGNED_LEN (OOB_HELLO_LEN + LOOM_AUTH_CHAL_LEN + LOOM_AUTH_MAC_LEN)
#define OOB_HDR_LEN 24
#define OOB_CTX "oob"
#define OOB_KIND_MSG 1
#define OOB_KIND_GET 2
#define OOB_IDLE_CLOSE 1.0           /* seconds an idle outgoing socket stays */
#define OOB_IN_DEADLINE 10.0         /* seconds a new socket has to say who it is */
#define OOB_INS_MAX 256
#define OOB_BACKOFF_MIN 0.01
#define OOB_BACKOFF_MAX 0.5

struct oob_msg {
    struct oob_msg *next;
    uint64_t ns;
    int from;                        /* job rank                            */
    uint32_t tag;
    uint8_t kind;
    size_t len;
    uint8_t data[];
};

struct oob_pub {
    struct oob_pub *next;
    uint64_t ns;
    uint32_t tag;
    void *blob;
    size_t len;
    size_t (*fn)(void *ctx, int from, void *out, size_t cap);
    void *ctx;
};

struct oob_get {                     /* a lookup waiting for its blob       */
    struct oob_get *next;
    uint64_t ns;
    uint32_t tag;
    int from;
};

struct oob_fd {
    struct oob_fd *next;
    uint64_t ns;
    uint32_t kind;
    int fd;
    char from[LOOM_NET_ADDRSTR_MAX];
};

enum {
    IN_PREAMBLE, IN_HELLO, IN_HOLD, IN_MSGS,
    OUT_IDLE, OUT_WAIT, OUT_CONNECTING, OUT_PRE, OUT_CHAL, OUT_HELLO, OUT_PROOF,
    OUT_READY
};

struct oob_conn {
    struct oob_conn *next;           /* ins list                             */
    int fd;
    int state;
    int peer;                        /* job rank; -1 until a hello says     */
    double deadline;                 /* ins: to finish the handshake        */
    double next_try, backoff, first_try, last_active;
    int last_errno;
    size_t got, need, sent;
    uint8_t ca[LOOM_AUTH_CHAL_LEN], cc[LOOM_AUTH_CHAL_LEN];
    uint8_t buf[OOB_SIGNED_LEN];     /* handshake bytes in or out            */
    uint8_t hdr[OOB_HDR_LEN];
    struct oob_msg *rx;              /* ins: the message being read          */
    struct oob_msg *q, *qtail;       /* outs: messages to send               */
    char from[LOOM_NET_ADDRSTR_MAX];
};

struct oob_job;

struct loom_oob {                    /* a view                               */
    struct oob_job *job;
    struct loom_oob *next;
    uint64_t ns;
    int rank, nranks;
    int *map;                        /* view rank -> job rank (NULL: same)   */
    int *rmap;                       /* job rank -> view rank or -1          */
    void (*notify)(void *ctx);
    void *notify_ctx;
    uint32_t recv_tag;               /* messages of this tag go to recv_fn  */
    void (*recv_fn)(void *ctx, int from, const void *buf, size_t len);
    void *recv_ctx;
    char err[512];
};

struct oob_job {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int rank, nranks;
    uint64_t job_id;
    uint8_t *table;                  /* nranks entries                       */
    uint8_t *have;                   /* entry r is known                     */
    int complete;
    int lfd, kick;
    pthread_t thread;
    int thread_started, stop, closing, aborted;
    int nviews;
    struct loom_oob *views;
    struct oob_msg *inbox, *inbox_tail;
    struct oob_pub *pubs;
    struct oob_get *gets;
    struct oob_fd *fds, *fds_tail;
    struct oob_conn **outs;          /* per job rank, allocated on use       */
    struct oob_conn *ins;
    int nins;
    struct loom_auth_key key;
    double connect_timeout;
    loom_result_t err_res;
    char err[512];
    loom_result_t *peer_err;         /* per job rank: it cannot be reached   */
    char **peer_msg;
    uint64_t sent, recvd;
};

static void kick(struct oob_job *j)
{
    uint64_t one = 1;
    if (write(j->kick, &one, sizeof one) < 0) {
        /* saturated: the thread is awake anyway */
    }
}

/* Notify the views of namespace ns (with the job lock held). */
static void notify_ns(struct oob_job *j, uint64_t ns)
{
    for (struct loom_oob *v = j->views; v; v = v->next)
        if (v->ns == ns && v->notify)
            v->notify(v->notify_ctx);
    pthread_cond_broadcast(&j->cv);
}

static void notify_all(struct oob_job *j)
{
    for (struct loom_oob *v = j->views; v; v = v->next)
        if (v->notify)
            v->notify(v->notify_ctx);
    pthread_cond_broadcast(&j->cv);
}

static int job_rank(const struct loom_oob *v, int r)
{
    return v->map ? v->map[r] : r;
}

static int view_rank(const struct loom_oob *v, int jr)
{
    return v->rmap ? v->rmap[jr] : jr;
}

static struct oob_msg *msg_new(uint64_t ns, int from, uint32_t tag, uint8_t kind,
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

static struct oob_conn *out_conn(struct oob_job *j, int peer)
{
    if (!j->outs[peer]) {
        struct oob_conn *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->fd = -1;
        c->peer = peer;
        c->state = OUT_IDLE;
        j->outs[peer] = c;
    }
    return j->outs[peer];
}

/* Queue m for job rank peer (lock held). */
static loom_result_t enqueue(struct oob_job *j, int peer, struct oob_msg *m)
{
    struct oob_conn *c = out_conn(j, peer);
    if (!c) {
        free(m);
        return LOOM_ERROR_NO_MEMORY;
    }
    if (c->qtail)
        c->qtail->next = m;
    else
        c->q = m;
    c->qtail = m;
    if (c->state == OUT_IDLE) {
        c->state = OUT_WAIT;
        c->next_try = loom_now();
        c->first_try = c->next_try;
        c->backoff = OOB_BACKOFF_MIN;
    }
    kick(j);
    return LOOM_SUCCESS;
}

static void entry_addr(const struct oob_job *j, int r, struct sockaddr_storage *ss,
                       socklen_t *sl)
{
    if (loom_net_from_wire(j->table + (size_t)r * LOOM_OOB_ENTRY_LEN, ss, sl) != 0)
        *sl = 0;
}

/* ---- answering lookups ---------------------------------------------------- */

static struct oob_pub *find_pub(struct oob_job *j, uint64_t ns, uint32_t tag)
{
    for (struct oob_pub *p = j->pubs; p; p = p->next)
        if (p->ns == ns && p->tag == tag)
            return p;
    return NULL;
}

/* A lookup from job rank `from` (lock held; may drop it around a handler). */
static void answer_get(struct oob_job *j, uint64_t ns, uint32_t tag, int from)
{
    if (tag == LOOM_OOB_TAG_PING) {
        struct oob_msg *m = msg_new(ns, j->rank, tag, OOB_KIND_MSG, NULL, 0);
        if (m)
            enqueue(j, from, m);
        return;
    }
    struct oob_pub *p = find_pub(j, ns, tag);
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
                vfrom = view_rank(v, from);
        pthread_mutex_unlock(&j->lock);
        size_t n = fn(ctx, vfrom, out, sizeof out);
        pthread_mutex_lock(&j->lock);
        m = msg_new(ns, j->rank, tag, OOB_KIND_MSG, out, n > sizeof out ? sizeof out : n);
    } else {
        m = msg_new(ns, j->rank, tag, OOB_KIND_MSG, p->blob, p->len);
    }
    if (m)
        enqueue(j, from, m);
}

/* ---- incoming sockets ------------------------------------------------------ */

static void in_free(struct oob_job *j, struct oob_conn *c, int close_fd)
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
    free(c->rx);
    free(c);
}

static int send_small(int fd, const uint8_t *buf, size_t len)
{
    ssize_t n = LOOM_SYSCALL_RETRY(send(fd, buf, len, MSG_NOSIGNAL));
    return n == (ssize_t)len ? 0 : -1;
}

/* Check a complete signed hello (lock held). 1 accepted, 0 wait for the job
 * id, -1 dropped. */
static int in_check_hello(struct oob_job *j, struct oob_conn *c)
{
    const uint8_t *h = c->buf;
    uint32_t magic = loom_get_le32(h), from = loom_get_le32(h + 16),
             to = loom_get_le32(h + 20), n = loom_get_le32(h + 24);
    uint16_t version = loom_get_le16(h + 4), flags = loom_get_le16(h + 6);
    uint64_t job = loom_get_le64(h + 8);
    const char *why = NULL;
    if (magic != OOB_HELLO_MAGIC || version != OOB_VERSION)
        why = "not a Loom OOB hello";
    else if (!!(flags & LOOM_AUTH_FLAG_KEYED) != !!j->key.set)
        why = j->key.set ? "it has no job key (LOOM_JOB_KEY) and this rank has one"
                         : "it has a job key (LOOM_JOB_KEY) and this rank has none";
    else if (to != (uint32_t)j->rank || n != (uint32_t)j->nranks || from >= n)
        why = "it is for another rank or job size";
    else if (j->key.set && !loom_auth_verify(&j->key, OOB_CTX, 'C', c->ca,
                                             h + OOB_HELLO_LEN, h, OOB_HELLO_LEN,
                                             h + OOB_HELLO_LEN + LOOM_AUTH_CHAL_LEN))
        why = "its job key (LOOM_JOB_KEY) does not match";
    if (!why && j->job_id == 0)
        return 0;
    if (!why && job != j->job_id)
        why = "it is for another job";
    if (why) {
        LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d dropped a connection from %s: %s",
                  j->rank, c->from, why);
        return -1;
    }
    uint8_t mac[LOOM_AUTH_MAC_LEN] = {0}, proof[LOOM_AUTH_MSG_LEN];
    if (j->key.set &&
        loom_auth_mac(&j->key, OOB_CTX, 'A', h + OOB_HELLO_LEN, c->ca, h,
                      OOB_HELLO_LEN, mac) < 0)
        return -1;
    loom_auth_msg_encode(proof, OOB_PROOF_MAGIC, OOB_VERSION,
                         j->key.set ? LOOM_AUTH_FLAG_KEYED : 0, mac);
    if (send_small(c->fd, proof, sizeof proof) < 0)
        return -1;
    c->peer = (int)from;
    c->state = IN_MSGS;
    c->got = 0;
    return 1;
}

/* A whole message arrived on c (lock held). */
static void in_deliver(struct oob_job *j, struct oob_conn *c)
{
    struct oob_msg *m = c->rx;
    c->rx = NULL;
    if (m->kind == OOB_KIND_GET) {
        answer_get(j, m->ns, m->tag, m->from);
        free(m);
        return;
    }
    for (struct loom_oob *v = j->views; v; v = v->next)
        if (v->ns == m->ns && v->recv_fn && v->recv_tag == m->tag &&
            view_rank(v, m->from) >= 0) {
            v->recv_fn(v->recv_ctx, view_rank(v, m->from), m->data, m->len);
            free(m);
            return;
        }
    if (j->inbox_tail)
        j->inbox_tail->next = m;
    else
        j->inbox = m;
    j->inbox_tail = m;
    notify_ns(j, m->ns);
}

/* Read what is there on an incoming socket (lock held). Returns -1 when c
 * was freed. */
static int in_read(struct oob_job *j, struct oob_conn *c)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->state == IN_PREAMBLE) {
            dst = c->buf + c->got;
            want = LOOM_OOB_PREAMBLE_LEN - c->got;
        } else if (c->state == IN_HELLO) {
            dst = c->buf + c->got;
            want = OOB_SIGNED_LEN - c->got;
        } else if (c->state == IN_HOLD) {
            return 0;
        } else if (!c->rx) {
            dst = c->hdr + c->got;
            want = OOB_HDR_LEN - c->got;
        } else {
            dst = c->rx->data + c->got;
            want = c->rx->len - c->got;
        }
        ssize_t n = want ? recv(c->fd, dst, want, 0) : 0;
        if (want && n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (want && n <= 0) {
            if (c->state != IN_MSGS || c->got || c->rx)
                LOOM_INFO(LOOM_SUB_BOOT, "oob: rank %d: connection from %s ended: %s",
                          j->rank, c->from, n == 0 ? "end of stream" : strerror(errno));
            in_free(j, c, 1);
            return -1;
        }
        c->got += (size_t)(want ? n : 0);
        j->recvd += (uint64_t)(want ? n : 0);
        if ((size_t)(want ? n : 0) < want)
            return 0;
        if (c->state == IN_PREAMBLE) {
            uint32_t magic = loom_get_le32(c->buf);
            uint64_t ns = loom_get_le64(c->buf + 8);
            if (magic == OOB_MAGIC && loom_get_le16(c->buf + 4) == OOB_VERSION) {
                uint8_t chal[LOOM_AUTH_MSG_LEN];
                if (loom_auth_challenge(c->ca) < 0) {
                    in_free(j, c, 1);
                    return -1;
                }
                loom_auth_msg_encode(chal, OOB_CHAL_MAGIC, OOB_VERSION,
                                     j->key.set ? LOOM_AUTH_FLAG_KEYED : 0, c->ca);
                if (send_small(c->fd, chal, sizeof chal) < 0) {
                    in_free(j, c, 1);
                    return -1;
                }
                c->state = IN_HELLO;
                c->got = 0;
                continue;
            }
            if ((magic == LOOM_OOB_KIND_TCP || magic == LOOM_OOB_KIND_BOOT ||
                 magic == LOOM_OOB_KIND_VERBS || magic == LOOM_OOB_KIND_OFI) &&
                loom_get_le16(c->buf + 4) == OOB_VERSION) {
                struct oob_fd *f = malloc(sizeof *f);
                if (!f) {
                    in_free(j, c, 1);
                    return -1;
                }
                *f = (struct oob_fd){.ns = ns, .kind = magic, .fd = c->fd};
                memcpy(f->from, c->from, sizeof f->from);
                if (j->fds_tail)
                    j->fds_tail->next = f;
                else
                    j->fds = f;
                j->fds_tail = f;
                in_free(j, c, 0);
                notify_ns(j, ns);
                return -1;
            }
            LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d dropped a connection from %s: not a "
                      "Loom socket (preamble 0x%08x)", j->rank, c->from, (unsigned)magic);
            in_free(j, c, 1);
            return -1;
        }
        if (c->state == IN_HELLO) {
            int rc = in_check_hello(j, c);
            if (rc < 0) {
                in_free(j, c, 1);
                return -1;
            }
            if (rc == 0)
                c->state = IN_HOLD;
            continue;
        }
        if (!c->rx) {
            uint8_t kind = c->hdr[0];
            uint32_t tag = loom_get_le32(c->hdr + 4), len = loom_get_le32(c->hdr + 8);
            if ((kind != OOB_KIND_MSG && kind != OOB_KIND_GET) || len > LOOM_OOB_MSG_MAX) {
                LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d: rank %d sent a bad message header "
                          "(kind %u, %u bytes): dropped", j->rank, c->peer, kind, len);
                in_free(j, c, 1);
                return -1;
            }
            c->rx = msg_new(loom_get_le64(c->hdr + 16), c->peer, tag, kind, NULL, len);
            if (!c->rx) {
                in_free(j, c, 1);
                return -1;
            }
            c->got = 0;
            if (len)
                continue;
        }
        c->got = 0;
        in_deliver(j, c);
    }
}

static void accept_new(struct oob_job *j)
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
            LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d: too many silent connections; "
                      "dropped one from %s", j->rank, old->from);
            in_free(j, old, 1);
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
        loom_net_format((struct sockaddr *)&ss, c->from, sizeof c->from);
        c->next = j->ins;
        j->ins = c;
        j->nins++;
    }
}

/* ---- outgoing sockets ------------------------------------------------------ */

static void out_reset(struct oob_conn *c, int err, double now)
{
    if (c->state == OUT_READY)
        c->first_try = now; /* a working link broke: a fresh allowance */
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->last_errno = err;
    c->state = c->q ? OUT_WAIT : OUT_IDLE;
    c->next_try = now + c->backoff;
    c->backoff = c->backoff * 2 > OOB_BACKOFF_MAX ? OOB_BACKOFF_MAX : c->backoff * 2;
}

/* Record that job rank peer cannot be reached (lock held). */
static void set_peer_error(struct oob_job *j, int peer, loom_result_t res, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));
static void set_peer_error(struct oob_job *j, int peer, loom_result_t res, const char *fmt,
                           ...)
{
    if (j->peer_err[peer] < 0)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    j->peer_err[peer] = res;
    free(j->peer_msg[peer]);
    j->peer_msg[peer] = strdup(msg);
    LOOM_INFO(LOOM_SUB_BOOT, "oob: rank %d: %s", j->rank, msg);
    notify_all(j);
}

static void out_drop_queue(struct oob_conn *c)
{
    while (c->q) {
        struct oob_msg *m = c->q;
        c->q = m->next;
        free(m);
    }
    c->qtail = NULL;
}

static void out_give_up(struct oob_job *j, struct oob_conn *c, int refused)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char a[LOOM_NET_ADDRSTR_MAX] = "?";
    entry_addr(j, c->peer, &ss, &sl);
    if (sl)
        loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    if (refused)
        set_peer_error(j, c->peer, LOOM_ERROR_REMOTE,
                       "rank %d is gone: its port %s refused a connection (the process "
                       "exited or crashed)", c->peer, a);
    else
        set_peer_error(j, c->peer, LOOM_ERROR_TIMEOUT,
                       "rank %d could not be reached at %s within %g s: %s", c->peer, a,
                       j->connect_timeout,
                       c->last_errno ? strerror(c->last_errno) : "no answer");
    out_drop_queue(c);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = OUT_IDLE;
}

static void out_start(struct oob_job *j, struct oob_conn *c, double now)
{
    if (!j->have[c->peer] || j->job_id == 0) {
        c->next_try = now + 0.01; /* not yet known where it listens, or who we are */
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    entry_addr(j, c->peer, &ss, &sl);
    c->fd = sl ? socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
    if (c->fd < 0) {
        out_reset(c, sl ? errno : EINVAL, now);
        return;
    }
    loom_net_set_nodelay(c->fd);
    c->sent = c->got = 0;
    if (connect(c->fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS ||
        errno == EINTR)
        c->state = OUT_CONNECTING;
    else
        out_reset(c, errno, now);
}

/* Bytes of the current outgoing message: header then data. */
static int out_write_msg(struct oob_job *j, struct oob_conn *c)
{
    while (c->q) {
        struct oob_msg *m = c->q;
        if (c->sent == 0) {
            memset(c->hdr, 0, sizeof c->hdr);
            c->hdr[0] = m->kind;
            loom_put_le32(c->hdr + 4, m->tag);
            loom_put_le32(c->hdr + 8, (uint32_t)m->len);
            loom_put_le64(c->hdr + 16, m->ns);
        }
        struct iovec iov[2];
        int n = 0;
        if (c->sent < OOB_HDR_LEN)
            iov[n++] = (struct iovec){c->hdr + c->sent, OOB_HDR_LEN - c->sent};
        size_t doff = c->sent > OOB_HDR_LEN ? c->sent - OOB_HDR_LEN : 0;
        if (m->len > doff)
            iov[n++] = (struct iovec){m->data + doff, m->len - doff};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = n ? sendmsg(c->fd, &mh, MSG_NOSIGNAL) : 0;
        if (n && w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->sent += (size_t)w;
        j->sent += (uint64_t)w;
        if (c->sent < OOB_HDR_LEN + m->len)
            return 0;
        c->q = m->next;
        if (!c->q)
            c->qtail = NULL;
        free(m);
        c->sent = 0;
        c->last_active = loom_now();
    }
    return 0;
}

/* Move c along after a poll event (lock held). */
static void out_io(struct oob_job *j, struct oob_conn *c, short revents, double now)
{
    if (c->state == OUT_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        if (err) {
            out_reset(c, err, now);
            return;
        }
        uint8_t pre[LOOM_OOB_PREAMBLE_LEN] = {0};
        loom_put_le32(pre, OOB_MAGIC);
        loom_put_le16(pre + 4, OOB_VERSION);
        if (send_small(c->fd, pre, sizeof pre) < 0) {
            out_reset(c, errno, now);
            return;
        }
        j->sent += sizeof pre;
        c->state = OUT_CHAL;
        c->got = 0;
        return;
    }
    if (c->state == OUT_CHAL || c->state == OUT_PROOF) {
        ssize_t n = recv(c->fd, c->buf + c->got, LOOM_AUTH_MSG_LEN - c->got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            out_reset(c, n == 0 ? ECONNRESET : errno, now);
            return;
        }
        c->got += (size_t)n;
        j->recvd += (uint64_t)n;
        if (c->got < LOOM_AUTH_MSG_LEN)
            return;
        struct loom_auth_msg am;
        loom_auth_msg_decode(c->buf, &am);
        if (c->state == OUT_CHAL) {
            if (am.magic != OOB_CHAL_MAGIC || am.version != OOB_VERSION) {
                set_peer_error(j, c->peer, LOOM_ERROR_PROTOCOL, "rank %d's port did "
                               "not answer as a Loom rank (magic 0x%08x)", c->peer,
                               (unsigned)am.magic);
                out_give_up(j, c, 0);
                return;
            }
            memcpy(c->ca, am.body, sizeof c->ca);
            uint8_t *h = c->buf;
            memset(h, 0, OOB_HELLO_LEN);
            loom_put_le32(h, OOB_HELLO_MAGIC);
            loom_put_le16(h + 4, OOB_VERSION);
            loom_put_le16(h + 6, j->key.set ? LOOM_AUTH_FLAG_KEYED : 0);
            loom_put_le64(h + 8, j->job_id);
            loom_put_le32(h + 16, (uint32_t)j->rank);
            loom_put_le32(h + 20, (uint32_t)c->peer);
            loom_put_le32(h + 24, (uint32_t)j->nranks);
            uint8_t *cc = h + OOB_HELLO_LEN, *mac = cc + LOOM_AUTH_CHAL_LEN;
            memset(mac, 0, LOOM_AUTH_MAC_LEN);
            if (loom_auth_challenge(cc) < 0 ||
                (j->key.set && loom_auth_mac(&j->key, OOB_CTX, 'C', c->ca, cc, h,
                                             OOB_HELLO_LEN, mac) < 0)) {
                out_reset(c, EIO, now);
                return;
            }
            memcpy(c->cc, cc, sizeof c->cc);
            c->state = OUT_HELLO;
            c->sent = 0;
            revents = POLLOUT;
        } else {
            uint8_t hello[OOB_HELLO_LEN];
            memset(hello, 0, sizeof hello);
            loom_put_le32(hello, OOB_HELLO_MAGIC);
            loom_put_le16(hello + 4, OOB_VERSION);
            loom_put_le16(hello + 6, j->key.set ? LOOM_AUTH_FLAG_KEYED : 0);
            loom_put_le64(hello + 8, j->job_id);
            loom_put_le32(hello + 16, (uint32_t)j->rank);
            loom_put_le32(hello + 20, (uint32_t)c->peer);
            loom_put_le32(hello + 24, (uint32_t)j->nranks);
            if (am.magic != OOB_PROOF_MAGIC ||
                (j->key.set && !loom_auth_verify(&j->key, OOB_CTX, 'A', c->cc, c->ca,
                                                 hello, sizeof hello, am.body))) {
                set_peer_error(j, c->peer, LOOM_ERROR_MISMATCH, "rank %d did not prove "
                               "the job key (LOOM_JOB_KEY differs)", c->peer);
                out_give_up(j, c, 0);
                return;
            }
            c->state = OUT_READY;
            c->sent = 0;
            c->backoff = OOB_BACKOFF_MIN;
            c->last_active = now;
            revents = POLLOUT;
        }
    }
    if (c->state == OUT_HELLO && (revents & POLLOUT)) {
        ssize_t n = send(c->fd, c->buf + c->sent, OOB_SIGNED_LEN - c->sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            out_reset(c, errno, now);
            return;
        }
        if (n > 0) {
            c->sent += (size_t)n;
            j->sent += (uint64_t)n;
        }
        if (c->sent == OOB_SIGNED_LEN) {
            c->state = OUT_PROOF;
            c->got = 0;
        }
        return;
    }
    if (c->state == OUT_READY) {
        if (revents & (POLLHUP | POLLERR)) {
            out_reset(c, ECONNRESET, now);
            return;
        }
        if (out_write_msg(j, c) < 0)
            out_reset(c, errno, now);
    }
}

/* ---- the service thread ------------------------------------------------------ */

static void *oob_main(void *arg)
{
    struct oob_job *j = arg;
    loom_log_set_rank(j->rank);
    size_t cap = 0;
    struct pollfd *pfds = NULL;
    struct oob_conn **owners = NULL;
    pthread_mutex_lock(&j->lock);
    while (!j->stop) {
        double now = loom_now(), wake_at = now + 0.5;
        size_t need = 2 + (size_t)j->nins + (size_t)j->nranks;
        if (need > cap) {
            struct pollfd *np = realloc(pfds, need * sizeof *np);
            struct oob_conn **no = realloc(owners, need * sizeof *no);
            if (np)
                pfds = np;
            if (no)
                owners = no;
            if (!np || !no) {
                pthread_mutex_unlock(&j->lock);
                usleep(10000);
                pthread_mutex_lock(&j->lock);
                continue;
            }
            cap = need;
        }
        size_t n = 0;
        pfds[n] = (struct pollfd){.fd = j->kick, .events = POLLIN};
        owners[n++] = NULL;
        pfds[n] = (struct pollfd){.fd = j->lfd, .events = POLLIN};
        owners[n++] = NULL;
        for (struct oob_conn *c = j->ins; c; c = c->next) {
            if (c->state == IN_HOLD)
                continue;
            pfds[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            owners[n++] = c;
            if (c->state != IN_MSGS && c->deadline < wake_at)
                wake_at = c->deadline;
        }
        for (int r = 0; r < j->nranks; r++) {
            struct oob_conn *c = j->outs[r];
            if (!c || c->state == OUT_IDLE)
                continue;
            if (c->state == OUT_WAIT) {
                if (c->next_try < wake_at)
                    wake_at = c->next_try;
                continue;
            }
            short ev = c->state == OUT_CONNECTING || c->state == OUT_HELLO ||
                               (c->state == OUT_READY && c->q)
                           ? POLLOUT
                           : POLLIN;
            pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
            owners[n++] = c;
            if (c->state == OUT_READY && !c->q && c->last_active + OOB_IDLE_CLOSE < wake_at)
                wake_at = c->last_active + OOB_IDLE_CLOSE;
        }
        pthread_mutex_unlock(&j->lock);
        int ms = (int)((wake_at - now) * 1000.0) + 1;
        int rc = poll(pfds, (nfds_t)n, ms < 0 ? 0 : ms);
        pthread_mutex_lock(&j->lock);
        if (rc < 0 && errno != EINTR)
            break;
        now = loom_now();
        if (pfds[0].revents & POLLIN) {
            uint64_t v;
            if (read(j->kick, &v, sizeof v) < 0) {
                /* nothing to read: another wake-up took it */
            }
        }
        for (size_t i = 2; i < n && rc > 0; i++) {
            struct oob_conn *c = owners[i];
            if (!pfds[i].revents)
                continue;
            if (c->state <= IN_MSGS)
                in_read(j, c);
            else
                out_io(j, c, pfds[i].revents, now);
        }
        if (rc > 0 && (pfds[1].revents & POLLIN))
            accept_new(j);
        /* handshakes that never finished, retries, idle sockets */
        for (struct oob_conn *c = j->ins, *next; c; c = next) {
            next = c->next;
            if (c->state != IN_MSGS && c->state != IN_HOLD && now > c->deadline) {
                LOOM_WARN(LOOM_SUB_BOOT, "oob: rank %d dropped a silent connection "
                          "from %s", j->rank, c->from);
                in_free(j, c, 1);
            }
        }
        for (int r = 0; r < j->nranks; r++) {
            struct oob_conn *c = j->outs[r];
            if (!c)
                continue;
            if (c->state == OUT_WAIT || (c->state > OUT_WAIT && c->state < OUT_READY)) {
                if (j->job_id && now > c->first_try + j->connect_timeout) {
                    out_give_up(j, c, 0);
                    continue;
                }
                /* once every rank listens, a refusal means the process is
                 * gone: no point in retrying */
                if (c->state == OUT_WAIT && c->last_errno == ECONNREFUSED && j->complete) {
                    out_give_up(j, c, 1);
                    continue;
                }
            }
            if (c->state == OUT_WAIT && now >= c->next_try)
                out_start(j, c, now);
            else if (c->state == OUT_READY && !c->q && now > c->last_active + OOB_IDLE_CLOSE) {
                close(c->fd);
                c->fd = -1;
                c->state = OUT_IDLE;
            }
        }
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->lock);
    free(pfds);
    free(owners);
    return NULL;
}

/* ---- the job and its views ------------------------------------------------------ */

static void job_free(struct oob_job *j)
{
    if (j->thread_started) {
        pthread_mutex_lock(&j->lock);
        j->stop = 1;
        kick(j);
        pthread_mutex_unlock(&j->lock);
        pthread_join(j->thread, NULL);
    }
    while (j->ins)
        in_free(j, j->ins, 1);
    for (int r = 0; j->outs && r < j->nranks; r++) {
        struct oob_conn *c = j->outs[r];
        if (!c)
            continue;
        if (c->fd >= 0)
            close(c->fd);
        while (c->q) {
            struct oob_msg *m = c->q;
            c->q = m->next;
            free(m);
        }
        free(c);
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

static loom_result_t job_new(int rank, int nranks, struct oob_job **out, char *err,
                             size_t errlen)
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
static loom_result_t job_begin(struct oob_job *j, struct loom_oob **out, uint8_t *entry,
                               char *err, size_t errlen)
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
    if (pthread_create(&j->thread, NULL, oob_main, j) != 0) {
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
                            struct loom_oob **out, uint8_t *entry, char *err,
                            size_t errlen)
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

loom_result_t loom_oob_open_fd(int rank, int nranks, int lfd, struct loom_oob **out,
                               uint8_t *entry, char *err, size_t errlen)
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
    /* hellos that came before the id was known */
    for (struct oob_conn *c = j->ins, *next; c; c = next) {
        next = c->next;
        if (c->state == IN_HOLD) {
            c->state = IN_HELLO;
            if (in_check_hello(j, c) < 0)
                in_free(j, c, 1);
        }
    }
    kick(j);
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
    kick(j);
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
    kick(j);
    pthread_mutex_unlock(&j->lock);
    return LOOM_SUCCESS;
}

const uint8_t *loom_oob_table(const struct loom_oob *v)
{
    return v->job->complete ? v->job->table : NULL;
}

uint64_t loom_oob_host(const struct loom_oob *v, int r)
{
    return loom_get_le64(v->job->table + (size_t)job_rank(v, r) * LOOM_OOB_ENTRY_LEN +
                         LOOM_OOB_ENTRY_HOST);
}

uint32_t loom_oob_flags(const struct loom_oob *v, int r)
{
    return loom_get_le32(v->job->table + (size_t)job_rank(v, r) * LOOM_OOB_ENTRY_LEN +
                         LOOM_OOB_ENTRY_FLAGS);
}

loom_result_t loom_oob_view(struct loom_oob *parent, const int *ranks, int n, int me,
                            uint64_t ns, struct loom_oob **out)
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
        map[i] = job_rank(parent, ranks[i]);
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
    notify_all(j); /* waits on the views' notifications learn it */
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

/* ---- messages ---------------------------------------------------------------- */

static loom_result_t view_error(struct loom_oob *v, int peer)
{
    struct oob_job *j = v->job;
    if (peer >= 0 && j->peer_err[job_rank(v, peer)] < 0) {
        snprintf(v->err, sizeof v->err, "%s", j->peer_msg[job_rank(v, peer)]);
        return j->peer_err[job_rank(v, peer)];
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
    struct oob_msg *m = msg_new(v->ns, j->rank, tag, OOB_KIND_MSG, buf, len);
    if (!m)
        return LOOM_ERROR_NO_MEMORY;
    pthread_mutex_lock(&j->lock);
    loom_result_t res = view_error(v, peer);
    if (res == LOOM_SUCCESS)
        res = enqueue(j, job_rank(v, peer), m);
    else
        free(m);
    pthread_mutex_unlock(&j->lock);
    return res;
}

loom_result_t loom_oob_lookup(struct loom_oob *v, int peer, uint32_t tag)
{
    if (peer < 0 || peer >= v->nranks)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct oob_job *j = v->job;
    struct oob_msg *m = msg_new(v->ns, j->rank, tag, OOB_KIND_GET, NULL, 0);
    if (!m)
        return LOOM_ERROR_NO_MEMORY;
    pthread_mutex_lock(&j->lock);
    loom_result_t res = view_error(v, peer);
    if (res == LOOM_SUCCESS)
        res = enqueue(j, job_rank(v, peer), m);
    else
        free(m);
    pthread_mutex_unlock(&j->lock);
    return res;
}

/* Take a matching message from the inbox (lock held): 1 taken, 0 none. */
static int take(struct loom_oob *v, uint32_t tag, int peer, int *from, void **buf,
                size_t *len)
{
    struct oob_job *j = v->job;
    int want = peer >= 0 ? job_rank(v, peer) : -1;
    struct oob_msg *prev = NULL;
    for (struct oob_msg *m = j->inbox; m; prev = m, m = m->next) {
        if (m->ns != v->ns || m->tag != tag || (want >= 0 && m->from != want) ||
            view_rank(v, m->from) < 0)
            continue;
        if (prev)
            prev->next = m->next;
        else
            j->inbox = m->next;
        if (j->inbox_tail == m)
            j->inbox_tail = prev;
        void *data = malloc(m->len ? m->len : 1);
        if (!data) {
            free(m);
            return LOOM_ERROR_NO_MEMORY;
        }
        memcpy(data, m->data, m->len);
        if (from)
            *from = view_rank(v, m->from);
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
    double until = loom_now() + timeout;
    pthread_mutex_lock(&j->lock);
    for (;;) {
        int rc = take(v, tag, peer, from, buf, len);
        if (rc == 1) {
            pthread_mutex_unlock(&j->lock);
            return LOOM_SUCCESS;
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
    struct oob_pub *p = find_pub(j, v->ns, tag);
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
            answer_get(j, g->ns, g->tag, g->from);
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
    memset(out, 0, LOOM_OOB_PREAMBLE_LEN);
    loom_put_le32(out, kind);
    loom_put_le16(out + 4, OOB_VERSION);
    loom_put_le64(out + 8, v->ns);
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
    int jr = job_rank(v, r);
    pthread_mutex_lock(&j->lock);
    int have = j->have[jr];
    if (have)
        entry_addr(j, jr, ss, sl);
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
    int jr = job_rank(v, peer);
    loom_result_t res = j->peer_err[jr];
    if (res < 0 && why)
        snprintf(why, len, "%s", j->peer_msg[jr] ? j->peer_msg[jr] : "");
    pthread_mutex_unlock(&j->lock);
    return res;
}
