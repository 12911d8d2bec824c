/* oob_priv.h - the out-of-band service's state, shared by its files:
 *   oob_wire.c     the codec (pure)
 *   oob_job.c      a job's life and its views
 *   oob_service.c  the service thread's loop
 *   oob_in.c       sockets peers open to this rank: admission, messages in,
 *                  lookups answered
 *   oob_out.c      sockets this rank opens: connect, retry, messages out
 *   oob.c          the views' calls: messages, blobs, sockets for transports
 * Everything under a job's lock unless said otherwise. */
#ifndef LOOM_OOB_PRIV_H
#define LOOM_OOB_PRIV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loom.h"
#include "auth.h"
#include "bootstrap/oob.h"
#include "bootstrap/oob_wire.h"
#include "net/handshake.h"
#include "net/net.h"

#define OOB_IDLE_CLOSE 1.0   /* seconds an idle outgoing socket stays */
#define OOB_IN_DEADLINE 10.0 /* seconds a new socket has to say who it is */
#define OOB_INS_MAX 256
#define OOB_BACKOFF_MIN 0.01
#define OOB_BACKOFF_MAX 0.5
#define OOB_RECV_PING 1.0 /* seconds between pings of the rank a receive waits on */

struct oob_msg {
    struct oob_msg *next;
    uint64_t ns;
    int from; /* job rank                            */
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

struct oob_get { /* a lookup waiting for its blob       */
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

/* A socket's states: incoming ones first (loom_oob_in_*), then outgoing. */
enum { IN_PREAMBLE, IN_HS, IN_MSGS, OUT_IDLE, OUT_WAIT, OUT_CONNECTING, OUT_HS, OUT_READY };

struct oob_conn {
    struct oob_conn *next; /* ins list                             */
    int fd;
    int state;
    int peer;        /* job rank; -1 until a hello says     */
    double deadline; /* ins: to finish the handshake        */
    double next_try, backoff, first_try, last_active;
    int last_errno;
    size_t got, sent;
    struct oob_job *job;
    struct loom_hs hs; /* IN_HS, OUT_HS                        */
    uint8_t pre[LOOM_OOB_PREAMBLE_LEN];
    uint8_t hdr[LOOM_OOB_HDR_LEN];
    struct oob_msg *rx;        /* ins: the message being read          */
    struct oob_msg *q, *qtail; /* outs: messages to send               */
    char from[LOOM_NET_ADDRSTR_MAX];
};

struct oob_job;

struct loom_oob { /* a view                               */
    struct oob_job *job;
    struct loom_oob *next;
    uint64_t ns;
    int rank, nranks;
    int *map;  /* view rank -> job rank (NULL: same)   */
    int *rmap; /* job rank -> view rank or -1          */
    void (*notify)(void *ctx);
    void *notify_ctx;
    uint32_t recv_tag; /* messages of this tag go to recv_fn  */
    void (*recv_fn)(void *ctx, int from, const void *buf, size_t len);
    void *recv_ctx;
    char err[512];
};

struct oob_job {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int rank, nranks;
    uint64_t job_id;
    uint8_t *table; /* nranks entries                       */
    uint8_t *have;  /* entry r is known                     */
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
    struct oob_conn **outs; /* per job rank, allocated on use       */
    struct oob_conn *ins;
    int nins;
    struct loom_auth_key key;
    double connect_timeout;
    loom_result_t err_res;
    char err[512];
    loom_result_t *peer_err; /* per job rank: it cannot be reached   */
    char **peer_msg;
    uint64_t sent, recvd;
};

/* The handshake's protocol for OOB sockets (oob_in.c: its payload check). */
extern const struct loom_hs_proto loom_oob_hs;

static inline int loom_oob_job_rank(const struct loom_oob *v, int r)
{
    return v->map ? v->map[r] : r;
}

static inline int loom_oob_view_rank(const struct loom_oob *v, int jr)
{
    return v->rmap ? v->rmap[jr] : jr;
}

/* oob_job.c */
void loom_oob_kick(struct oob_job *j);
/* Notify the views of namespace ns (or all) and wake waiters. */
void loom_oob_notify_ns(struct oob_job *j, uint64_t ns);
void loom_oob_notify_all(struct oob_job *j);
struct oob_msg *loom_oob_msg_new(uint64_t ns, int from, uint32_t tag, uint8_t kind,
                                 const void *data, size_t len);
/* Rank r's OOB address from the table (*sl 0 when unusable). */
void loom_oob_entry_addr(const struct oob_job *j, int r, struct sockaddr_storage *ss,
                         socklen_t *sl);

/* oob_service.c: the thread. */
void *loom_oob_main(void *arg);

/* oob_in.c */
void loom_oob_accept_new(struct oob_job *j);
/* Read what is there; -1 when c was freed. */
int loom_oob_in_read(struct oob_job *j, struct oob_conn *c);
void loom_oob_in_free(struct oob_job *j, struct oob_conn *c, int close_fd);
/* Hellos held until the job id was known: decide them now. */
void loom_oob_in_resume(struct oob_job *j);
/* Drop sockets that did not finish their handshake in time. */
void loom_oob_in_expire(struct oob_job *j, double now);
struct oob_pub *loom_oob_find_pub(struct oob_job *j, uint64_t ns, uint32_t tag);
/* A lookup from job rank from (may drop the lock around a handler). */
void loom_oob_answer_get(struct oob_job *j, uint64_t ns, uint32_t tag, int from);

/* oob_out.c */
/* Queue m for job rank peer. */
loom_result_t loom_oob_enqueue(struct oob_job *j, int peer, struct oob_msg *m);
/* Move c along after a poll event. */
void loom_oob_out_io(struct oob_job *j, struct oob_conn *c, short revents, double now);
/* Retries, give-ups and idle closes due at now. */
void loom_oob_out_tick(struct oob_job *j, struct oob_conn *c, double now);
/* What c waits for in poll (0: nothing), and when it next needs a tick. */
short loom_oob_out_events(const struct oob_conn *c, double *wake_at);
void loom_oob_out_free(struct oob_conn *c);

#endif
