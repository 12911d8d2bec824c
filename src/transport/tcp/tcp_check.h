/* tcp_check.h - the checks the tcp receive path applies to a decoded frame
 * header, as a pure function (no sockets), so tests and the fuzz target
 * drive exactly what tcp.c runs. */
#ifndef LOOM_TCP_CHECK_H
#define LOOM_TCP_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "transport/tcp/tcp_frame.h"

/* What the posted receive expects of the next frame on one socket. */
struct loom_tcp_expect {
    uint64_t comm_id;
    uint64_t seq; /* message number on this peer link */
    uint16_t stripe;
    uint64_t len;   /* payload bytes of this stripe      */
    uint32_t tag;   /* the call: sequence number          */
    uint32_t desc;  /*           kind/dtype/op/root        */
    uint64_t count; /*           element count             */
    int sock_index; /* for the message only              */
};

enum loom_tcp_check {
    LOOM_TCP_FRAME_OK = 0,
    LOOM_TCP_FRAME_CONTROL = 1,    /* a control frame: the caller acts on it   */
    LOOM_TCP_FRAME_OTHER_CALL = 2, /* the peer is in another collective call  */
    LOOM_TCP_FRAME_BAD = -1        /* a protocol error                          */
};

/* Classify f against what the posted receive expects. For OTHER_CALL and
 * BAD, why holds the sentence that follows the peer's name ("sent a frame
 * with bad magic ..."). The checks, in order: magic, version, communicator
 * id, control frame, the call's fingerprint (tag, desc, count), sequence and
 * stripe, length. */
enum loom_tcp_check loom_tcp_frame_check(const struct loom_tcp_frame *f,
                                         const struct loom_tcp_expect *e, char *why, size_t whylen);

#endif
