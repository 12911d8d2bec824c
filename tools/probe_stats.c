/* probe_stats.c - what rank 0's report derives from the matrix: the state
 * of a pair, why a link failed, medians, and the per-server summary
 * (within each server, between each two servers). */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "probe_internal.h"

const char *probe_reach_text(int reach, double timeout, char *buf, size_t len)
{
    switch (reach) {
    case PROBE_R_REFUSED: return "connect: connection refused";
    case PROBE_R_TIMEOUT:
        snprintf(buf, len, "connect: no answer within %g s (connect timed out)", timeout);
        return buf;
    case PROBE_R_NOROUTE: return "connect: no route to host";
    case PROBE_R_OTHER: return "connect: failed";
    case PROBE_R_UNKNOWN: return "not tried";
    default: return "connected";
    }
}

const char *probe_fail_text(const struct probe *p, int from, int to, char *buf, size_t len)
{
    const struct probe_link *l = PROBE_LINK(p, from, to);
    if (l->reach != PROBE_R_OK && l->reach != PROBE_R_UNKNOWN)
        return probe_reach_text(l->reach, p->o.timeout, buf, len);
    for (size_t i = 0; i < p->nerrs; i++)
        if (p->errs[i].from == from && p->errs[i].to == to)
            return p->errs[i].text;
    return "failed";
}

int probe_pair_ok(const struct probe *p, int a, int b)
{
    return PROBE_LINK(p, a, b)->state == PROBE_MEASURED &&
           PROBE_LINK(p, b, a)->state == PROBE_MEASURED;
}

int probe_pair_failed(const struct probe *p, int a, int b)
{
    return PROBE_LINK(p, a, b)->state == PROBE_FAILED ||
           PROBE_LINK(p, b, a)->state == PROBE_FAILED;
}

double probe_link_bw(const struct probe *p, int a, int b)
{
    double x = PROBE_LINK(p, a, b)->bw_gbps, y = PROBE_LINK(p, b, a)->bw_gbps;
    return x < y ? x : y;
}

int probe_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double probe_median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, probe_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double probe_median_bw(const struct probe *p)
{
    size_t cnt = 0, cap = (size_t)p->n * (size_t)p->n / 2 + 1;
    double *v = malloc(cap * sizeof *v);
    if (!v)
        return 0;
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (probe_pair_ok(p, a, b))
                v[cnt++] = probe_link_bw(p, a, b);
    double m = probe_median(v, cnt);
    free(v);
    return m;
}

void probe_add_err(struct probe *p, int from, int to, const char *text)
{
    if (p->nerrs == p->errs_cap) {
        size_t cap = p->errs_cap ? 2 * p->errs_cap : 16;
        struct probe_err *e = realloc(p->errs, cap * sizeof *e);
        if (!e)
            return; /* the matrix still says FAILED; only the text is lost */
        p->errs = e;
        p->errs_cap = cap;
    }
    struct probe_err *e = &p->errs[p->nerrs++];
    e->from = from;
    e->to = to;
    snprintf(e->text, sizeof e->text, "%s", text);
}

const char *probe_rank_list(const int *ranks, int count, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < count && off < len; i++) {
        int j = i;
        while (j + 1 < count && ranks[j + 1] == ranks[j] + 1)
            j++;
        if (j > i)
            off += (size_t)snprintf(buf + off, len - off, "%s%d-%d", off ? ", " : "",
                                    ranks[i], ranks[j]);
        else
            off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "",
                                    ranks[i]);
        i = j;
    }
    return buf;
}

/* One pass over every pair of ranks: each pair counts in the group of its
 * two servers (idx: server pair -> group); measured pairs' latency and
 * bandwidth go to that group's slice of lat/bw (off: where each begins). */
static void groups_pass(const struct probe *p, struct probe_group *g, const int *idx,
                        size_t *off, double *lat, double *bw)
{
    int ns = p->nservers;
    for (int x = 0; x < p->n; x++)
        for (int y = x + 1; y < p->n; y++) {
            int sx = p->server_of[x], sy = p->server_of[y];
            int a = sx < sy ? sx : sy, b = sx < sy ? sy : sx;
            struct probe_group *q = &g[idx[a * ns + b]];
            if (!off) { /* counting */
                q->links++;
                q->failed += probe_pair_failed(p, x, y);
                q->measured += probe_pair_ok(p, x, y);
                continue;
            }
            if (!probe_pair_ok(p, x, y))
                continue;
            size_t i = off[q - g]++;
            double v = probe_link_bw(p, x, y);
            lat[i] = (PROBE_LINK(p, x, y)->lat_us + PROBE_LINK(p, y, x)->lat_us) / 2;
            bw[i] = v;
            if (q->slow_from < 0 || v < q->bw_min) {
                q->bw_min = v;
                q->slow_from = x;
                q->slow_to = y;
            }
        }
}

