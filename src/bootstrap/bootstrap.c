/* bootstrap.c - rendezvous through rank 0 (see bootstrap.h).
 *
 * The wire and the checks on what a peer sends are in boot_wire.h: rank 0
 * sends a challenge on every accepted connection; the rank answers with its
 * hello signed with the job key (auth.h); rank 0 checks the key before it
 * looks at the hello, proves the key back, and answers with all endpoints
 * once everyone is in. Every length read is bounded before use; a
 * connection that is not a rank of this job is logged and dropped, and the
 * rendezvous goes on. */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/boot_io.h"
#include "bootstrap/boot_wire.h"
#include "auth.h"
#include "transport/net.h"
#include "transport/transport.h"

#define BOOT_ANSWER_MAGIC LOOM_BOOT_ANSWER_MAGIC
#define BOOT_VERSION LOOM_BOOT_VERSION
#define BOOT_HELLO_LEN LOOM_BOOT_HELLO_LEN
#define BOOT_ANSWER_LEN LOOM_BOOT_ANSWER_LEN
#define BOOT_MSG_MAX 1024
#define BOOT_NRANKS_MAX (1 << 20)
#define BOOT_STRANGERS_MAX 64
#define BOOT_BACKOFF_MIN 0.01
#define BOOT_BACKOFF_MAX 0.5

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
    size_t got, need;
    char from[LOOM_NET_ADDRSTR_MAX];
    uint8_t ca[LOOM_AUTH_CHAL_LEN];  /* the challenge sent to it */
    uint8_t buf[BOOT_HELLO_LEN + LOOM_EP_MAX + LOOM_BOOT_AUTH_LEN];
};

/* Best effort: tell a refused rank why (why < 0 is sent as its status),
 * then close. */
static void refuse(int fd, loom_result_t why, const char *msg, double deadline)
{
    size_t mlen = strlen(msg);
    if (mlen > BOOT_MSG_MAX)
        mlen = BOOT_MSG_MAX;
    uint8_t hdr[BOOT_ANSWER_LEN + 4];
    loom_put_le32(hdr, BOOT_ANSWER_MAGIC);
    loom_put_le16(hdr + 4, BOOT_VERSION);
    loom_put_le16(hdr + 6, (uint16_t)-why);
    loom_put_le32(hdr + 8, (uint32_t)mlen);
    double d = loom_now() + 1.0 < deadline ? loom_now() + 1.0 : deadline;
    if (loom_boot_write_all(fd, hdr, sizeof hdr, d, -1) == LOOM_SUCCESS)
        loom_boot_write_all(fd, msg, mlen, d, -1);
    close(fd);
}

struct root_state {
    const struct loom_boot_params *p;
    int *rank_fd;           /* accepted fd of each rank, -1 until joined */
    int joined;
    void *all_eps;
    size_t ep_stride;
    char *err;
    size_t errlen;
    const struct loom_auth_key *key;
    char refused[BOOT_MSG_MAX]; /* the last refusal of a claimed rank */
};

/* A hello has fully arrived on c: take it or refuse it. Returns 1 when the
 * fd now belongs to a rank, 0 when it was closed. */
static int root_take(struct root_state *st, struct boot_conn *c, double deadline)
{
    const struct loom_boot_params *p = st->p;
    int rank = (int)loom_get_le32(c->buf + 8);
    uint32_t nranks = loom_get_le32(c->buf + 12);
    uint64_t hash = loom_get_le64(c->buf + 16);
    uint32_t ep_len = loom_get_le32(c->buf + 24);
    char msg[BOOT_MSG_MAX], d[256];
    loom_result_t why = LOOM_ERROR_INVALID_ARGUMENT;
    if (loom_get_le32(c->buf + 8) >= (uint32_t)p->nranks || rank == 0) {
        snprintf(msg, sizeof msg, "rank %u is not in 1..%d (the job has %d ranks)",
                 loom_get_le32(c->buf + 8), p->nranks - 1, p->nranks);
    } else if (nranks != (uint32_t)p->nranks) {
        snprintf(msg, sizeof msg, "%s was started with %u ranks, rank 0 has %d",
                 describe(p, rank, d, sizeof d), nranks, p->nranks);
        why = LOOM_ERROR_MISMATCH;
    } else if (hash != p->table_hash) {
        snprintf(msg, sizeof msg,
                 "%s loaded a different rank table (hash 0x%016llx, root has "
                 "0x%016llx)",
                 describe(p, rank, d, sizeof d), (unsigned long long)hash,
                 (unsigned long long)p->table_hash);
        why = LOOM_ERROR_MISMATCH;
    } else if (st->rank_fd[rank] >= 0) {
        snprintf(msg, sizeof msg, "%s joined twice (again from %s)",
                 describe(p, rank, d, sizeof d), c->from);
    } else {
        memcpy((uint8_t *)st->all_eps + (size_t)rank * st->ep_stride,
               c->buf + BOOT_HELLO_LEN, ep_len);
        st->rank_fd[rank] = c->fd;
        st->joined++;
        LOOM_TRACE(LOOM_SUB_BOOT, "bootstrap: rank %d joined from %s (%d of %d)",
                   rank, c->from, st->joined + 1, p->nranks);
        return 1;
    }
    /* Another job's rank (different table or size) is refused, by name, but
     * does not stop this job: the root's timeout message repeats why. */
    LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: rank 0 refused a connection from %s: %s",
              c->from, msg);
    if (why == LOOM_ERROR_MISMATCH)
        snprintf(st->refused, sizeof st->refused, "%s", msg);
    refuse(c->fd, why, msg, deadline);
    return 0;
}

