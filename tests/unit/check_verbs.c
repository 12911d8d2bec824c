/* check_verbs.c - the verbs transport without a NIC.
 *
 * proto: immediate data, sequence expansion and credits under wrap-around,
 *        CTS entries, the connection blob (round trip and every
 *        refusal), control frames, work-request ids, error mapping.
 * qp:    the attributes and masks of qp_to_init/rtr/rts (RoCE and IB).
 * gid:   device, port and GID choice over sysfs fixture trees made here
 *        (RoCE v1/v2, IPv4-mapped and IPv6 GIDs, several devices and
 *        ports, a port down, InfiniBand LIDs and IPoIB, the overrides, the
 *        error listing everything).
 * model: the software model itself (verbs_model.h) against the man pages:
 *        the QP state machine, RDMA write and write with immediate,
 *        send/receive, signalling and send-queue reclaim, inline data,
 *        completion channels, and the error completions (bad rkey or range,
 *        bad lkey, a peer process that vanished, CQ overrun, flushes).
 * transport: the verbs transport over the model between forked ranks
 *        meeting through the out-of-band service: the work requests,
 *        completions, registrations and copies each message costs (exact),
 *        chunking and staging with small slots, the injected faults (bad
 *        rkey, CQ overrun, a queue pair that vanished, a killed peer) each
 *        producing its named error, strangers on the control socket, the
 *        device choice and what available() says without the model. (The
 *        contract itself: check_transport's "verbs (software model)".) */
#include "build_config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>
#include <sys/socket.h>

#include "loom.h"
#include "config.h"
#include "bootstrap/oob.h"
#include "net/net.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_priv.h"
#include "transport/verbs/verbs_gid.h"
#include "transport/verbs/verbs_proto.h"
#include "transport/verbs/verbs_qp.h"
#include "verbs_model.h"
#include "mp_util.h"
#include "tx_util.h"

/* ------------------------------------------------------------------ proto */

START_TEST(test_imm)
{
    enum loom_verbs_imm_kind k;
    uint16_t s;
    const enum loom_verbs_imm_kind kinds[] = {LOOM_VERBS_IMM_DATA, LOOM_VERBS_IMM_CTS};
    const uint32_t seqs[] = {0, 1, 0xffff, 0x10000, 0x1fffe, 0xffffffffu};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < sizeof seqs / sizeof seqs[0]; j++) {
            uint32_t imm = loom_verbs_imm_encode(kinds[i], seqs[j]);
            ck_assert_int_eq(loom_verbs_imm_decode(imm, &k, &s), 0);
            ck_assert_int_eq(k, kinds[i]);
            ck_assert_uint_eq(s, seqs[j] & 0xffff);
        }
    ck_assert_int_eq(loom_verbs_imm_decode(0, &k, &s), -1);          /* kind 0 */
    ck_assert_int_eq(loom_verbs_imm_decode(0xc0000001u, &k, &s), -1); /* kind 3 */
    ck_assert_int_eq(loom_verbs_imm_decode(0x40010000u, &k, &s), -1); /* reserved bits */
}
END_TEST

START_TEST(test_seq_expand)
{
    /* the full number is recovered from 16 bits within +-2^15 of the
     * expected one, across the 2^16 and 2^32 boundaries */
    const uint32_t bases[] = {0, 5, 0xfff0, 0x10000, 0x7fff0000u, 0xfffffff0u, 0xffffffffu};
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
        for (int32_t d = -(1 << 15); d < (1 << 15); d += 97) {
            uint32_t seq = bases[b] + (uint32_t)d;
            ck_assert_uint_eq(loom_verbs_seq_expand(bases[b], (uint16_t)seq), seq);
        }
    ck_assert_uint_eq(loom_verbs_seq_expand(0xfffffffeu, 1), 1u);
    ck_assert_uint_eq(loom_verbs_seq_expand(2, 0xffff), 0xffffffffu);
}
END_TEST

START_TEST(test_credits)
{
    /* counters that wrap: out = posted - done, whatever the wrap */
    const uint32_t limit = 64;
    uint32_t posted = 0xffffffc0u, done = posted; /* 64 below the wrap */
    for (int round = 0; round < 4; round++) {
        int sent = 0;
        while (loom_verbs_credit_free(posted, done, limit)) {
            ck_assert(loom_verbs_seq_in_window(posted, done, limit));
            posted++;
            sent++;
        }
        ck_assert_int_eq(sent, (int)limit - (round ? 5 : 0));
        ck_assert_uint_eq(loom_verbs_credits_out(posted, done), limit);
        ck_assert(!loom_verbs_seq_in_window(posted, done, limit));
        done += limit - 5; /* consume most, leave 5 out */
        ck_assert_uint_eq(loom_verbs_credits_out(posted, done), 5);
    }
    ck_assert(posted < 0x100u); /* it did wrap */
    /* ring indices stay continuous over the wrap (power-of-two rings) */
    ck_assert_uint_eq(loom_verbs_ring_index(0xffffffffu, 64), 63);
    ck_assert_uint_eq(loom_verbs_ring_index(0x100000000ull & 0xffffffffu, 64), 0);
    ck_assert_uint_eq(loom_verbs_nchunks(0, 4096), 1);
    ck_assert_uint_eq(loom_verbs_nchunks(4096, 4096), 1);
    ck_assert_uint_eq(loom_verbs_nchunks(4097, 4096), 2);
    ck_assert_uint_eq(loom_verbs_nchunks((1ull << 33) + 1, 1ull << 30), 9);
}
END_TEST

START_TEST(test_cts)
{
    struct loom_verbs_cts c = {.addr = 0x7f0012345678ull, .rkey = 0xabcdef, .len = 65536,
                               .msg = 0x1122334455667788ull, .offset = 131072,
                               .msg_len = 1 << 20, .count = 262144, .tag = 77,
                               .desc = 0x01020304, .cts = 0xfffffffeu,
                               .flags = LOOM_VERBS_CTS_F_BOUNCE};
    uint8_t b[LOOM_VERBS_CTS_LEN];
    struct loom_verbs_cts d;
    loom_verbs_cts_encode(&c, b);
    loom_verbs_cts_decode(b, &d);
    ck_assert_mem_eq(&c, &d, sizeof c);
    ck_assert_uint_eq(loom_get_le64(b), c.addr); /* little-endian on the wire */
    char why[256];
    ck_assert_int_eq(loom_verbs_cts_check(&d, 0xfffffffeu, c.msg, why, sizeof why), 0);
    ck_assert_int_eq(loom_verbs_cts_check(&d, 0xffffffffu, c.msg, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "#4294967294"));
    ck_assert_int_eq(loom_verbs_cts_check(&d, d.cts, c.msg + 1, why, sizeof why), -1);
    d.offset = d.msg_len - 10; /* runs past the end */
    ck_assert_int_eq(loom_verbs_cts_check(&d, d.cts, c.msg, why, sizeof why), -1);
    d.offset = UINT64_MAX - 5; /* would overflow */
    ck_assert_int_eq(loom_verbs_cts_check(&d, d.cts, c.msg, why, sizeof why), -1);
    d.offset = 0;
    d.len = 0; /* an empty chunk of a non-empty message */
    ck_assert_int_eq(loom_verbs_cts_check(&d, d.cts, c.msg, why, sizeof why), -1);
    d.msg_len = 0; /* of an empty message: fine */
    ck_assert_int_eq(loom_verbs_cts_check(&d, d.cts, c.msg, why, sizeof why), 0);
    d.flags = 0x80;
    ck_assert_int_eq(loom_verbs_cts_check(&d, d.cts, c.msg, why, sizeof why), -1);

}
END_TEST

static struct loom_verbs_blob good_blob(void)
{
    struct loom_verbs_blob b = {.comm_id = 0x1234, .from = 3, .to = 1, .nonce = 99,
                                .qpn = 0x123456, .psn = 0xabcdef, .lid = 7, .mtu = 5,
                                .port = 1, .gid_index = 3, .flags = LOOM_VERBS_BLOB_F_ETHERNET,
                                .cts_entries = 64, .cts_addr = 0x7000, .cts_rkey = 11,
                                .max_msg = 1u << 30};
    for (int i = 0; i < LOOM_VERBS_TOKEN_LEN; i++)
        b.token[i] = (uint8_t)(i * 7 + 1);
    for (int i = 0; i < 16; i++)
        b.gid[i] = (uint8_t)(0xf0 + i);
    return b;
}

