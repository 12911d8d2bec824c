/* verbs_gid.c - read a sysfs tree of RDMA devices and choose the device,
 * port and GID a rank uses (verbs_gid.h). Pure file reading: no verbs. */
#include "build_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "transport/verbs/verbs_gid.h"

/* Bounds on what a tree may hold, so a strange one cannot make us allocate
 * without limit (real HCAs: a few ports, GID tables of 16..256 entries). */
#define GID_MAX_DEVS 64
#define GID_MAX_PORTS 16
#define GID_MAX_INDEX 1024

/* Copy src into dst[len], cut to fit. */
static void copy_str(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The first line of root/rel (trailing newline removed), or -1. */
static int read_line(const char *dir, const char *rel, char *buf, size_t len)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *s = fgets(buf, (int)len, f);
    fclose(f);
    if (!s)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Non-negative decimal entry names of dir, sorted; *n of them. */
static int *numeric_entries(const char *dir, int max, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    int *v = NULL, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        long x = strtol(e->d_name, &end, 10);
        if (*end || x < 0 || x >= max)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            int *nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = (int)x;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort: a handful of entries */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v;
}

int loom_verbs_gid_parse(const char *s, uint8_t raw[16])
{
    /* exactly 8 groups of 4 hex digits separated by ':' (sysfs prints them
     * so); anything else is malformed */
    if (strlen(s) != 39)
        return -1;
    for (int g = 0; g < 8; g++) {
        unsigned v = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[g * 5 + k];
            if (!isxdigit((unsigned char)c))
                return -1;
            v = v * 16 + (unsigned)(isdigit((unsigned char)c)
                                        ? c - '0'
                                        : (tolower((unsigned char)c) - 'a' + 10));
        }
        if (g < 7 && s[g * 5 + 4] != ':')
            return -1;
        raw[2 * g] = (uint8_t)(v >> 8);
        raw[2 * g + 1] = (uint8_t)v;
    }
    return 0;
}

void loom_verbs_gid_format(const uint8_t raw[16], char *out, size_t len)
{
    char buf[INET6_ADDRSTRLEN];
    if (!inet_ntop(AF_INET6, raw, buf, sizeof buf))
        snprintf(buf, sizeof buf, "?");
    snprintf(out, len, "%s", buf);
}

int loom_verbs_addr_gid(const char *addr, uint8_t raw[16])
{
    struct in_addr a4;
    if (!addr)
        return -1;
    if (inet_pton(AF_INET, addr, &a4) == 1) {
        memset(raw, 0, 16);
        raw[10] = raw[11] = 0xff;
        memcpy(raw + 12, &a4, 4);
        return 0;
    }
    return inet_pton(AF_INET6, addr, raw) == 1 ? 0 : -1;
}

static int gid_is_zero(const uint8_t raw[16])
{
    for (int i = 0; i < 16; i++)
        if (raw[i])
            return 0;
    return 1;
}

static void scan_port(const char *portdir, int num, struct loom_verbs_port *p)
{
    char buf[128];
    p->num = num;
    snprintf(p->state, sizeof p->state, "unknown");
    if (read_line(portdir, "state", buf, sizeof buf) == 0) {
        /* "4: ACTIVE" -> "ACTIVE" */
        const char *colon = strchr(buf, ':');
        const char *name = colon ? colon + 1 : buf;
        while (*name == ' ')
            name++;
        copy_str(p->state, sizeof p->state, name);
        p->active = strcmp(name, "ACTIVE") == 0;
    }
    p->ethernet = read_line(portdir, "link_layer", buf, sizeof buf) == 0 &&
                  strcmp(buf, "Ethernet") == 0;
    if (read_line(portdir, "lid", buf, sizeof buf) == 0)
        p->lid = (uint16_t)strtoul(buf, NULL, 0);

    char gdir[1200];
    snprintf(gdir, sizeof gdir, "%s/gids", portdir);
    int n = 0;
    int *idx = numeric_entries(gdir, GID_MAX_INDEX, &n);
    p->gids = n ? calloc((size_t)n, sizeof *p->gids) : NULL;
    for (int i = 0; i < n && p->gids; i++) {
        struct loom_verbs_gid g = {.index = idx[i]};
        char rel[64];
        snprintf(rel, sizeof rel, "%d", idx[i]);
        if (read_line(gdir, rel, buf, sizeof buf) != 0 || loom_verbs_gid_parse(buf, g.raw) != 0 ||
            gid_is_zero(g.raw))
            continue; /* empty slots read as all zeros */
        snprintf(rel, sizeof rel, "gid_attrs/types/%d", idx[i]);
        if (read_line(portdir, rel, buf, sizeof buf) == 0) {
            if (strcmp(buf, "RoCE v2") == 0)
                g.type = LOOM_VERBS_GID_ROCE_V2;
            else if (strcmp(buf, "IB/RoCE v1") == 0)
                g.type = LOOM_VERBS_GID_ROCE_V1;
        }
        p->gids[p->ngids++] = g;
    }
    free(idx);
}

