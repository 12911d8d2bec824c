/* check_handshake.c - the signed hello of every Loom socket (net/handshake.h):
 * both sides over a socketpair and over loopback TCP, with and without a job
 * key; refusals (wrong magic, another protocol version, another key, a key
 * on one side, a payload the acceptor refuses, holds or drops, an oversized
 * hello); a peer that stalls mid-hello cut at the deadline; and the pure
 * decoders on tampered bytes. */
#include "build_config.h"

#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "auth.h"
#include "util.h"
#include "wire.h"
#include "net/handshake.h"
#include "net/net.h"

struct verdict {
    int rc; /* what check returns                           */
    int calls;
    int hold_for; /* LOOM_HS_HOLD this many calls first            */
    char seen[64];
};

static int check_payload(void *arg, const uint8_t *payload, size_t len, char *why, size_t whylen)
{
    struct verdict *v = arg;
    v->calls++;
    snprintf(v->seen, sizeof v->seen, "%.*s", (int)len, (const char *)payload);
    if (v->calls <= v->hold_for)
        return LOOM_HS_HOLD;
    if (v->rc != LOOM_HS_ACCEPT)
        snprintf(why, whylen, "hello for job 7, this is job 9 (another job)");
    return v->rc;
}

static const struct loom_hs_proto proto = {.name = "test",
                                           .ctx = "test",
                                           .chal_magic = 0x4c484354u,
                                           .hello_magic = 0x4c454854u,
                                           .proof_magic = 0x46525054u,
                                           .version = 1,
                                           .payload_max = 256,
                                           .check = check_payload};

static struct loom_auth_key key_a, key_b, none;

static void setup(void)
{
    loom_auth_key_set(&key_a, "key-a", 5);
    loom_auth_key_set(&key_b, "key-b", 5);
    loom_auth_key_set(&none, "", 0);
}