START_TEST(test_blob)
{
    struct loom_verbs_blob b = good_blob(), d;
    uint8_t buf[LOOM_VERBS_BLOB_MAX];
    char why[256];
    ck_assert_uint_eq(loom_verbs_blob_encode(&b, buf, 10), 0);
    size_t n = loom_verbs_blob_encode(&b, buf, sizeof buf);
    ck_assert_uint_eq(n, LOOM_VERBS_BLOB_LEN);
    ck_assert_int_eq(loom_verbs_blob_decode(buf, n, 0x1234, 4, 1, &d, why, sizeof why), 0);
    uint8_t again[LOOM_VERBS_BLOB_MAX];
    ck_assert_uint_eq(loom_verbs_blob_encode(&d, again, sizeof again), n);
    ck_assert_mem_eq(again, buf, n);
    ck_assert_uint_eq(d.qpn, 0x123456);
    ck_assert_mem_eq(d.token, b.token, sizeof b.token);

    /* each refusal names what is wrong */
    struct {
        size_t off;
        uint8_t val;
        const char *says;
    } bad[] = {
        {0, 0x00, "not a verbs"},        /* magic */
        {4, 0x02, "version 2"},          /* version */
        {8, 0x35, "communicator"},       /* comm id */
        {16, 0x09, "from rank 9"},       /* from >= nranks */
        {20, 0x02, "to rank 2"},         /* not to us */
        {64, 0x00, "qpn"},               /* qpn 0 (all four bytes, below) */
        {90, 0x06, "mtu 6"},             /* mtu */
        {91, 0x00, "port 0"},            /* port */
        {116, 0x30, "CTS ring of 48"},   /* not a power of two */
        {93, 0x80, "unknown flags"},     /* flags */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t c[LOOM_VERBS_BLOB_MAX];
        memcpy(c, buf, n);
        c[bad[i].off] = bad[i].val;
        if (bad[i].off == 64)
            memset(c + 64, 0, 4);
        ck_assert_msg(loom_verbs_blob_decode(c, n, 0x1234, 4, 1, &d, why, sizeof why) == -1,
                      "case %zu accepted", i);
        ck_assert_msg(strstr(why, bad[i].says), "case %zu: %s", i, why);
    }
    /* lengths: short, over the bound, disagreeing with the header */
    ck_assert_int_eq(loom_verbs_blob_decode(buf, 4, 0x1234, 4, 1, &d, why, sizeof why), -1);
    ck_assert_int_eq(loom_verbs_blob_decode(buf, n - 1, 0x1234, 4, 1, &d, why, sizeof why), -1);
    uint8_t big[LOOM_VERBS_BLOB_MAX + 8] = {0};
    memcpy(big, buf, n);
    loom_put_le16(big + 6, LOOM_VERBS_BLOB_MAX + 8);
    ck_assert_int_eq(loom_verbs_blob_decode(big, sizeof big, 0x1234, 4, 1, &d, why, sizeof why),
                     -1);
    /* a later minor version's longer blob is accepted, its tail ignored */
    loom_put_le16(big + 6, (uint16_t)(n + 16));
    ck_assert_int_eq(loom_verbs_blob_decode(big, n + 16, 0x1234, 4, 1, &d, why, sizeof why), 0);
    /* 24-bit QP numbers and PSNs */
    b.psn = 0x1000000;
    loom_verbs_blob_encode(&b, buf, sizeof buf);
    ck_assert_int_eq(loom_verbs_blob_decode(buf, n, 0x1234, 4, 1, &d, why, sizeof why), -1);
}
END_TEST

START_TEST(test_ctl_frames)
{
    const struct loom_link_proto vx = {LOOM_VERBS_HELLO_MAGIC, LOOM_VERBS_FRAME_MAGIC,
                                       "loom-verbs-ctl"};
    struct loom_link_hello h = {.from = 5, .to = 2, .comm_id = 0xfeedu}, h2;
    memset(h.token, 0x5a, sizeof h.token);
    uint8_t b[LOOM_LINK_HELLO_LEN];
    loom_link_hello_encode(&h, b);
    ck_assert_int_eq(loom_link_hello_decode(b, sizeof b, &h2), 0);
    uint8_t b2[LOOM_LINK_HELLO_LEN];
    loom_link_hello_encode(&h2, b2);
    ck_assert_mem_eq(b, b2, sizeof b);
    ck_assert_uint_eq(h2.from, 5);
    ck_assert_int_eq(loom_link_hello_decode(b, sizeof b - 1, &h2), -1);

    struct loom_link_frame f = {.type = LOOM_LINK_FAIL, .flags = 4, .comm_id = 1,
                                 .w0 = 12, .w1 = 1000,
                                 .w2 = 0x00030001u | (uint64_t)(uint32_t)LOOM_ERROR_TIMEOUT << 32},
                           f2;
    uint8_t fb[LOOM_LINK_FRAME_LEN];
    loom_link_frame_encode(&vx, &f, fb);
    ck_assert_int_eq(loom_link_frame_decode(&vx, fb, &f2), 0);
    ck_assert(f2.type == f.type && f2.flags == f.flags && f2.comm_id == f.comm_id &&
              f2.w0 == f.w0 && f2.w1 == f.w1 && f2.w2 == f.w2);
    ck_assert_int_eq((int32_t)(uint32_t)(f2.w2 >> 32), LOOM_ERROR_TIMEOUT);
    f.type = 99;
    loom_link_frame_encode(&vx, &f, fb);
    ck_assert_int_eq(loom_link_frame_decode(&vx, fb, &f2), -1);
    fb[0] ^= 1;
    ck_assert_int_eq(loom_link_frame_decode(&vx, fb, &f2), -1);
}
END_TEST