/* Read what arrived on c. Returns 1 taken, 0 still waiting, -1 closed. */
static int root_read(struct root_state *st, struct boot_conn *c, double deadline)
{
    ssize_t n = recv(c->fd, c->buf + c->got, c->need - c->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: connection from %s ended before its "
                  "hello: %s", c->from, n == 0 ? "end of stream" : strerror(errno));
        close(c->fd);
        return -1;
    }
    c->got += (size_t)n;
    char why[300];
    if (c->got == BOOT_HELLO_LEN && c->need == BOOT_HELLO_LEN) {
        size_t ep_max = st->ep_stride < LOOM_EP_MAX ? st->ep_stride : LOOM_EP_MAX;
        int rc = loom_boot_hello_head_check(c->buf, ep_max, &c->need, why,
                                            sizeof why);
        if (rc == LOOM_BOOT_DROP) {
            LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped a connection from %s: %s",
                      c->from, why);
            close(c->fd);
            return -1;
        }
        if (rc != LOOM_BOOT_OK) {
            LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: refused %s: %s", c->from, why);
            refuse(c->fd, LOOM_ERROR_PROTOCOL, why, deadline);
            return -1;
        }
    }
    if (c->got < c->need)
        return 0;
    /* The key before the hello: nothing it claims is trusted until then. */
    if (loom_boot_hello_auth_check(st->key, c->ca, c->buf, c->got, why,
                                   sizeof why) != LOOM_BOOT_OK) {
        LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: connection from %s: %s (dropped)",
                  c->from, why);
        char msg[BOOT_MSG_MAX];
        snprintf(msg, sizeof msg, "rank 0 rejected this rank's job key: %s "
                 "(LOOM_JOB_KEY / LOOM_JOB_KEY_FILE must be the same on every "
                 "rank)", why);
        refuse(c->fd, LOOM_ERROR_MISMATCH, msg, deadline);
        return -1;
    }
    size_t hlen = c->got - LOOM_BOOT_AUTH_LEN;
    uint8_t proof[LOOM_AUTH_MSG_LEN];
    double d = loom_now() + 1.0 < deadline ? loom_now() + 1.0 : deadline;
    if (loom_boot_proof_make(st->key, c->ca, c->buf + hlen, c->buf, hlen,
                             proof) < 0 ||
        loom_boot_write_all(c->fd, proof, sizeof proof, d, -1) < 0) {
        LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped a connection from %s: "
                  "could not send the key proof", c->from);
        close(c->fd);
        return -1;
    }
    return root_take(st, c, deadline) ? 1 : -1;
}

static void root_missing(struct root_state *st)
{
    const struct loom_boot_params *p = st->p;
    size_t off = 0;
    int listed = 0;
    for (int r = 1; r < p->nranks && off + 32 < st->errlen; r++) {
        if (st->rank_fd[r] >= 0)
            continue;
        if (listed == 8) {
            off += (size_t)snprintf(st->err + off, st->errlen - off,
                                    " and %d more", p->nranks - 1 - st->joined - 8);
            break;
        }
        char d[256];
        off += (size_t)snprintf(st->err + off, st->errlen - off, "%s%s",
                                listed ? ", " : "", describe(p, r, d, sizeof d));
        listed++;
    }
    if (off < st->errlen)
        off += (size_t)snprintf(st->err + off, st->errlen - off,
                                " did not join within %g s", p->timeout);
    if (off < st->errlen && st->refused[0])
        snprintf(st->err + off, st->errlen - off, " (refused: %s)", st->refused);
}

