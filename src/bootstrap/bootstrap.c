/* bootstrap.c - rendezvous through rank 0 (see bootstrap.h).
 *
 * The wire and the checks on what a peer sends are in boot_wire.h: every
 * connection opens with the handshake of every Loom socket (net/handshake.h):
 * rank 0 challenges, the rank's hello is signed with the job key, rank 0
 * checks the key before it looks at the hello and proves the key back; it
 * answers with all endpoints once everyone is in. Every length read is bounded before use; a
 * connection that is not a rank of this job is logged and dropped, and the
 * rendezvous goes on. */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/boot_io.h"
#include "bootstrap/boot_wire.h"
#include "auth.h"
#include "net/net.h"
#include "bootstrap/oob.h"

#define BOOT_ANSWER_MAGIC LOOM_BOOT_ANSWER_MAGIC
#define BOOT_VERSION LOOM_BOOT_VERSION
#define BOOT_ANSWER_LEN LOOM_BOOT_ANSWER_LEN
#define BOOT_MSG_MAX 1024
#define BOOT_NRANKS_MAX (1 << 20)
#define BOOT_STRANGERS_MAX 64
#define BOOT_BACKOFF_MIN 0.01
#define BOOT_BACKOFF_MAX 0.5
#define BOOT_REPORT_FIRST 3.0   /* seconds before rank 0 names missing ranks */
#define BOOT_REPORT_EVERY 5.0   /* and again every so often                  */
#define BOOT_LINGER 2.0         /* refusing latecomers after a fatal refusal */
/* The table spreads down a tree of this fan-out: rank 0 hands it to this
 * many ranks, each of them to as many more (8: 512 ranks in 3 levels). */
#define BOOT_FANOUT 8

/* Bytes this rank moved on bootstrap sockets (the calling thread's job). */
static __thread struct loom_boot_stats boot_count;

static const char *describe(const struct loom_boot_params *p, int rank,
                            char *buf, size_t len)
{
    const char *d = p->describe ? p->describe(p->describe_ctx, rank) : NULL;
    if (d)
        snprintf(buf, len, "%s", d);
    else
        snprintf(buf, len, "rank %d", rank);
    return buf;
}

static uint64_t new_comm_id(void)
{
    uint64_t id = 0;
    while (id == 0) {
        if (getrandom(&id, sizeof id, 0) != sizeof id)
            id = loom_fnv1a(LOOM_FNV_INIT, &(uint64_t){loom_now_ns()}, 8) ^
                 (uint64_t)getpid();
    }
    return id;
}

/* ------------------------------------------------------------------ root */

struct boot_conn {
    int fd;
    char from[LOOM_NET_ADDRSTR_MAX];
    struct loom_hs *hs; /* until its hello is proved and taken */
};

static void conn_hs_end(struct boot_conn *c)
{
    if (!c->hs)
        return;
    loom_hs_free(c->hs);
    free(c->hs);
    c->hs = NULL;
}

/* Best effort: tell a refused rank why (why < 0 is sent as its status),
 * then close. */
static void refuse(int fd, loom_result_t why, const char *msg, double deadline)
{
    size_t mlen = strlen(msg);
    if (mlen > BOOT_MSG_MAX)
        mlen = BOOT_MSG_MAX;
    uint8_t hdr[BOOT_ANSWER_LEN + 4];
    boot_count.sent += sizeof hdr + mlen;
    loom_put_le32(hdr, BOOT_ANSWER_MAGIC);
    loom_put_le16(hdr + 4, BOOT_VERSION);
    loom_put_le16(hdr + 6, (uint16_t)-why);
    loom_put_le32(hdr + 8, (uint32_t)mlen);
    double d = loom_now() + 1.0 < deadline ? loom_now() + 1.0 : deadline;
    if (loom_boot_write_all(fd, hdr, sizeof hdr, d, -1) == LOOM_SUCCESS)
        loom_boot_write_all(fd, msg, mlen, d, -1);
    close(fd);
}

/* Rank r's table has reached its subtree: wait for its children's word
 * (ranks 8r+1 .. 8r+8), then tell its parent. When rank 0 returns, every
 * rank holds the table, so no rank can later be stranded by one that left. */
