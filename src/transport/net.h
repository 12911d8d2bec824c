/* net.h - socket address helpers shared by the tcp transport and bootstrap.
 *
 * Addresses travel as a fixed 20-byte "wire address": family (1 byte: 4 or
 * 6), a pad byte, the port in network order (2 bytes) and 16 address bytes
 * (IPv4 uses the first 4). Nothing here blocks. */
#ifndef LOOM_NET_H
#define LOOM_NET_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include "loom.h"

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

/* Little-endian field codecs for wire headers: one unaligned load or store
 * each (memcpy plus a byte swap on big-endian hosts), not a byte loop. */
static inline void loom_put_le16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, sizeof v);
}
static inline void loom_put_le32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof v);
}
static inline void loom_put_le64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof v);
}
static inline uint16_t loom_get_le16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return le16toh(v);
}
static inline uint32_t loom_get_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return le32toh(v);
}
static inline uint64_t loom_get_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

#endif