static loom_result_t root_send_answers(struct root_state *st, uint64_t comm_id,
                                       double deadline)
{
    const struct loom_boot_params *p = st->p;
    size_t ep_len = st->ep_stride < LOOM_EP_MAX ? st->ep_stride : LOOM_EP_MAX;
    size_t total = BOOT_ANSWER_LEN + 12 + (size_t)p->nranks * (4 + ep_len);
    uint8_t *buf = malloc(total);
    if (!buf) {
        snprintf(st->err, st->errlen, "bootstrap: out of memory (%zu bytes)", total);
        return LOOM_ERROR_NO_MEMORY;
    }
    loom_put_le32(buf, BOOT_ANSWER_MAGIC);
    loom_put_le16(buf + 4, BOOT_VERSION);
    loom_put_le16(buf + 6, 0);
    loom_put_le64(buf + 8, comm_id);
    loom_put_le32(buf + 16, (uint32_t)p->nranks);
    uint8_t *q = buf + 20;
    for (int r = 0; r < p->nranks; r++) {
        loom_put_le32(q, (uint32_t)ep_len);
        memcpy(q + 4, (uint8_t *)st->all_eps + (size_t)r * st->ep_stride, ep_len);
        q += 4 + ep_len;
    }
    loom_result_t res = LOOM_SUCCESS;
    for (int r = 1; r < p->nranks && res == LOOM_SUCCESS; r++) {
        res = loom_boot_write_all(st->rank_fd[r], buf, total, deadline, p->wake_fd);
        if (res < 0) {
            char d[256];
            snprintf(st->err, st->errlen,
                     "bootstrap: rank 0 could not send the endpoints to %s: %s",
                     describe(p, r, d, sizeof d),
                     res == LOOM_ERROR_TIMEOUT   ? "timed out"
                     : res == LOOM_ERROR_ABORTED ? "aborted"
                     : res == LOOM_ERROR_REMOTE  ? "it closed the connection"
                                                 : strerror(errno));
        }
    }
    free(buf);
    return res;
}

static loom_result_t root_listen(const struct loom_boot_params *p, int *fdp,
                                 char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char e[256];
    loom_result_t res = loom_net_resolve(p->root_host, p->root_port, &ss, &sl, e,
                                         sizeof e);
    if (res < 0) {
        snprintf(err, errlen, "bootstrap: rank 0 cannot listen: %s", e);
        return res;
    }
    char a[LOOM_NET_ADDRSTR_MAX];
    loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "bootstrap: rank 0: socket() for %s: %s", a,
                 strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        int e2 = errno;
        snprintf(err, errlen, "bootstrap: rank 0 cannot listen on %s: %s%s", a,
                 strerror(e2),
                 e2 == EADDRINUSE ? " (the port is taken: another job or a "
                                    "previous run still holds it)"
                                  : "");
        close(fd);
        return LOOM_ERROR_SYSTEM;
    }
    int backlog = p->nranks + BOOT_STRANGERS_MAX;
    if (listen(fd, backlog > 4096 ? 4096 : backlog) < 0) {
        snprintf(err, errlen, "bootstrap: rank 0: listen on %s: %s", a,
                 strerror(errno));
        close(fd);
        return LOOM_ERROR_SYSTEM;
    }
    *fdp = fd;
    return LOOM_SUCCESS;
}