static loom_result_t tree_ack(const struct loom_boot_params *p, struct loom_oob *oob,
                              double deadline, char *err, size_t errlen)
{
    for (int c = BOOT_FANOUT * p->rank + 1;
         c <= BOOT_FANOUT * p->rank + BOOT_FANOUT && c < p->nranks; c++) {
        void *buf = NULL;
        double left = deadline - loom_now();
        loom_result_t res = loom_oob_recv(oob, LOOM_OOB_TAG_TABLE_ACK, c,
                                          left > 1 ? left : 1, NULL, &buf, NULL);
        free(buf);
        if (res < 0) {
            char d[256];
            snprintf(err, errlen, "bootstrap: rank %d did not hear that %s got the "
                     "job's table: %s", p->rank, describe(p, c, d, sizeof d),
                     loom_oob_error(oob));
            return res;
        }
    }
    if (p->rank == 0)
        return LOOM_SUCCESS;
    return loom_oob_send(oob, (p->rank - 1) / BOOT_FANOUT, LOOM_OOB_TAG_TABLE_ACK, "", 0);
}

struct root_state {
    const struct loom_boot_params *p;
    int *rank_fd;           /* accepted fd of each rank, -1 until joined */
    int joined;
    uint8_t *table;         /* nranks entries                            */
    char *err;
    size_t errlen;
    const struct loom_auth_key *key;
    loom_result_t fatal;    /* a claimed rank of this job is refused     */
    char refused[BOOT_MSG_MAX]; /* why                                   */
};

/* A hello has fully arrived on c: take it or refuse it. Returns 1 when the
 * fd now belongs to a rank, 0 when it was closed. A rank of this job that
 * loaded another table or size makes the job fail (st->fatal). */
static int root_take(struct root_state *st, struct boot_conn *c, double deadline)
{
    const struct loom_boot_params *p = st->p;
    size_t len = 0;
    const uint8_t *payload = loom_hs_payload(c->hs, &len);
    struct loom_boot_hello h;
    char msg[BOOT_MSG_MAX], d[256];
    loom_result_t why = LOOM_ERROR_INVALID_ARGUMENT;
    int rank = -1;
    uint32_t nranks = 0;
    uint64_t hash = 0;
    size_t ep_len = 0;
    if (loom_boot_hello_decode(payload, len, &h, msg, sizeof msg) == 0) {
        rank = (int)h.rank;
        nranks = h.nranks;
        hash = h.table_hash;
        ep_len = h.entry_len;
    } else {
        why = LOOM_ERROR_PROTOCOL;
    }
    if (why == LOOM_ERROR_PROTOCOL) {
        /* msg says what was wrong */
    } else if (h.rank >= (uint32_t)p->nranks || rank == 0) {
        snprintf(msg, sizeof msg,
                 "a process at %s claims rank %u, which is not in "
                 "1..%d (rank 0 has %d ranks)",
                 c->from, h.rank, p->nranks - 1, p->nranks);
        why = LOOM_ERROR_MISMATCH;
    } else if (nranks != (uint32_t)p->nranks) {
        snprintf(msg, sizeof msg, "%s was started with %u ranks, rank 0 has %d",
                 describe(p, rank, d, sizeof d), nranks, p->nranks);
        why = LOOM_ERROR_MISMATCH;
    } else if (hash != p->table_hash) {
        snprintf(msg, sizeof msg,
                 "%s loaded a different rank table (hash 0x%016llx, rank 0 has "
                 "0x%016llx)",
                 describe(p, rank, d, sizeof d), (unsigned long long)hash,
                 (unsigned long long)p->table_hash);
        why = LOOM_ERROR_MISMATCH;
    } else if (ep_len != LOOM_OOB_ENTRY_LEN) {
        snprintf(msg, sizeof msg, "%s sent a %zu-byte entry, expected %d",
                 describe(p, rank, d, sizeof d), ep_len, LOOM_OOB_ENTRY_LEN);
        why = LOOM_ERROR_PROTOCOL;
    } else if (st->rank_fd[rank] >= 0) {
        snprintf(msg, sizeof msg, "%s joined twice (again from %s)",
                 describe(p, rank, d, sizeof d), c->from);
        why = LOOM_ERROR_MISMATCH;
    } else {
        memcpy(st->table + (size_t)rank * LOOM_OOB_ENTRY_LEN, h.entry, LOOM_OOB_ENTRY_LEN);
        st->rank_fd[rank] = c->fd;
        st->joined++;
        LOOM_TRACE(LOOM_SUB_BOOT, "bootstrap: rank %d joined from %s (%d of %d)",
                   rank, c->from, st->joined + 1, p->nranks);
        return 1;
    }
    LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: rank 0 refused a connection from %s: %s",
              c->from, msg);
    if (why == LOOM_ERROR_MISMATCH && st->fatal == LOOM_SUCCESS) {
        /* a rank of this job disagrees: nobody can go on, tell everyone */
        snprintf(st->refused, sizeof st->refused, "%s", msg);
        st->fatal = why;
    }
    refuse(c->fd, why, msg, deadline);
    return 0;
}

