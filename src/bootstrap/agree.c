/* agree.c - agreement on the failed ranks (see agree.h).
 *
 * Messages, in the view's namespace:
 *   proposal (LOOM_OOB_TAG_AGREE, to the coordinator):
 *     magic "AGRP" u32 | version u16 | pad u16 | n u32 | pad u32 |
 *     suspects (n bits) | excluded (n bits)
 *   decision (LOOM_OOB_TAG_AGREE_DONE, published; fetched by lookups):
 *     magic "AGRD" u32 | result i32 | n u32 | coordinator u32 | msglen u32 |
 *     pad u32 | failed (n bits) | message (msglen bytes)
 * Bit r of a set is byte r / 8, bit r % 8. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/agree.h"
#include "bootstrap/oob.h"
#include "log.h"
#include "util.h"
#include "wire.h"

#define AGREE_PROP_MAGIC 0x50524741u /* "AGRP" */
#define AGREE_DONE_MAGIC 0x44524741u /* "AGRD" */
#define AGREE_VERSION 1
#define AGREE_PROP_HDR 16
#define AGREE_DONE_HDR 24
#define AGREE_MSG_MAX 480
#define AGREE_POLL 0.02              /* seconds between looks at the inbox   */
#define AGREE_PING 0.25              /* seconds between pings of a rank waited on */
#define AGREE_SWEEP0 0.05            /* coordinator: ping every missing rank */
#define AGREE_SWEEP 0.5              /* ... then at most this far apart      */

struct agree {
    const struct loom_agree_params *p;
    struct loom_oob *oob;
    int n, me;
    size_t nb;                       /* bytes of a set of n bits            */
    uint8_t *dead;                   /* n: found dead by this rank's service */
    uint8_t *excl;                   /* n                                    */
    uint8_t *hint;                   /* n: someone saw it fail               */
    uint8_t *have;                   /* n: coordinator: it proposed          */
    struct loom_agree_stats st;
    char *err;
    size_t errlen;
};

static void who(const struct agree *a, int r, char *buf, size_t len)
{
    const char *d = a->p->describe ? a->p->describe(a->p->describe_ctx, r) : NULL;
    if (d)
        snprintf(buf, len, "%s", d);
    else
        snprintf(buf, len, "rank %d", r);
}

/* "{2, 5}" (at most 16 named, then a count). */
static void list_ranks(const uint8_t *set, int n, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "{");
    int shown = 0, more = 0;
    for (int r = 0; r < n; r++) {
        if (!set[r])
            continue;
        if (shown == 16) {
            more++;
            continue;
        }
        if (off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s%d", shown ? ", " : "", r);
        shown++;
    }
    if (off < len)
        snprintf(buf + off, len - off, more ? " and %d more}" : "}", more);
}

static void bits_put(uint8_t *dst, const uint8_t *set, int n)
{
    for (int r = 0; r < n; r++)
        if (set[r])
            dst[r / 8] |= (uint8_t)(1u << (r % 8));
}

static int bit(const uint8_t *bits, int r)
{
    return (bits[r / 8] >> (r % 8)) & 1;
}

static int is_dead(struct agree *a, int r)
{
    if (!a->dead[r] && r != a->me && loom_oob_peer_error(a->oob, r, NULL, 0) < 0) {
        a->dead[r] = 1;
        LOOM_INFO(LOOM_SUB_BOOT, "agree: rank %d: rank %d is dead", a->me, r);
    }
    return a->dead[r];
}

/* The lowest rank not known dead nor excluded. */
static int coordinator_of(struct agree *a)
{
    for (int r = 0; r < a->n; r++)
        if (!a->excl[r] && !is_dead(a, r))
            return r;
    return a->me;
}

static void ask(struct agree *a, int peer, uint32_t tag)
{
    if (loom_oob_lookup(a->oob, peer, tag) == LOOM_SUCCESS)
        a->st.sent++;
}

/* Ping replies only say "alive": drop them. */
static void drain_pings(struct agree *a)
{
    void *buf;
    while (loom_oob_poll(a->oob, LOOM_OOB_TAG_PING, -1, NULL, &buf, NULL) == 1)
        free(buf);
}

