/* uniqueid.c - the rendezvous id a framework passes around itself
 * (loom_get_unique_id / loom_comm_init_rank).
 *
 * Layout (little-endian, the rest of the 128 bytes zero):
 *   magic "LMID" u32 | version u16 | flags u16 | nonce u64 | wire address (20)
 * The listener is opened when the id is made and held in this process until
 * rank 0 of that id takes it (root_listen), so no other socket can take the
 * port in between. */
#include "build_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "config.h"
#include "net/net.h"
#include "util.h"

#define UID_MAGIC 0x44494d4cu /* "LMID" */
#define UID_VERSION 1
#define UID_HELD_MAX 16

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int fd;
    int port;
    uint64_t nonce;
} held[UID_HELD_MAX];
static int nheld;

/* The address ranks will reach this host at: LOOM_SOCKET_IFNAME when set;
 * else this host's address on the route to toward (the framework's own
 * rendezvous host, which every rank reaches: 127.0.0.1 keeps a job on
 * loopback); else the first interface that is up other than loopback,
 * else 127.0.0.1. */
static loom_result_t uid_address(const char *toward, char *out, size_t outlen, char *err,
                                 size_t errlen)
{
    const char *spec = loom_config()->socket_ifname;
    if (*spec)
        return loom_net_local_addr(NULL, 0, spec, out, outlen, err, errlen);
    if (toward && *toward) {
        char e[256];
        if (loom_net_local_addr(toward, 0, NULL, out, outlen, e, sizeof e) < 0) {
            snprintf(err, errlen, "no address of this host reaches the rendezvous "
                     "host %s: %s (LOOM_SOCKET_IFNAME names an interface)", toward, e);
            return LOOM_ERROR_SYSTEM;
        }
        return LOOM_SUCCESS;
    }
    if (loom_net_local_addr(NULL, 0, "^lo,docker,virbr", out, outlen, err, errlen) ==
        LOOM_SUCCESS)
        return LOOM_SUCCESS;
    snprintf(out, outlen, "127.0.0.1");
    err[0] = '\0';
    return LOOM_SUCCESS;
}

loom_result_t loom_boot_uid_create(uint8_t id[LOOM_UNIQUE_ID_BYTES], const char *toward,
                                   char *err, size_t errlen)
{
    char addr[64];
    LOOM_CHECK(uid_address(toward, addr, sizeof addr, err, errlen));
    struct sockaddr_storage ss;
    socklen_t sl;
    if (loom_net_parse(addr, 0, &ss, &sl) < 0) {
        snprintf(err, errlen, "unique id: %s is not a numeric address", addr);
        return LOOM_ERROR_CONFIG;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "unique id: socket(): %s", strerror(errno));
        return LOOM_ERROR_SYSTEM;
    }
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errlen, "unique id: cannot listen on %s: %s", addr,
                 strerror(errno));
        close(fd);
        return LOOM_ERROR_SYSTEM;
    }
    uint64_t nonce = 0;
    while (nonce == 0)
        if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
            nonce = loom_now_ns() ^ ((uint64_t)getpid() << 32);
    pthread_mutex_lock(&held_lock);
    if (nheld == UID_HELD_MAX) {
        /* the oldest id nobody initialised with goes */
        close(held[0].fd);
        memmove(held, held + 1, sizeof held[0] * (UID_HELD_MAX - 1));
        nheld--;
    }
    held[nheld].fd = fd;
    held[nheld].port = loom_net_port((struct sockaddr *)&ss);
    held[nheld].nonce = nonce;
    nheld++;
    pthread_mutex_unlock(&held_lock);
    memset(id, 0, LOOM_UNIQUE_ID_BYTES);
    loom_put_le32(id, UID_MAGIC);
    loom_put_le16(id + 4, UID_VERSION);
    loom_put_le64(id + 8, nonce);
    loom_net_to_wire((struct sockaddr *)&ss, id + 16);
    return LOOM_SUCCESS;
}

loom_result_t loom_boot_uid_parse(const uint8_t id[LOOM_UNIQUE_ID_BYTES], char *host,
                                  size_t hostlen, int *port, uint64_t *nonce,
                                  char *err, size_t errlen)
{
    if (loom_get_le32(id) != UID_MAGIC || loom_get_le16(id + 4) != UID_VERSION) {
        snprintf(err, errlen, "the unique id is not one loom_get_unique_id made "
                 "(magic 0x%08x, version %u)", (unsigned)loom_get_le32(id),
                 (unsigned)loom_get_le16(id + 4));
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    if (loom_net_from_wire(id + 16, &ss, &sl) != 0) {
        snprintf(err, errlen, "the unique id holds no address (family byte %u)",
                 id[16]);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    char a[LOOM_NET_ADDRSTR_MAX];
    loom_net_format((struct sockaddr *)&ss, a, sizeof a);
    /* "1.2.3.4:5" or "[::1]:5": keep the address part only */
    char *colon = strrchr(a, ':');
    if (colon)
        *colon = '\0';
    const char *h = a;
    if (*h == '[') {
        h++;
        char *close = strchr(a, ']');
        if (close)
            *close = '\0';
    }
    snprintf(host, hostlen, "%s", h);
    *port = loom_net_port((struct sockaddr *)&ss);
    *nonce = loom_get_le64(id + 8);
    return LOOM_SUCCESS;
}

int loom_boot_uid_take_listener(int port)
{
    int fd = -1;
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < nheld; i++)
        if (held[i].port == port) {
            fd = held[i].fd;
            held[i] = held[--nheld];
            break;
        }
    pthread_mutex_unlock(&held_lock);
    return fd;
}