/* Step c's handshake. Returns 1 taken, 0 still waiting, -1 closed. */
static int root_read(struct root_state *st, struct boot_conn *c, double deadline)
{
    size_t sent = c->hs->sent, received = c->hs->received;
    int rc = loom_hs_step(c->hs);
    boot_count.sent += c->hs->sent - sent;
    boot_count.received += c->hs->received - received;
    if (rc == LOOM_HS_AGAIN)
        return 0;
    if (rc < 0) {
        /* the key before the hello: nothing it claims is trusted until then */
        LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped a connection from %s: %s", c->from,
                  c->hs->err);
        conn_hs_end(c);
        close(c->fd);
        return -1;
    }
    int taken = root_take(st, c, deadline);
    conn_hs_end(c);
    return taken ? 1 : -1;
}

/* "rank 2 (server ...), rank 3 (...) and 5 more" into buf. */
static size_t root_list_missing(const struct root_state *st, char *buf, size_t len)
{
    const struct loom_boot_params *p = st->p;
    size_t off = 0;
    int listed = 0;
    buf[0] = '\0';
    for (int r = 1; r < p->nranks && off + 32 < len; r++) {
        if (st->rank_fd[r] >= 0)
            continue;
        if (listed == 8) {
            off += (size_t)snprintf(buf + off, len - off, " and %d more",
                                    p->nranks - 1 - st->joined - 8);
            break;
        }
        char d[256];
        off += (size_t)snprintf(buf + off, len - off, "%s%s", listed ? ", " : "",
                                describe(p, r, d, sizeof d));
        listed++;
    }
    return off < len ? off : len - 1;
}

static void root_missing(struct root_state *st)
{
    size_t off = root_list_missing(st, st->err, st->errlen);
    if (off < st->errlen)
        off += (size_t)snprintf(st->err + off, st->errlen - off,
                                " did not join within %g s", st->p->timeout);
}

/* Each rank's answer: the communicator id, its parent in the tree that
 * spreads the table, and where the parent listens. O(1) bytes a rank. */
static loom_result_t root_send_answers(struct root_state *st, uint64_t comm_id,
                                       double deadline, int abort_fd)
{
    const struct loom_boot_params *p = st->p;
    uint8_t buf[BOOT_ANSWER_LEN + 16 + LOOM_OOB_ENTRY_LEN];
    loom_result_t res = LOOM_SUCCESS;
    for (int r = 1; r < p->nranks && res == LOOM_SUCCESS; r++) {
        int parent = (r - 1) / BOOT_FANOUT;
        loom_put_le32(buf, BOOT_ANSWER_MAGIC);
        loom_put_le16(buf + 4, BOOT_VERSION);
        loom_put_le16(buf + 6, 0);
        loom_put_le64(buf + 8, comm_id);
        loom_put_le32(buf + 16, (uint32_t)p->nranks);
        loom_put_le32(buf + 20, (uint32_t)parent);
        memcpy(buf + 24, st->table + (size_t)parent * LOOM_OOB_ENTRY_LEN,
               LOOM_OOB_ENTRY_LEN);
        res = loom_boot_write_all(st->rank_fd[r], buf, sizeof buf, deadline, abort_fd);
        boot_count.sent += sizeof buf;
        if (res < 0) {
            char d[256];
            snprintf(st->err, st->errlen,
                     "bootstrap: rank 0 could not answer %s: %s",
                     describe(p, r, d, sizeof d),
                     res == LOOM_ERROR_TIMEOUT   ? "timed out"
                     : res == LOOM_ERROR_ABORTED ? "aborted"
                     : res == LOOM_ERROR_REMOTE  ? "it closed the connection"
                                                 : strerror(errno));
        }
    }
    return res;
}

/* What the out-of-band service wakes during the bootstrap: `any` on every
 * arrival (rank 0 takes joining sockets), `abort` once the job is aborted
 * (every wait of the bootstrap watches it). Both exist only meanwhile. */
struct boot_wake {
    struct loom_oob *oob;
    int any, abort;
};

static void boot_notify(void *ctx)
{
    struct boot_wake *w = ctx;
    uint64_t one = 1;
    if (w->any >= 0 && write(w->any, &one, sizeof one) < 0) {
        /* saturated: readable anyway */
    }
    if (loom_oob_aborted(w->oob) && write(w->abort, &one, sizeof one) < 0) {
        /* saturated: readable anyway */
    }
}

/* Take a socket handed over by the service: its handshake starts (rank 0
 * challenges first). As root_read: 1 taken, 0 pending, -1 closed. */