static loom_result_t root_exchange(const struct loom_boot_params *p,
                                   const struct loom_auth_key *key,
                                   void *all_eps, size_t ep_stride,
                                   uint64_t *comm_id, char *err, size_t errlen)
{
    double deadline = loom_now() + p->timeout;
    int lfd = loom_boot_uid_take_listener(p->root_port);
    if (lfd < 0)
        LOOM_CHECK(root_listen(p, &lfd, err, errlen));
    loom_result_t res = LOOM_SUCCESS;
    int nconn = 0;
    int maxconn = p->nranks - 1 + BOOT_STRANGERS_MAX;
    struct root_state st = {.p = p, .all_eps = all_eps, .ep_stride = ep_stride,
                            .err = err, .errlen = errlen, .key = key};
    st.rank_fd = malloc(sizeof *st.rank_fd * (size_t)p->nranks);
    struct boot_conn *conns = calloc((size_t)maxconn, sizeof *conns);
    struct pollfd *pfds = calloc((size_t)maxconn + 2, sizeof *pfds);
    if (!st.rank_fd || !conns || !pfds) {
        snprintf(err, errlen, "bootstrap: out of memory for %d ranks", p->nranks);
        res = LOOM_ERROR_NO_MEMORY;
        goto out;
    }
    for (int r = 0; r < p->nranks; r++)
        st.rank_fd[r] = -1;
    while (st.joined < p->nranks - 1) {
        double left = deadline - loom_now();
        if (left <= 0) {
            root_missing(&st);
            res = LOOM_ERROR_TIMEOUT;
            goto out;
        }
        pfds[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = p->wake_fd, .events = POLLIN};
        for (int i = 0; i < nconn; i++)
            pfds[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        int rc = poll(pfds, (nfds_t)nconn + 2, (int)(left * 1000.0) + 1);
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
        for (int i = 0; i < nconn;) {
            int r = pfds[2 + i].revents ? root_read(&st, &conns[i], deadline) : 0;
            if (r == 0) {
                i++;
                continue;
            }
            /* Taken or closed: either way no longer a pending connection. */
            nconn--;
            conns[i] = conns[nconn];
            pfds[2 + i] = pfds[2 + nconn];
        }
        while (pfds[0].revents & POLLIN) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                break;
            if (nconn == maxconn) {
                /* Full of silent connections: the oldest goes. */
                LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped silent connection "
                          "from %s", conns[0].from);
                close(conns[0].fd);
                conns[0] = conns[--nconn];
            }
            struct boot_conn *c = &conns[nconn];
            c->fd = fd;
            c->got = 0;
            c->need = BOOT_HELLO_LEN;
            loom_net_format((struct sockaddr *)&ss, c->from, sizeof c->from);
            /* The challenge goes first; 40 bytes fit any fresh socket. */
            uint8_t chal[LOOM_AUTH_MSG_LEN];
            ssize_t sent = -1;
            if (loom_auth_challenge(c->ca) == LOOM_SUCCESS) {
                loom_auth_msg_encode(chal, LOOM_BOOT_CHAL_MAGIC, LOOM_BOOT_VERSION,
                                     key->set ? LOOM_AUTH_FLAG_KEYED : 0, c->ca);
                sent = send(fd, chal, sizeof chal, MSG_NOSIGNAL);
            }
            if (sent != (ssize_t)sizeof chal) {
                LOOM_WARN(LOOM_SUB_BOOT, "bootstrap: dropped a connection from %s: "
                          "could not send the challenge", c->from);
                close(fd);
                continue;
            }
            nconn++;
        }
    }
    *comm_id = new_comm_id();
    double send_deadline = deadline > loom_now() + 10.0 ? deadline : loom_now() + 10.0;
    res = root_send_answers(&st, *comm_id, send_deadline);
    if (res == LOOM_SUCCESS)
        LOOM_INFO(LOOM_SUB_BOOT, "bootstrap: %d ranks joined, comm id 0x%016llx",
                  p->nranks, (unsigned long long)*comm_id);

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
        for (int i = 0; i < nconn; i++)
            close(conns[i].fd);
    free(st.rank_fd);
    free(conns);
    free(pfds);
    close(lfd);
    return res;
}

/* -------------------------------------------------------------- non-root */