START_TEST(test_wrid_and_errors)
{
    const int peers[] = {0, 1, 4095, 0xffffff};
    for (size_t i = 0; i < 4; i++)
        for (int k = LOOM_VERBS_WR_RECV; k <= LOOM_VERBS_WR_DATA; k++) {
            uint64_t id = loom_verbs_wrid(peers[i], (enum loom_verbs_wr_kind)k,
                                          0xfffffffffull + (uint64_t)k);
            ck_assert_int_eq(loom_verbs_wrid_peer(id), peers[i]);
            ck_assert_int_eq(loom_verbs_wrid_kind(id), k);
            ck_assert_uint_eq(loom_verbs_wrid_index(id), ((uint64_t)k - 1) & 0xfffffffffull);
        }
    struct loom_verbs_wc_error e = loom_verbs_wc_error(IBV_WC_REM_ACCESS_ERR);
    ck_assert_str_eq(e.name, "IBV_WC_REM_ACCESS_ERR");
    ck_assert_int_eq(e.res, LOOM_ERROR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(e.hint, "rkey"));
    e = loom_verbs_wc_error(IBV_WC_RETRY_EXC_ERR);
    ck_assert_str_eq(e.name, "IBV_WC_RETRY_EXC_ERR");
    ck_assert_int_eq(e.res, LOOM_ERROR_REMOTE);
    e = loom_verbs_wc_error(IBV_WC_WR_FLUSH_ERR);
    ck_assert_str_eq(e.name, "IBV_WC_WR_FLUSH_ERR");
    e = loom_verbs_wc_error(IBV_WC_SUCCESS);
    ck_assert_int_eq(e.res, LOOM_SUCCESS);
    e = loom_verbs_wc_error(9999);
    ck_assert_int_lt(e.res, 0);
    ck_assert_int_eq(loom_verbs_errno_result(ENOMEM), LOOM_ERROR_NO_MEMORY);
    ck_assert_int_eq(loom_verbs_errno_result(ENOSYS), LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(loom_verbs_errno_result(EIO), LOOM_ERROR_SYSTEM);
}
END_TEST

/* --------------------------------------------------------------------- qp */

START_TEST(test_qp_attrs)
{
    struct loom_verbs_local l = {.port = 2, .gid_index = 3, .mtu = IBV_MTU_4096, .ethernet = 1};
    struct loom_verbs_remote r = {.qpn = 0x1234, .psn = 0x777, .lid = 0, .mtu = IBV_MTU_1024,
                                  .ethernet = 1};
    memset(r.gid, 0xab, 16);
    struct ibv_qp_attr a;
    int mask;
    loom_verbs_qp_init_attr(&l, &a, &mask);
    ck_assert_int_eq(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    ck_assert_int_eq(a.qp_state, IBV_QPS_INIT);
    ck_assert_int_eq(a.port_num, 2);
    ck_assert_int_eq(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);

    loom_verbs_qp_rtr_attr(&l, &r, &a, &mask);
    ck_assert_int_eq(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                               IBV_QP_MIN_RNR_TIMER);
    ck_assert_int_eq(a.qp_state, IBV_QPS_RTR);
    ck_assert_int_eq(a.path_mtu, IBV_MTU_1024); /* the smaller of the two */
    ck_assert_uint_eq(a.dest_qp_num, 0x1234);
    ck_assert_uint_eq(a.rq_psn, 0x777);
    ck_assert_int_eq(a.ah_attr.is_global, 1);   /* RoCE: GRH */
    ck_assert_mem_eq(a.ah_attr.grh.dgid.raw, r.gid, 16);
    ck_assert_int_eq(a.ah_attr.grh.sgid_index, 3);
    ck_assert_int_eq(a.ah_attr.grh.hop_limit, LOOM_VERBS_QP_HOP_LIMIT);
    ck_assert_int_eq(a.ah_attr.port_num, 2);

    /* InfiniBand: LID routed, no GRH */
    l.ethernet = r.ethernet = 0;
    r.lid = 0x12;
    loom_verbs_qp_rtr_attr(&l, &r, &a, &mask);
    ck_assert_int_eq(a.ah_attr.is_global, 0);
    ck_assert_int_eq(a.ah_attr.dlid, 0x12);

    loom_verbs_qp_rts_attr(0xabcdef, &a, &mask);
    ck_assert_int_eq(mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    ck_assert_int_eq(a.qp_state, IBV_QPS_RTS);
    ck_assert_uint_eq(a.sq_psn, 0xabcdef);
    ck_assert_int_eq(a.timeout, LOOM_VERBS_QP_TIMEOUT);
    ck_assert_int_eq(a.retry_cnt, 7);
    ck_assert_int_eq(a.rnr_retry, 7);
    ck_assert_int_eq(loom_verbs_mtu_bytes(IBV_MTU_4096), 4096);
    ck_assert_int_eq(loom_verbs_mtu_bytes(IBV_MTU_256), 256);
    ck_assert_int_eq(loom_verbs_mtu_bytes(9), 0);
}
END_TEST

/* -------------------------------------------------------------------- gid */

static char fx_root[64];

static void fx_write(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fx_root, rel);
    for (char *s = path + strlen(fx_root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", text);
    fclose(f);
}

static void fx_port(const char *dev, int port, const char *link, const char *state,
                    const char *lid)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%s/ports/%d/link_layer", dev, port);
    fx_write(rel, link);
    snprintf(rel, sizeof rel, "%s/ports/%d/state", dev, port);
    fx_write(rel, state);
    snprintf(rel, sizeof rel, "%s/ports/%d/lid", dev, port);
    fx_write(rel, lid);
}

static void fx_gid(const char *dev, int port, int idx, const char *gid, const char *type)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%s/ports/%d/gids/%d", dev, port, idx);
    fx_write(rel, gid);
    if (type) {
        snprintf(rel, sizeof rel, "%s/ports/%d/gid_attrs/types/%d", dev, port, idx);
        fx_write(rel, type);
    }
}

#define GID_ZERO "0000:0000:0000:0000:0000:0000:0000:0000"
#define GID_LL "fe80:0000:0000:0000:0202:c9ff:fe00:0001"
#define GID_V4(x) "0000:0000:0000:0000:0000:ffff:" x

/* mlx5_0: port 1 Ethernet ACTIVE (10.0.0.3 as v1 and v2), port 2 Ethernet
 * DOWN (10.0.0.9 v2); mlx5_1: port 1 Ethernet ACTIVE (2001:db8::5 v2,
 * 10.0.0.4 v1 only); mlx5_2: port 1 InfiniBand ACTIVE lid 0x12 (IPoIB ib0),
 * port 2 InfiniBand DOWN. */
static void fx_build(void)
{
    snprintf(fx_root, sizeof fx_root, "/tmp/loom-gidfx.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx_root));
    fx_port("mlx5_0", 1, "Ethernet", "4: ACTIVE", "0x0");
    fx_gid("mlx5_0", 1, 0, GID_LL, "IB/RoCE v1");
    fx_gid("mlx5_0", 1, 1, GID_LL, "RoCE v2");
    fx_gid("mlx5_0", 1, 2, GID_V4("0a00:0003"), "IB/RoCE v1");
    fx_gid("mlx5_0", 1, 3, GID_V4("0a00:0003"), "RoCE v2");
    fx_gid("mlx5_0", 1, 4, GID_ZERO, NULL);          /* empty entry */
    fx_gid("mlx5_0", 1, 5, "not-a-gid", "RoCE v2");   /* malformed */
    fx_port("mlx5_0", 2, "Ethernet", "1: DOWN", "0x0");
    fx_gid("mlx5_0", 2, 0, GID_LL, "RoCE v2");
    fx_gid("mlx5_0", 2, 1, GID_V4("0a00:0009"), "RoCE v2");
    fx_port("mlx5_1", 1, "Ethernet", "4: ACTIVE", "0x0");
    fx_gid("mlx5_1", 1, 0, "2001:0db8:0000:0000:0000:0000:0000:0005", "RoCE v2");
    fx_gid("mlx5_1", 1, 1, GID_V4("0a00:0004"), "IB/RoCE v1");
    fx_port("mlx5_2", 1, "InfiniBand", "4: ACTIVE", "0x12");
    fx_gid("mlx5_2", 1, 0, "fe80:0000:0000:0000:0002:c903:0000:1111", NULL);
    fx_write("mlx5_2/device/net/ib0/dev_port", "0");
    fx_port("mlx5_2", 2, "InfiniBand", "1: DOWN", "0x0");
    fx_gid("mlx5_2", 2, 0, "fe80:0000:0000:0000:0002:c903:0000:2222", NULL);
    fx_write("not_a_device/readme", "x"); /* no ports: ignored */
}

static int fx_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void fx_free(void)
{
    nftw(fx_root, fx_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* choose with the fixture; returns the result, fills c and err */
static loom_result_t fx_choose(const struct loom_verbs_topo *t, const char *addr,
                               const char *ifname, const char *hca, int gid,
                               struct loom_verbs_choice *c, char *err, size_t len)
{
    return loom_verbs_choose(t, fx_root, addr, ifname, hca, gid, c, err, len);
}

START_TEST(test_gid_scan)
{
    fx_build();
    struct loom_verbs_topo t;
    ck_assert_int_eq(loom_verbs_topo_scan(fx_root, &t), LOOM_SUCCESS);
    ck_assert_int_eq(t.ndevs, 3);
    ck_assert_str_eq(t.devs[0].name, "mlx5_0");
    ck_assert_int_eq(t.devs[0].nports, 2);
    ck_assert_int_eq(t.devs[0].ports[0].ngids, 4); /* empty and malformed skipped */
    ck_assert_int_eq(t.devs[0].ports[0].gids[3].index, 3);
    ck_assert_int_eq(t.devs[0].ports[0].gids[3].type, LOOM_VERBS_GID_ROCE_V2);
    ck_assert_int_eq(t.devs[0].ports[0].gids[2].type, LOOM_VERBS_GID_ROCE_V1);
    ck_assert_int_eq(t.devs[0].ports[0].active, 1);
    ck_assert_int_eq(t.devs[0].ports[1].active, 0);
    ck_assert_str_eq(t.devs[0].ports[1].state, "DOWN");
    ck_assert_int_eq(t.devs[2].ports[0].ethernet, 0);
    ck_assert_int_eq(t.devs[2].ports[0].lid, 0x12);
    ck_assert_int_eq(t.devs[2].ports[0].gids[0].type, LOOM_VERBS_GID_UNKNOWN);
    loom_verbs_topo_free(&t);

    /* a missing root is no devices, not an error */
    ck_assert_int_eq(loom_verbs_topo_scan("/nonexistent/loom", &t), LOOM_SUCCESS);
    ck_assert_int_eq(t.ndevs, 0);
    struct loom_verbs_choice c;
    char err[2048];
    ck_assert_int_eq(loom_verbs_choose(&t, "/nonexistent/loom", "10.0.0.3", NULL, "", -1, &c,
                                       err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "no RDMA device"));
    fx_free();
}
END_TEST

START_TEST(test_gid_choose)
{
    fx_build();
    struct loom_verbs_topo t;
    ck_assert_int_eq(loom_verbs_topo_scan(fx_root, &t), LOOM_SUCCESS);
    struct loom_verbs_choice c;
    char err[4096];

    /* IPv4-mapped, v2 preferred over v1 */
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "", -1, &c, err, sizeof err), 0);
    ck_assert_str_eq(c.dev, "mlx5_0");
    ck_assert_int_eq(c.port, 1);
    ck_assert_int_eq(c.gid_index, 3);
    ck_assert_int_eq(c.type, LOOM_VERBS_GID_ROCE_V2);
    ck_assert_int_eq(c.ethernet, 1);
    ck_assert_ptr_nonnull(strstr(c.why, "10.0.0.3"));

    /* only v1 holds it: v1 it is, on the second device */
    ck_assert_int_eq(fx_choose(&t, "10.0.0.4", NULL, "", -1, &c, err, sizeof err), 0);
    ck_assert_str_eq(c.dev, "mlx5_1");
    ck_assert_int_eq(c.gid_index, 1);
    ck_assert_int_eq(c.type, LOOM_VERBS_GID_ROCE_V1);

    /* IPv6 GID */
    ck_assert_int_eq(fx_choose(&t, "2001:db8::5", NULL, "", -1, &c, err, sizeof err), 0);
    ck_assert_str_eq(c.dev, "mlx5_1");
    ck_assert_int_eq(c.gid_index, 0);

    /* held only by a port that is down: said so */
    ck_assert_int_eq(fx_choose(&t, "10.0.0.9", NULL, "", -1, &c, err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "mlx5_0 port 2, but that port is DOWN"));

    /* nowhere: the error lists every device, port and GID */
    ck_assert_int_eq(fx_choose(&t, "192.168.1.1", NULL, "", -1, &c, err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "192.168.1.1"));
    const char *must[] = {"mlx5_0 port 1 (Ethernet, ACTIVE)", "gid 3 ::ffff:10.0.0.3 RoCE v2",
                          "gid 2 ::ffff:10.0.0.3 RoCE v1", "mlx5_0 port 2 (Ethernet, DOWN)",
                          "gid 1 ::ffff:10.0.0.9", "mlx5_1 port 1", "gid 0 2001:db8::5",
                          "mlx5_2 port 1 (InfiniBand, ACTIVE, lid 18)",
                          "gid 0 fe80::2:c903:0:1111 IB", "mlx5_2 port 2 (InfiniBand, DOWN"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        ck_assert_msg(strstr(err, must[i]), "missing \"%s\" in: %s", must[i], err);
    /* and stays within its buffer, cut with "..." */
    char small[120];
    fx_choose(&t, "192.168.1.1", NULL, "", -1, &c, small, sizeof small);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_str_eq(small + sizeof small - 4, "...");

    /* LOOM_IB_HCA narrows: 10.0.0.3 is not on mlx5_1 */
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "mlx5_1", -1, &c, err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "mlx5_0:1", -1, &c, err, sizeof err), 0);
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "mlx5_0:2", -1, &c, err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "mlx9", -1, &c, err, sizeof err),
                     LOOM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "LOOM_IB_HCA=mlx9 names no device"));
    ck_assert_ptr_nonnull(strstr(err, "mlx5_2 port 2"));
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "mlx5_0:x", -1, &c, err, sizeof err),
                     LOOM_ERROR_CONFIG);

    /* LOOM_IB_GID_INDEX takes that index on the first active port left */
    ck_assert_int_eq(fx_choose(&t, "10.0.0.3", NULL, "", 1, &c, err, sizeof err), 0);
    ck_assert_str_eq(c.dev, "mlx5_0");
    ck_assert_int_eq(c.gid_index, 1);
    ck_assert_int_eq(fx_choose(&t, NULL, NULL, "mlx5_1", 1, &c, err, sizeof err), 0);
    ck_assert_str_eq(c.dev, "mlx5_1");
    ck_assert_int_eq(fx_choose(&t, NULL, NULL, "", 7, &c, err, sizeof err), LOOM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "LOOM_IB_GID_INDEX=7"));

    /* InfiniBand: by the IPoIB interface of the address, GID 0 and the LID */
    ck_assert_int_eq(fx_choose(&t, "10.1.0.3", "ib0", "", -1, &c, err, sizeof err), 0);
    ck_assert_str_eq(c.dev, "mlx5_2");
    ck_assert_int_eq(c.port, 1);
    ck_assert_int_eq(c.gid_index, 0);
    ck_assert_int_eq(c.lid, 0x12);
    ck_assert_int_eq(c.ethernet, 0);
    /* an interface of no device: no choice */
    ck_assert_int_eq(fx_choose(&t, "10.1.0.3", "eth7", "", -1, &c, err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED);
    /* or by LOOM_IB_HCA alone */
    ck_assert_int_eq(fx_choose(&t, "10.1.0.3", NULL, "mlx5_2", -1, &c, err, sizeof err), 0);
    ck_assert_int_eq(c.lid, 0x12);
    ck_assert_int_eq(fx_choose(&t, "10.1.0.3", NULL, "mlx5_2:2", -1, &c, err, sizeof err),
                     LOOM_ERROR_NOT_SUPPORTED); /* that port is down */
    loom_verbs_topo_free(&t);
    fx_free();
}
END_TEST