static void pair(int sv[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    loom_net_set_nonblock(sv[0]);
    loom_net_set_nonblock(sv[1]);
}

/* Step both sides in turn until neither moves. */
static void drive(struct loom_hs *c, struct loom_hs *a, int *rc_c, int *rc_a)
{
    *rc_c = *rc_a = LOOM_HS_AGAIN;
    for (int i = 0; i < 100 && (*rc_c == LOOM_HS_AGAIN || *rc_a == LOOM_HS_AGAIN); i++) {
        if (*rc_c == LOOM_HS_AGAIN)
            *rc_c = loom_hs_step(c);
        if (*rc_a == LOOM_HS_AGAIN)
            *rc_a = loom_hs_step(a);
    }
}

/* A whole handshake between keys kc (connector) and ka (acceptor). */
static void run_pair(const struct loom_hs_proto *pc, const struct loom_auth_key *kc,
                     const struct loom_auth_key *ka, struct verdict *v, const char *payload,
                     int *rc_c, int *rc_a, struct loom_hs *c, struct loom_hs *a)
{
    int sv[2];
    pair(sv);
    ck_assert_int_eq(
        loom_hs_connect(c, pc, kc, sv[0], "rank 1 (test)", payload, strlen(payload), 10.0),
        LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_accept(a, &proto, ka, sv[1], NULL, v, 10.0), LOOM_SUCCESS);
    drive(c, a, rc_c, rc_a);
    close(sv[0]);
    close(sv[1]);
}

START_TEST(test_round_trip)
{
    const struct loom_auth_key *keys[] = {&key_a, &none};
    for (int k = 0; k < 2; k++) {
        struct verdict v = {.rc = LOOM_HS_ACCEPT};
        struct loom_hs c, a;
        int rc_c, rc_a;
        run_pair(&proto, keys[k], keys[k], &v, "rank 3 of 8", &rc_c, &rc_a, &c, &a);
        ck_assert_int_eq(rc_c, LOOM_HS_DONE);
        ck_assert_int_eq(rc_a, LOOM_HS_DONE);
        size_t len;
        const uint8_t *p = loom_hs_payload(&a, &len);
        ck_assert_uint_eq(len, 11);
        ck_assert_mem_eq(p, "rank 3 of 8", 11);
        ck_assert_str_eq(v.seen, "rank 3 of 8");
        loom_hs_free(&c);
        loom_hs_free(&a);
    }
    /* an empty payload */
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    struct loom_hs c, a;
    int rc_c, rc_a;
    run_pair(&proto, &key_a, &key_a, &v, "", &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_c, LOOM_HS_DONE);
    ck_assert_int_eq(rc_a, LOOM_HS_DONE);
    loom_hs_free(&c);
    loom_hs_free(&a);
}
END_TEST

START_TEST(test_wrong_key)
{
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    struct loom_hs c, a;
    int rc_c, rc_a;
    run_pair(&proto, &key_b, &key_a, &v, "x", &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_a, LOOM_ERROR_MISMATCH);
    ck_assert_int_eq(rc_c, LOOM_ERROR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(a.err, "job key does not match"));
    ck_assert_ptr_nonnull(strstr(c.err, "rank 1 (test)"));
    ck_assert_ptr_nonnull(strstr(c.err, "refused this side's hello: job key does not match"));
    ck_assert_int_eq(v.calls, 0); /* the payload is not looked at */
    loom_hs_free(&c);
    loom_hs_free(&a);
    /* a key on one side only: the connector sees it in the challenge */
    run_pair(&proto, &none, &key_a, &v, "x", &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_c, LOOM_ERROR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(c.err, "it has a job key, this side has none"));
    loom_hs_free(&c);
    loom_hs_free(&a);
}
END_TEST

START_TEST(test_wrong_version)
{
    struct loom_hs_proto p2 = proto;
    p2.version = 2;
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    struct loom_hs c, a;
    int rc_c, rc_a;
    run_pair(&p2, &key_a, &key_a, &v, "x", &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_c, LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(c.err, "speaks test protocol version 1, this side 2"));
    loom_hs_free(&c);
    loom_hs_free(&a);
}
END_TEST

START_TEST(test_not_loom)
{
    /* a connector of another protocol: not answered, named */
    struct loom_hs_proto other = proto;
    other.chal_magic = 0x11111111u;
    other.hello_magic = 0x22222222u;
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    struct loom_hs c, a;
    int rc_c, rc_a;
    run_pair(&other, &key_a, &key_a, &v, "x", &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_c, LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(c.err, "not a Loom test socket"));
    loom_hs_free(&c);
    loom_hs_free(&a);
    /* an acceptor fed an HTTP request */
    int sv[2];
    pair(sv);
    ck_assert_int_eq(loom_hs_accept(&a, &proto, &key_a, sv[1], "10.0.0.9:80", &v, 10.0),
                     LOOM_SUCCESS);
    ck_assert_int_eq(write(sv[0], "GET / HTTP/1.0\r\n", 16), 16);
    ck_assert_int_eq(loom_hs_run(&a, -1), LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(a.err, "test handshake with 10.0.0.9:80: not a Loom test "
                                        "socket (hello magic 0x20544547)"));
    char buf[64];
    ck_assert_int_eq(read(sv[0], buf, sizeof buf), LOOM_AUTH_MSG_LEN); /* the challenge only */
    loom_hs_free(&a);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_payload_refused)
{
    struct verdict v = {.rc = LOOM_ERROR_MISMATCH};
    struct loom_hs c, a;
    int rc_c, rc_a;
    run_pair(&proto, &key_a, &key_a, &v, "job 7", &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_a, LOOM_ERROR_MISMATCH);
    ck_assert_int_eq(rc_c, LOOM_ERROR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(c.err, "refused this side's hello: hello for job 7, this "
                                        "is job 9 (another job)"));
    loom_hs_free(&c);
    loom_hs_free(&a);
    /* dropped: no answer; the connector sees the close */
    v = (struct verdict){.rc = LOOM_HS_DROP};
    int sv[2];
    pair(sv);
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, sv[0], NULL, "job 7", 5, 10.0),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_accept(&a, &proto, &key_a, sv[1], NULL, &v, 10.0), LOOM_SUCCESS);
    drive(&c, &a, &rc_c, &rc_a);
    ck_assert_int_eq(rc_a, LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(a.err, "dropped: hello for job 7"));
    ck_assert_int_eq(rc_c, LOOM_HS_AGAIN);
    close(sv[1]);
    ck_assert_int_eq(loom_hs_step(&c), LOOM_ERROR_REMOTE);
    ck_assert_ptr_nonnull(strstr(c.err, "closed the connection while this side waited for "
                                        "its proof of the job key (0 of 40 bytes)"));
    loom_hs_free(&c);
    loom_hs_free(&a);
    close(sv[0]);
}
END_TEST

