/* check_link.c - the link layer (src/transport/common/link.c) under a fake
 * transport whose peers are socket pairs: the handshake's hello an
 * acceptor checks (refused with another magic, another communicator,
 * another token or a wrong job key; held until the peer's blob is applied;
 * accepted with the right ones), the connector failing on a refusal, a
 * failure notice that overtakes the data it follows
 * (the drain hook takes what has arrived; what has not is waited for up to
 * LOOM_LINK_GRACE, and no longer), a data path error that the peer's
 * notice explains, deadlines (the blob that never comes, the socket that
 * says nothing, a peer gone without a goodbye) and the tag order of calls. */
#include "build_config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "wire.h"
#include "transport/common/link.h"

/* ---- the fake transport --------------------------------------------------- */

struct fk_peer {
    struct loom_link_peer lk;
    int arrived; /* the drain hook completes the receives   */
    int lost;    /* the lost hook ran, with lost_res        */
    loom_result_t lost_res;
    int up, busy;
};

struct fk_priv {
    struct loom_link link;
    struct fk_peer *peers;
    int drains;
};

static void fk_up(struct loom_tx *tx, int r)
{
    ((struct fk_priv *)tx->priv)->peers[r].up = 1;
}

static void fk_drain(struct loom_tx *tx, int r)
{
    struct fk_priv *fp = tx->priv;
    fp->drains++;
    struct fk_peer *p = &fp->peers[r];
    struct loom_tx_req *req = p->arrived ? loom_link_fifo_pop(&p->lk.reqs[0]) : NULL;
    if (req)
        req->status = LOOM_SUCCESS;
}

static int fk_busy(struct loom_tx *tx, int r)
{
    return ((struct fk_priv *)tx->priv)->peers[r].busy;
}

static void fk_lost(struct loom_tx *tx, int r, loom_result_t res)
{
    struct fk_peer *p = &((struct fk_priv *)tx->priv)->peers[r];
    p->lost++;
    p->lost_res = res;
    struct loom_tx_req *req;
    while ((req = loom_link_fifo_pop(&p->lk.reqs[0])))
        req->status = res;
}

static size_t fk_blob_encode(struct loom_tx *tx, int r, uint8_t *out)
{
    (void)tx;
    (void)r;
    out[0] = 1;
    return 1;
}

static int fk_blob_apply(struct loom_tx *tx, int r, const uint8_t *b, size_t len)
{
    (void)tx;
    (void)r;
    (void)b;
    (void)len;
    return 0;
}

static const struct loom_link_ops fk_ops = {
    .name = "fake",
    .proto = {0x4b46434cu, 0x4b46464cu, "loom-fake-ctl"},
    .oob_tag = 0,
    .oob_kind = 0,
    .blob_name = "fake blob",
    .blob_encode = fk_blob_encode,
    .blob_apply = fk_blob_apply,
    .up = fk_up,
    .drain = fk_drain,
    .busy = fk_busy,
    .lost = fk_lost,
};

#define COMM 0x1234abcd5678ef00ull
#define NRANKS 4

static struct loom_tx *tx_new(int rank, const char *key)
{
    struct loom_tx *tx = calloc(1, sizeof *tx);
    ck_assert_ptr_nonnull(tx);
    tx->params.rank = rank;
    tx->params.nranks = NRANKS;
    tx->params.comm_id = COMM;
    tx->params.connect_timeout = 60;
    tx->notice_culprit = -1;
    struct fk_priv *fp = calloc(1, sizeof *fp);
    ck_assert_ptr_nonnull(fp);
    tx->priv = fp;
    ck_assert_int_eq(loom_link_init(tx, &fk_ops, sizeof *fp->peers), 0);
    fp->peers = fp->link.peers;
    if (key) {
        fp->link.key.set = 1;
        fp->link.key.len = strlen(key);
        memcpy(fp->link.key.bytes, key, fp->link.key.len);
    }
    return tx;
}

static void tx_free(struct loom_tx *tx)
{
    struct fk_priv *fp = tx->priv;
    loom_link_free(tx);
    free(fp);
    free(tx);
}