static int root_adopt(struct root_state *st, struct boot_conn *c, int fd, const char *from,
                      double deadline)
{
    c->fd = fd;
    snprintf(c->from, sizeof c->from, "%s", from);
    loom_net_set_nonblock(fd);
    c->hs = malloc(sizeof *c->hs);
    if (!c->hs) {
        close(fd);
        return -1;
    }
    if (loom_hs_accept(c->hs, &loom_boot_hs, st->key, fd, from, NULL, deadline - loom_now()) < 0) {
        LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped a connection from %s: %s", c->from,
                  c->hs->err);
        conn_hs_end(c);
        close(fd);
        return -1;
    }
    return root_read(st, c, deadline);
}

/* c joined after the job failed: it hears why at once. */
static void root_late(struct root_state *st, struct boot_conn *c)
{
    for (int q = 1; q < st->p->nranks; q++)
        if (st->rank_fd[q] == c->fd) {
            refuse(c->fd, st->fatal, st->refused, loom_now() + 1.0);
            st->rank_fd[q] = -1;
        }
}

static loom_result_t root_exchange(const struct loom_boot_params *p,
                                   const struct loom_auth_key *key,
                                   struct loom_oob *oob, struct boot_wake *bw,
                                   const uint8_t *entry, uint64_t *comm_id, char *err,
                                   size_t errlen)
{
    double start = loom_now(), deadline = start + p->timeout;
    double report_at = start + (p->report_first > 0 ? p->report_first : BOOT_REPORT_FIRST);
    double report_every = p->report_every > 0 ? p->report_every : BOOT_REPORT_EVERY;
    loom_result_t res = LOOM_SUCCESS;
    int nconn = 0;
    int maxconn = p->nranks - 1 + BOOT_STRANGERS_MAX;
    int evfd = bw->any;
    struct root_state st = {.p = p, .err = err, .errlen = errlen, .key = key};
    st.rank_fd = malloc(sizeof *st.rank_fd * (size_t)p->nranks);
    st.table = calloc((size_t)p->nranks, LOOM_OOB_ENTRY_LEN);
    struct boot_conn *conns = calloc((size_t)maxconn, sizeof *conns);
    struct pollfd *pfds = calloc((size_t)maxconn + 2, sizeof *pfds);
    if (!st.rank_fd || !st.table || !conns || !pfds) {
        snprintf(err, errlen, "bootstrap: out of memory for %d ranks", p->nranks);
        res = LOOM_ERROR_NO_MEMORY;
        goto out;
    }
    for (int r = 0; r < p->nranks; r++)
        st.rank_fd[r] = -1;
    memcpy(st.table, entry, LOOM_OOB_ENTRY_LEN);
    double linger_until = 0;
    while (st.joined < p->nranks - 1 || st.fatal < 0) {
        double now = loom_now(), left = deadline - now;
        if (st.fatal < 0 && linger_until == 0) {
            /* tell every rank that joined, keep refusing latecomers a while */
            for (int r = 1; r < p->nranks; r++)
                if (st.rank_fd[r] >= 0) {
                    refuse(st.rank_fd[r], st.fatal, st.refused, loom_now() + 1.0);
                    st.rank_fd[r] = -1;
                }
            linger_until = now + (left < BOOT_LINGER ? left : BOOT_LINGER);
        }
        if (st.fatal < 0 && now >= linger_until) {
            snprintf(err, errlen, "bootstrap: %s", st.refused);
            res = st.fatal;
            goto out;
        }
        if (left <= 0) {
            root_missing(&st);
            res = LOOM_ERROR_TIMEOUT;
            goto out;
        }
        if (st.fatal == LOOM_SUCCESS && now >= report_at) {
            char names[768];
            root_list_missing(&st, names, sizeof names);
            LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: rank 0 is still waiting for %d of %d "
                      "ranks after %.0f s (timeout %g s): %s", p->nranks - 1 - st.joined,
                      p->nranks, now - start, p->timeout, names);
            report_at = now + report_every;
        }
        /* sockets the out-of-band service took for us */
        int fd;
        char from[LOOM_NET_ADDRSTR_MAX];
        int settled = 0;
        while (loom_oob_take_fd(oob, LOOM_OOB_KIND_BOOT, &fd, from, sizeof from)) {
            if (nconn == maxconn) {
                /* Full of silent connections: the oldest goes. */
                LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped silent connection "
                          "from %s", conns[0].from);
                close(conns[0].fd);
                conn_hs_end(&conns[0]);
                conns[0] = conns[--nconn];
            }
            /* a quick rank's hello may be taken at once */
            int r = root_adopt(&st, &conns[nconn], fd, from, deadline);
            if (r == 0)
                nconn++;
            else if (r == 1 && st.fatal < 0)
                root_late(&st, &conns[nconn]);
            settled |= r != 0;
        }
        /* A rank taken or refused as it arrived may have been the last one
         * or the one that fails the job: the loop's test decides, not a
         * poll that nothing would wake before the next report. */
        if (settled)
            continue;
        pfds[0] = (struct pollfd){.fd = evfd, .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = bw->abort, .events = POLLIN};
        for (int i = 0; i < nconn; i++)
            pfds[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = conns[i].hs->events};
        double until = st.fatal < 0 ? linger_until : deadline;
        if (st.fatal == LOOM_SUCCESS && report_at < until)
            until = report_at;
        int rc = poll(pfds, (nfds_t)nconn + 2, (int)((until - now) * 1000.0) + 1);
        if (rc < 0 && errno != EINTR) {
            snprintf(err, errlen, "bootstrap: poll: %s", strerror(errno));
            res = LOOM_ERROR_SYSTEM;
            goto out;
        }
        if (rc <= 0)
            continue;
        if (pfds[1].revents & POLLIN) {
            snprintf(err, errlen, "bootstrap: rank 0 aborted while waiting for "
                     "%d of %d ranks", p->nranks - 1 - st.joined, p->nranks);
            res = LOOM_ERROR_ABORTED;
            goto out;
        }
        if (pfds[0].revents & POLLIN) {
            uint64_t v;
            if (read(evfd, &v, sizeof v) < 0) {
                /* drained already */
            }
        }
        for (int i = 0; i < nconn;) {
            int r = pfds[2 + i].revents ? root_read(&st, &conns[i], deadline) : 0;
            if (r == 1 && st.fatal < 0)
                root_late(&st, &conns[i]);
            if (r == 0) {
                i++;
                continue;
            }
            /* Taken or closed: either way no longer a pending connection. */
            nconn--;
            conns[i] = conns[nconn];
            pfds[2 + i] = pfds[2 + nconn];
        }
    }
    *comm_id = new_comm_id();
    loom_oob_set_table(oob, st.table);
    loom_oob_start(oob, *comm_id);
    res = loom_oob_publish(oob, LOOM_OOB_TAG_TABLE, st.table,
                           (size_t)p->nranks * LOOM_OOB_ENTRY_LEN);
    if (res < 0) {
        snprintf(err, errlen, "bootstrap: cannot publish the table");
        goto out;
    }
    double send_deadline = deadline > loom_now() + 10.0 ? deadline : loom_now() + 10.0;
    res = root_send_answers(&st, *comm_id, send_deadline, bw->abort);
    if (res == LOOM_SUCCESS)
        res = tree_ack(p, oob, send_deadline, err, errlen);
    if (res == LOOM_SUCCESS)
        LOOM_INFO(LOOM_SUB_BOOT, "bootstrap: %d ranks joined in %.3f s, comm id "
                  "0x%016llx", p->nranks, loom_now() - start,
                  (unsigned long long)*comm_id);