loom_result_t loom_verbs_topo_scan(const char *root, struct loom_verbs_topo *topo)
{
    memset(topo, 0, sizeof *topo);
    DIR *d = opendir(root);
    if (!d)
        return LOOM_SUCCESS; /* no devices at all */
    char names[GID_MAX_DEVS][LOOM_VERBS_NAME_MAX];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < GID_MAX_DEVS) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= LOOM_VERBS_NAME_MAX)
            continue;
        copy_str(names[n++], LOOM_VERBS_NAME_MAX, e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    topo->devs = n ? calloc((size_t)n, sizeof *topo->devs) : NULL;
    if (n && !topo->devs)
        return LOOM_ERROR_NO_MEMORY;
    for (int i = 0; i < n; i++) {
        struct loom_verbs_dev *dev = &topo->devs[topo->ndevs];
        char pdir[1024];
        if (snprintf(pdir, sizeof pdir, "%s/%s/ports", root, names[i]) >= (int)sizeof pdir)
            continue;
        int np = 0;
        int *ports = numeric_entries(pdir, 256, &np);
        if (np == 0) {
            free(ports);
            continue; /* not a device directory */
        }
        if (np > GID_MAX_PORTS)
            np = GID_MAX_PORTS;
        copy_str(dev->name, sizeof dev->name, names[i]);
        dev->ports = calloc((size_t)np, sizeof *dev->ports);
        if (!dev->ports) {
            free(ports);
            loom_verbs_topo_free(topo);
            return LOOM_ERROR_NO_MEMORY;
        }
        for (int k = 0; k < np; k++) {
            char one[1100];
            snprintf(one, sizeof one, "%s/%d", pdir, ports[k]);
            scan_port(one, ports[k], &dev->ports[dev->nports++]);
        }
        free(ports);
        topo->ndevs++;
    }
    return LOOM_SUCCESS;
}

void loom_verbs_topo_free(struct loom_verbs_topo *topo)
{
    for (int i = 0; i < topo->ndevs; i++) {
        for (int k = 0; k < topo->devs[i].nports; k++)
            free(topo->devs[i].ports[k].gids);
        free(topo->devs[i].ports);
    }
    free(topo->devs);
    memset(topo, 0, sizeof *topo);
}

static const char *type_name(enum loom_verbs_gid_type t)
{
    return t == LOOM_VERBS_GID_ROCE_V2 ? "RoCE v2" : t == LOOM_VERBS_GID_ROCE_V1 ? "RoCE v1" : "IB";
}

/* Append to out[len] at *pos; 0 while it fits. */
static int append(char *out, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char *out, size_t len, size_t *pos, const char *fmt, ...)
{
    if (*pos >= len)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *pos) {
        *pos = len;
        return -1;
    }
    *pos += (size_t)n;
    return 0;
}

void loom_verbs_topo_format(const struct loom_verbs_topo *topo, char *out, size_t len)
{
    size_t pos = 0;
    if (!len)
        return;
    out[0] = '\0';
    int ok = 0;
    if (topo->ndevs == 0)
        ok = append(out, len, &pos, "no RDMA devices");
    for (int i = 0; i < topo->ndevs && ok == 0; i++) {
        const struct loom_verbs_dev *dev = &topo->devs[i];
        for (int k = 0; k < dev->nports && ok == 0; k++) {
            const struct loom_verbs_port *p = &dev->ports[k];
            ok = append(out, len, &pos, "%s%s port %d (%s, %s", pos ? "; " : "", dev->name, p->num,
                        p->ethernet ? "Ethernet" : "InfiniBand", p->state);
            if (ok == 0 && !p->ethernet)
                ok = append(out, len, &pos, ", lid %u", (unsigned)p->lid);
            if (ok == 0)
                ok = append(out, len, &pos, "):%s", p->ngids ? "" : " no GIDs");
            for (int g = 0; g < p->ngids && ok == 0; g++) {
                char gs[64];
                loom_verbs_gid_format(p->gids[g].raw, gs, sizeof gs);
                ok = append(out, len, &pos, "%s gid %d %s %s", g ? "," : "", p->gids[g].index, gs,
                            type_name(p->gids[g].type));
            }
        }
    }
    if (ok != 0 && len > 4)
        memcpy(out + len - 4, "...", 4);
}