/* Peer r's link as if its blob were applied: its hello must carry tok. */
static void peer_started(struct loom_tx *tx, int r, uint8_t fill)
{
    struct loom_link *l = loom_link_of(tx);
    struct loom_link_peer *lp = loom_link_peer(tx, r);
    l->live[l->nlive++] = r;
    lp->state = LOOM_LINK_S_WAIT_CTL;
    lp->have_blob = 1;
    lp->t_start = loom_now();
    memset(lp->token, fill, sizeof lp->token);
}

/* A socket handed over by the OOB service, its handshake started: the
 * link's end of a pair; *other: the far end. */
static int pending_add(struct loom_tx *tx, int *other, double deadline)
{
    struct loom_link *l = loom_link_of(tx);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    l->pending = realloc(l->pending, sizeof *l->pending * (size_t)(l->npending + 1));
    struct loom_link_pending *pd = &l->pending[l->npending++];
    pd->fd = sv[0];
    snprintf(pd->from, sizeof pd->from, "test");
    ck_assert_int_eq(
        loom_hs_accept(&pd->hs, &l->hs, &l->key, sv[0], "test", tx, deadline - loom_now()),
        LOOM_SUCCESS);
    *other = sv[1];
    return sv[0];
}

/* The handshake rank `from` would start on fd: its hello carries token
 * fill, signed with key (NULL: none), under magic. */
static void hello_start(struct loom_hs *c, struct loom_hs_proto *proto, uint32_t magic,
                        struct loom_auth_key *k, const char *key, uint32_t from, uint32_t to,
                        uint64_t comm, uint8_t fill, int fd)
{
    struct loom_link_hello h = {.from = from, .to = to, .comm_id = comm};
    memset(h.token, fill, sizeof h.token);
    uint8_t b[LOOM_LINK_HELLO_LEN];
    loom_link_hello_encode(&h, b);
    *proto = (struct loom_hs_proto)LOOM_HS_PROTO("fake", fk_ops.proto.mac_ctx, magic, magic, magic,
                                                 LOOM_LINK_VERSION, LOOM_LINK_HELLO_LEN, NULL);
    loom_auth_key_set(k, key, key ? strlen(key) : 0);
    ck_assert_int_eq(loom_hs_connect(c, proto, k, fd, "rank 2", b, sizeof b, 10.0), LOOM_SUCCESS);
}

/* Step the link's pending socket fd and the connector c until neither
 * moves: c's last result. */
static int hs_pump(struct loom_tx *tx, int fd, struct loom_hs *c)
{
    int rc = LOOM_HS_AGAIN;
    for (int i = 0; i < 20; i++) {
        loom_link_event(tx, LOOM_LINK_EP_PENDING(fd), EPOLLIN, NULL);
        rc = loom_hs_step(c);
        if (rc != LOOM_HS_AGAIN)
            break;
    }
    return rc;
}

/* Offer a hello to rank 2 (key: its job key) from rank 1 (ckey, magic,
 * its fields); whether the socket was taken as rank 1's control socket. */
static int offer_as(const char *key, const char *ckey, uint32_t magic, uint32_t from, uint32_t to,
                    uint64_t comm, uint8_t fill, int started)
{
    struct loom_tx *tx = tx_new(2, key);
    if (started)
        peer_started(tx, 1, 0x5a);
    int other;
    int fd = pending_add(tx, &other, loom_now() + 60);
    struct loom_hs c;
    struct loom_hs_proto cp;
    struct loom_auth_key ck;
    hello_start(&c, &cp, magic, &ck, ckey, from, to, comm, fill, other);
    int rc = hs_pump(tx, fd, &c);
    struct loom_link_peer *lp = loom_link_peer(tx, 1);
    int taken = lp->ctl_fd == fd;
    if (taken) {
        /* the key proved back, and up */
        ck_assert_int_eq(rc, LOOM_HS_DONE);
        ck_assert_int_eq(lp->state, LOOM_LINK_S_UP);
        ck_assert_int_eq(((struct fk_priv *)tx->priv)->peers[1].up, 1);
    } else {
        /* refused: closed, forgotten, the peer not failed (a stranger
         * cannot fail a peer) */
        ck_assert_int_lt(rc, 0);
        if (loom_link_of(tx)->npending) {
            close(other); /* the connector gave up first */
            other = -1;
            loom_link_event(tx, LOOM_LINK_EP_PENDING(fd), EPOLLIN, NULL);
        }
        ck_assert_int_eq(loom_link_of(tx)->npending, 0);
        ck_assert_int_eq(lp->failed, 0);
    }
    loom_hs_free(&c);
    if (other >= 0)
        close(other);
    tx_free(tx);
    return taken;
}

