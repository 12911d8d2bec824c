/* tcp_check.h - the checks the tcp receive path applies to a decoded frame
 * header, as a pure function (no sockets), so tests and the fuzz target
 * drive exactly what tcp.c runs. */
#ifndef LOOM_TCP_CHECK_H
#define LOOM_TCP_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "transport/tcp_frame.h"

/* What the posted receive expects of the next frame on one socket. */
struct loom_tcp_expect {
    uint64_t comm_id;
    uint64_t seq;          /* message number on this peer link */
    uint16_t stripe;
    uint64_t len;          /* payload bytes of this stripe      */
    uint32_t tag;
    int sock_index;        /* for the message only              */
};

/* 0 when f is the frame expected. Otherwise -1, and why holds the sentence
 * that follows the peer's name ("sent a frame with bad magic ..."). The
 * checks, in order: magic, version, communicator id, sequence and stripe,
 * length and tag. */
int loom_tcp_frame_check(const struct loom_tcp_frame *f,
                         const struct loom_tcp_expect *e, char *why,
                         size_t whylen);

#endif