static loom_result_t send_proposal(struct agree *a, int to)
{
    size_t len = AGREE_PROP_HDR + 2 * a->nb;
    uint8_t *m = calloc(1, len);
    if (!m)
        return LOOM_ERROR_NO_MEMORY;
    loom_put_le32(m, AGREE_PROP_MAGIC);
    loom_put_le16(m + 4, AGREE_VERSION);
    loom_put_le32(m + 8, (uint32_t)a->n);
    bits_put(m + AGREE_PROP_HDR, a->hint, a->n);
    bits_put(m + AGREE_PROP_HDR + a->nb, a->excl, a->n);
    loom_result_t res = loom_oob_send(a->oob, to, LOOM_OOB_TAG_AGREE, m, len);
    free(m);
    if (res == LOOM_SUCCESS)
        a->st.sent++;
    return res;
}

/* Publish a decision (every rank that takes one does, before returning). */
static loom_result_t publish(struct agree *a, loom_result_t res, const uint8_t *failed,
                             int coord, const char *msg)
{
    size_t ml = strlen(msg);
    if (ml > AGREE_MSG_MAX)
        ml = AGREE_MSG_MAX;
    size_t len = AGREE_DONE_HDR + a->nb + ml;
    uint8_t *m = calloc(1, len);
    if (!m)
        return LOOM_ERROR_NO_MEMORY;
    loom_put_le32(m, AGREE_DONE_MAGIC);
    loom_put_le32(m + 4, (uint32_t)(int32_t)res);
    loom_put_le32(m + 8, (uint32_t)a->n);
    loom_put_le32(m + 12, (uint32_t)coord);
    loom_put_le32(m + 16, (uint32_t)ml);
    bits_put(m + AGREE_DONE_HDR, failed, a->n);
    memcpy(m + AGREE_DONE_HDR + a->nb, msg, ml);
    loom_result_t r = loom_oob_publish(a->oob, LOOM_OOB_TAG_AGREE_DONE, m, len);
    free(m);
    return r;
}

/* Take a decision that rank `from` published (as this rank's own). */
static loom_result_t adopt(struct agree *a, int from, const uint8_t *m, size_t len,
                           uint8_t *failed)
{
    if (len < AGREE_DONE_HDR + a->nb || loom_get_le32(m) != AGREE_DONE_MAGIC ||
        loom_get_le32(m + 8) != (uint32_t)a->n ||
        loom_get_le32(m + 16) > AGREE_MSG_MAX ||
        len != AGREE_DONE_HDR + a->nb + loom_get_le32(m + 16)) {
        char w[256];
        who(a, from, w, sizeof w);
        snprintf(a->err, a->errlen, "shrink: %s sent a malformed decision (%zu bytes)", w,
                 len);
        return LOOM_ERROR_PROTOCOL;
    }
    loom_result_t res = (loom_result_t)(int32_t)loom_get_le32(m + 4);
    int coord = (int)loom_get_le32(m + 12);
    char msg[AGREE_MSG_MAX + 1];
    size_t ml = loom_get_le32(m + 16);
    memcpy(msg, m + AGREE_DONE_HDR + a->nb, ml);
    msg[ml] = 0;
    for (int r = 0; r < a->n; r++)
        failed[r] = (uint8_t)bit(m + AGREE_DONE_HDR, r);
    a->st.coordinator = coord;
    loom_result_t pr = publish(a, res, failed, coord, msg);
    if (res < 0)
        snprintf(a->err, a->errlen, "%s", msg);
    else if (pr < 0)
        snprintf(a->err, a->errlen, "shrink: cannot publish the decision");
    return res < 0 ? res : pr;
}

/* Coordinator: the decision is final once published. */
static loom_result_t decide(struct agree *a, loom_result_t res, uint8_t *failed,
                            const char *msg)
{
    if (res == LOOM_SUCCESS)
        for (int r = 0; r < a->n; r++)
            failed[r] = (uint8_t)(a->excl[r] || is_dead(a, r));
    else
        memset(failed, 0, (size_t)a->n);
    a->st.coordinator = a->me;
    loom_result_t pr = publish(a, res, failed, a->me, msg);
    if (res < 0)
        snprintf(a->err, a->errlen, "%s", msg);
    else if (pr < 0)
        snprintf(a->err, a->errlen, "shrink: cannot publish the decision");
    return res < 0 ? res : pr;
}