static int offer(const char *key, const char *ckey, uint32_t from, uint32_t to, uint64_t comm,
                 uint8_t fill)
{
    return offer_as(key, ckey, fk_ops.proto.hello_magic, from, to, comm, fill, 1);
}

/* ---- the hello ------------------------------------------------------------ */

START_TEST(test_hello_accepted)
{
    ck_assert_int_eq(offer(NULL, NULL, 1, 2, COMM, 0x5a), 1);
    ck_assert_int_eq(offer("sesame", "sesame", 1, 2, COMM, 0x5a), 1);
}
END_TEST

START_TEST(test_hello_refused)
{
    /* another transport's magic */
    ck_assert_int_eq(offer_as(NULL, NULL, 0x4843464cu, 1, 2, COMM, 0x5a, 1), 0);
    /* another communicator, another addressee, a higher rank, no rank */
    ck_assert_int_eq(offer(NULL, NULL, 1, 2, COMM + 1, 0x5a), 0);
    ck_assert_int_eq(offer(NULL, NULL, 1, 3, COMM, 0x5a), 0);
    ck_assert_int_eq(offer(NULL, NULL, 3, 2, COMM, 0x5a), 0);
    ck_assert_int_eq(offer(NULL, NULL, NRANKS + 7, 2, COMM, 0x5a), 0);
    /* a token this rank did not give */
    ck_assert_int_eq(offer(NULL, NULL, 1, 2, COMM, 0x5b), 0);
    /* a wrong job key, none where one is needed, one where none is */
    ck_assert_int_eq(offer("sesame", "sesamf", 1, 2, COMM, 0x5a), 0);
    ck_assert_int_eq(offer("sesame", NULL, 1, 2, COMM, 0x5a), 0);
    ck_assert_int_eq(offer(NULL, "sesame", 1, 2, COMM, 0x5a), 0);
}
END_TEST

/* A peer that has not started a link with this rank gets no socket. */
START_TEST(test_hello_unstarted_refused)
{
    ck_assert_int_eq(offer_as(NULL, NULL, fk_ops.proto.hello_magic, 1, 2, COMM, 0, 0), 0);
}
END_TEST

/* A hello whose sender's blob has not been applied yet waits for it (the
 * deadline still runs), then is accepted. */
START_TEST(test_hello_held)
{
    struct loom_tx *tx = tx_new(2, NULL);
    peer_started(tx, 1, 0x5a);
    struct loom_link_peer *lp = loom_link_peer(tx, 1);
    lp->state = LOOM_LINK_S_WAIT_BLOB;
    int other;
    int fd = pending_add(tx, &other, loom_now() + 60);
    struct loom_hs c;
    struct loom_hs_proto cp;
    struct loom_auth_key ck;
    hello_start(&c, &cp, fk_ops.proto.hello_magic, &ck, NULL, 1, 2, COMM, 0x5a, other);
    ck_assert_int_eq(hs_pump(tx, fd, &c), LOOM_HS_AGAIN);
    ck_assert_int_eq(loom_link_of(tx)->npending, 1);
    ck_assert_int_eq(lp->ctl_fd, -1);
    lp->state = LOOM_LINK_S_WAIT_CTL; /* as apply_blob leaves it */
    ck_assert_int_eq(hs_pump(tx, fd, &c), LOOM_HS_DONE);
    ck_assert_int_eq(lp->ctl_fd, fd);
    ck_assert_int_eq(lp->state, LOOM_LINK_S_UP);
    loom_hs_free(&c);
    close(other);
    tx_free(tx);
}
END_TEST