out:
    if (st.rank_fd && res < 0) {
        /* Tell the ranks that did join why the job stops. */
        char msg[BOOT_MSG_MAX];
        snprintf(msg, sizeof msg, "rank 0 gave up: %s", err);
        for (int r = 1; r < p->nranks; r++)
            if (st.rank_fd[r] >= 0) {
                refuse(st.rank_fd[r], res, msg, loom_now() + 1.0);
                st.rank_fd[r] = -1;
            }
    }
    if (st.rank_fd)
        for (int r = 1; r < p->nranks; r++)
            if (st.rank_fd[r] >= 0)
                close(st.rank_fd[r]);
    if (conns)
        for (int i = 0; i < nconn; i++) {
            close(conns[i].fd);
            conn_hs_end(&conns[i]);
        }
    /* sockets handed over that nobody read */
    int fd;
    while (loom_oob_take_fd(oob, LOOM_OOB_KIND_BOOT, &fd, NULL, 0))
        close(fd);
    free(st.rank_fd);
    free(st.table);
    free(conns);
    free(pfds);
    return res;
}

/* -------------------------------------------------------------- non-root */

static loom_result_t peer_connect(const struct loom_boot_params *p,
                                  const struct sockaddr_storage *ss, socklen_t sl,
                                  const char *root, double deadline, int wake_fd,
                                  int *fdp, char *err, size_t errlen)
{
    double backoff = BOOT_BACKOFF_MIN;
    int last = 0;
    for (;;) {
        int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, errlen, "bootstrap: socket(): %s", strerror(errno));
            return LOOM_ERROR_SYSTEM;
        }
        loom_net_set_nodelay(fd); /* short exchanges: see oob_in.c's accept */
        int e = 0;
        if (connect(fd, (const struct sockaddr *)ss, sl) < 0) {
            e = errno;
            if (e == EINPROGRESS || e == EINTR) {
                int w = loom_boot_wait(fd, POLLOUT, deadline, wake_fd);
                if (w == 1) {
                    socklen_t el = sizeof e;
                    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
                        e = errno;
                } else if (w == 0) {
                    e = ETIMEDOUT;
                } else {
                    close(fd);
                    snprintf(err, errlen, "bootstrap: rank %d aborted while "
                             "connecting to rank 0 at %s", p->rank, root);
                    return LOOM_ERROR_ABORTED;
                }
            }
        }
        if (e == 0) {
            *fdp = fd;
            return LOOM_SUCCESS;
        }
        close(fd);
        if (e != ETIMEDOUT || loom_now() < deadline)
            last = e;
        if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH &&
            e != ENETUNREACH && e != ECONNRESET && e != ECONNABORTED) {
            snprintf(err, errlen, "bootstrap: rank %d cannot connect to rank 0 "
                     "at %s: %s", p->rank, root, strerror(e));
            return LOOM_ERROR_SYSTEM;
        }
        double wake = loom_now() + backoff;
        if (wake > deadline)
            wake = deadline;
        int w = loom_boot_wait(-1, 0, wake, wake_fd);
        if (w < 0) {
            snprintf(err, errlen, "bootstrap: rank %d aborted while connecting "
                     "to rank 0 at %s", p->rank, root);
            return LOOM_ERROR_ABORTED;
        }
        if (loom_now() >= deadline) {
            snprintf(err, errlen, "bootstrap: rank %d could not reach rank 0 at "
                     "%s within %g s: %s", p->rank, root, p->timeout,
                     strerror(last ? last : ETIMEDOUT));
            return LOOM_ERROR_TIMEOUT;
        }
        backoff = backoff * 2 > BOOT_BACKOFF_MAX ? BOOT_BACKOFF_MAX : backoff * 2;
    }
}