static loom_result_t peer_connect(const struct loom_boot_params *p,
                                  const struct sockaddr_storage *ss, socklen_t sl,
                                  const char *root, double deadline, int *fdp,
                                  char *err, size_t errlen)
{
    double backoff = BOOT_BACKOFF_MIN;
    int last = 0;
    for (;;) {
        int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, errlen, "bootstrap: socket(): %s", strerror(errno));
            return LOOM_ERROR_SYSTEM;
        }
        int e = 0;
        if (connect(fd, (const struct sockaddr *)ss, sl) < 0) {
            e = errno;
            if (e == EINPROGRESS || e == EINTR) {
                int w = loom_boot_wait(fd, POLLOUT, deadline, p->wake_fd);
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
        int w = loom_boot_wait(-1, 0, wake, p->wake_fd);
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
                                   const void *my_ep, size_t ep_len, void *all_eps,
                                   size_t ep_stride, uint64_t *comm_id, char *err,
                                   size_t errlen)
{
    double deadline = loom_now() + p->timeout;
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
    LOOM_CHECK(peer_connect(p, &ss, sl, root, deadline, &fd, err, errlen));

    int eof = 0;
    char why[300];
    uint8_t chal[LOOM_AUTH_MSG_LEN], ca[LOOM_AUTH_CHAL_LEN], cc[LOOM_AUTH_CHAL_LEN];
    loom_result_t res = loom_boot_read_all(fd, chal, sizeof chal, deadline,
                                           p->wake_fd, &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "waiting for its challenge", err, errlen);
        goto out;
    }
    if (loom_boot_chal_check(chal, ca, why, sizeof why) != LOOM_BOOT_OK) {
        snprintf(err, errlen, "bootstrap: %s %s", root, why);
        res = LOOM_ERROR_PROTOCOL;
        goto out;
    }
    uint8_t hello[BOOT_HELLO_LEN + LOOM_EP_MAX + LOOM_BOOT_AUTH_LEN];
    struct loom_boot_hello h = {
        .magic = LOOM_BOOT_HELLO_MAGIC, .version = LOOM_BOOT_VERSION,
        .flags = key->set ? LOOM_AUTH_FLAG_KEYED : 0, .rank = (uint32_t)p->rank,
        .nranks = (uint32_t)p->nranks, .table_hash = p->table_hash,
        .ep_len = (uint32_t)ep_len};
    loom_boot_hello_encode(&h, hello);
    memcpy(hello + BOOT_HELLO_LEN, my_ep, ep_len);
    size_t hlen = BOOT_HELLO_LEN + ep_len;
    res = loom_auth_challenge(cc);
    if (res == LOOM_SUCCESS)
        res = loom_boot_hello_sign(key, ca, cc, hello, hlen, hello + hlen);
    if (res < 0) {
        snprintf(err, errlen, "bootstrap: rank %d cannot sign its hello: %s",
                 p->rank, loom_result_string(res));
        goto out;
    }
    res = loom_boot_write_all(fd, hello, hlen + LOOM_BOOT_AUTH_LEN, deadline,
                              p->wake_fd);
    if (res < 0) {
        link_error(p, res, 0, root, "sending its hello", err, errlen);
        goto out;
    }
    /* Rank 0 answers with its proof of the key, or refuses at once. */
    uint8_t hdr[LOOM_AUTH_MSG_LEN + 12];
    res = loom_boot_read_all(fd, hdr, BOOT_ANSWER_LEN, deadline, p->wake_fd, &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "waiting for its key proof", err, errlen);
        goto out;
    }
    if (loom_get_le32(hdr) == LOOM_BOOT_PROOF_MAGIC) {
        res = loom_boot_read_all(fd, hdr + BOOT_ANSWER_LEN,
                                 LOOM_AUTH_MSG_LEN - BOOT_ANSWER_LEN, deadline,
                                 p->wake_fd, &eof);
        if (res < 0) {
            link_error(p, res, eof, root, "reading its key proof", err, errlen);
            goto out;
        }
        int rc = loom_boot_proof_check(key, hdr, ca, cc, hello, hlen, why,
                                       sizeof why);
        if (rc != LOOM_BOOT_OK) {
            snprintf(err, errlen, "bootstrap: rank 0 at %s %s", root, why);
            res = rc == LOOM_BOOT_BAD_KEY ? LOOM_ERROR_MISMATCH
                                          : LOOM_ERROR_PROTOCOL;
            goto out;
        }
        res = loom_boot_read_all(fd, hdr, BOOT_ANSWER_LEN, deadline, p->wake_fd,
                                 &eof);
        if (res < 0) {
            link_error(p, res, eof, root, "waiting for the endpoints", err,
                       errlen);
            goto out;
        }
    }
    if (loom_get_le32(hdr) != BOOT_ANSWER_MAGIC ||
        loom_get_le16(hdr + 4) != BOOT_VERSION) {
        snprintf(err, errlen, "bootstrap: %s is not a Loom rank 0 (bad answer "
                 "magic 0x%08x)", root, (unsigned)loom_get_le32(hdr));
        res = LOOM_ERROR_PROTOCOL;
        goto out;
    }
    res = loom_boot_read_all(fd, hdr + BOOT_ANSWER_LEN, 4, deadline, p->wake_fd,
                             &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "waiting for the endpoints", err, errlen);
        goto out;
    }
    if (loom_get_le16(hdr + 6) != 0) {
        uint32_t mlen = loom_get_le32(hdr + 8);
        char msg[BOOT_MSG_MAX + 1] = "";
        if (mlen > BOOT_MSG_MAX)
            mlen = BOOT_MSG_MAX;
        if (loom_boot_read_all(fd, msg, mlen, deadline, p->wake_fd, &eof) < 0)
            mlen = 0;
        msg[mlen] = '\0';
        snprintf(err, errlen, "bootstrap: rank 0 at %s refused rank %d: %s", root,
                 p->rank, mlen ? msg : "(no reason given)");
        int status = -(int)loom_get_le16(hdr + 6);
        res = status >= LOOM_ERROR_INTERNAL ? (loom_result_t)status
                                            : LOOM_ERROR_PROTOCOL;
        goto out;
    }
    res = loom_boot_read_all(fd, hdr + BOOT_ANSWER_LEN + 4, 8, deadline,
                             p->wake_fd, &eof);
    if (res < 0) {
        link_error(p, res, eof, root, "reading the endpoints", err, errlen);
        goto out;
    }
    *comm_id = loom_get_le64(hdr + 8);
    uint32_t n = loom_get_le32(hdr + 16);
    if (n != (uint32_t)p->nranks) {
        snprintf(err, errlen, "bootstrap: rank 0 at %s answered with %u ranks, "
                 "this rank expects %d", root, n, p->nranks);
        res = LOOM_ERROR_PROTOCOL;
        goto out;
    }
    for (int r = 0; r < p->nranks; r++) {
        uint8_t lb[4];
        res = loom_boot_read_all(fd, lb, 4, deadline, p->wake_fd, &eof);
        uint32_t len = res == LOOM_SUCCESS ? loom_get_le32(lb) : 0;
        if (res == LOOM_SUCCESS && (len > LOOM_EP_MAX || len > ep_stride)) {
            snprintf(err, errlen, "bootstrap: rank 0 at %s sent a %u-byte endpoint "
                     "for rank %d (limit %zu)", root, len, r,
                     ep_stride < LOOM_EP_MAX ? ep_stride : (size_t)LOOM_EP_MAX);
            res = LOOM_ERROR_PROTOCOL;
            goto out;
        }
        if (res == LOOM_SUCCESS)
            res = loom_boot_read_all(fd, (uint8_t *)all_eps + (size_t)r * ep_stride,
                                     len, deadline, p->wake_fd, &eof);
        if (res < 0) {
            link_error(p, res, eof, root, "reading the endpoints", err, errlen);
            goto out;
        }
    }
