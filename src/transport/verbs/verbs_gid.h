/* verbs_gid.h - which RDMA device, port and GID a rank uses: a pure function
 * over a sysfs tree (/sys/class/infiniband, or a fixture in tests).
 *
 * The tree is read once into a plain description (loom_verbs_topo_scan) and
 * the choice made from that (loom_verbs_choose), so tests can build trees of
 * any shape (RoCE v1/v2, IPv4-mapped and IPv6 GIDs, several ports, ports
 * down, InfiniBand LIDs) without a NIC. What sysfs holds per port:
 *   <dev>/ports/<n>/state              "4: ACTIVE"
 *   <dev>/ports/<n>/link_layer         "Ethernet" | "InfiniBand"
 *   <dev>/ports/<n>/lid                "0x12"
 *   <dev>/ports/<n>/gids/<i>           "0000:0000:0000:0000:0000:ffff:0a00:0003"
 *   <dev>/ports/<n>/gid_attrs/types/<i> "RoCE v2" | "IB/RoCE v1" (unreadable
 *                                       for an empty entry)
 *   <dev>/device/net/<ifname>/dev_port  0-based port of an IPoIB interface
 * Nothing here includes <infiniband/verbs.h>. */
#ifndef LOOM_VERBS_GID_H
#define LOOM_VERBS_GID_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#define LOOM_VERBS_NAME_MAX 64

enum loom_verbs_gid_type {
    LOOM_VERBS_GID_UNKNOWN = 0, /* type file absent (InfiniBand ports)     */
    LOOM_VERBS_GID_ROCE_V1 = 1, /* "IB/RoCE v1"                             */
    LOOM_VERBS_GID_ROCE_V2 = 2, /* "RoCE v2": routable, UDP encapsulated    */
};

struct loom_verbs_gid {
    int index;
    uint8_t raw[16];
    enum loom_verbs_gid_type type;
};

struct loom_verbs_port {
    int num;        /* 1-based, as verbs numbers ports          */
    int active;     /* state is ACTIVE                          */
    char state[24]; /* "ACTIVE", "DOWN", ...                    */
    int ethernet;   /* link layer Ethernet (RoCE), else IB      */
    uint16_t lid;
    int ngids; /* non-zero entries only                    */
    struct loom_verbs_gid *gids;
};

struct loom_verbs_dev {
    char name[LOOM_VERBS_NAME_MAX];
    int nports;
    struct loom_verbs_port *ports;
};

struct loom_verbs_topo {
    int ndevs;
    struct loom_verbs_dev *devs;
};

/* What was chosen, for the transport and its log line. */
struct loom_verbs_choice {
    char dev[LOOM_VERBS_NAME_MAX];
    int port;
    int gid_index;
    uint8_t gid[16];
    enum loom_verbs_gid_type type;
    int ethernet;
    uint16_t lid;
    char why[160]; /* "GID 3 holds 10.0.0.3 (RoCE v2)"         */
};

/* Read every device under root (a directory of devices). An absent or empty
 * root is an empty topology, not an error; malformed files are skipped. */
loom_result_t loom_verbs_topo_scan(const char *root, struct loom_verbs_topo *topo);
void loom_verbs_topo_free(struct loom_verbs_topo *topo);

/* Choose the device, port and GID index:
 *  - hca ("" = any; "mlx5_0" or "mlx5_0:1") restricts devices and ports;
 *  - gid_index >= 0 takes that index on the first active port left;
 *  - else the GID that holds addr (a numeric IPv4 address as its
 *    IPv4-mapped GID ::ffff:a.b.c.d, or an IPv6 address), on an active
 *    port, preferring RoCE v2 to v1, then the lowest device, port, index;
 *  - else (InfiniBand: addresses are not in GID tables) the port of the
 *    IPoIB interface ifname (may be NULL) under <root>/<dev>/device/net,
 *    with GID 0 and the port's LID;
 *  - else, when hca names a device (and port), its first active
 *    InfiniBand port with GID 0 (RoCE needs the address's GID).
 * On failure errmsg lists every device, port and GID found (bounded by
 * errlen) and the result is LOOM_ERROR_NOT_SUPPORTED (nothing found) or
 * LOOM_ERROR_CONFIG (LOOM_IB_HCA / LOOM_IB_GID_INDEX name nothing). */
loom_result_t loom_verbs_choose(const struct loom_verbs_topo *topo, const char *root,
                                const char *addr, const char *ifname, const char *hca,
                                int gid_index, struct loom_verbs_choice *out, char *errmsg,
                                size_t errlen);

/* "mlx5_0 port 1 (Ethernet, ACTIVE): gid 0 fe80::1 RoCE v1, ...; mlx5_1 ..."
 * Always NUL-terminates; ends with "..." when cut. */
void loom_verbs_topo_format(const struct loom_verbs_topo *topo, char *out, size_t len);

/* GID <-> text: sysfs form "xxxx:xxxx:...:xxxx" (8 groups) -> 16 bytes
 * (0 ok, -1 malformed); 16 bytes -> inet_ntop form ("::ffff:10.0.0.3"). */
int loom_verbs_gid_parse(const char *s, uint8_t raw[16]);
void loom_verbs_gid_format(const uint8_t raw[16], char *out, size_t len);
/* The GID an address appears as: IPv4 -> ::ffff:a.b.c.d, IPv6 -> itself.
 * 0 ok, -1 when addr is not numeric. */
int loom_verbs_addr_gid(const char *addr, uint8_t raw[16]);

#endif