/* A proposal from rank `from`: 1 taken, 0 ignored, or a mismatch decided. */
static int take_proposal(struct agree *a, int from, const uint8_t *m, size_t len,
                         loom_result_t *res, uint8_t *failed)
{
    char w[256], mine[256], theirs[256], msg[1024];
    if (len != AGREE_PROP_HDR + 2 * a->nb || loom_get_le32(m) != AGREE_PROP_MAGIC ||
        loom_get_le32(m + 8) != (uint32_t)a->n) {
        who(a, from, w, sizeof w);
        snprintf(msg, sizeof msg, "shrink: %s sent a malformed proposal (%zu bytes, "
                 "for %u ranks; this communicator has %d)", w, len,
                 len >= 12 ? loom_get_le32(m + 8) : 0, a->n);
        *res = decide(a, LOOM_ERROR_PROTOCOL, failed, msg);
        return -1;
    }
    uint8_t *ex = calloc((size_t)a->n, 1);
    if (!ex) {
        *res = decide(a, LOOM_ERROR_NO_MEMORY, failed, "shrink: out of memory");
        return -1;
    }
    int differ = 0;
    for (int r = 0; r < a->n; r++) {
        ex[r] = (uint8_t)bit(m + AGREE_PROP_HDR + a->nb, r);
        differ |= ex[r] != a->excl[r];
        if (bit(m + AGREE_PROP_HDR, r) && !a->hint[r]) {
            a->hint[r] = 1;
            if (r != a->me && !is_dead(a, r))
                ask(a, r, LOOM_OOB_TAG_PING);
        }
    }
    if (differ) {
        who(a, from, w, sizeof w);
        list_ranks(ex, a->n, theirs, sizeof theirs);
        list_ranks(a->excl, a->n, mine, sizeof mine);
        snprintf(msg, sizeof msg, "shrink: the ranks exclude different ranks: %s "
                 "excludes %s, rank %d (the coordinator) excludes %s", w, theirs, a->me,
                 mine);
        free(ex);
        *res = decide(a, LOOM_ERROR_MISMATCH, failed, msg);
        return -1;
    }
    free(ex);
    a->have[from] = 1;
    return 1;
}

static loom_result_t coordinate(struct agree *a, uint8_t *failed, int takeover)
{
    loom_result_t res;
    void *buf;
    size_t len;
    int from;
    /* ranks not heard from soon are pinged: by then the live ones have
     * mostly proposed, so the pings go to the few that may be dead */
    double now = loom_now(), deadline = now + a->p->timeout, gap = AGREE_SWEEP0;
    double sweep = now + gap;
    LOOM_INFO(LOOM_SUB_BOOT, "agree: rank %d coordinates%s", a->me,
              takeover ? " (a coordinator before it died: asking for its decision)" : "");
    a->have[a->me] = 1;
    for (int r = 0; r < a->n; r++) {
        if (r == a->me || a->excl[r] || is_dead(a, r))
            continue;
        if (takeover)
            ask(a, r, LOOM_OOB_TAG_AGREE_DONE);
        if (a->hint[r])
            ask(a, r, LOOM_OOB_TAG_PING);
    }
    for (;;) {
        res = loom_oob_recv(a->oob, LOOM_OOB_TAG_AGREE, -1, AGREE_POLL, &from, &buf, &len);
        if (res == LOOM_SUCCESS) {
            int t = take_proposal(a, from, buf, len, &res, failed);
            free(buf);
            if (t < 0)
                return res;
            continue; /* take what else is there first */
        }
        if (res != LOOM_ERROR_TIMEOUT) {
            snprintf(a->err, a->errlen, "shrink: %s", loom_oob_error(a->oob));
            return res;
        }
        while (loom_oob_poll(a->oob, LOOM_OOB_TAG_AGREE_DONE, -1, &from, &buf, &len) == 1) {
            /* a decision a dead coordinator made: it stands */
            if (takeover) {
                res = adopt(a, from, buf, len, failed);
                free(buf);
                return res;
            }
            free(buf);
        }
        drain_pings(a);
        int missing = 0;
        for (int r = 0; r < a->n; r++)
            missing += !a->have[r] && !a->excl[r] && !is_dead(a, r);
        if (missing == 0)
            return decide(a, LOOM_SUCCESS, failed, "");
        now = loom_now();
        if (now >= deadline) {
            uint8_t *late = calloc((size_t)a->n, 1);
            char msg[1024], list[256], w[256] = "";
            for (int r = 0; late && r < a->n; r++)
                if (!a->have[r] && !a->excl[r] && !a->dead[r]) {
                    late[r] = 1;
                    if (!w[0])
                        who(a, r, w, sizeof w);
                }
            if (late)
                list_ranks(late, a->n, list, sizeof list);
            snprintf(msg, sizeof msg, "shrink: %s%s%s is alive but did not join within "
                     "%g s (it has not called loom_comm_shrink on this communicator; "
                     "coordinator rank %d)", w, missing > 1 ? " and the ranks " : "",
                     missing > 1 ? list : "", a->p->timeout, a->me);
            free(late);
            return decide(a, LOOM_ERROR_TIMEOUT, failed, msg);
        }
        if (now >= sweep) {
            for (int r = 0; r < a->n; r++)
                if (!a->have[r] && !a->excl[r] && !a->dead[r])
                    ask(a, r, LOOM_OOB_TAG_PING);
            gap = gap * 2 > AGREE_SWEEP ? AGREE_SWEEP : gap * 2;
            sweep = now + gap;
        }
    }
}

