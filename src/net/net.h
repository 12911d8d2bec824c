/* net.h - sockets and addresses (the net layer, under bootstrap and the
 * transports).
 *
 * Addresses travel as a fixed 20-byte "wire address": family (1 byte: 4 or
 * 6), a pad byte, the port in network order (2 bytes) and 16 address bytes
 * (IPv4 uses the first 4). Nothing here blocks. */
#ifndef LOOM_NET_H
#define LOOM_NET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include "loom.h"
#include "wire.h"

#define LOOM_NET_WIRE_ADDR_LEN 20
/* "[ffff:...:ffff]:65535" fits with room to spare. */
#define LOOM_NET_ADDRSTR_MAX 64

/* Parse a numeric IPv4/IPv6 address and port into *ss. */
loom_result_t loom_net_parse(const char *addr, int port,
                             struct sockaddr_storage *ss, socklen_t *sslen);
/* Resolve a host name or numeric address (first result, TCP). */
loom_result_t loom_net_resolve(const char *host, int port,
                               struct sockaddr_storage *ss, socklen_t *sslen,
                               char *err, size_t errlen);
/* "1.2.3.4:80" or "[::1]:80". Always NUL-terminates out. */
void loom_net_format(const struct sockaddr *sa, char *out, size_t outlen);
int loom_net_port(const struct sockaddr *sa);

/* Wire form: writes LOOM_NET_WIRE_ADDR_LEN bytes. */
void loom_net_to_wire(const struct sockaddr *sa, uint8_t *wire);
/* Returns -1 when the family byte is neither 4 nor 6. */
int loom_net_from_wire(const uint8_t *wire, struct sockaddr_storage *ss,
                       socklen_t *sslen);

int loom_net_set_nonblock(int fd);
/* TCP_NODELAY; failures ignored (only a latency hint). */
void loom_net_set_nodelay(int fd);
/* SO_SNDBUF = bytes (0: leave the kernel's autotuning); failures ignored
 * (only a tuning hint). */
void loom_net_set_sndbuf(int fd, size_t bytes);
/* TCP keepalive probes so that the kernel notices a lost host within about
 * timeout seconds even on an idle link: first probe after timeout/2, then
 * every timeout/8, 4 unanswered end it (each at least 1 s); timeout <= 0:
 * none. Failures ignored (only a liveness hint). */
void loom_net_set_keepalive(int fd, double timeout);

/* The local address (numeric) this host would use to reach host:port
 * (connect a UDP socket, nothing is sent; getsockname), or, when ifname_spec
 * is non-empty, the first address of an interface matching it (NCCL syntax:
 * "eth" prefix, "^lo" not, "=eth0" exact, comma lists). */
loom_result_t loom_net_local_addr(const char *host, int port,
                                  const char *ifname_spec, char *out,
                                  size_t outlen, char *err, size_t errlen);

/* A port base for a job on this host: base..base+nports-1 can each be
 * bound on 127.0.0.1 now, and lie outside the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range), so no connect() or port-0 listener on
 * this host can take one of them between this check and the job's listen.
 * Random among such bases, to keep concurrent jobs apart; 0 if none found
 * or nports is not in 1..4096. Where the ephemeral range leaves no room
 * (it covers 10000..65535), any free base from 1024 is taken instead.
 * For launchers and tests that choose rank 0's port (loom-run). */
int loom_net_pick_port_base(int nports);

#endif
