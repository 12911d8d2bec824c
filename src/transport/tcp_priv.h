/* tcp_priv.h - the tcp transport's instance state, shared by tcp.c (data
 * path) and tcp_conn.c (listen, connect, hello). */
#ifndef LOOM_TCP_PRIV_H
#define LOOM_TCP_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/net.h"
#include "transport/tcp_frame.h"
#include "transport/transport.h"

/* Endpoint blob: wire address (20 bytes) + instance nonce (8 bytes). */
#define LOOM_TCP_EP_LEN (LOOM_NET_WIRE_ADDR_LEN + 8)
/* Messages longer than this are striped over all of a direction's sockets. */
#define LOOM_TCP_STRIPE_MIN (64 * 1024)
/* Stripe sizes are rounded up to this, so stripes stay page-sized. */
#define LOOM_TCP_STRIPE_ALIGN 4096
#define LOOM_TCP_MAX_SOCKS 64
/* Each direction of a pair of ranks has its own sockets ("lanes") for
 * long messages: socket s carries them from the lower rank to the higher
 * when s is even, the other way when s is odd. Long messages never travel
 * against a lane's direction (only short ones do, on socket 0, below), so
 * the two ranks' long sends never contend for one socket's lock and
 * backlog (on loopback, sharing sockets both ways made a 1 MiB exchange
 * between two ranks about 30% slower). */
static inline int loom_tcp_lane_sock(int from, int to, int lane)
{
    return 2 * lane + (from < to ? 0 : 1);
}
/* A message of at most this many bytes goes on socket 0 whichever way it
 * travels, so that when two ranks trade small messages (2-rank allreduce
 * and allgather, recursive doubling) each side's frames carry the ACKs for
 * the other's instead of each frame drawing an ACK segment of its own: on
 * loopback a 2-rank 8-byte allreduce sent 3.6 segments per call with a
 * socket each way and 2.0 with one (the peers' Open MPI sends 2.0). */
#define LOOM_TCP_SHARED_MAX (16 * 1024)
/* The socket (index into a peer's socks) for stripe s of a message of len
 * bytes from rank `from` to rank `to`; both ends compute the same. */
static inline int loom_tcp_msg_sock(int from, int to, size_t len, int stripe)
{
    return len <= LOOM_TCP_SHARED_MAX ? 0 : loom_tcp_lane_sock(from, to, stripe);
}
/* Each socket reads up to this many bytes past its posted receives into a
 * buffer of its own (allocated at its first receive), so that one recvmsg
 * takes every small frame that has arrived, not one call's. */
#define LOOM_TCP_RCACHE (16 * 1024)
/* SO_RCVLOWAT bounds while blocked on a large receive. */
#define LOOM_TCP_LOWAT_MIN (128 * 1024)
#define LOOM_TCP_LOWAT_MAX (512 * 1024)

/* One stripe of one request, queued on one socket. */
struct tcp_op {
    struct tcp_op *next;
    struct loom_tx_req *req;
    uint8_t *base;         /* payload start in the user's buffer          */
    size_t len;            /* payload bytes of this stripe                */
    size_t done;           /* bytes moved, header included                */
    uint64_t seq;          /* message number on this link                 */
    uint16_t stripe;
    uint8_t hdr[LOOM_TCP_FRAME_LEN];
};

struct tcp_queue {
    struct tcp_op *head, *tail;
};

struct tcp_sock {
    int fd;
    int peer;
    int index;
    uint32_t ep_mask;      /* events registered in epoll (0 = none)       */
    int active;            /* on the active list                          */
    int hup;               /* epoll reported HUP; removed from the set    */
    int lowat;             /* SO_RCVLOWAT in force (0/1: the default)     */
    struct tcp_queue sendq, recvq;
    uint8_t *cache;        /* LOOM_TCP_RCACHE bytes read ahead, or NULL   */
    size_t cache_off;      /* the stream's next byte is cache[cache_off]  */
    size_t cache_len;      /* bytes there; while > 0 the kernel's data    */
                           /* continues the stream after them             */
};

struct tcp_peer {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    uint64_t nonce;
    struct tcp_sock *socks;   /* nsocks entries                          */
    uint64_t send_seq, recv_seq;
    loom_result_t failed;     /* 0 while the link is up                  */
    int bye;                  /* it said goodbye: left in order          */
    int draining;             /* reading what it left before an EOF      */
    char *failmsg;            /* the sentence it failed with             */
};

struct tcp_priv {
    int listen_fd;
    int epfd;
    int nsocks;
    uint64_t nonce;
    struct sockaddr_storage self;
    socklen_t selflen;
    struct tcp_peer *peers;   /* nranks entries; own slot unused          */
    struct tcp_sock **active; /* sockets with queued work                 */
    int nactive, active_cap;
    struct tcp_op *free_ops;
    int connected;
    loom_result_t pending_err; /* a link failed since progress returned */
    int blame;                /* rank + 1 this rank blames for a failure  */
    int *lingering;           /* sockets half-closed after an abort notice, */
    int nlingering;           /* closed at finalize (so no RST eats it)     */
};

/* "rank 3 (server ..., addr)" from params.describe, else "rank 3 (addr)". */
const char *loom_tcp_describe(struct loom_tx *tx, int rank, char *buf,
                              size_t len);
loom_result_t loom_tcp_init(struct loom_tx *tx, void *ep, size_t *ep_len);
loom_result_t loom_tcp_connect_all(struct loom_tx *tx, const void *eps,
                                   size_t ep_stride);
/* Close every socket and the listener; queues must already be empty. */
void loom_tcp_close_sockets(struct loom_tx *tx);

#endif