/* Turn a failed read/write on the root link into a sentence. */
static loom_result_t link_error(const struct loom_boot_params *p, loom_result_t res,
                                int eof, const char *root, const char *doing,
                                char *err, size_t errlen)
{
    if (res == LOOM_ERROR_TIMEOUT)
        snprintf(err, errlen, "bootstrap: rank %d got no answer from rank 0 at %s "
                 "within %g s while %s (are all ranks started?)", p->rank, root,
                 p->timeout, doing);
    else if (res == LOOM_ERROR_ABORTED)
        snprintf(err, errlen, "bootstrap: rank %d aborted while %s", p->rank, doing);
    else
        snprintf(err, errlen, "bootstrap: rank 0 at %s %s while rank %d was %s",
                 root, eof ? "closed the connection" : strerror(errno), p->rank,
                 doing);
    return res;
}

static loom_result_t peer_exchange(const struct loom_boot_params *p,
                                   const struct loom_auth_key *key,
                                   struct loom_oob *oob, struct boot_wake *bw,
                                   const uint8_t *entry, uint64_t *comm_id, char *err,
                                   size_t errlen)
{
    double deadline = loom_now() + p->timeout;
    int wake_fd = bw->abort;
    struct sockaddr_storage ss;
    socklen_t sl;
    char e[256];
    if (loom_net_resolve(p->root_host, p->root_port, &ss, &sl, e, sizeof e) < 0) {
        snprintf(err, errlen, "bootstrap: rank %d cannot reach rank 0: %s", p->rank,
                 e);
        return LOOM_ERROR_SYSTEM;
    }
    char root[LOOM_NET_ADDRSTR_MAX + 8];
    loom_net_format((struct sockaddr *)&ss, root, sizeof root);
    int fd = -1;
    LOOM_CHECK(peer_connect(p, &ss, sl, root, deadline, wake_fd, &fd, err, errlen));

    int eof = 0;
    uint8_t pre[LOOM_OOB_PREAMBLE_LEN];
    loom_oob_preamble(oob, LOOM_OOB_KIND_BOOT, pre);
    loom_put_le64(pre + 8, 0); /* rank 0's bootstrap is not in a namespace */
    loom_result_t res = loom_boot_write_all(fd, pre, sizeof pre, deadline, wake_fd);
    boot_count.sent += sizeof pre;
    if (res < 0) {
        link_error(p, res, 0, root, "sending its preamble", err, errlen);
        goto out;
    }
    uint8_t hello[LOOM_BOOT_HELLO_LEN + LOOM_OOB_ENTRY_LEN];
    struct loom_boot_hello h = {.rank = (uint32_t)p->rank,
                                .nranks = (uint32_t)p->nranks,
                                .table_hash = p->table_hash,
                                .entry = entry,
                                .entry_len = LOOM_OOB_ENTRY_LEN};
    loom_boot_hello_encode(&h, hello);
    struct loom_hs hs;
    char rname[sizeof root + 16];
    snprintf(rname, sizeof rname, "rank 0 at %s", root);
    res = loom_hs_connect(&hs, &loom_boot_hs, key, fd, rname, hello, sizeof hello,
                          deadline - loom_now());
    if (res == LOOM_SUCCESS)
        res = loom_hs_run(&hs, wake_fd);
    boot_count.sent += hs.sent;
    boot_count.received += hs.received;
    if (res < 0) {
        char why[700];
        if (res == LOOM_ERROR_TIMEOUT || res == LOOM_ERROR_ABORTED)
            link_error(p, res, 0, root, "proving the job key", err, errlen);
        else if (res == LOOM_ERROR_MISMATCH)
            snprintf(err, errlen, "bootstrap: rank 0 at %s refused rank %d: rank 0 %s", root,
                     p->rank, loom_hs_blame(&hs, why, sizeof why));
        else
            snprintf(err, errlen, "bootstrap: rank %d: %s", p->rank, hs.err);
        loom_hs_free(&hs);
        goto out;
    }
    loom_hs_free(&hs);
    /* Rank 0 answers once every rank is in, or refuses this one. */
    uint8_t hdr[BOOT_ANSWER_LEN + 16 + LOOM_OOB_ENTRY_LEN];
    res = loom_boot_read_all(fd, hdr, BOOT_ANSWER_LEN, deadline, wake_fd, &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "waiting for the other ranks to join", err, errlen);
        goto out;
    }
    if (loom_get_le32(hdr) != BOOT_ANSWER_MAGIC ||
        loom_get_le16(hdr + 4) != BOOT_VERSION) {
        snprintf(err, errlen, "bootstrap: %s is not a Loom rank 0 of this version "
                 "(answer magic 0x%08x, version %u)", root, (unsigned)loom_get_le32(hdr),
                 (unsigned)loom_get_le16(hdr + 4));
        res = LOOM_ERROR_PROTOCOL;
        goto out;
    }
    res = loom_boot_read_all(fd, hdr + BOOT_ANSWER_LEN, 4, deadline, wake_fd, &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "waiting for its answer", err, errlen);
        goto out;
    }
    if (loom_get_le16(hdr + 6) != 0) {
        uint32_t mlen = loom_get_le32(hdr + 8);
        char msg[BOOT_MSG_MAX + 1] = "";
        if (mlen > BOOT_MSG_MAX)
            mlen = BOOT_MSG_MAX;
        if (loom_boot_read_all(fd, msg, mlen, deadline, wake_fd, &eof) < 0)
            mlen = 0;
        msg[mlen] = '\0';
        snprintf(err, errlen, "bootstrap: rank 0 at %s refused rank %d: %s", root,
                 p->rank, mlen ? msg : "(no reason given)");
        int status = -(int)loom_get_le16(hdr + 6);
        res = status >= LOOM_ERROR_INTERNAL ? (loom_result_t)status
                                            : LOOM_ERROR_PROTOCOL;
        goto out;
    }
    res = loom_boot_read_all(fd, hdr + BOOT_ANSWER_LEN + 4, 12 + LOOM_OOB_ENTRY_LEN,
                             deadline, wake_fd, &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "reading its answer", err, errlen);
        goto out;
    }
    boot_count.received += BOOT_ANSWER_LEN + 16 + LOOM_OOB_ENTRY_LEN;
    *comm_id = loom_get_le64(hdr + 8);
    uint32_t n = loom_get_le32(hdr + 16), parent = loom_get_le32(hdr + 20);
    if (n != (uint32_t)p->nranks || parent >= (uint32_t)p->rank) {
        snprintf(err, errlen, "bootstrap: rank 0 at %s answered with %u ranks and "
                 "parent %u; this rank expects %d ranks", root, n, parent, p->nranks);
        res = LOOM_ERROR_PROTOCOL;
        goto out;
    }
    close(fd);
    fd = -1;
    /* The table comes from the parent (rank 0 itself for ranks 1 and 2). */
    loom_oob_set_entry(oob, (int)parent, hdr + 24);
    loom_oob_start(oob, *comm_id);
    void *table = NULL;
    size_t tlen = 0;
    res = loom_oob_lookup(oob, (int)parent, LOOM_OOB_TAG_TABLE);
    double left = deadline - loom_now();
    if (res == LOOM_SUCCESS)
        res = loom_oob_recv(oob, LOOM_OOB_TAG_TABLE, (int)parent, left > 1 ? left : 1,
                            NULL, &table, &tlen);
    if (res < 0) {
        char d[256];
        snprintf(err, errlen, "bootstrap: rank %d did not get the job's table from "
                 "its parent %s: %s", p->rank, describe(p, (int)parent, d, sizeof d),
                 loom_oob_error(oob));
        goto out;
    }
    if (tlen != (size_t)p->nranks * LOOM_OOB_ENTRY_LEN ||
        memcmp((uint8_t *)table + (size_t)p->rank * LOOM_OOB_ENTRY_LEN, entry,
               LOOM_OOB_ENTRY_LEN) != 0) {
        snprintf(err, errlen, "bootstrap: rank %d got a table of %zu bytes from rank "
                 "%u that does not hold its own entry", p->rank, tlen, parent);
        free(table);
        res = LOOM_ERROR_PROTOCOL;
        goto out;
    }
    loom_oob_set_table(oob, table);
    res = loom_oob_publish(oob, LOOM_OOB_TAG_TABLE, table, tlen);
    free(table);
    if (res == LOOM_SUCCESS)
        res = tree_ack(p, oob, deadline, err, errlen);
