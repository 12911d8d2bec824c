/* ofi_conn.c - the libfabric transport's part of its connections: its blob
 * (the endpoint address, put in the address vector of the peer that gets
 * it) and its hooks into the link layer (common/link.h), which does the
 * rest: the exchange through the out-of-band service, the TCP control
 * socket per peer for liveness and failure notices, deadlines.
 *
 * Addresses come only through the out-of-band service (ranks that passed
 * the bootstrap's authentication) and receives are directed at them, so a
 * stranger's packets to the provider's port match nothing; with
 * LOOM_JOB_KEY nothing is posted for a peer until it has proven the key on
 * the control socket. The control socket tells a dead peer at once,
 * whatever the provider (an RDM endpoint cannot tell a dead peer on an idle
 * link). A rank that destroys its communicator says goodbye with the number
 * of messages it received from the peer: the peer's sends among them are
 * complete even if the provider never reports them (udp;ofi_rxd's
 * acknowledgement may not leave a closed endpoint). */
#include "build_config.h"

#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "wire.h"
#include "bootstrap/oob.h"
#include "transport/ofi/ofi_priv.h"

#define OX_BLOB_MAGIC 0x424f464cu  /* "LFOB" */
#define OX_HELLO_MAGIC 0x4843464cu /* "LFCH" */
#define OX_FRAME_MAGIC 0x4643464cu /* "LFCF" */
#define OX_VERSION 1
#define OX_BLOB_HDR (28 + LOOM_LINK_TOKEN_LEN)
#define OX_BLOB_F_REPLY 0x1u
_Static_assert(OX_BLOB_HDR + OX_ADDR_MAX <= LOOM_LINK_BLOB_MAX, "a blob fits the link's");

/* magic u32 | version u16 | flags u16 | from u32 | to u32 | comm_id u64 |
 * addrlen u32 | token[32] | addr */
static size_t blob_encode(struct loom_tx *tx, int r, uint8_t *out)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    loom_put_le32(out, OX_BLOB_MAGIC);
    loom_put_le16(out + 4, OX_VERSION);
    loom_put_le16(out + 6, p->lk.have_blob ? OX_BLOB_F_REPLY : 0);
    loom_put_le32(out + 8, (uint32_t)tx->params.rank);
    loom_put_le32(out + 12, (uint32_t)r);
    loom_put_le64(out + 16, tx->params.comm_id);
    loom_put_le32(out + 24, (uint32_t)vp->addrlen);
    memcpy(out + 28, p->lk.token, LOOM_LINK_TOKEN_LEN);
    memcpy(out + OX_BLOB_HDR, vp->addr, vp->addrlen);
    return OX_BLOB_HDR + vp->addrlen;
}

static int blob_apply(struct loom_tx *tx, int r, const uint8_t *b, size_t len)
{
    struct ox_priv *vp = tx->priv;
    struct ox_peer *p = &vp->peers[r];
    size_t alen = len >= OX_BLOB_HDR ? loom_get_le32(b + 24) : 0;
    if (len < OX_BLOB_HDR || loom_get_le32(b) != OX_BLOB_MAGIC ||
        loom_get_le16(b + 4) != OX_VERSION || alen == 0 || alen > OX_ADDR_MAX ||
        len != OX_BLOB_HDR + alen || loom_get_le32(b + 8) != (uint32_t)r ||
        loom_get_le32(b + 12) != (uint32_t)tx->params.rank ||
        loom_get_le64(b + 16) != tx->params.comm_id || alen != vp->addrlen) {
        loom_link_fail(tx, r, LOOM_ERROR_PROTOCOL,
                       "sent an endpoint address this rank cannot use (%zu bytes)", len);
        return -1;
    }
    const uint8_t *addr = b + OX_BLOB_HDR;
    fi_addr_t fa = FI_ADDR_UNSPEC;
    int n = fi_av_insert(vp->av, addr, 1, &fa, 0, NULL);
    if (n != 1) {
        loom_link_fail(tx, r, LOOM_ERROR_SYSTEM,
                       "cannot be reached: fi_av_insert of its address: %s",
                       n < 0 ? loom_fi.strerror(-n) : "not inserted");
        return -1;
    }
    p->addr = fa;
    if (vp->sndbuf) {
        memcpy(&p->sa, addr, vp->addrlen);
        p->salen = (socklen_t)vp->addrlen;
    }
    memcpy(p->lk.rtoken, b + 28, LOOM_LINK_TOKEN_LEN);
    return 0;
}

static uint64_t received(struct loom_tx *tx, int r)
{
    struct ox_priv *vp = tx->priv;
    return vp->peers[r].recv_done;
}

const struct loom_link_ops loom_ofi_link_ops = {
    .name = "ofi",
    .proto = {OX_HELLO_MAGIC, OX_FRAME_MAGIC, "loom-ofi-ctl"},
    .oob_tag = LOOM_OOB_TAG_OFI + 0,
    .oob_kind = LOOM_OOB_KIND_OFI,
    .blob_name = "endpoint address",
    .blob_encode = blob_encode,
    .blob_apply = blob_apply,
    .up = loom_ofi_kick,
    .got = loom_ofi_sends_received,
    .received = received,
    .post = loom_ofi_post,
    .poll = loom_ofi_poll_cq,
    .lost = loom_ofi_fail_reqs,
};