/* The connector: a refusal of its job key fails the peer, naming it and
 * the fix. */
START_TEST(test_connector_refused)
{
    for (int good = 0; good < 2; good++) {
        struct loom_tx *tx = tx_new(1, "sesame");
        peer_started(tx, 2, 0x11);
        struct loom_link *l = loom_link_of(tx);
        struct loom_link_peer *lp = loom_link_peer(tx, 2);
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
        lp->ctl_fd = sv[0];
        lp->ctl = LOOM_LINK_CS_HS;
        lp->hs = malloc(sizeof *lp->hs);
        uint8_t b[LOOM_LINK_HELLO_LEN] = {0};
        ck_assert_int_eq(
            loom_hs_connect(lp->hs, &l->hs, &l->key, sv[0], "rank 2", b, sizeof b, 10.0),
            LOOM_SUCCESS);
        struct loom_hs a;
        struct loom_auth_key ak;
        loom_auth_key_set(&ak, good ? "sesame" : "sesamf", 6);
        struct loom_hs_proto ap = l->hs;
        ap.check = NULL;
        ck_assert_int_eq(loom_hs_accept(&a, &ap, &ak, sv[1], "rank 1", NULL, 10.0), LOOM_SUCCESS);
        for (int i = 0; i < 20 && !lp->failed && lp->state != LOOM_LINK_S_UP; i++) {
            loom_hs_step(&a);
            loom_link_event(tx, LOOM_LINK_EP_PEER(2), EPOLLIN, NULL);
        }
        if (good) {
            ck_assert_int_eq(lp->state, LOOM_LINK_S_UP);
            ck_assert_int_eq(lp->failed, 0);
            ck_assert_ptr_null(lp->hs);
        } else {
            ck_assert_int_eq(lp->failed, LOOM_ERROR_MISMATCH);
            ck_assert_ptr_nonnull(strstr(tx->errmsg, "rank 2 rejected this rank's job key"));
            ck_assert_int_eq(tx->blame, 3);
            ck_assert_int_eq(lp->ctl_fd, -1);
        }
        loom_hs_free(&a);
        close(sv[1]);
        tx_free(tx);
    }
}
END_TEST

/* ---- notices -------------------------------------------------------------- */

/* Rank 1 with peer 2 up on a socket pair; *other: peer 2's end. */
static struct loom_tx *up_pair(int *other)
{
    struct loom_tx *tx = tx_new(1, NULL);
    peer_started(tx, 2, 0);
    struct loom_link_peer *lp = loom_link_peer(tx, 2);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    lp->ctl_fd = sv[0];
    lp->ctl = LOOM_LINK_CS_UP;
    lp->state = LOOM_LINK_S_UP;
    *other = sv[1];
    return tx;
}

static void send_notice(int fd, uint64_t seq, loom_result_t code)
{
    struct loom_link_notice n = {.culprit = -1, .code = code, .seq = seq};
    struct loom_link_frame f;
    uint8_t fb[LOOM_LINK_FRAME_LEN];
    loom_link_notice_encode(&n, &f);
    f.comm_id = COMM;
    loom_link_frame_encode(&fk_ops.proto, &f, fb);
    ck_assert_int_eq(write(fd, fb, sizeof fb), (ssize_t)sizeof fb);
}

/* The notice for call 7 comes while the receive of call `tag` (its data
 * on another path) is pending. */
static struct loom_tx *race(int arrived, uint32_t tag, struct loom_tx_req *req, int *other)
{
    struct loom_tx *tx = up_pair(other);
    struct fk_priv *fp = tx->priv;
    *req = (struct loom_tx_req){.peer = 2, .tag = tag, .status = 1};
    loom_link_fifo_push(&fp->peers[2].lk.reqs[0], req);
    fp->peers[2].arrived = arrived;
    send_notice(*other, 7, LOOM_ERROR_TIMEOUT);
    loom_link_event(tx, LOOM_LINK_EP_PEER(2), EPOLLIN, NULL);
    ck_assert_int_eq(fp->drains, 1);
    return tx;
}

