/* oob.h - out-of-band exchange between the ranks of a job.
 *
 * Every rank of a job runs one service thread with one listener (its "OOB
 * address", learnt by every rank at bootstrap). Through it:
 *   - a rank sends small authenticated messages to any rank, tagged, without
 *     a transport connection (transports swap connection data this way, in
 *     as many rounds as they need; the core asks a stalled peer which call
 *     it is in);
 *   - a rank publishes blobs that the service answers lookups with, without
 *     waking anyone;
 *   - transports take sockets that peers open to this rank's OOB port for
 *     them (a preamble names the kind), so a rank listens on one port only.
 * A communicator sees the job through a view (struct loom_oob): its own
 * ranks, mapped onto the job's, and its own namespace (the communicator id),
 * so that a split communicator's messages never meet its parent's.
 *
 * Delivery is reliable and in order per (sender, namespace, tag). Sockets
 * are short-lived: a link idle for a second is closed, so a rank holds
 * sockets only while it talks. Nothing here blocks except loom_oob_recv,
 * which waits up to its timeout. */
#ifndef LOOM_OOB_H
#define LOOM_OOB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loom.h"

struct loom_oob;
struct loom_auth_key;

/* Tags name a protocol; each transport owns one block of tags. */
#define LOOM_OOB_TAG_CORE 0x0000u   /* 0x0000-0x00ff: Loom's core          */
#define LOOM_OOB_TAG_TCP 0x0100u
#define LOOM_OOB_TAG_OFI 0x0200u
#define LOOM_OOB_TAG_VERBS 0x0300u
#define LOOM_OOB_MSG_MAX (64u << 20) /* bytes of one message               */

/* Core tags. */
#define LOOM_OOB_TAG_TABLE 0x0001u   /* bootstrap: the job's address table  */
#define LOOM_OOB_TAG_CALL 0x0002u    /* "which call are you in?" and answer */
#define LOOM_OOB_TAG_PING 0x0003u    /* answered by every service: alive?   */
#define LOOM_OOB_TAG_TABLE_ACK 0x0004u /* bootstrap: a subtree has the table */
#define LOOM_OOB_TAG_SHM_HELLO 0x0010u /* shared-memory set-up (2 methods)  */
#define LOOM_OOB_TAG_SHM_AGREE 0x0012u
#define LOOM_OOB_TAG_REVOKE 0x0020u  /* a communicator is revoked (shrink.c) */
#define LOOM_OOB_TAG_AGREE 0x0021u   /* agreement: a proposal (agree.c)     */
#define LOOM_OOB_TAG_AGREE_DONE 0x0022u /* agreement: a decision, published */
#define LOOM_OOB_TAG_P2P 0x0030u        /* tagged point-to-point messages     */

/* Socket kinds a preamble can name (see loom_oob_connect_fd). */
#define LOOM_OOB_KIND_TCP 0x50435454u  /* "TTCP": a tcp transport data socket */
#define LOOM_OOB_KIND_BOOT 0x54534f42u /* "BOST": a rank joining at rank 0   */
#define LOOM_OOB_KIND_VERBS 0x42525656u /* "VVRB": a verbs control socket  */
#define LOOM_OOB_KIND_OFI 0x4946464fu /* "OFFI": an ofi control socket      */

/* What bootstrap records of each rank, 32 bytes on the wire: its OOB
 * address (20), a hash naming its host (boot id and host name, 8) and flags
 * (4; LOOM_OOB_FLAG_*). */
#define LOOM_OOB_ENTRY_LEN 32
#define LOOM_OOB_ENTRY_HOST 20       /* offset of the host hash             */
#define LOOM_OOB_ENTRY_FLAGS 28      /* offset of the flags                 */
#define LOOM_OOB_FLAG_SHM 0x1u       /* the rank would share memory (LOOM_SHM) */

/* ---- the job (bootstrap/comm creation) ----------------------------------- */

/* Open this rank's listener on local_addr (port 0: any) and start nothing
 * yet; *oob is the job's root view (namespace 0). entry (LOOM_OOB_ENTRY_LEN
 * bytes) is what this rank tells the others. */
loom_result_t loom_oob_open(int rank, int nranks, const char *local_addr, int port,
                            struct loom_oob **oob, uint8_t *entry, char *err,
                            size_t errlen);
/* The same on a socket already listening (a unique id's), which it takes. */
loom_result_t loom_oob_open_fd(int rank, int nranks, int lfd, struct loom_oob **oob,
                               uint8_t *entry, char *err, size_t errlen);
/* Once bootstrap knows them: the job id (every hello carries it) and the
 * table of every rank's entry (copied); starts serving. Until then the
 * service may already answer lookups of published blobs whose requester's
 * address it was told with loom_oob_set_entry. */
loom_result_t loom_oob_start(struct loom_oob *oob, uint64_t job_id);
loom_result_t loom_oob_set_entry(struct loom_oob *oob, int rank,
                                 const uint8_t *entry);
/* Every entry at once (nranks * LOOM_OOB_ENTRY_LEN bytes). */
loom_result_t loom_oob_set_table(struct loom_oob *oob, const uint8_t *table);
/* The table as the job knows it (NULL before it is complete). */
const uint8_t *loom_oob_table(const struct loom_oob *oob);
/* Host hash and flags of (view) rank r from the table. */
uint64_t loom_oob_host(const struct loom_oob *oob, int r);
uint32_t loom_oob_flags(const struct loom_oob *oob, int r);
/* A view for a communicator: its ranks are ranks[0..n) of parent (by parent
 * rank), its namespace ns (the new communicator's id); me is this rank's
 * place in it. Holds a reference on the job. */
