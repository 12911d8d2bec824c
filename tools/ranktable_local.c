/* ranktable_local.c - `loom-ranktable check --local` (ranktable_local.h).
 *
 * For each rank: is its device address this host's, is its host address
 * this host's (either makes the rank one of this host's), which one does
 * LOOM_ADDRESS make it use (the same choice loom_comm_init_ranktable
 * makes), and can a listener take that address and port now. */
#include "build_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/config.h"
#include "ranktable_local.h"

struct local_rank {
    int rank;
    loom_rank_addrs_t addrs;
    int dev_errno;        /* 0: this host owns the device address      */
    int host_errno;       /* 0: this host owns the host address        */
    int here;             /* either is this host's                     */
    loom_result_t res;    /* of the choice under LOOM_ADDRESS          */
    struct loom_rt_endpoint ep;
    char err[768];
    int port_errno;       /* 0: a listener can take ep's port now       */
};

/* Can a listener bind addr:port now? (SO_REUSEADDR, as rank 0's
 * rendezvous listener sets: a port in TIME_WAIT is free.) 0 or errno. */
static int port_free(const char *addr, int port)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    struct sockaddr *sa = (struct sockaddr *)&v4;
    socklen_t sl = sizeof v4;
    if (inet_pton(AF_INET, addr, &v4.sin_addr) != 1) {
        if (inet_pton(AF_INET6, addr, &v6.sin6_addr) != 1)
            return EINVAL;
        sa = (struct sockaddr *)&v6, sl = sizeof v6;
    }
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, sa, sl) == 0 && listen(fd, 1) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

static void look(const struct loom_ranktable *t, int mode, int rank,
                 struct local_rank *lr)
{
    memset(lr, 0, sizeof *lr);
    lr->rank = rank;
    lr->addrs.struct_size = sizeof lr->addrs;
    loom_ranktable_rank_addrs(t, rank, &lr->addrs);
    lr->dev_errno = lr->addrs.device_address
                        ? loom_rt_addr_usable(lr->addrs.device_address)
                        : ENOENT;
    lr->host_errno = lr->addrs.host_address
                         ? loom_rt_addr_usable(lr->addrs.host_address)
                         : ENOENT;
    lr->here = lr->dev_errno == 0 || lr->host_errno == 0;
    if (!lr->here)
        return;
    lr->res = loom_rt_endpoint_local(t, rank, mode, &lr->ep, lr->err,
                                     sizeof lr->err);
    /* a port free now is still taken by the other rank once both start */
    if (lr->res == LOOM_SUCCESS &&
        loom_rt_endpoint_clash(t, rank, mode, &lr->ep, lr->err, sizeof lr->err) >= 0)
        lr->res = LOOM_ERROR_INVALID_RANKTABLE;
    if (lr->res == LOOM_SUCCESS)
        lr->port_errno = port_free(lr->ep.address, lr->ep.port);
}

/* "device_ip 192.168.1.1 here", "host_ip 10.0.0.1 not here (...)". */
static void print_addr(const char *field, const char *addr, int e)
{
    if (!addr)
        printf("no %s", field);
    else if (e == 0)
        printf("%s %s here", field, addr);
    else
        printf("%s %s not here (%s)", field, addr, strerror(e));
}

static int mode_of(void)
{
    int mode = loom_rt_addr_mode_parse(loom_config()->address);
    return mode < 0 ? LOOM_RT_ADDR_AUTO : mode;
}

int loom_rt_local_text(const struct loom_ranktable *t, int rank)
{
    int mode = mode_of(), nhere = 0, bad = 0;
    printf("this host, LOOM_ADDRESS=%s:\n", loom_rt_addr_mode_name(mode));
    for (int r = rank < 0 ? 0 : rank; r < (rank < 0 ? t->nranks : rank + 1); r++) {
        struct local_rank lr;
        look(t, mode, r, &lr);
        if (!lr.here && rank < 0)
            continue;
        loom_rank_info_t ri;
        loom_ranktable_rank_info(t, r, &ri);
        printf("rank %d: server %s device %d: ", r, ri.server_id, ri.device_id);
        /* a 2.0 rank has one address, its host's */
        if (t->shape != LOOM_RT_SHAPE_RANK_LIST) {
            print_addr("device_ip", lr.addrs.device_address, lr.dev_errno);
            printf("; ");
        }
        print_addr(loom_rt_host_field(t, r), lr.addrs.host_address,
                   lr.host_errno);
        printf("\n");
        if (!lr.here) {
            printf("  not a rank of this host\n");
            continue;
        }
        nhere++;
        if (lr.res != LOOM_SUCCESS) {
            printf("  error: %s\n", lr.err);
            bad++;
        } else if (lr.port_errno) {
            printf("  uses %s %s:%d; port %d is not free (%s)\n", lr.ep.field,
                   lr.ep.address, lr.ep.port, lr.ep.port,
                   strerror(lr.port_errno));
            bad++;
        } else {
            printf("  uses %s %s:%d; port %d is free\n", lr.ep.field,
                   lr.ep.address, lr.ep.port, lr.ep.port);
        }
    }
    if (nhere == 0)
        printf("no rank of this table has an address on this host\n");
    else
        printf("%d rank%s on this host, %d with a problem\n", nhere,
               nhere == 1 ? "" : "s", bad);
    return nhere > 0 && bad == 0 ? 0 : 1;
}

static void add_addr(cJSON *o, const char *key, const char *addr, int e)
{
    cJSON *a = cJSON_AddObjectToObject(o, key);
    if (!a)
        return;
    if (addr)
        cJSON_AddStringToObject(a, "address", addr);
    else
        cJSON_AddNullToObject(a, "address");
    cJSON_AddBoolToObject(a, "here", addr && e == 0);
    if (addr && e)
        cJSON_AddStringToObject(a, "error", strerror(e));
}

int loom_rt_local_json(const struct loom_ranktable *t, int rank, cJSON *root)
{
    int mode = mode_of(), nhere = 0, bad = 0;
    cJSON *local = cJSON_AddObjectToObject(root, "local");
    if (!local)
        return 1;
    cJSON_AddStringToObject(local, "address_mode", loom_rt_addr_mode_name(mode));
    cJSON *ranks = cJSON_AddArrayToObject(local, "ranks");
    for (int r = rank < 0 ? 0 : rank; r < (rank < 0 ? t->nranks : rank + 1); r++) {
        struct local_rank lr;
        look(t, mode, r, &lr);
        if (!lr.here && rank < 0)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(ranks, o))
            break;
        cJSON_AddNumberToObject(o, "rank", r);
        add_addr(o, "device", lr.addrs.device_address, lr.dev_errno);
        add_addr(o, "host", lr.addrs.host_address, lr.host_errno);
        cJSON_AddBoolToObject(o, "here", lr.here);
        if (!lr.here)
            continue;
        nhere++;
        if (lr.res != LOOM_SUCCESS) {
            cJSON_AddStringToObject(o, "error", lr.err);
            bad++;
            continue;
        }
        cJSON_AddStringToObject(o, "uses", lr.ep.field);
        cJSON_AddStringToObject(o, "address", lr.ep.address);
        cJSON_AddNumberToObject(o, "port", lr.ep.port);
        cJSON_AddBoolToObject(o, "port_free", lr.port_errno == 0);
        if (lr.port_errno) {
            cJSON_AddStringToObject(o, "error", strerror(lr.port_errno));
            bad++;
        }
    }
    int ok = nhere > 0 && bad == 0;
    cJSON_AddBoolToObject(local, "ok", ok);
    return ok ? 0 : 1;
}