/* The peer failed, with req's status. */
static void race_end(struct loom_tx *tx, int other, const struct loom_tx_req *req,
                     loom_result_t status)
{
    struct fk_priv *fp = tx->priv;
    ck_assert_int_eq(fp->peers[2].lk.failed, LOOM_ERROR_REMOTE);
    ck_assert_int_eq(req->status, status);
    close(other);
    tx_free(tx);
}

/* Its data has arrived: drained first, then the peer fails. */
START_TEST(test_notice_drains_first)
{
    struct loom_tx_req req;
    int other;
    struct loom_tx *tx = race(1, 6, &req, &other);
    ck_assert_int_eq(((struct fk_priv *)tx->priv)->peers[2].lost, 1);
    ck_assert_ptr_nonnull(strstr(tx->errmsg, "call #7"));
    race_end(tx, other, &req, LOOM_SUCCESS);
}
END_TEST

/* Its data is still on its way: the notice waits for it, then applies. */
START_TEST(test_notice_waits_for_data)
{
    struct loom_tx_req req;
    int other;
    struct loom_tx *tx = race(0, 6, &req, &other);
    struct fk_priv *fp = tx->priv;
    ck_assert_int_eq(fp->peers[2].lk.failed, 0);
    ck_assert_int_eq(loom_link_timeouts(tx), 10);
    ck_assert_int_eq(fp->peers[2].lk.failed, 0);
    /* the data lands (the transport's completion), then the next pass */
    req.status = LOOM_SUCCESS;
    loom_link_fifo_pop(&fp->peers[2].lk.reqs[0]);
    loom_link_timeouts(tx);
    race_end(tx, other, &req, LOOM_SUCCESS);
}
END_TEST

/* ... but no longer than the grace: then the pending receive fails. */
START_TEST(test_notice_grace_ends)
{
    struct loom_tx_req req;
    int other;
    struct loom_tx *tx = race(0, 6, &req, &other);
    loom_link_peer(tx, 2)->held_at -= LOOM_LINK_GRACE; /* the grace has passed */
    loom_link_timeouts(tx);
    race_end(tx, other, &req, LOOM_ERROR_REMOTE);
}
END_TEST

/* A later call's request does not hold a notice. */
START_TEST(test_notice_later_call_not_held)
{
    struct loom_tx_req req;
    int other;
    struct loom_tx *tx = race(0, 9, &req, &other);
    race_end(tx, other, &req, LOOM_ERROR_REMOTE);
}
END_TEST

/* A data path error waits a moment for the notice that explains it. */
START_TEST(test_data_error_explained)
{
    int other;
    struct loom_tx *tx = up_pair(&other);
    struct fk_priv *fp = tx->priv;
    loom_link_data_error(tx, 2, ": a send of 8 bytes failed");
    ck_assert_int_eq(fp->peers[2].lk.failed, 0);
    send_notice(other, 3, LOOM_ERROR_MISMATCH);
    loom_link_event(tx, LOOM_LINK_EP_PEER(2), EPOLLIN, NULL);
    ck_assert_int_eq(fp->peers[2].lk.failed, LOOM_ERROR_REMOTE);
    ck_assert_ptr_nonnull(strstr(tx->errmsg, "call #3"));
    ck_assert_ptr_null(strstr(tx->errmsg, "a send of 8 bytes"));
    close(other);
    tx_free(tx);

    /* no notice within the grace: the error stands */
    tx = up_pair(&other);
    fp = tx->priv;
    loom_link_data_error(tx, 2, ": a send of 8 bytes failed");
    loom_link_peer(tx, 2)->held_at -= LOOM_LINK_GRACE;
    loom_link_timeouts(tx);
    ck_assert_int_eq(fp->peers[2].lk.failed, LOOM_ERROR_REMOTE);
    ck_assert_ptr_nonnull(strstr(tx->errmsg, "a send of 8 bytes"));
    close(other);
    tx_free(tx);
}
END_TEST

/* ---- deadlines and ends --------------------------------------------------- */