/* "mlx5_0" or "mlx5_0:1" -> name and port (0 = any). -1 if malformed. */
static int parse_hca(const char *hca, char *name, size_t nlen, int *port)
{
    *port = 0;
    const char *colon = strchr(hca, ':');
    size_t n = colon ? (size_t)(colon - hca) : strlen(hca);
    if (n == 0 || n >= nlen)
        return -1;
    memcpy(name, hca, n);
    name[n] = '\0';
    if (colon) {
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (*end || p < 1 || p > 255)
            return -1;
        *port = (int)p;
    }
    return 0;
}

static void fill(struct loom_verbs_choice *out, const struct loom_verbs_dev *dev,
                 const struct loom_verbs_port *p, const struct loom_verbs_gid *g)
{
    memset(out, 0, sizeof *out);
    copy_str(out->dev, sizeof out->dev, dev->name);
    out->port = p->num;
    out->gid_index = g ? g->index : 0;
    if (g)
        memcpy(out->gid, g->raw, 16);
    out->type = g ? g->type : LOOM_VERBS_GID_UNKNOWN;
    out->ethernet = p->ethernet;
    out->lid = p->lid;
}

static int hca_allows(const char *want, int want_port, const struct loom_verbs_dev *dev,
                      const struct loom_verbs_port *p)
{
    return (!want[0] || strcmp(want, dev->name) == 0) && (!want_port || want_port == p->num);
}