START_TEST(test_gid_text)
{
    uint8_t g[16];
    char s[64];
    ck_assert_int_eq(loom_verbs_gid_parse(GID_V4("0a00:0003"), g), 0);
    loom_verbs_gid_format(g, s, sizeof s);
    ck_assert_str_eq(s, "::ffff:10.0.0.3");
    uint8_t a[16];
    ck_assert_int_eq(loom_verbs_addr_gid("10.0.0.3", a), 0);
    ck_assert_mem_eq(a, g, 16);
    ck_assert_int_eq(loom_verbs_addr_gid("fe80::1", a), 0);
    ck_assert_int_eq(loom_verbs_addr_gid("host.example", a), -1);
    ck_assert_int_eq(loom_verbs_addr_gid(NULL, a), -1);
    ck_assert_int_eq(loom_verbs_gid_parse("fe80::1", g), -1);
    ck_assert_int_eq(loom_verbs_gid_parse("fe80:0000:0000:0000:0202:c9ff:fe00:000g", g), -1);
    ck_assert_int_eq(loom_verbs_gid_parse("fe80:0000:0000:0000:0202:c9ff:fe00-0001", g), -1);
    ck_assert_int_eq(loom_verbs_gid_parse("FE80:0000:0000:0000:0202:C9FF:FE00:0001", g), 0);
    ck_assert_uint_eq(g[0], 0xfe);
}
END_TEST

/* ------------------------------------------------------------------ model */

/* One side of a loopback connection through the model. */
struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    uint8_t *buf;
    struct ibv_mr *mr;
};

static const struct loom_ibv *M;

static void model_up(double scale)
{
    struct vmodel_cfg cfg;
    vmodel_cfg_loopback(&cfg);
    cfg.time_scale = scale;
    ck_assert_int_eq(vmodel_create(&cfg), 0);
    M = vmodel_ibv();
}

static void side_open(struct side *s, int cqe, size_t buflen)
{
    int n = 0;
    struct ibv_device **list = M->get_device_list(&n);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(M->get_device_name(list[0]), "mlx5_0");
    s->ctx = M->open_device(list[0]);
    M->free_device_list(list);
    ck_assert_ptr_nonnull(s->ctx);
    s->pd = M->alloc_pd(s->ctx);
    s->ch = M->create_comp_channel(s->ctx);
    s->cq = M->create_cq(s->ctx, cqe, s, s->ch, 0);
    ck_assert_ptr_nonnull(s->cq);
    ck_assert_int_ge(s->cq->cqe, cqe);
    struct ibv_qp_init_attr ia = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 16, .max_recv_wr = 16,
                                          .max_send_sge = 2, .max_recv_sge = 2,
                                          .max_inline_data = 64}};
    s->qp = M->create_qp(s->pd, &ia);
    ck_assert_ptr_nonnull(s->qp);
    ck_assert_uint_ge(ia.cap.max_inline_data, 64);
    s->buf = calloc(1, buflen);
    s->mr = M->reg_mr(s->pd, s->buf, buflen,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ck_assert_ptr_nonnull(s->mr);
    ck_assert_uint_ne(s->mr->lkey, s->mr->rkey);
}

static const struct loom_verbs_local LOCAL = {.port = 1, .gid_index = 3, .mtu = IBV_MTU_4096,
                                              .ethernet = 1};

static struct loom_verbs_remote remote_of(const struct side *s, uint32_t psn)
{
    struct loom_verbs_remote r = {.qpn = s->qp->qp_num, .psn = psn, .mtu = IBV_MTU_4096,
                                  .ethernet = 1};
    union ibv_gid g;
    ck_assert_int_eq(M->query_gid(s->ctx, 1, 3, &g), 0);
    memcpy(r.gid, g.raw, 16);
    return r;
}

static void connect_pair(struct side *a, struct side *b)
{
    struct loom_verbs_remote ra = remote_of(a, 100), rb = remote_of(b, 200);
    ck_assert_int_eq(loom_verbs_qp_to_init(M, a->qp, &LOCAL), 0);
    ck_assert_int_eq(loom_verbs_qp_to_init(M, b->qp, &LOCAL), 0);
    ck_assert_int_eq(loom_verbs_qp_to_rtr(M, a->qp, &LOCAL, &rb), 0);
    ck_assert_int_eq(loom_verbs_qp_to_rtr(M, b->qp, &LOCAL, &ra), 0);
    ck_assert_int_eq(loom_verbs_qp_to_rts(M, a->qp, 100), 0);
    ck_assert_int_eq(loom_verbs_qp_to_rts(M, b->qp, 200), 0);
}

static void side_close(struct side *s)
{
    ck_assert_int_eq(M->destroy_qp(s->qp), 0);
    ck_assert_int_eq(M->dereg_mr(s->mr), 0);
    ck_assert_int_eq(M->destroy_cq(s->cq), 0);
    ck_assert_int_eq(M->destroy_comp_channel(s->ch), 0);
    ck_assert_int_eq(M->dealloc_pd(s->pd), 0);
    ck_assert_int_eq(M->close_device(s->ctx), 0);
    free(s->buf);
}

/* Poll cq until n completions arrived or 5 s passed. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
    int got = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (got < n) {
        int k = M->poll_cq(cq, n - got, wc + got);
        if (k < 0)
            return k;
        got += k;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 5)
            break;
        if (!k)
            usleep(200);
    }
    return got;
}

static int post_write(struct side *s, uint64_t id, void *src, uint32_t len, uint32_t lkey,
                      uint64_t raddr, uint32_t rkey, int imm, unsigned flags)
{
    struct ibv_sge sge = {.addr = (uintptr_t)src, .length = len, .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1,
                             .opcode = imm >= 0 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                             .send_flags = flags, .imm_data = htonl((uint32_t)imm),
                             .wr.rdma = {.remote_addr = raddr, .rkey = rkey}};
    struct ibv_send_wr *bad = NULL;
    return M->post_send(s->qp, &wr, &bad);
}

static int post_recv0(struct side *s, uint64_t id)
{
    struct ibv_recv_wr wr = {.wr_id = id, .num_sge = 0};
    struct ibv_recv_wr *bad;
    return M->post_recv(s->qp, &wr, &bad);
}

START_TEST(test_model_state_machine)
{
    model_up(0);
    struct side a, b;
    side_open(&a, 64, 4096);
    side_open(&b, 64, 4096);
    struct ibv_qp_attr at;
    int mask;
    /* posting before RTS fails as a NIC does; receives from Init on */
    ck_assert_int_eq(post_write(&a, 1, a.buf, 8, a.mr->lkey, 0, 0, -1, 0), EINVAL);
    ck_assert_int_eq(post_recv0(&a, 1), EINVAL); /* Reset */
    /* Reset -> RTR is no transition */
    struct loom_verbs_remote rb = remote_of(&b, 200);
    ck_assert_int_eq(loom_verbs_qp_to_rtr(M, a.qp, &LOCAL, &rb), EINVAL);
    /* a required attribute missing, or one not allowed, refuses it all */
    loom_verbs_qp_init_attr(&LOCAL, &at, &mask);
    ck_assert_int_eq(M->modify_qp(a.qp, &at, mask & ~IBV_QP_PORT), EINVAL);
    ck_assert_int_eq(M->modify_qp(a.qp, &at, mask | IBV_QP_SQ_PSN), EINVAL);
    ck_assert_int_eq(a.qp->state, IBV_QPS_RESET);
    ck_assert_int_eq(loom_verbs_qp_to_init(M, a.qp, &LOCAL), 0);
    ck_assert_int_eq(a.qp->state, IBV_QPS_INIT);
    ck_assert_int_eq(post_recv0(&a, 1), 0);
    ck_assert_int_eq(post_write(&a, 1, a.buf, 8, a.mr->lkey, 0, 0, -1, 0), EINVAL);
    /* RoCE needs a GRH; its source GID must exist; MTU within the port's */
    loom_verbs_qp_rtr_attr(&LOCAL, &rb, &at, &mask);
    at.ah_attr.is_global = 0;
    ck_assert_int_eq(M->modify_qp(a.qp, &at, mask), EINVAL);
    loom_verbs_qp_rtr_attr(&LOCAL, &rb, &at, &mask);
    at.ah_attr.grh.sgid_index = 7; /* an empty entry */
    ck_assert_int_eq(M->modify_qp(a.qp, &at, mask), EINVAL);
    loom_verbs_qp_rtr_attr(&LOCAL, &rb, &at, &mask);
    at.path_mtu = 6;
    ck_assert_int_eq(M->modify_qp(a.qp, &at, mask), EINVAL);
    ck_assert_int_eq(loom_verbs_qp_to_rtr(M, a.qp, &LOCAL, &rb), 0);
    ck_assert_int_eq(a.qp->state, IBV_QPS_RTR);
    ck_assert_int_eq(post_write(&a, 1, a.buf, 8, a.mr->lkey, 0, 0, -1, 0), EINVAL); /* RTR */
    /* RTS without its required attributes */
    at = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS};
    ck_assert_int_eq(M->modify_qp(a.qp, &at, IBV_QP_STATE), EINVAL);
    ck_assert_int_eq(loom_verbs_qp_to_rts(M, a.qp, 100), 0);
    /* to the error state: the posted receive is flushed */
    ck_assert_int_eq(loom_verbs_qp_to_err(M, a.qp), 0);
    struct ibv_wc wc[4];
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    ck_assert_uint_eq(wc[0].wr_id, 1);
    /* posting in Error completes flushed */
    ck_assert_int_eq(post_write(&a, 9, a.buf, 8, a.mr->lkey, 0, 0, -1, 0), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    ck_assert_uint_eq(wc[0].wr_id, 9);
    /* a destroyed CQ in use, a PD in use */
    ck_assert_int_eq(M->destroy_cq(a.cq), EBUSY);
    ck_assert_int_eq(M->dealloc_pd(a.pd), EBUSY);
    /* memory: remote write needs local write; unmapped memory is refused */
    ck_assert_ptr_null(M->reg_mr(a.pd, a.buf, 64, IBV_ACCESS_REMOTE_WRITE));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(M->reg_mr(a.pd, (void *)0x10000, 4096, IBV_ACCESS_LOCAL_WRITE));
    ck_assert_int_eq(errno, EFAULT);
    side_close(&a);
    side_close(&b);
    vmodel_destroy();
}
END_TEST