static loom_result_t participate(struct agree *a, uint8_t *failed)
{
    void *buf;
    size_t len;
    int from, c = -1;
    /* a little longer than the coordinator's own bound, so that its verdict
     * on a late rank arrives first */
    double wait = a->p->timeout * 1.5 + 2.0, deadline = 0, pinged = 0;
    for (;;) {
        int nc = coordinator_of(a);
        /* a rank this one proposed to died: it may have decided first (a
         * rank that never proposed to it could not have been waited for) */
        if (nc == a->me)
            return coordinate(a, failed, c >= 0);
        double now = loom_now();
        if (nc != c) {
            if (c >= 0)
                a->st.takeovers++;
            c = nc;
            LOOM_INFO(LOOM_SUB_BOOT, "agree: rank %d proposes to rank %d", a->me, c);
            loom_result_t r = send_proposal(a, c);
            if (r == LOOM_SUCCESS)
                ask(a, c, LOOM_OOB_TAG_AGREE_DONE);
            else if (r != LOOM_ERROR_REMOTE && r != LOOM_ERROR_TIMEOUT) {
                snprintf(a->err, a->errlen, "shrink: %s", loom_oob_error(a->oob));
                return r;
            }
            deadline = now + wait;
            pinged = now;
            continue;
        }
        loom_result_t res = loom_oob_recv(a->oob, LOOM_OOB_TAG_AGREE_DONE, -1, AGREE_POLL,
                                          &from, &buf, &len);
        if (res == LOOM_SUCCESS) {
            if (from == c) {
                res = adopt(a, from, buf, len, failed);
                free(buf);
                return res;
            }
            free(buf); /* from a coordinator this rank has left for dead */
            continue;
        }
        if (res != LOOM_ERROR_TIMEOUT) {
            snprintf(a->err, a->errlen, "shrink: %s", loom_oob_error(a->oob));
            return res;
        }
        drain_pings(a);
        now = loom_now();
        if (now - pinged >= AGREE_PING) {
            ask(a, c, LOOM_OOB_TAG_PING);
            pinged = now;
        }
        if (now >= deadline && !is_dead(a, c)) {
            char w[256];
            who(a, c, w, sizeof w);
            snprintf(a->err, a->errlen, "shrink: %s, which coordinates it, is alive but "
                     "gave no decision within %g s (it has not called loom_comm_shrink on "
                     "this communicator?)", w, wait);
            return LOOM_ERROR_TIMEOUT;
        }
    }
}

loom_result_t loom_agree_failed(const struct loom_agree_params *p, uint8_t *failed,
                                struct loom_agree_stats *stats, char *err, size_t errlen)
{
    struct agree a = {
        .p = p,
        .oob = p->oob,
        .n = loom_oob_size(p->oob),
        .me = loom_oob_rank(p->oob),
        .err = err,
        .errlen = errlen,
        .st = {.coordinator = -1},
    };
    double t0 = loom_now();
    a.nb = ((size_t)a.n + 7) / 8;
    a.dead = calloc((size_t)a.n, 1);
    a.excl = calloc((size_t)a.n, 1);
    a.hint = calloc((size_t)a.n, 1);
    a.have = calloc((size_t)a.n, 1);
    loom_result_t res = LOOM_ERROR_NO_MEMORY;
    if (!a.dead || !a.excl || !a.hint || !a.have) {
        snprintf(err, errlen, "shrink: out of memory for %d ranks", a.n);
        goto out;
    }
    for (int r = 0; r < a.n; r++) {
        a.excl[r] = p->exclude && p->exclude[r];
        a.hint[r] = p->suspect && p->suspect[r];
    }
    if (a.excl[a.me]) {
        snprintf(err, errlen, "shrink: rank %d excludes itself (an excluded rank does "
                 "not call loom_comm_shrink)", a.me);
        res = LOOM_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    res = participate(&a, failed);
out:
    a.st.seconds = loom_now() - t0;
    if (stats)
        *stats = a.st;
    free(a.dead);
    free(a.excl);
    free(a.hint);
    free(a.have);
    return res;
}