struct probe_group *probe_groups(const struct probe *p, int *count)
{
    int ns = p->nservers, cap = ns + ns * (ns - 1) / 2;
    struct probe_group *g = calloc((size_t)(cap ? cap : 1), sizeof *g);
    /* zeroed: the loop below fills only the upper triangle (a <= b), and GCC
     * 14 cannot see that groups_pass reads nothing else */
    int *idx = calloc((size_t)(ns ? ns * ns : 1), sizeof *idx);
    int *size = calloc((size_t)(ns ? ns : 1), sizeof *size);
    size_t *off = calloc((size_t)(cap ? cap : 1), sizeof *off);
    size_t pairs = (size_t)p->n * (size_t)(p->n - 1) / 2 + 1;
    double *lat = malloc(pairs * sizeof *lat), *bw = malloc(pairs * sizeof *bw);
    struct probe_group *out = NULL;
    if (!g || !idx || !size || !off || !lat || !bw)
        goto done;
    for (int r = 0; r < p->n; r++)
        size[p->server_of[r]]++;
    for (int a = 0; a < ns; a++)
        for (int b = a; b < ns; b++) {
            int k = a * (2 * ns - a + 1) / 2 + (b - a); /* row-major upper triangle */
            idx[a * ns + b] = k;
            g[k] = (struct probe_group){.a = a, .b = b, .slow_from = -1, .slow_to = -1};
        }
    groups_pass(p, g, idx, NULL, NULL, NULL);
    size_t start = 0;
    for (int k = 0; k < cap; k++) {
        off[k] = start;
        start += (size_t)g[k].measured;
    }
    groups_pass(p, g, idx, off, lat, bw);
    /* medians, and servers of one rank (no pair inside) dropped */
    int kept = 0;
    start = 0;
    for (int k = 0; k < cap; k++) {
        size_t m = (size_t)g[k].measured;
        g[k].lat_med = probe_median(lat + start, m);
        g[k].bw_med = probe_median(bw + start, m);
        start += m;
        if (g[k].a == g[k].b && size[g[k].a] < 2)
            continue;
        g[kept++] = g[k];
    }
    *count = kept;
    out = g;
    g = NULL;
done:
    free(g);
    free(idx);
    free(size);
    free(off);
    free(lat);
    free(bw);
    return out;
}

void probe_class_medians(const struct probe *p, struct probe_class *intra,
                         struct probe_class *inter)
{
    size_t pairs = (size_t)p->n * (size_t)(p->n - 1) / 2 + 1;
    double *v[4];
    size_t cnt[2] = {0, 0};
    for (int i = 0; i < 4; i++)
        v[i] = malloc(pairs * sizeof *v[i]);
    *intra = *inter = (struct probe_class){0};
    if (v[0] && v[1] && v[2] && v[3]) {
        for (int x = 0; x < p->n; x++)
            for (int y = x + 1; y < p->n; y++) {
                int c = p->server_of[x] != p->server_of[y];
                struct probe_class *k = c ? inter : intra;
                k->links++;
                k->failed += probe_pair_failed(p, x, y);
                if (!probe_pair_ok(p, x, y))
                    continue;
                v[2 * c][cnt[c]] =
                    (PROBE_LINK(p, x, y)->lat_us + PROBE_LINK(p, y, x)->lat_us) / 2;
                v[2 * c + 1][cnt[c]++] = probe_link_bw(p, x, y);
            }
        for (int c = 0; c < 2; c++) {
            struct probe_class *k = c ? inter : intra;
            k->measured = (int)cnt[c];
            k->lat_med = probe_median(v[2 * c], cnt[c]);
            k->bw_med = probe_median(v[2 * c + 1], cnt[c]);
        }
    }
    for (int i = 0; i < 4; i++)
        free(v[i]);
}