START_TEST(test_model_write_imm)
{
    model_up(0);
    struct side a, b;
    side_open(&a, 64, 1 << 20);
    side_open(&b, 64, 1 << 20);
    connect_pair(&a, &b);
    for (size_t i = 0; i < (1 << 20); i++)
        a.buf[i] = (uint8_t)(i * 31 + 7);
    vmodel_stats_reset();
    /* a plain write (unsignalled: no completion), then a write with
     * immediate (signalled) of a multi-packet length */
    ck_assert_int_eq(post_recv0(&b, 77), 0);
    ck_assert_int_eq(post_write(&a, 1, a.buf, 100, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey,
                                -1, 0), 0);
    ck_assert_int_eq(post_write(&a, 2, a.buf + 100, 300000, a.mr->lkey,
                                (uintptr_t)b.buf + 100, b.mr->rkey, 0x12345678,
                                IBV_SEND_SIGNALED), 0);
    struct ibv_wc wc[4];
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
    ck_assert_uint_eq(wc[0].wr_id, 2); /* only the signalled one */
    ck_assert_int_eq(wc[0].opcode, IBV_WC_RDMA_WRITE);
    ck_assert_int_eq(M->poll_cq(a.cq, 4, wc), 0);
    /* the receive: the immediate in network order, the length written */
    ck_assert_int_eq(poll_n(b.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
    ck_assert_uint_eq(wc[0].wr_id, 77);
    ck_assert_int_eq(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    ck_assert_uint_eq(ntohl(wc[0].imm_data), 0x12345678);
    ck_assert(wc[0].wc_flags & IBV_WC_WITH_IMM);
    ck_assert_uint_eq(wc[0].byte_len, 300000);
    ck_assert_uint_eq(wc[0].qp_num, b.qp->qp_num);
    ck_assert_mem_eq(b.buf, a.buf, 300100);
    struct vmodel_stats st;
    vmodel_stats(&st);
    ck_assert_uint_eq(st.writes, 1);
    ck_assert_uint_eq(st.writes_imm, 1);
    ck_assert_uint_eq(st.bytes_out, 300100);

    /* inline: the buffer may change as soon as the post returns */
    uint8_t small[48];
    memset(small, 0x5c, sizeof small);
    ck_assert_int_eq(post_recv0(&b, 78), 0);
    ck_assert_int_eq(post_write(&a, 3, small, sizeof small, 0, (uintptr_t)b.buf, b.mr->rkey, 1,
                                IBV_SEND_INLINE | IBV_SEND_SIGNALED), 0);
    memset(small, 0, sizeof small);
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(poll_n(b.cq, wc, 1), 1);
    for (int i = 0; i < 48; i++)
        ck_assert_uint_eq(b.buf[i], 0x5c);

    /* send/receive scattering over two entries */
    struct ibv_sge rs[2] = {{.addr = (uintptr_t)b.buf + 5000, .length = 10, .lkey = b.mr->lkey},
                            {.addr = (uintptr_t)b.buf + 9000, .length = 20, .lkey = b.mr->lkey}};
    struct ibv_recv_wr rw = {.wr_id = 80, .sg_list = rs, .num_sge = 2}, *rbad;
    ck_assert_int_eq(M->post_recv(b.qp, &rw, &rbad), 0);
    struct ibv_sge ss = {.addr = (uintptr_t)a.buf, .length = 25, .lkey = a.mr->lkey};
    struct ibv_send_wr sw = {.wr_id = 4, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *sbad;
    ck_assert_int_eq(M->post_send(a.qp, &sw, &sbad), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(poll_n(b.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].opcode, IBV_WC_RECV);
    ck_assert_uint_eq(wc[0].byte_len, 25);
    ck_assert_mem_eq(b.buf + 5000, a.buf, 10);
    ck_assert_mem_eq(b.buf + 9000, a.buf + 10, 15);
    side_close(&a);
    side_close(&b);
    vmodel_destroy();
}
END_TEST

START_TEST(test_model_sq_reclaim_and_channel)
{
    model_up(0);
    struct side a, b;
    side_open(&a, 64, 4096);
    side_open(&b, 64, 4096);
    connect_pair(&a, &b);
    /* the completion channel, armed before the completions come: an
     * arming reports only completions that arrive after it */
    int fl = fcntl(a.ch->fd, F_GETFL);
    fcntl(a.ch->fd, F_SETFL, fl | O_NONBLOCK);
    ck_assert_int_eq(M->req_notify_cq(a.cq, 0), 0);
    /* 16 unsignalled writes fill the send queue: the 17th is refused until
     * a signalled completion is polled */
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(post_write(&a, (uint64_t)i, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf,
                                    b.mr->rkey, -1, i == 15 ? IBV_SEND_SIGNALED : 0), 0);
    struct ibv_send_wr *bad = NULL;
    struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 99, .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .wr.rdma = {.remote_addr = (uintptr_t)b.buf, .rkey = b.mr->rkey}};
    ck_assert_int_eq(M->post_send(a.qp, &wr, &bad), ENOMEM);
    ck_assert_ptr_eq(bad, &wr); /* the failing WR is handed back */

    /* it becomes readable on the completion */
    struct pollfd pfd = {.fd = a.ch->fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
    struct ibv_cq *ecq;
    void *ectx;
    ck_assert_int_eq(M->get_cq_event(a.ch, &ecq, &ectx), 0);
    ck_assert_ptr_eq(ecq, a.cq);
    ck_assert_ptr_eq(ectx, &a);
    M->ack_cq_events(ecq, 1);
    ck_assert_int_eq(M->get_cq_event(a.ch, &ecq, &ectx), -1); /* one event per arming */
    struct ibv_wc wc[2];
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_uint_eq(wc[0].wr_id, 15);
    ck_assert_int_eq(M->post_send(a.qp, &wr, &bad), 0); /* room again */
    side_close(&a);
    side_close(&b);
    vmodel_destroy();
}
END_TEST

START_TEST(test_model_access_errors)
{
    model_up(0);
    struct side a, b;
    side_open(&a, 64, 4096);
    side_open(&b, 64, 4096);
    connect_pair(&a, &b);
    struct ibv_wc wc[8];
    ck_assert_int_eq(post_recv0(&b, 50), 0);
    ck_assert_int_eq(post_recv0(&b, 51), 0);
    /* past the end of b's region: remote access error; the write after it
     * is flushed; b's queue pair goes to error (class C) and its receives
     * are flushed */
    ck_assert_int_eq(post_write(&a, 1, a.buf, 64, a.mr->lkey, (uintptr_t)b.buf + 4090,
                                b.mr->rkey, 5, IBV_SEND_SIGNALED), 0);
    ck_assert_int_eq(post_write(&a, 2, a.buf, 64, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, 6,
                                0), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 2), 2);
    ck_assert_uint_eq(wc[0].wr_id, 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    ck_assert_uint_ne(wc[0].vendor_err, 0);
    ck_assert_uint_eq(wc[1].wr_id, 2);
    ck_assert_int_eq(wc[1].status, IBV_WC_WR_FLUSH_ERR); /* unsignalled, yet there */
    ck_assert_int_eq(poll_n(b.cq, wc, 2), 2);
    ck_assert_uint_eq(wc[0].wr_id, 50);
    ck_assert_int_eq(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    ck_assert_uint_eq(wc[1].wr_id, 51);
    ck_assert_int_eq(wc[1].status, IBV_WC_WR_FLUSH_ERR);
    ck_assert_int_eq(a.qp->state, IBV_QPS_ERR);
    ck_assert_int_eq(b.qp->state, IBV_QPS_ERR);
    side_close(&a);
    side_close(&b);

    /* a wrong rkey (the injected fault), and the lkey used as an rkey */
    side_open(&a, 64, 4096);
    side_open(&b, 64, 4096);
    connect_pair(&a, &b);
    vmodel_inject(VMODEL_FAULT_BAD_RKEY, 1);
    ck_assert_int_eq(post_write(&a, 3, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, -1,
                                IBV_SEND_SIGNALED), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    side_close(&a);
    side_close(&b);
    side_open(&a, 64, 4096);
    side_open(&b, 64, 4096);
    connect_pair(&a, &b);
    ck_assert_int_eq(post_write(&a, 4, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf, b.mr->lkey, -1,
                                IBV_SEND_SIGNALED), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    side_close(&a);
    side_close(&b);

    /* a local key that does not cover the gather entry */
    side_open(&a, 64, 4096);
    side_open(&b, 64, 4096);
    connect_pair(&a, &b);
    ck_assert_int_eq(post_write(&a, 5, a.buf + 4000, 200, a.mr->lkey, (uintptr_t)b.buf,
                                b.mr->rkey, -1, IBV_SEND_SIGNALED), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_LOC_PROT_ERR);
    side_close(&a);
    side_close(&b);
    vmodel_destroy();
}
END_TEST

START_TEST(test_model_cq_overrun)
{
    model_up(0);
    vmodel_inject(VMODEL_FAULT_CQ_SIZE, 2);
    struct side a, b;
    side_open(&a, 64, 4096); /* reports >= 64 entries, holds 2 */
    side_open(&b, 64, 4096);
    connect_pair(&a, &b);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(post_write(&a, (uint64_t)i, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf,
                                    b.mr->rkey, -1, IBV_SEND_SIGNALED), 0);
    struct ibv_wc wc[8];
    /* "In case of a CQ overrun ... the CQ cannot be used": polls fail */
    int k = 0;
    for (int i = 0; i < 5000 && k >= 0; i++) {
        k = M->poll_cq(a.cq, 0, wc); /* take nothing: let it overrun */
        usleep(1000);
    }
    ck_assert_int_lt(k, 0);
    ck_assert_int_lt(M->poll_cq(a.cq, 8, wc), 0);
    ck_assert_int_eq(a.qp->state, IBV_QPS_ERR);
    vmodel_destroy();
}
END_TEST

/* A peer process that goes away: what is in flight, and what is posted
 * after, ends in "retry exceeded" once the (scaled) retries run out. */
START_TEST(test_model_vanished_peer)
{
    model_up(0.01); /* RC retries ~86 ms instead of 8.6 s */
    int p2c[2], c2p[2];
    ck_assert_int_eq(pipe(p2c), 0);
    ck_assert_int_eq(pipe(c2p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct side b;
        side_open(&b, 64, 4096);
        uint32_t qpn = b.qp->qp_num, a_qpn;
        if (write(c2p[1], &qpn, 4) != 4 || read(p2c[0], &a_qpn, 4) != 4)
            _exit(2);
        struct loom_verbs_remote ra = remote_of(&b, 100);
        ra.qpn = a_qpn;
        if (loom_verbs_qp_to_init(M, b.qp, &LOCAL) || loom_verbs_qp_to_rtr(M, b.qp, &LOCAL, &ra) ||
            loom_verbs_qp_to_rts(M, b.qp, 200))
            _exit(3);
        if (post_recv0(&b, 7) != 0)
            _exit(7);
        uint64_t addr = (uintptr_t)b.buf, key = b.mr->rkey;
        if (write(c2p[1], &addr, 8) != 8 || write(c2p[1], &key, 8) != 8)
            _exit(4);
        /* one write with immediate lands (read once its completion is
         * polled), then we vanish */
        struct ibv_wc wc;
        if (poll_n(b.cq, &wc, 1) != 1 || wc.status != IBV_WC_SUCCESS)
            _exit(5);
        _exit(b.buf[0] == 0x42 ? 0 : 6);
    }
    struct side a;
    side_open(&a, 64, 4096);
    uint32_t b_qpn, a_qpn = a.qp->qp_num;
    ck_assert_int_eq(read(c2p[0], &b_qpn, 4), 4);
    ck_assert_int_eq(write(p2c[1], &a_qpn, 4), 4);
    uint64_t addr, key;
    ck_assert_int_eq(read(c2p[0], &addr, 8), 8);
    ck_assert_int_eq(read(c2p[0], &key, 8), 8);
    struct loom_verbs_remote rb = remote_of(&a, 200);
    rb.qpn = b_qpn;
    ck_assert_int_eq(loom_verbs_qp_to_init(M, a.qp, &LOCAL), 0);
    ck_assert_int_eq(loom_verbs_qp_to_rtr(M, a.qp, &LOCAL, &rb), 0);
    ck_assert_int_eq(loom_verbs_qp_to_rts(M, a.qp, 100), 0);
    a.buf[0] = 0x42;
    ck_assert_int_eq(post_write(&a, 1, a.buf, 1, a.mr->lkey, addr, (uint32_t)key, 9,
                                IBV_SEND_SIGNALED), 0);
    struct ibv_wc wc[2];
    ck_assert_int_eq(poll_n(a.cq, wc, 1), 1);
    ck_assert_int_eq(wc[0].status, IBV_WC_SUCCESS);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(post_write(&a, 2, a.buf, 1, a.mr->lkey, addr, (uint32_t)key, -1,
                                IBV_SEND_SIGNALED), 0);
    ck_assert_int_eq(post_write(&a, 3, a.buf, 1, a.mr->lkey, addr, (uint32_t)key, -1, 0), 0);
    ck_assert_int_eq(poll_n(a.cq, wc, 2), 2);
    ck_assert_int_eq(wc[0].status, IBV_WC_RETRY_EXC_ERR);
    ck_assert_uint_eq(wc[0].wr_id, 2);
    ck_assert_int_eq(wc[1].status, IBV_WC_WR_FLUSH_ERR);
    ck_assert_uint_eq(wc[1].wr_id, 3);
    ck_assert_str_eq(M->wc_status_str(wc[0].status), "transport retry counter exceeded");
    side_close(&a);
    vmodel_destroy();
}
END_TEST

/* The table libloom builds from libibverbs.so.1 here: loaded, or a clear
 * sentence why not. Either way no call reaches a device. */
START_TEST(test_dlopen_table)
{
    loom_ibv_set(NULL);
    char why[256] = "";
    const struct loom_ibv *t = loom_ibv_get(why, sizeof why);
    if (t) {
        ck_assert_str_eq(t->name, "libibverbs.so.1");
        ck_assert_ptr_nonnull(t->post_send);
        ck_assert_ptr_nonnull(t->poll_cq);
        ck_assert_ptr_nonnull(t->get_device_list);
        ck_assert_ptr_nonnull(t->wc_status_str);
        ck_assert_str_eq(t->wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
    } else {
        ck_assert_ptr_nonnull(strstr(why, "libibverbs"));
    }
    loom_ibv_set(vmodel_ibv());
    ck_assert_ptr_eq(loom_ibv_get(NULL, 0), vmodel_ibv());
    loom_ibv_set(NULL);
}
END_TEST


/* -------------------------------------------------------------- transport */

#define TX_ERR 1024

/* What the forked ranks report back (shared memory). */
struct txjob {
    int port;
    int variant;
    char err[4][TX_ERR];
    loom_result_t res[4];
    double secs[4];
    struct vmodel_stats st[4][3];   /* per rank, per size class */
    struct loom_verbs_counts cnt[4][3];
};

static struct txjob *txjob_new(int variant)
{
    struct txjob *j = txu_shared_new(sizeof *j);
    j->port = mp_free_port();
    j->variant = variant;
    return j;
}

static void txjob_free(struct txjob *j, int n)
{
    for (int r = 0; r < n; r++)
        if (j->err[r][0])
            fprintf(stderr, "rank %d: %s\n", r, j->err[r]);
    munmap(j, sizeof *j);
}

static int tx_setup(void *job, int rank, int n, struct loom_tx **tx)
{
    struct txjob *j = job;
    return txu_setup(&loom_verbs_transport, j->port, rank, n, tx, j->err[rank], TX_ERR);
}

static int tx_post(struct loom_tx *tx, struct loom_tx_req *r, int peer, int send, void *buf,
                   size_t len, uint32_t tag)
{
    return txu_post(tx, r, peer, send, buf, len, tag, 0x30 + tag % 5);
}

/* One message each way between ranks 0 and 1 (the link is up after). */
static int tx_exchange(struct loom_tx *tx, int rank, void *sb, void *rb, size_t len,
                       uint32_t tag)
{
    return txu_exchange(tx, 1 - rank, sb, rb, len, tag, 0x30 + tag % 5, 20.0);
}

static void model_for_tx(double scale)
{
    struct vmodel_cfg cfg;
    vmodel_cfg_loopback(&cfg);
    cfg.time_scale = scale;
    ck_assert_int_eq(vmodel_create(&cfg), 0);
    loom_ibv_set(vmodel_ibv()); /* inherited by the ranks */
}

/* ---- per-message costs ---- */

#define NCOUNT 64
static const size_t count_sizes[3] = {8, 4096, 1 << 20};

static int counts_main(struct loom_tx *tx, int rank, void *arg)
{
    struct txjob *j = arg;
    struct vx_priv *vp = tx->priv;
    for (int c = 0; c < 3; c++) {
        size_t len = count_sizes[c];
        uint8_t *buf = malloc(len);
        mp_fill(buf, len, 77);
        /* warm-up: the link, and the buffer's registration in the cache */
        if (tx_exchange(tx, rank, buf, buf, len, 1000 + (uint32_t)c)) {
            snprintf(j->err[rank], TX_ERR, "warm-up: %s", tx->errmsg);
            return 20;
        }
        /* both count from here: rank 1 posts its first receive (whose CTS
         * rank 0 counts) only once rank 0 has reset its counters; the
         * signal goes through the out-of-band service, not verbs */
        vmodel_stats_reset();
        struct loom_verbs_counts before = vp->counts;
        const uint32_t go = LOOM_OOB_TAG_VERBS + 0xf0;
        if (rank == 0 && loom_oob_send(txu_oob, 1, go, "go", 2) != LOOM_SUCCESS)
            return 24;
        void *gb = NULL;
        if (rank == 1 && loom_oob_recv(txu_oob, go, 0, 10.0, NULL, &gb, NULL) != LOOM_SUCCESS)
            return 25;
        free(gb);
        for (int i = 0; i < NCOUNT; i++) {
            struct loom_tx_req r;
            if (rank == 0)
                mp_fill(buf, len, (uint64_t)i);
            if (tx_post(tx, &r, 1 - rank, rank == 0, buf, len, (uint32_t)i) ||
                txu_wait(tx, &r, 1, 20.0) != LOOM_SUCCESS) {
                snprintf(j->err[rank], TX_ERR, "message %d of %zu bytes: %s", i, len, tx->errmsg);
                return 21;
            }
            if (rank == 1 && mp_verify(buf, len, (uint64_t)i) >= 0) {
                snprintf(j->err[rank], TX_ERR, "message %d of %zu bytes: wrong bytes", i, len);
                return 22;
            }
        }
        vmodel_stats(&j->st[rank][c]);
        struct loom_verbs_counts *d = &j->cnt[rank][c];
        *d = vp->counts;
        d->data_wrs -= before.data_wrs;
        d->cts_wrs -= before.cts_wrs;
        d->cqes -= before.cqes;
        d->regs -= before.regs;
        d->copies_in -= before.copies_in;
        d->copies_out -= before.copies_out;
        d->recv_wrs_posted -= before.recv_wrs_posted;
        free(buf);
    }
    /* let rank 1 see the last completions before the goodbye */
    int last = 0;
    if (tx_exchange(tx, rank, &last, &last, sizeof last, 9999))
        return 23;
    txu_teardown(tx);
    return 0;
}

START_TEST(test_tx_message_costs)
{
    model_for_tx(0);
    struct txjob *j = txjob_new(0);
    ck_assert_uint_eq(txu_run(2, tx_setup, counts_main, j, 60.0, 0), 0);
    const char *name[3] = {"8 B (inline)", "4 KiB (copied)", "1 MiB (zero-copy)"};
    fprintf(stderr, "verbs per message, rank 0 -> rank 1, %d messages each (model counts):\n",
            NCOUNT);
    for (int c = 0; c < 3; c++) {
        const struct vmodel_stats *s = &j->st[0][c], *r = &j->st[1][c];
        const struct loom_verbs_counts *cs = &j->cnt[0][c], *cr = &j->cnt[1][c];
        fprintf(stderr,
                "  %-18s sender: %.2f WR (%.2f write+imm, %.2f inline), %.2f CQE, %.2f reg, "
                "%.2f copies | receiver: %.2f WR (CTS), %.2f CQE, %.2f recv WR, %.2f reg, "
                "%.2f copies\n",
                name[c], (double)s->send_wrs / NCOUNT, (double)s->writes_imm / NCOUNT,
                (double)s->inline_wrs / NCOUNT, (double)s->cqes / NCOUNT,
                (double)s->reg_mr / NCOUNT, (double)cs->copies_in / NCOUNT,
                (double)r->send_wrs / NCOUNT, (double)r->cqes / NCOUNT,
                (double)r->recv_wrs / NCOUNT, (double)r->reg_mr / NCOUNT,
                (double)cr->copies_out / NCOUNT);
        /* one write with immediate per message (one chunk), nothing else */
        ck_assert_uint_eq(s->send_wrs, NCOUNT);
        ck_assert_uint_eq(s->writes_imm, NCOUNT);
        ck_assert_uint_eq(s->writes + s->sends, 0);
        /* its completion and the CTS's arrival (and at most one
         * signalled CTS write of the warm-up, completing late) */
        ck_assert_uint_ge(s->cqes, 2 * NCOUNT);
        ck_assert_uint_le(s->cqes, 2 * NCOUNT + 1);
        /* one CTS write per message; its completions only now and then */
        ck_assert_uint_eq(r->send_wrs, NCOUNT);
        ck_assert_uint_eq(r->writes_imm, NCOUNT);
        ck_assert_uint_ge(r->cqes, NCOUNT);
        ck_assert_uint_le(r->cqes, NCOUNT + NCOUNT / 8);
        /* every immediate consumed one receive, given back in batches */
        ck_assert_uint_le(r->recv_wrs, NCOUNT + 16);
        ck_assert_uint_ge(r->recv_wrs + 16, NCOUNT);
        ck_assert_uint_le(r->post_recv_calls, NCOUNT / 16 + 1);
        /* no registration on the data path once a buffer is known */
        ck_assert_uint_eq(s->reg_mr + r->reg_mr, 0);
        ck_assert_uint_eq(cs->regs + cr->regs, 0);
    }
    /* short: inline, one copy out of a bounce slot; 4 KiB: a copy each
     * side; 1 MiB: none */
    ck_assert_uint_eq(j->st[0][0].inline_wrs, 2 * 0 + NCOUNT);
    ck_assert_uint_eq(j->cnt[0][0].copies_in, 0);
    ck_assert_uint_eq(j->cnt[1][0].copies_out, NCOUNT);
    ck_assert_uint_eq(j->cnt[0][1].copies_in, NCOUNT);
    ck_assert_uint_eq(j->cnt[1][1].copies_out, NCOUNT);
    ck_assert_uint_eq(j->cnt[0][2].copies_in + j->cnt[1][2].copies_out, 0);
    ck_assert_uint_eq(j->st[0][2].bytes_out, (uint64_t)NCOUNT << 20);
    txjob_free(j, 2);
    vmodel_destroy();
}
END_TEST

/* ---- chunks and staging with small slots ---- */

static int chunks_main(int rank, int n, void *arg)
{
    struct txjob *j = arg;
    /* 4 KiB slots, 4 CTS entries, 2 bounce and 2 staging slots, 8 KiB
     * writes: messages cut in many chunks and pieces, credits wrapping
     * quickly. Rank 0 copies everything; rank 1 registers from 100000 B
     * (so both kinds meet in one message pair). */
    loom_verbs_default_tuning = (struct loom_verbs_tuning){
        .cts_entries = 4, .bounce_slots = 2, .stage_slots = 2, .slot_size = 4096,
        .zcopy_min = rank == 0 ? (size_t)-1 : 100000, .inline_max = 0, .max_write = 8192};
    struct loom_tx *tx;
    int rc = tx_setup(j, rank, n, &tx);
    if (rc)
        return rc;
    static const size_t sizes[] = {0, 1, 4095, 4096, 4097, 8193, 100000, 300001};
    for (int it = 0; it < 6; it++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t len = sizes[si];
            uint8_t *sb = malloc(len + 1), *rb = malloc(len + 1);
            mp_fill(sb, len, (uint64_t)(rank * 1000 + it * 10) + si);
            memset(rb, 0xa5, len + 1);
            if (tx_exchange(tx, rank, sb, rb, len, (uint32_t)si)) {
                snprintf(j->err[rank], TX_ERR, "%zu bytes: %s", len, tx->errmsg);
                return 20;
            }
            if (mp_verify(rb, len, (uint64_t)((1 - rank) * 1000 + it * 10) + si) >= 0 ||
                rb[len] != 0xa5) {
                snprintf(j->err[rank], TX_ERR, "%zu bytes: wrong bytes", len);
                return 21;
            }
            free(sb);
            free(rb);
        }
    txu_teardown(tx);
    return 0;
}

START_TEST(test_tx_chunks_small_slots)
{
    model_for_tx(0);
    struct txjob *j = txjob_new(0);
    ck_assert_uint_eq(mp_run(2, chunks_main, j, 60.0, 0), 0);
    txjob_free(j, 2);
    vmodel_destroy();
}
END_TEST

/* ---- injected faults, each with its named error ---- */

enum { FAULT_BAD_RKEY, FAULT_CQ_OVERRUN, FAULT_QP_GONE, FAULT_KILLED, NFAULTS };

static int faults_main(int rank, int n, void *arg)
{
    struct txjob *j = arg;
    if (j->variant == FAULT_CQ_OVERRUN && rank == 0)
        vmodel_inject(VMODEL_FAULT_CQ_SIZE, 4); /* reports its size, holds 4 */
    struct loom_tx *tx;
    int rc = tx_setup(j, rank, n, &tx);
    if (rc)
        return rc;
    static uint8_t sb[1 << 20], rb[1 << 20];
    if (j->variant != FAULT_CQ_OVERRUN) {
        if (tx_exchange(tx, rank, sb, rb, 64, 1)) {
            snprintf(j->err[rank], TX_ERR, "warm-up: %s", tx->errmsg);
            return 20;
        }
        /* rank 0 injects only once rank 1 is out of the warm-up too (its
         * last completions could otherwise be flushed by the fault) */
        const uint32_t ready = LOOM_OOB_TAG_VERBS + 0xf2;
        void *gb = NULL;
        if (rank == 1 ? loom_oob_send(txu_oob, 0, ready, "r", 1)
                      : loom_oob_recv(txu_oob, ready, 1, 10.0, NULL, &gb, NULL))
            return 23;
        free(gb);
    }
    struct loom_tx_req r[64];
    int nr = 0;
    switch (j->variant) {
    case FAULT_BAD_RKEY:
        if (rank == 0)
            vmodel_inject(VMODEL_FAULT_BAD_RKEY, 1); /* its next RDMA write */
        if (tx_post(tx, &r[nr++], 1 - rank, 0, rb, sizeof rb, 2) ||
            tx_post(tx, &r[nr++], 1 - rank, 1, sb, sizeof sb, 2))
            return 21;
        break;
    case FAULT_CQ_OVERRUN:
        for (int i = 0; i < 32; i++)
            if (tx_post(tx, &r[nr++], 1 - rank, i & 1, i & 1 ? sb : rb, 8, (uint32_t)i / 2))
                return 21;
        /* rank 0 polls only once more than its 4 completions are in (a
         * rank that polls as fast as they come never overruns) */
        if (rank == 0)
            usleep(200000);
        break;
    case FAULT_QP_GONE: {
        const uint32_t gone = LOOM_OOB_TAG_VERBS + 0xf1;
        if (rank == 1) {
            /* its adapter forgets the queue pair, its process and control
             * socket stay: only the queue pair's retries can tell */
            struct vx_priv *vp = tx->priv;
            vp->ibv->destroy_qp(vp->peers[0].qp);
            vp->peers[0].qp = NULL;
            loom_oob_send(txu_oob, 0, gone, "x", 1);
            usleep(3000000);
            _exit(0);
        }
        void *gb = NULL;
        if (loom_oob_recv(txu_oob, gone, 1, 10.0, NULL, &gb, NULL) != LOOM_SUCCESS)
            return 22;
        free(gb);
        /* a receive: its CTS write goes to the queue pair that is gone */
        if (tx_post(tx, &r[nr++], 1, 0, rb, 4096, 2))
            return 21;
        break;
    }
    case FAULT_KILLED:
        if (rank == 1) {
            usleep(100000);
            raise(SIGKILL);
        }
        if (tx_post(tx, &r[nr++], 1, 0, rb, 64, 2))
            return 21;
        break;
    }
    double t0 = mp_now();
    j->res[rank] = txu_wait(tx, r, nr, 20.0);
    j->secs[rank] = mp_now() - t0;
    snprintf(j->err[rank], TX_ERR, "%s", tx->errmsg);
    usleep(rank ? 1000000 : 200000); /* rank 0 first reads what it is sent */
    txu_teardown(tx);
    return 0;
}

START_TEST(test_tx_faults_named)
{
    model_for_tx(_i == FAULT_QP_GONE ? 0.02 : 0); /* RC retries: ~170 ms / 8.6 s */
    struct txjob *j = txjob_new(_i);
    unsigned failed = mp_run(2, faults_main, j, 60.0, _i == FAULT_KILLED ? 2u : 0u);
    fprintf(stderr, "fault %d: rank 0 after %.2f s: %s\n", _i, j->secs[0], j->err[0]);
    fprintf(stderr, "fault %d: rank 1 after %.2f s: %s\n", _i, j->secs[1], j->err[1]);
    ck_assert_uint_eq(failed, 0);
    switch (_i) {
    case FAULT_BAD_RKEY:
        ck_assert_int_eq(j->res[0], LOOM_ERROR_PROTOCOL);
        ck_assert_ptr_nonnull(strstr(j->err[0], "rank 1: "));
        ck_assert_ptr_nonnull(strstr(j->err[0], "remote access error (IBV_WC_REM_ACCESS_ERR"));
        ck_assert_ptr_nonnull(strstr(j->err[0], "vendor error 0x"));
        ck_assert_int_lt(j->res[1], 0); /* its side fails too, naming rank 0 */
        ck_assert_ptr_nonnull(strstr(j->err[1], "rank 0"));
        break;
    case FAULT_CQ_OVERRUN:
        ck_assert_int_eq(j->res[0], LOOM_ERROR_SYSTEM);
        ck_assert_ptr_nonnull(strstr(j->err[0], "completion queue of mlx5_0 failed"));
        ck_assert_ptr_nonnull(strstr(j->err[0], "overrun"));
        break;
    case FAULT_QP_GONE:
        ck_assert_int_eq(j->res[0], LOOM_ERROR_REMOTE);
        ck_assert_ptr_nonnull(strstr(j->err[0], "rank 1: "));
        ck_assert_ptr_nonnull(strstr(j->err[0], "IBV_WC_RETRY_EXC_ERR"));
        ck_assert_double_lt(j->secs[0], 2.5); /* before its control socket closes */
        break;
    case FAULT_KILLED:
        /* through the control channel, well before the queue pair's
         * retries (8.6 s, unscaled) would */
        ck_assert_int_eq(j->res[0], LOOM_ERROR_REMOTE);
        ck_assert_ptr_nonnull(strstr(j->err[0], "rank 1 closed its control connection"));
        ck_assert_double_lt(j->secs[0], 3.0);
        break;
    }
    txjob_free(j, 2);
    vmodel_destroy();
}
END_TEST

/* ---- strangers on the control socket ---- */

static int strangers_main(struct loom_tx *tx, int rank, void *arg)
{
    struct txjob *j = arg;
    uint8_t sb[5000], rb[5000];
    if (rank == 0) {
        /* a bare hello payload as rank 0 to rank 1, no handshake around
         * it, before any connection and once one exists */
        for (int k = 0; k < 2; k++) {
            if (k == 1 && tx_exchange(tx, rank, sb, rb, 16, 100))
                return 20;
            int fd = -1;
            char err[256];
            if (loom_oob_connect_fd(txu_oob, 1, &fd, err, sizeof err) != LOOM_SUCCESS)
                return 21;
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, 2000);
            uint8_t b[LOOM_OOB_PREAMBLE_LEN + LOOM_LINK_HELLO_LEN];
            loom_oob_preamble(txu_oob, LOOM_OOB_KIND_VERBS, b);
            struct loom_link_hello h = {.from = 0, .to = 1, .comm_id = tx->params.comm_id};
            memset(h.token, 0x42, sizeof h.token);
            loom_link_hello_encode(&h, b + LOOM_OOB_PREAMBLE_LEN);
            if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b)
                return 22;
            usleep(200000);
            close(fd);
        }
    } else if (tx_exchange(tx, rank, sb, rb, 16, 100)) {
        return 23;
    }
    for (int i = 0; i < 20; i++) {
        mp_fill(sb, sizeof sb, (uint64_t)(rank * 100 + i));
        if (tx_exchange(tx, rank, sb, rb, sizeof sb, (uint32_t)i) ||
            mp_verify(rb, sizeof rb, (uint64_t)((1 - rank) * 100 + i)) >= 0) {
            snprintf(j->err[rank], TX_ERR, "message %d: %s", i, tx->errmsg);
            return 24;
        }
    }
    txu_teardown(tx);
    return 0;
}

START_TEST(test_tx_strangers_refused)
{
    model_for_tx(0);
    struct txjob *j = txjob_new(0);
    ck_assert_uint_eq(txu_run(2, tx_setup, strangers_main, j, 60.0, 0), 0);
    txjob_free(j, 2);
    vmodel_destroy();
}
END_TEST

/* ---- device choice through the transport; available() without a model ---- */

static int choice_main(int rank, int n, void *arg)
{
    struct txjob *j = arg;
    struct loom_tx *tx = NULL;
    if (j->variant == 1) {
        setenv("LOOM_IB_HCA", "mlx5_0:1", 1);
        setenv("LOOM_IB_GID_INDEX", "1", 1);
        loom_config_reset();
    }
    j->res[rank] = loom_tx_bootstrap(&loom_verbs_transport, rank, n, "127.0.0.1", "127.0.0.1",
                                     j->port, 10.0, &txu_oob, &tx, j->err[rank], TX_ERR);
    if (j->res[rank] == LOOM_SUCCESS) {
        snprintf(j->err[rank], TX_ERR, "%s", tx->info);
        uint8_t b[64];
        if (tx_exchange(tx, rank, b, b, sizeof b, 1))
            return 20;
        txu_teardown(tx);
    }
    return 0;
}

START_TEST(test_tx_device_choice)
{
    /* a device whose GIDs do not hold 127.0.0.1 */
    struct vmodel_cfg cfg;
    vmodel_cfg_loopback(&cfg);
    cfg.devs[0].ports[0].ngids = 2;
    ck_assert_int_eq(vmodel_create(&cfg), 0);
    loom_ibv_set(vmodel_ibv());
    struct txjob *j = txjob_new(0);
    ck_assert_uint_eq(mp_run(2, choice_main, j, 30.0, 0), 0);
    ck_assert_int_eq(j->res[0], LOOM_ERROR_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(j->err[0], "127.0.0.1"));
    ck_assert_ptr_nonnull(strstr(j->err[0], "found: mlx5_0 port 1 (Ethernet, ACTIVE): gid 0"));
    memset(j->err, 0, sizeof j->err);
    /* LOOM_IB_HCA and LOOM_IB_GID_INDEX: that GID, and it works */
    j->variant = 1;
    j->port = mp_free_port();
    ck_assert_uint_eq(mp_run(2, choice_main, j, 30.0, 0), 0);
    ck_assert_int_eq(j->res[0], LOOM_SUCCESS);
    ck_assert_str_eq(j->err[0], "verbs mlx5_0:1 gid 1 (RoCE v2)");
    memset(j->err, 0, sizeof j->err);
    txjob_free(j, 2);
    vmodel_destroy();

    /* without the model: libibverbs here, and why verbs cannot run */
    loom_ibv_set(NULL);
    unsetenv("LOOM_TEST_VERBS_MODEL");
    char why[256] = "";
    if (loom_verbs_transport.available(why, sizeof why) == 0) {
        fprintf(stderr, "verbs is available on this host\n");
    } else {
        fprintf(stderr, "verbs unavailable here: %s\n", why);
        ck_assert(strstr(why, "libibverbs") || strstr(why, "ibv_get_device_list") ||
                  strstr(why, "RDMA"));
    }
    /* the variable in a program without the model: refused, said why */
    setenv("LOOM_TEST_VERBS_MODEL", "1", 1);
    ck_assert_ptr_eq(loom_ibv_get(why, sizeof why), vmodel_ibv()); /* this one has it */
    unsetenv("LOOM_TEST_VERBS_MODEL");
}
END_TEST

static Suite *verbs_suite(void)
{
    Suite *s = suite_create("verbs");
    TCase *tp = tcase_create("proto");
    tcase_add_test(tp, test_imm);
    tcase_add_test(tp, test_seq_expand);
    tcase_add_test(tp, test_credits);
    tcase_add_test(tp, test_cts);
    tcase_add_test(tp, test_blob);
    tcase_add_test(tp, test_ctl_frames);
    tcase_add_test(tp, test_wrid_and_errors);
    tcase_add_test(tp, test_qp_attrs);
    suite_add_tcase(s, tp);
    TCase *tg = tcase_create("gid");
    tcase_add_test(tg, test_gid_scan);
    tcase_add_test(tg, test_gid_choose);
    tcase_add_test(tg, test_gid_text);
    suite_add_tcase(s, tg);
    TCase *tm = tcase_create("model");
    tcase_set_timeout(tm, 30);
    tcase_add_test(tm, test_model_state_machine);
    tcase_add_test(tm, test_model_write_imm);
    tcase_add_test(tm, test_model_sq_reclaim_and_channel);
    tcase_add_test(tm, test_model_access_errors);
    tcase_add_test(tm, test_model_cq_overrun);
    tcase_add_test(tm, test_model_vanished_peer);
    tcase_add_test(tm, test_dlopen_table);
    suite_add_tcase(s, tm);
    TCase *tt = tcase_create("transport");
    tcase_set_timeout(tt, 90);
    tcase_add_test(tt, test_tx_message_costs);
    tcase_add_test(tt, test_tx_chunks_small_slots);
    tcase_add_loop_test(tt, test_tx_faults_named, 0, NFAULTS);
    tcase_add_test(tt, test_tx_strangers_refused);
    tcase_add_test(tt, test_tx_device_choice);
    suite_add_tcase(s, tt);
    return s;
}

int main(void)
{
    return txu_run_suite(verbs_suite());
}