loom_result_t loom_oob_view(struct loom_oob *parent, const int *ranks, int n,
                            int me, uint64_t ns, struct loom_oob **view);
/* Drop a view; the job ends (thread stopped, sockets closed) with its last
 * view. Messages not yet delivered are given up to a second to go. */
void loom_oob_close(struct loom_oob *oob);
/* Any thread: every wait on this job (loom_oob_recv, bootstrap) returns
 * LOOM_ERROR_ABORTED; the views' notify functions are called. */
void loom_oob_abort(struct loom_oob *oob);
int loom_oob_aborted(const struct loom_oob *oob);
/* Bytes this rank's service has sent and received, for scale reports. */
void loom_oob_counters(const struct loom_oob *oob, uint64_t *sent, uint64_t *received);

/* ---- messages ------------------------------------------------------------- */

/* Queue len bytes of buf (copied) for rank peer under tag. Returns at once;
 * a message that cannot be delivered within the connect timeout makes later
 * polls fail naming the peer. */
loom_result_t loom_oob_send(struct loom_oob *oob, int peer, uint32_t tag,
                            const void *buf, size_t len);
/* Take the oldest message under tag from peer (peer < 0: any rank): 1 and
 * *from, *buf (malloc'd; the caller frees), *len; 0 when none has arrived;
 * or an error (see loom_oob_error). from and len may be NULL. */
int loom_oob_poll(struct loom_oob *oob, uint32_t tag, int peer, int *from,
                  void **buf, size_t *len);
/* The same, waiting up to timeout seconds (LOOM_ERROR_TIMEOUT naming the
 * peer; LOOM_ERROR_ABORTED after loom_oob_abort). Waiting on one peer of a
 * complete table pings it every second: one that died fails the wait with
 * LOOM_ERROR_REMOTE within about a second (see loom_oob_peer_error). */
loom_result_t loom_oob_recv(struct loom_oob *oob, uint32_t tag, int peer,
                            double timeout, int *from, void **buf, size_t *len);
/* Answer every lookup of tag with this blob without waking anyone:
 * loom_oob_lookup(peer, tag) on another rank receives it as a message under
 * tag from this rank. Replaces an earlier blob. Lookups that came before the
 * blob are answered when it is published. */
loom_result_t loom_oob_publish(struct loom_oob *oob, uint32_t tag,
                               const void *buf, size_t len);
loom_result_t loom_oob_lookup(struct loom_oob *oob, int peer, uint32_t tag);
/* Answer lookups of tag from a function instead (called on the service
 * thread; it fills at most cap bytes of out and returns the length). */
void loom_oob_set_handler(struct loom_oob *oob, uint32_t tag,
                          size_t (*fn)(void *ctx, int from, void *out, size_t cap),
                          void *ctx);
/* Called on the service thread when a message or a socket arrives for this
 * view, so that a transport sleeping in progress() wakes (its wake()). */
void loom_oob_set_notify(struct loom_oob *oob, void (*fn)(void *ctx), void *ctx);
/* Deliver this view's messages of tag to fn on the service thread, with
 * the service's lock held (fn must not call the OOB service), instead of
 * queueing them for loom_oob_recv: for notices that must act while no
 * thread of the owner reads (a revocation). One tag per view; fn NULL
 * stops it. */
void loom_oob_set_receiver(struct loom_oob *oob, uint32_t tag,
                           void (*fn)(void *ctx, int from, const void *buf, size_t len),
                           void *ctx);
/* The sentence of the last error. */
const char *loom_oob_error(struct loom_oob *oob);
/* Whether (view) rank peer was found unreachable: LOOM_SUCCESS, or the
 * error and why (LOOM_ERROR_REMOTE: its port refused a connection once
 * every rank listened, so the process is gone; LOOM_ERROR_TIMEOUT: no
 * answer within the connect timeout). A lookup of LOOM_OOB_TAG_PING checks. */
loom_result_t loom_oob_peer_error(struct loom_oob *oob, int peer, char *why, size_t len);

/* ---- sockets for transports ----------------------------------------------- */

/* Connect (non-blocking) to (view) rank peer's OOB port and queue a preamble
 * naming kind and this view's namespace; the peer's service hands the socket
 * to its transport (loom_oob_take_fd). *fd is in progress: wait for POLLOUT.
 * The preamble is sent by the first writes: call loom_oob_preamble_len and
 * send loom_oob_preamble first. */
loom_result_t loom_oob_connect_fd(struct loom_oob *oob, int peer, int *fd,
                                  char *err, size_t errlen);
#define LOOM_OOB_PREAMBLE_LEN 16
void loom_oob_preamble(const struct loom_oob *oob, uint32_t kind,
                       uint8_t out[LOOM_OOB_PREAMBLE_LEN]);
/* The oldest socket a peer opened for kind in this view's namespace: 1 and
 * *fd (now the caller's), 0 when none. The peer's rank is not known yet:
 * the transport's own handshake says it. */
int loom_oob_take_fd(struct loom_oob *oob, uint32_t kind, int *fd, char *from,
                     size_t fromlen);
/* The OOB address of (view) rank r. */
loom_result_t loom_oob_addr(const struct loom_oob *oob, int r,
                            struct sockaddr_storage *ss, socklen_t *sl);
int loom_oob_rank(const struct loom_oob *oob);
int loom_oob_size(const struct loom_oob *oob);
uint64_t loom_oob_ns(const struct loom_oob *oob);

#endif