static loom_result_t fail(const struct loom_verbs_topo *topo, char *errmsg, size_t errlen,
                          loom_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static loom_result_t fail(const struct loom_verbs_topo *topo, char *errmsg, size_t errlen,
                          loom_result_t res, const char *fmt, ...)
{
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t pos = 0;
    if (errlen == 0)
        return res;
    errmsg[0] = '\0';
    if (append(errmsg, errlen, &pos, "%s; found: ", head) == 0)
        loom_verbs_topo_format(topo, errmsg + pos, errlen - pos);
    else if (errlen > 4)
        memcpy(errmsg + errlen - 4, "...", 4);
    return res;
}

loom_result_t loom_verbs_choose(const struct loom_verbs_topo *topo, const char *root,
                                const char *addr, const char *ifname, const char *hca,
                                int gid_index, struct loom_verbs_choice *out, char *errmsg,
                                size_t errlen)
{
    char want[LOOM_VERBS_NAME_MAX] = "";
    int want_port = 0;
    if (errlen)
        errmsg[0] = '\0';
    if (hca && hca[0] && parse_hca(hca, want, sizeof want, &want_port) != 0)
        return fail(topo, errmsg, errlen, LOOM_ERROR_CONFIG,
                    "LOOM_IB_HCA=%s is not \"device\" or \"device:port\"", hca);
    int allowed = 0;
    for (int i = 0; i < topo->ndevs; i++)
        for (int k = 0; k < topo->devs[i].nports; k++)
            allowed += hca_allows(want, want_port, &topo->devs[i], &topo->devs[i].ports[k]);
    if (!allowed) {
        if (want[0])
            return fail(topo, errmsg, errlen, LOOM_ERROR_CONFIG,
                        "LOOM_IB_HCA=%s names no device and port here", hca);
        return fail(topo, errmsg, errlen, LOOM_ERROR_NOT_SUPPORTED, "no RDMA device found under %s",
                    root ? root : "sysfs");
    }

    if (gid_index >= 0) {
        for (int i = 0; i < topo->ndevs; i++)
            for (int k = 0; k < topo->devs[i].nports; k++) {
                const struct loom_verbs_port *p = &topo->devs[i].ports[k];
                if (!hca_allows(want, want_port, &topo->devs[i], p) || !p->active)
                    continue;
                for (int g = 0; g < p->ngids; g++)
                    if (p->gids[g].index == gid_index) {
                        fill(out, &topo->devs[i], p, &p->gids[g]);
                        snprintf(out->why, sizeof out->why, "LOOM_IB_GID_INDEX=%d (%s)", gid_index,
                                 type_name(p->gids[g].type));
                        return LOOM_SUCCESS;
                    }
            }
        return fail(topo, errmsg, errlen, LOOM_ERROR_CONFIG,
                    "LOOM_IB_GID_INDEX=%d%s%s: no active port has a GID there", gid_index,
                    want[0] ? " on LOOM_IB_HCA=" : "", want[0] ? hca : "");
    }

    /* The GID that holds addr: v2 beats v1, then first in order. A match
     * on a port that is down is remembered to say so. */
    uint8_t agid[16];
    int have_addr = loom_verbs_addr_gid(addr, agid) == 0;
    const struct loom_verbs_dev *bdev = NULL, *ddev = NULL;
    const struct loom_verbs_port *bport = NULL, *dport = NULL;
    const struct loom_verbs_gid *bgid = NULL, *dgid = NULL;
    for (int i = 0; have_addr && i < topo->ndevs; i++)
        for (int k = 0; k < topo->devs[i].nports; k++) {
            const struct loom_verbs_port *p = &topo->devs[i].ports[k];
            if (!hca_allows(want, want_port, &topo->devs[i], p))
                continue;
            for (int g = 0; g < p->ngids; g++) {
                const struct loom_verbs_gid *gid = &p->gids[g];
                if (memcmp(gid->raw, agid, 16) != 0)
                    continue;
                if (!p->active) {
                    if (!dgid) {
                        ddev = &topo->devs[i];
                        dport = p;
                        dgid = gid;
                    }
                    continue;
                }
                if (!bgid ||
                    (gid->type == LOOM_VERBS_GID_ROCE_V2 && bgid->type != LOOM_VERBS_GID_ROCE_V2)) {
                    bdev = &topo->devs[i];
                    bport = p;
                    bgid = gid;
                }
            }
        }
    if (bgid) {
        fill(out, bdev, bport, bgid);
        snprintf(out->why, sizeof out->why, "GID %d holds %s (%s)", bgid->index, addr,
                 type_name(bgid->type));
        return LOOM_SUCCESS;
    }

    /* InfiniBand: the address belongs to an IPoIB interface of the device. */
    if (ifname && ifname[0] && root && !strchr(ifname, '/')) {
        for (int i = 0; i < topo->ndevs; i++) {
            char rel[512], path[1100], buf[32];
            struct stat st;
            snprintf(rel, sizeof rel, "%s/device/net/%s", topo->devs[i].name, ifname);
            snprintf(path, sizeof path, "%s/%s", root, rel);
            if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
                continue;
            int port = 1;
            snprintf(rel, sizeof rel, "%s/device/net/%s/dev_port", topo->devs[i].name, ifname);
            if (read_line(root, rel, buf, sizeof buf) == 0)
                port = (int)strtol(buf, NULL, 0) + 1;
            for (int k = 0; k < topo->devs[i].nports; k++) {
                const struct loom_verbs_port *p = &topo->devs[i].ports[k];
                if (p->num != port || !hca_allows(want, want_port, &topo->devs[i], p))
                    continue;
                if (!p->active)
                    return fail(topo, errmsg, errlen, LOOM_ERROR_NOT_SUPPORTED,
                                "%s (interface %s) is %s port %d, which is %s", addr, ifname,
                                topo->devs[i].name, p->num, p->state);
                if (p->ngids == 0)
                    break;
                fill(out, &topo->devs[i], p, &p->gids[0]);
                snprintf(out->why, sizeof out->why,
                         "%s is on %s, an IPoIB interface of "
                         "this port; GID %d",
                         addr ? addr : "the address", ifname, p->gids[0].index);
                return LOOM_SUCCESS;
            }
        }
    }

    /* LOOM_IB_HCA alone: its first active InfiniBand port, GID 0 (on RoCE
     * the GID must be the address's: GID 0 is a link-local one) */
    if (want[0]) {
        for (int i = 0; i < topo->ndevs; i++)
            for (int k = 0; k < topo->devs[i].nports; k++) {
                const struct loom_verbs_port *p = &topo->devs[i].ports[k];
                if (!hca_allows(want, want_port, &topo->devs[i], p) || !p->active || p->ethernet ||
                    p->ngids == 0)
                    continue;
                fill(out, &topo->devs[i], p, &p->gids[0]);
                snprintf(out->why, sizeof out->why, "LOOM_IB_HCA=%s, GID %d", hca,
                         p->gids[0].index);
                return LOOM_SUCCESS;
            }
    }

    if (dgid)
        return fail(topo, errmsg, errlen, LOOM_ERROR_NOT_SUPPORTED,
                    "%s is GID %d of %s port %d, but that port is %s", addr, dgid->index,
                    ddev->name, dport->num, dport->state);
    if (!have_addr)
        return fail(topo, errmsg, errlen, LOOM_ERROR_NOT_SUPPORTED,
                    "no address to look for in the GID tables (%s); set LOOM_IB_HCA "
                    "and LOOM_IB_GID_INDEX",
                    addr ? addr : "none given");
    return fail(topo, errmsg, errlen, LOOM_ERROR_NOT_SUPPORTED,
                "no active RDMA port%s%s has %s in its GID table (set LOOM_IB_HCA, "
                "and LOOM_IB_GID_INDEX for RoCE)",
                want[0] ? " of LOOM_IB_HCA=" : "", want[0] ? hca : "", addr);
}