out:
    if (fd >= 0)
        close(fd);
    return res;
}

loom_result_t loom_bootstrap(const struct loom_boot_params *p, struct loom_oob *oob,
                             const uint8_t *entry, uint64_t *comm_id,
                             struct loom_boot_stats *stats, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    memset(&boot_count, 0, sizeof boot_count);
    if (!p || !oob || !entry || !comm_id) {
        snprintf(err, errlen, "bootstrap: missing argument");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (p->nranks < 1 || p->nranks > BOOT_NRANKS_MAX || p->rank < 0 ||
        p->rank >= p->nranks) {
        snprintf(err, errlen, "bootstrap: rank %d of %d ranks is out of range",
                 p->rank, p->nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    /* The key is checked at every creation, one rank or many, so a bad key
     * file is reported where it is configured. */
    struct loom_auth_key own;
    const struct loom_auth_key *key = p->key;
    if (!key) {
        char e[512] = "";
        loom_result_t kr = loom_auth_key_from_config(&own, e, sizeof e);
        if (kr < 0) {
            snprintf(err, errlen, "bootstrap: rank %d: %s", p->rank, e);
            return kr;
        }
        key = &own;
    } else {
        loom_auth_key_clear(&own);
    }
    double start = loom_now();
    loom_result_t res;
    struct boot_wake bw = {.oob = oob, .any = -1, .abort = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    if (p->rank == 0 && p->nranks > 1)
        bw.any = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (bw.abort < 0 || (p->rank == 0 && p->nranks > 1 && bw.any < 0)) {
        snprintf(err, errlen, "bootstrap: eventfd: %s", strerror(errno));
        if (bw.abort >= 0)
            close(bw.abort);
        loom_auth_key_clear(&own);
        return LOOM_ERROR_SYSTEM;
    }
    loom_oob_set_notify(oob, boot_notify, &bw);
    if (loom_oob_aborted(oob))
        boot_notify(&bw);
    if (p->nranks == 1) {
        *comm_id = new_comm_id();
        loom_oob_set_table(oob, entry);
        res = loom_oob_start(oob, *comm_id);
    } else if (!p->root_host || p->root_port <= 0 || p->root_port > 65535) {
        snprintf(err, errlen, "bootstrap: rank 0's address %s:%d is not valid",
                 p->root_host ? p->root_host : "(none)", p->root_port);
        res = LOOM_ERROR_INVALID_ARGUMENT;
    } else if (p->rank == 0) {
        res = root_exchange(p, key, oob, &bw, entry, comm_id, err, errlen);
    } else {
        res = peer_exchange(p, key, oob, &bw, entry, comm_id, err, errlen);
    }
    loom_oob_set_notify(oob, NULL, NULL);
    close(bw.abort);
    if (bw.any >= 0)
        close(bw.any);
    loom_auth_key_clear(&own);
    if (stats) {
        uint64_t os = 0, orr = 0;
        loom_oob_counters(oob, &os, &orr);
        *stats = boot_count;
        stats->sent += os;
        stats->received += orr;
        stats->seconds = loom_now() - start;
    }
    if (res < 0)
        LOOM_INFO(LOOM_SUB_BOOT, "%s", err);
    return res;
}