START_TEST(test_hold_then_accept)
{
    struct verdict v = {.rc = LOOM_HS_ACCEPT, .hold_for = 3};
    int sv[2];
    pair(sv);
    struct loom_hs c, a;
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, sv[0], NULL, "p", 1, 10.0), LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_accept(&a, &proto, &key_a, sv[1], NULL, &v, 10.0), LOOM_SUCCESS);
    int rc_c, rc_a;
    drive(&c, &a, &rc_c, &rc_a);
    /* drive stops only when both are decided: the held one asked again */
    ck_assert_int_eq(rc_a, LOOM_HS_DONE);
    ck_assert_int_eq(rc_c, LOOM_HS_DONE);
    ck_assert_int_eq(v.calls, 4);
    loom_hs_free(&c);
    loom_hs_free(&a);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_too_long)
{
    struct loom_hs_proto big = proto;
    big.payload_max = 1024;
    char payload[300];
    memset(payload, 'x', sizeof payload - 1);
    payload[sizeof payload - 1] = '\0';
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    struct loom_hs c, a;
    int rc_c, rc_a;
    run_pair(&big, &key_a, &key_a, &v, payload, &rc_c, &rc_a, &c, &a);
    ck_assert_int_eq(rc_a, LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(a.err, "test hello of 299 bytes exceeds the limit of 256"));
    ck_assert_int_eq(rc_c, LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(c.err, "exceeds the limit of 256"));
    loom_hs_free(&c);
    loom_hs_free(&a);
    /* and the connector will not send one */
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, -1, "x", payload, strlen(payload), 1.0),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_hs_free(&c);
}
END_TEST

/* A peer that stops part way through its hello is cut at the deadline, and
 * the message names it and how far it got. */
START_TEST(test_stall_mid_hello)
{
    int sv[2];
    pair(sv);
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    struct loom_hs a;
    ck_assert_int_eq(loom_hs_accept(&a, &proto, &key_a, sv[1], "rank 5 (10.0.0.5:9)", &v, 0.3),
                     LOOM_SUCCESS);
    uint8_t head[LOOM_HS_HEAD_LEN];
    loom_put_le32(head, proto.hello_magic);
    loom_put_le16(head + 4, proto.version);
    loom_put_le16(head + 6, LOOM_AUTH_FLAG_KEYED);
    loom_put_le32(head + 8, 4);
    ck_assert_int_eq(write(sv[0], head, sizeof head), (ssize_t)sizeof head);
    ck_assert_int_eq(write(sv[0], "ab", 2), 2);
    double t0 = loom_now();
    ck_assert_int_eq(loom_hs_run(&a, -1), LOOM_ERROR_TIMEOUT);
    ck_assert(loom_now() - t0 >= 0.25);
    ck_assert_ptr_nonnull(strstr(a.err, "with rank 5 (10.0.0.5:9): timed out after 0.3 s "
                                        "waiting for its hello (14 of 80 bytes)"));
    loom_hs_free(&a);
    close(sv[0]);
    close(sv[1]);
    /* a connector whose acceptor never sends its challenge */
    pair(sv);
    struct loom_hs c;
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, sv[0], "rank 0", "x", 1, 0.2),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_run(&c, -1), LOOM_ERROR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(c.err, "waiting for its challenge (0 of 40 bytes)"));
    loom_hs_free(&c);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_abort_by_wake_fd)
{
    int sv[2], wake[2];
    pair(sv);
    ck_assert_int_eq(pipe(wake), 0);
    ck_assert_int_eq(write(wake[1], "x", 1), 1);
    struct loom_hs c;
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, sv[0], "rank 0", "x", 1, 30.0),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_run(&c, wake[0]), LOOM_ERROR_ABORTED);
    ck_assert_ptr_nonnull(strstr(c.err, "aborted"));
    loom_hs_free(&c);
    close(sv[0]);
    close(sv[1]);
    close(wake[0]);
    close(wake[1]);
}
END_TEST

/* Loopback TCP, the blocking helper on both sides (one in a thread). */
struct acceptor {
    int lfd;
    const struct loom_auth_key *key;
    struct verdict v;
    struct loom_hs hs;
    loom_result_t res;
};