out:
    close(fd);
    return res;
}

loom_result_t loom_bootstrap_exchange(const struct loom_boot_params *p,
                                      const void *my_ep, size_t ep_len,
                                      void *all_eps, size_t ep_stride,
                                      uint64_t *comm_id, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    if (!p || !all_eps || !comm_id || (ep_len && !my_ep)) {
        snprintf(err, errlen, "bootstrap: missing argument");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (p->nranks < 1 || p->nranks > BOOT_NRANKS_MAX || p->rank < 0 ||
        p->rank >= p->nranks) {
        snprintf(err, errlen, "bootstrap: rank %d of %d ranks is out of range",
                 p->rank, p->nranks);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (ep_len > LOOM_EP_MAX || ep_len > ep_stride) {
        snprintf(err, errlen, "bootstrap: endpoint of %zu bytes exceeds the limit "
                 "of %zu", ep_len, ep_stride < LOOM_EP_MAX ? ep_stride
                                                            : (size_t)LOOM_EP_MAX);
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
    memset(all_eps, 0, (size_t)p->nranks * ep_stride);
    memcpy((uint8_t *)all_eps + (size_t)p->rank * ep_stride, my_ep, ep_len);
    if (p->nranks == 1) {
        loom_auth_key_clear(&own);
        *comm_id = new_comm_id();
        return LOOM_SUCCESS;
    }
    if (!p->root_host || p->root_port <= 0 || p->root_port > 65535) {
        loom_auth_key_clear(&own);
        snprintf(err, errlen, "bootstrap: rank 0's address %s:%d is not valid",
                 p->root_host ? p->root_host : "(none)", p->root_port);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    loom_result_t res;
    if (p->rank == 0)
        res = root_exchange(p, key, all_eps, ep_stride, comm_id, err, errlen);
    else
        res = peer_exchange(p, key, my_ep, ep_len, all_eps, ep_stride, comm_id,
                            err, errlen);
    if (res < 0) /* the caller gets err and reports it */
        LOOM_INFO(LOOM_SUB_BOOT, "%s", err);
    loom_auth_key_clear(&own);
    return res;
}