START_TEST(test_blob_deadline)
{
    struct loom_tx *tx = tx_new(1, NULL);
    tx->params.connect_timeout = 5;
    peer_started(tx, 3, 0);
    struct loom_link_peer *lp = loom_link_peer(tx, 3);
    lp->state = LOOM_LINK_S_WAIT_BLOB;
    lp->have_blob = 0;
    loom_link_timeouts(tx);
    ck_assert_int_eq(lp->failed, 0);
    lp->t_start -= 6;
    loom_link_timeouts(tx);
    ck_assert_int_eq(lp->failed, LOOM_ERROR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(tx->errmsg, "rank 3 did not connect within 5 s"));
    ck_assert_ptr_nonnull(strstr(tx->errmsg, "its fake blob never came"));
    tx_free(tx);
}
END_TEST

START_TEST(test_pending_deadline)
{
    struct loom_tx *tx = tx_new(1, NULL);
    int other;
    pending_add(tx, &other, loom_now() + 60);
    loom_link_timeouts(tx);
    ck_assert_int_eq(loom_link_of(tx)->npending, 1);
    loom_link_of(tx)->pending[0].hs.deadline = loom_now() - 1;
    loom_link_timeouts(tx);
    ck_assert_int_eq(loom_link_of(tx)->npending, 0);
    uint8_t chal[LOOM_AUTH_MSG_LEN];
    ck_assert_int_eq(read(other, chal, sizeof chal), (ssize_t)sizeof chal);
    ck_assert_int_eq(read(other, chal, 1), 0);
    close(other);
    tx_free(tx);
}
END_TEST

/* A peer whose control socket ends without a goodbye: at once when
 * nothing of its may still complete, else after the grace. */
START_TEST(test_eof_without_goodbye)
{
    for (int busy = 0; busy < 2; busy++) {
        int other;
        struct loom_tx *tx = up_pair(&other);
        struct fk_priv *fp = tx->priv;
        fp->peers[2].busy = busy;
        close(other);
        loom_link_event(tx, LOOM_LINK_EP_PEER(2), EPOLLIN, NULL);
        loom_link_timeouts(tx);
        ck_assert_int_eq(fp->peers[2].lk.failed, busy ? 0 : LOOM_ERROR_REMOTE);
        if (busy) {
            loom_link_peer(tx, 2)->eof_at -= LOOM_LINK_GRACE;
            loom_link_timeouts(tx);
            ck_assert_int_eq(fp->peers[2].lk.failed, LOOM_ERROR_REMOTE);
        }
        ck_assert_ptr_nonnull(strstr(tx->errmsg, "without a goodbye"));
        tx_free(tx);
    }
}
END_TEST

/* The per-peer request lists: oldest first, a completion out of order
 * taken from the middle or the end. */
START_TEST(test_fifo)
{
    struct loom_link_fifo q = {0};
    struct loom_tx_req a = {.tag = 1}, b = {.tag = 2}, c = {.tag = 3}, d = {.tag = 4};
    ck_assert_ptr_null(loom_link_fifo_pop(&q));
    loom_link_fifo_push(&q, &a);
    loom_link_fifo_push(&q, &b);
    loom_link_fifo_push(&q, &c);
    loom_link_fifo_remove(&q, &b);
    loom_link_fifo_remove(&q, &c);
    ck_assert_ptr_eq(q.tail, &a);
    loom_link_fifo_push(&q, &d);
    loom_link_fifo_remove(&q, &b); /* not there: nothing changes */
    ck_assert_ptr_eq(loom_link_fifo_pop(&q), &a);
    ck_assert_ptr_eq(loom_link_fifo_pop(&q), &d);
    ck_assert_ptr_null(q.head);
    ck_assert_ptr_null(q.tail);
    loom_link_fifo_push(&q, &c);
    ck_assert_ptr_eq(q.head, &c);
    ck_assert_ptr_null(c.next);
}
END_TEST