static void *accept_main(void *arg)
{
    struct acceptor *ac = arg;
    int fd = accept(ac->lfd, NULL, NULL);
    loom_net_set_nonblock(fd);
    ac->res = loom_hs_accept(&ac->hs, &proto, ac->key, fd, NULL, &ac->v, 10.0);
    if (ac->res == LOOM_SUCCESS)
        ac->res = loom_hs_run(&ac->hs, -1);
    close(fd);
    return NULL;
}

/* A listener on loopback with its acceptor thread; returns the connected
 * (non-blocking) client socket. */
static int loopback(struct acceptor *ac, pthread_t *t)
{
    ac->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    ck_assert_int_eq(bind(ac->lfd, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(ac->lfd, 1), 0);
    ck_assert_int_eq(getsockname(ac->lfd, (struct sockaddr *)&sin, &sl), 0);
    ck_assert_int_eq(pthread_create(t, NULL, accept_main, ac), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    loom_net_set_nonblock(fd);
    return fd;
}

/* Each side stepped only when poll says its socket is ready: a refusal
 * reaches the connector at once, not at the deadline. */
START_TEST(test_loopback_refusal)
{
    struct acceptor ac = {.v = {.rc = LOOM_HS_ACCEPT}, .key = &key_a};
    pthread_t t;
    int fd = loopback(&ac, &t);
    struct loom_hs c;
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_b, fd, NULL, "x", 1, 10.0), LOOM_SUCCESS);
    double t0 = loom_now();
    ck_assert_int_eq(loom_hs_run(&c, -1), LOOM_ERROR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(c.err, "refused this side's hello: job key does not match"));
    pthread_join(t, NULL);
    ck_assert_int_eq(ac.res, LOOM_ERROR_MISMATCH);
    ck_assert(loom_now() - t0 < 9.0);
    loom_hs_free(&c);
    loom_hs_free(&ac.hs);
    close(fd);
    close(ac.lfd);
}
END_TEST

/* The state lives in the struct alone: a copy taken mid-way goes on. */
START_TEST(test_moved_mid_way)
{
    struct verdict v = {.rc = LOOM_HS_ACCEPT};
    int sv[2];
    pair(sv);
    struct loom_hs c, a, c2, a2;
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, sv[0], NULL, "moved", 5, 10.0),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_accept(&a, &proto, &key_a, sv[1], NULL, &v, 10.0), LOOM_SUCCESS);
    /* one moved before its first step, the other part way */
    memcpy(&a2, &a, sizeof a);
    memset(&a, 0xee, sizeof a);
    ck_assert_int_eq(loom_hs_step(&a2), LOOM_HS_AGAIN); /* challenge sent */
    ck_assert_int_eq(loom_hs_step(&c), LOOM_HS_AGAIN);  /* hello sent */
    memcpy(&c2, &c, sizeof c);
    memset(&c, 0xee, sizeof c);
    int rc_c, rc_a;
    drive(&c2, &a2, &rc_c, &rc_a);
    ck_assert_int_eq(rc_c, LOOM_HS_DONE);
    ck_assert_int_eq(rc_a, LOOM_HS_DONE);
    ck_assert_str_eq(v.seen, "moved");
    loom_hs_free(&c2);
    loom_hs_free(&a2);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(test_loopback_blocking)
{
    struct acceptor ac = {.v = {.rc = LOOM_HS_ACCEPT}, .key = &key_a};
    pthread_t t;
    int fd = loopback(&ac, &t);
    uint8_t payload[200];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7 + 1);
    struct loom_hs c;
    ck_assert_int_eq(loom_hs_connect(&c, &proto, &key_a, fd, NULL, payload, sizeof payload, 10.0),
                     LOOM_SUCCESS);
    ck_assert_int_eq(loom_hs_run(&c, -1), LOOM_SUCCESS);
    pthread_join(t, NULL);
    ck_assert_int_eq(ac.res, LOOM_SUCCESS);
    size_t len;
    const uint8_t *got = loom_hs_payload(&ac.hs, &len);
    ck_assert_uint_eq(len, sizeof payload);
    ck_assert_mem_eq(got, payload, sizeof payload);
    loom_hs_free(&c);
    loom_hs_free(&ac.hs);
    close(fd);
    close(ac.lfd);
}
END_TEST

