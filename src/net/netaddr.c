/* netaddr.c - choose the local address to advertise (bootstrap.h). */
#include "build_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "net/net.h"
#include "util.h"

/* Does name match spec? "eth,ib" prefixes, "^lo,docker" excludes those
 * prefixes, "=eth0" (or "^=eth0") compares whole names. */
static int ifname_match(const char *spec, const char *name)
{
    int exclude = 0, exact = 0;
    if (*spec == '^') {
        exclude = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    int hit = 0;
    while (*spec && !hit) {
        const char *end = strchr(spec, ',');
        size_t len = end ? (size_t)(end - spec) : strlen(spec);
        if (len > 0) {
            if (exact)
                hit = strlen(name) == len && strncmp(name, spec, len) == 0;
            else
                hit = strncmp(name, spec, len) == 0;
        }
        spec += len + (end ? 1 : 0);
    }
    return exclude ? !hit : hit;
}

static loom_result_t by_interface(const char *spec, char *out, size_t outlen,
                                  char *err, size_t errlen)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0) {
        snprintf(err, errlen, "getifaddrs: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    /* IPv4 first; then IPv6 that is not link-local (needs a scope id). */
    int found = 0;
    for (int pass = 0; pass < 2 && !found; pass++) {
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) ||
                !ifname_match(spec, i->ifa_name))
                continue;
            int fam = i->ifa_addr->sa_family;
            if (pass == 0 && fam == AF_INET) {
                struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
                found = inet_ntop(AF_INET, &sin->sin_addr, out,
                                  (socklen_t)outlen) != NULL;
            } else if (pass == 1 && fam == AF_INET6) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)i->ifa_addr;
                if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
                    continue;
                found = inet_ntop(AF_INET6, &s6->sin6_addr, out,
                                  (socklen_t)outlen) != NULL;
            }
        }
    }
    freeifaddrs(ifs);
    if (!found) {
        snprintf(err, errlen, "no interface that is up matches \"%s\"", spec);
        return LOOM_ERROR_CONFIG;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_net_local_addr(const char *host, int port,
                                  const char *ifname_spec, char *out,
                                  size_t outlen, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    if (!out || outlen < INET6_ADDRSTRLEN) {
        snprintf(err, errlen, "address buffer of %zu bytes is too small", outlen);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (ifname_spec && *ifname_spec)
        return by_interface(ifname_spec, out, outlen, err, errlen);

    struct sockaddr_storage ss;
    socklen_t sl;
    char e[256];
    if (loom_net_resolve(host, port > 0 ? port : 1, &ss, &sl, e, sizeof e) < 0) {
        snprintf(err, errlen, "%s", e);
        return LOOM_ERROR_SYSTEM;
    }
    int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket(): %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    /* A UDP connect only picks the route; nothing is sent. */
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
        snprintf(err, errlen, "no route to %s: %s", host, strerror(errno));
        close(fd);
        return LOOM_ERROR_SYSTEM;
    }
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    int rc = getsockname(fd, (struct sockaddr *)&me, &ml);
    close(fd);
    if (rc < 0) {
        snprintf(err, errlen, "getsockname: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    const void *a = me.ss_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)&me)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)&me)->sin6_addr;
    if (!inet_ntop(me.ss_family, a, out, (socklen_t)outlen)) {
        snprintf(err, errlen, "inet_ntop: %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    return LOOM_SUCCESS;
}

/* Can a TCP listener bind 127.0.0.1:port right now? (Without SO_REUSEADDR:
 * a port still in TIME_WAIT counts as taken, which only skips more.) */
static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

int loom_net_pick_port_base(int nports)
{
    if (nports < 1 || nports > 4096)
        return 0;
    int lo = 32768, hi = 60999; /* Linux's default ephemeral range */
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        int a, b;
        if (fscanf(f, "%d %d", &a, &b) == 2 && a > 0 && b >= a && b <= 65535) {
            lo = a;
            hi = b;
        }
        fclose(f);
    }
    /* Bases below the ephemeral range (above the well-known and the
     * registered ports most services use), then above it. */
    int first[2] = {10000, hi + 1};
    int span[2] = {lo - nports - 10000 + 1, 65535 - nports - hi + 1};
    for (int w = 0; w < 2; w++)
        span[w] = span[w] < 0 ? 0 : span[w];
    if (span[0] + span[1] == 0) { /* the whole range is ephemeral */
        first[0] = 1024;
        span[0] = 65535 - nports - 1024 + 1;
    }
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)loom_now_ns();
    for (int attempt = 0; attempt < 256; attempt++) {
        unsigned k = (unsigned)rand_r(&seed) % (unsigned)(span[0] + span[1]);
        int base = (int)k < span[0] ? first[0] + (int)k : first[1] + (int)k - span[0];
        int p = 0;
        while (p < nports && port_free(base + p))
            p++;
        if (p == nports)
            return base;
    }
    return 0;
}
