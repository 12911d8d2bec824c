/* net.c - socket address helpers (see net.h). */
#include "build_config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "net/net.h"

loom_result_t loom_net_parse(const char *addr, int port,
                             struct sockaddr_storage *ss, socklen_t *sslen)
{
    memset(ss, 0, sizeof *ss);
    if (!addr || port < 0 || port > 65535)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        *sslen = sizeof *sin;
        return LOOM_SUCCESS;
    }
    /* Accept "[::1]" as well as "::1". */
    char buf[INET6_ADDRSTRLEN + 2];
    size_t n = strlen(addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']' && n - 2 < sizeof buf) {
        memcpy(buf, addr + 1, n - 2);
        buf[n - 2] = '\0';
        addr = buf;
    }
    if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        *sslen = sizeof *sin6;
        return LOOM_SUCCESS;
    }
    return LOOM_ERROR_INVALID_ARGUMENT;
}

loom_result_t loom_net_resolve(const char *host, int port,
                               struct sockaddr_storage *ss, socklen_t *sslen,
                               char *err, size_t errlen)
{
    if (loom_net_parse(host, port, ss, sslen) == LOOM_SUCCESS)
        return LOOM_SUCCESS;
    if (!host || port < 0 || port > 65535) {
        snprintf(err, errlen, "invalid address %s port %d", host ? host : "(null)",
                 port);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve host \"%s\": %s", host,
                 rc ? gai_strerror(rc) : "no address");
        return LOOM_ERROR_SYSTEM;
    }
    memset(ss, 0, sizeof *ss);
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return LOOM_SUCCESS;
}

void loom_net_format(const struct sockaddr *sa, char *out, size_t outlen)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        snprintf(out, outlen, "%s:%d", host, ntohs(sin->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        snprintf(out, outlen, "[%s]:%d", host, ntohs(sin6->sin6_port));
    } else {
        snprintf(out, outlen, "(family %d)", sa->sa_family);
    }
}

int loom_net_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return -1;
}

void loom_net_to_wire(const struct sockaddr *sa, uint8_t *wire)
{
    memset(wire, 0, LOOM_NET_WIRE_ADDR_LEN);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        wire[0] = 4;
        memcpy(wire + 2, &sin->sin_port, 2);
        memcpy(wire + 4, &sin->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        wire[0] = 6;
        memcpy(wire + 2, &sin6->sin6_port, 2);
        memcpy(wire + 4, &sin6->sin6_addr, 16);
    }
}

int loom_net_from_wire(const uint8_t *wire, struct sockaddr_storage *ss,
                       socklen_t *sslen)
{
    memset(ss, 0, sizeof *ss);
    if (wire[0] == 4) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_port, wire + 2, 2);
        memcpy(&sin->sin_addr, wire + 4, 4);
        *sslen = sizeof *sin;
        return 0;
    }
    if (wire[0] == 6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_port, wire + 2, 2);
        memcpy(&sin6->sin6_addr, wire + 4, 16);
        *sslen = sizeof *sin6;
        return 0;
    }
    return -1;
}

int loom_net_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void loom_net_set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void loom_net_set_sndbuf(int fd, size_t bytes)
{
    if (bytes == 0)
        return;
    int v = bytes > INT_MAX / 2 ? INT_MAX / 2 : (int)bytes;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

void loom_net_set_keepalive(int fd, double timeout)
{
    if (timeout <= 0)
        return;
    int idle = (int)(timeout / 2), intvl = (int)(timeout / 8), cnt = 4, one = 1;
    idle = idle < 1 ? 1 : idle;
    intvl = intvl < 1 ? 1 : intvl;
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}