/* The pure decoders on tampered messages. */
START_TEST(test_decoders)
{
    uint8_t ca[LOOM_AUTH_CHAL_LEN] = {1}, cc[LOOM_AUTH_CHAL_LEN] = {2};
    uint8_t msg[LOOM_HS_HEAD_LEN + 3 + LOOM_HS_TRAILER_LEN];
    char why[300];
    ck_assert_int_eq(loom_hs_hello_make(&proto, &key_a, ca, cc, "abc", 3, msg), LOOM_SUCCESS);
    size_t need = 0;
    ck_assert_int_eq(loom_hs_head_check(&proto, msg, &need, why, sizeof why), LOOM_SUCCESS);
    ck_assert_uint_eq(need, sizeof msg);
    ck_assert_int_eq(loom_hs_hello_verify(&proto, &key_a, ca, msg, sizeof msg, why, sizeof why),
                     LOOM_SUCCESS);
    /* every byte but the trailer's challenge is covered by the mac */
    for (size_t i = 0; i < sizeof msg; i++) {
        if (i >= LOOM_HS_HEAD_LEN + 3 && i < LOOM_HS_HEAD_LEN + 3 + LOOM_AUTH_CHAL_LEN)
            continue;
        if (i >= 8 && i < 12)
            continue; /* the length: refused as such, checked below */
        msg[i] ^= 0x40;
        ck_assert_int_lt(loom_hs_hello_verify(&proto, &key_a, ca, msg, sizeof msg, why, sizeof why),
                         0);
        msg[i] ^= 0x40;
    }
    loom_put_le32(msg + 8, 4);
    ck_assert_int_eq(loom_hs_hello_verify(&proto, &key_a, ca, msg, sizeof msg, why, sizeof why),
                     LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(why, "does not match its length field"));
    loom_put_le32(msg + 8, 3);
    /* the proof: good, then under the other key, then a refusal */
    uint8_t proof[LOOM_AUTH_MSG_LEN];
    ck_assert_int_eq(loom_hs_proof_make(&proto, &key_a, ca, msg, sizeof msg, proof), LOOM_SUCCESS);
    ck_assert_int_eq(
        loom_hs_proof_check(&proto, &key_a, proof, ca, cc, msg, sizeof msg, why, sizeof why),
        LOOM_SUCCESS);
    ck_assert_int_eq(
        loom_hs_proof_check(&proto, &key_b, proof, ca, cc, msg, sizeof msg, why, sizeof why),
        LOOM_ERROR_MISMATCH);
    uint8_t refusal[LOOM_AUTH_MSG_LEN + 4 + LOOM_HS_REASON_MAX];
    size_t n = loom_hs_refusal_make(&proto, &key_a, LOOM_ERROR_TIMEOUT, "slow\x01", refusal);
    ck_assert_uint_eq(n, LOOM_AUTH_MSG_LEN + 4 + 5);
    ck_assert_int_eq(
        loom_hs_proof_check(&proto, &key_a, refusal, ca, cc, msg, sizeof msg, why, sizeof why),
        LOOM_HS_REFUSED);
    size_t rlen;
    ck_assert_int_eq(loom_hs_reason_head(refusal + LOOM_AUTH_MSG_LEN, &rlen), LOOM_ERROR_TIMEOUT);
    char text[16];
    loom_hs_reason_text(refusal + LOOM_AUTH_MSG_LEN + 4, rlen, text, sizeof text);
    ck_assert_str_eq(text, "slow?");
    /* a code out of range reads as a protocol error */
    loom_put_le16(refusal + LOOM_AUTH_MSG_LEN, 999);
    ck_assert_int_eq(loom_hs_reason_head(refusal + LOOM_AUTH_MSG_LEN, &rlen), LOOM_ERROR_PROTOCOL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("handshake");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_wrong_key);
    tcase_add_test(tc, test_wrong_version);
    tcase_add_test(tc, test_not_loom);
    tcase_add_test(tc, test_payload_refused);
    tcase_add_test(tc, test_hold_then_accept);
    tcase_add_test(tc, test_too_long);
    tcase_add_test(tc, test_stall_mid_hello);
    tcase_add_test(tc, test_abort_by_wake_fd);
    tcase_add_test(tc, test_loopback_blocking);
    tcase_add_test(tc, test_loopback_refusal);
    tcase_add_test(tc, test_moved_mid_way);
    tcase_add_test(tc, test_decoders);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