/* A goodbye while this rank still expects a message from it. */
START_TEST(test_goodbye_with_pending)
{
    int other;
    struct loom_tx *tx = up_pair(&other);
    struct fk_priv *fp = tx->priv;
    struct loom_tx_req req = {.peer = 2, .tag = 4, .status = 1};
    loom_link_fifo_push(&fp->peers[2].lk.reqs[0], &req);
    struct loom_link_frame f = {.type = LOOM_LINK_BYE, .comm_id = COMM};
    uint8_t fb[LOOM_LINK_FRAME_LEN];
    loom_link_frame_encode(&fk_ops.proto, &f, fb);
    ck_assert_int_eq(write(other, fb, sizeof fb), (ssize_t)sizeof fb);
    close(other);
    loom_link_event(tx, LOOM_LINK_EP_PEER(2), EPOLLIN, NULL);
    ck_assert_int_eq(loom_link_timeouts(tx), 10);
    ck_assert_int_eq(fp->peers[2].lk.failed, 0);
    loom_link_peer(tx, 2)->bye_at -= LOOM_LINK_GRACE;
    loom_link_timeouts(tx);
    ck_assert_int_eq(fp->peers[2].lk.failed, LOOM_ERROR_REMOTE);
    ck_assert_ptr_nonnull(strstr(tx->errmsg, "still expected a message from it"));
    tx_free(tx);
}
END_TEST

/* Another communicator's frame, and bytes of no frame type (1) on a link
 * already up. */
START_TEST(test_bad_frames)
{
    for (int k = 0; k < 2; k++) {
        int other;
        struct loom_tx *tx = up_pair(&other);
        struct loom_link_frame f = {.type = k ? 1 : LOOM_LINK_PING, .comm_id = k ? COMM : COMM ^ 1};
        uint8_t fb[LOOM_LINK_FRAME_LEN];
        loom_link_frame_encode(&fk_ops.proto, &f, fb);
        ck_assert_int_eq(write(other, fb, sizeof fb), (ssize_t)sizeof fb);
        loom_link_event(tx, LOOM_LINK_EP_PEER(2), EPOLLIN, NULL);
        ck_assert_int_eq(loom_link_peer(tx, 2)->failed, LOOM_ERROR_PROTOCOL);
        ck_assert_ptr_nonnull(strstr(tx->errmsg, k ? "bytes on its control connection that "
                                                     "are not a frame"
                                                   : "a control frame of communicator"));
        close(other);
        tx_free(tx);
    }
}
END_TEST

START_TEST(test_tag_order)
{
    ck_assert(loom_link_tag_earlier(6, 7));
    ck_assert(!loom_link_tag_earlier(7, 7));
    ck_assert(!loom_link_tag_earlier(8, 7));
    /* the call number wraps in 31 bits */
    ck_assert(loom_link_tag_earlier(0x7ffffffeu, 0x80000001ull));
    /* Loom's own calls count apart from the user's */
    ck_assert(!loom_link_tag_earlier(0x80000001u, 7));
    ck_assert(loom_link_tag_earlier(0x80000001u, (1ull << 63) | 2));
    ck_assert(!loom_link_tag_earlier(1, (1ull << 63) | 2));
}
END_TEST

static Suite *link_suite(void)
{
    Suite *s = suite_create("link");
    TCase *tc = tcase_create("hello");
    tcase_add_test(tc, test_hello_accepted);
    tcase_add_test(tc, test_hello_refused);
    tcase_add_test(tc, test_hello_unstarted_refused);
    tcase_add_test(tc, test_hello_held);
    tcase_add_test(tc, test_connector_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("notice");
    tcase_add_test(tc, test_notice_drains_first);
    tcase_add_test(tc, test_notice_waits_for_data);
    tcase_add_test(tc, test_notice_grace_ends);
    tcase_add_test(tc, test_notice_later_call_not_held);
    tcase_add_test(tc, test_data_error_explained);
    suite_add_tcase(s, tc);
    tc = tcase_create("deadlines");
    tcase_add_test(tc, test_blob_deadline);
    tcase_add_test(tc, test_pending_deadline);
    tcase_add_test(tc, test_eof_without_goodbye);
    tcase_add_test(tc, test_goodbye_with_pending);
    tcase_add_test(tc, test_fifo);
    tcase_add_test(tc, test_bad_frames);
    tcase_add_test(tc, test_tag_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(link_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
