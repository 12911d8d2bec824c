/* tcp_priv.h - the tcp transport's instance state, shared by tcp.c (data
 * path) and tcp_conn.c (connections on first use, hello). */
#ifndef LOOM_TCP_PRIV_H
#define LOOM_TCP_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net/handshake.h"
#include "net/net.h"
#include "transport/tcp/tcp_frame.h"
#include "transport/transport.h"

struct loom_auth_key;

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
    uint8_t *base; /* payload start in the user's buffer          */
    size_t len;    /* payload bytes of this stripe                */
    size_t done;   /* bytes moved, header included                */
    uint64_t seq;  /* message number on this link                 */
    uint16_t stripe;
    uint8_t hdr[LOOM_TCP_FRAME_LEN];
};

struct tcp_queue {
    struct tcp_op *head, *tail;
};

/* What an epoll event's data.ptr points at: each struct starts with this. */
enum tcp_ev_kind { TCP_EV_WAKE = 1, TCP_EV_SOCK, TCP_EV_IN };

/* Connection states of one socket (tcp_conn.c). The higher rank of a pair
 * opens every socket between them; the lower one asks it to (through the
 * out-of-band service) when it needs one first. */
enum tcp_conn_state {
    TCP_CS_NONE = 0,   /* not connected, nobody asked                      */
    TCP_CS_ASKED,      /* lower rank: asked the peer to connect this socket */
    TCP_CS_WAIT,       /* higher rank: retry after a backoff               */
    TCP_CS_CONNECTING, /* connect() in progress                            */
    TCP_CS_HS,         /* preamble sent; the handshake runs (sk->hs)       */
    TCP_CS_UP          /* connected and authenticated                      */
};

struct tcp_sock {
    int evkind; /* TCP_EV_SOCK                                 */
    int fd;
    int peer;
    int index;
    uint32_t ep_mask; /* events registered in epoll (0 = none)       */
    int active;       /* on the active list                          */
    int hup;          /* epoll reported HUP; removed from the set    */
    int lowat;        /* SO_RCVLOWAT in force (0/1: the default)     */
    struct tcp_queue sendq, recvq;
    uint8_t *cache;   /* LOOM_TCP_RCACHE bytes read ahead, or NULL   */
    size_t cache_off; /* the stream's next byte is cache[cache_off]  */
    size_t cache_len; /* bytes there; while > 0 the kernel's data    */
                      /* continues the stream after them             */
    /* connection (tcp_conn.c) */
    int cstate;     /* enum tcp_conn_state                         */
    int hs_fd;      /* the socket while its handshake runs         */
    int connecting; /* on tp->pending                              */
    double first_try, next_try, backoff;
    int last_errno;
    struct loom_hs *hs; /* while cstate is TCP_CS_HS                   */
};

/* A socket a higher rank opened to this one, before its hello says who. */
struct tcp_in {
    int evkind; /* TCP_EV_IN                                   */
    int fd;
    struct loom_tx *tx;          /* for the hello's check                      */
    struct loom_tcp_hello hello; /* once accepted                       */
    struct loom_hs hs;
    char from[LOOM_NET_ADDRSTR_MAX];
    struct tcp_in *next;
};

struct tcp_peer {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    uint64_t nonce;
    struct tcp_sock *socks; /* nsocks entries                          */
    uint64_t send_seq, recv_seq;
    loom_result_t failed; /* 0 while the link is up                  */
    int bye;              /* it said goodbye: left in order          */
    int draining;         /* reading what it left before an EOF      */
    char *failmsg;        /* the sentence it failed with             */
};

struct tcp_priv {
    int epfd;
    int wake_fd;   /* eventfd: wake() writes, progress drains    */
    int wake_kind; /* TCP_EV_WAKE: what the wake fd's events point at */
    int nsocks;    /* sockets per peer: 2 * LOOM_NSOCKS          */
    size_t sndbuf; /* LOOM_SOCKET_SNDBUF                         */
    struct loom_auth_key *key;
    struct loom_oob *oob;
    struct tcp_peer *peers;   /* nranks entries; own slot unused          */
    struct tcp_sock **active; /* sockets with queued work                 */
    int nactive, active_cap;
    struct tcp_sock **pending; /* sockets being connected (higher rank)   */
    int npending, pending_cap;
    struct tcp_in *ins; /* sockets whose hello has not arrived      */
    int nins;
    struct tcp_op *free_ops;
    loom_result_t pending_err; /* a link failed since progress returned */
    int *lingering;            /* sockets half-closed after an abort notice, */
    int nlingering;            /* closed at finalize (so no RST eats it)     */
    int peers_used;            /* peers with a socket up (for logs, scale)   */
    unsigned polls;            /* progress(0) calls that moved nothing       */
    int no_fingerprint;        /* LOOM_TEST_TCP_NO_FINGERPRINT: behave as a
                                 transport that cannot check calls (tests
                                 of the core's envelope)                    */
};

/* "rank 3 (server ..., addr)" from params.describe, else "rank 3". */
const char *loom_tcp_describe(struct loom_tx *tx, int rank, char *buf, size_t len);
/* tcp_conn.c: make socket s to peer r (connect, or ask the peer to); move
 * handshakes along after an event on a socket being connected or accepted;
 * take sockets the out-of-band service handed over and peers' requests;
 * retries and deadlines. */
loom_result_t loom_tcp_want_sock(struct loom_tx *tx, int r, int s);
void loom_tcp_conn_event(struct loom_tx *tx, void *evptr, uint32_t events);
void loom_tcp_conn_poll(struct loom_tx *tx);
/* The earliest retry or deadline among sockets being connected (0: none). */
double loom_tcp_conn_next(struct loom_tx *tx);
/* The tcp handshake (its acceptor's payload check is tcp_conn.c's). */
extern const struct loom_hs_proto loom_tcp_hs;
/* End sk's handshake, if one runs: its socket closed, its state freed. */
void loom_tcp_hs_close(struct tcp_sock *sk);
/* Close every socket, handshakes too; queues must already be empty. */
void loom_tcp_close_sockets(struct loom_tx *tx);
/* Fail peer r (tcp.c): its requests fail, later posts fail at once. */
void loom_tcp_fail_peer(struct loom_tx *tx, int r, loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
