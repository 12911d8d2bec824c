/* probe_report.c - rank 0's report for `loom-ranktable probe`: who did not
 * join, the latency and bandwidth matrices (row = the rank that measured;
 * where a pair was not measured, what the row's connect did), the summary
 * per server and between servers, servers cut off, unreachable links with
 * both endpoints, links below half the median bandwidth; text or JSON. */
#include "build_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "probe.h"
#include "probe_internal.h"

#define REPORT_MAX_LINES 100  /* unreachable and slow links listed in text */
#define REPORT_MAX_GROUPS 16  /* server pairs listed in full up to this many */

static int joined(const struct probe *p, int r)
{
    return p->joined ? p->joined[r] != 0 : 1;
}

static int pairs_failed(const struct probe *p)
{
    int bad = 0;
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            bad += probe_pair_failed(p, a, b) || !joined(p, a) || !joined(p, b);
    return bad;
}

static int nmissing(const struct probe *p)
{
    int m = 0;
    for (int r = 0; r < p->n; r++)
        m += !joined(p, r);
    return m;
}

/* The ranks of server s for which keep(p, r) holds, as "2-3". */
static const char *server_ranks(const struct probe *p, int s, int only_missing, char *buf,
                                size_t len, int *count)
{
    int *v = malloc((size_t)p->n * sizeof *v), cnt = 0;
    buf[0] = 0;
    if (v) {
        for (int r = 0; r < p->n; r++)
            if (p->server_of[r] == s && (!only_missing || !joined(p, r)))
                v[cnt++] = r;
        probe_rank_list(v, cnt, buf, len);
        free(v);
    }
    if (count)
        *count = cnt;
    return buf;
}

/* ---- who is cut off ------------------------------------------------------ */

/* What the joined ranks' connects to the ranks of server s (missing ones
 * only, or those of other servers) did: counts per enum probe_reach. */
static void inbound(const struct probe *p, int s, int only_missing, int *by)
{
    memset(by, 0, PROBE_R_COUNT * sizeof *by);
    for (int r = 0; r < p->n; r++) {
        if (p->server_of[r] != s || (only_missing && joined(p, r)))
            continue;
        for (int q = 0; q < p->n; q++)
            if (joined(p, q) && q != r && (only_missing || p->server_of[q] != s))
                by[PROBE_LINK(p, q, r)->reach]++;
    }
}

static void outbound(const struct probe *p, int s, int *by)
{
    memset(by, 0, PROBE_R_COUNT * sizeof *by);
    for (int r = 0; r < p->n; r++) {
        if (p->server_of[r] != s || !joined(p, r))
            continue;
        for (int q = 0; q < p->n; q++)
            if (p->server_of[q] != s)
                by[PROBE_LINK(p, r, q)->reach]++;
    }
}

/* "3 refused, 1 timed out" */
static const char *reach_counts(const int *by, char *buf, size_t len)
{
    static const char *const names[PROBE_R_COUNT] = {
        [PROBE_R_OK] = "connected", [PROBE_R_REFUSED] = "refused",
        [PROBE_R_TIMEOUT] = "timed out", [PROBE_R_NOROUTE] = "no route",
        [PROBE_R_OTHER] = "failed otherwise"};
    size_t off = 0;
    buf[0] = 0;
    for (int k = PROBE_R_OK; k < PROBE_R_COUNT && off < len; k++)
        if (by[k])
            off += (size_t)snprintf(buf + off, len - off, "%s%d %s", off ? ", " : "",
                                    by[k], names[k]);
    return buf;
}

/* One line per server that is cut off: ranks that did not join, and
 * servers whose ports no other server reaches (or that reach no other). */
static int print_cut_off(const struct probe *p)
{
    int lines = 0;
    for (int s = 0; s < p->nservers; s++) {
        char list[512], counts[160];
        int cnt, by[PROBE_R_COUNT];
        server_ranks(p, s, 1, list, sizeof list, &cnt);
        if (cnt) {
            inbound(p, s, 1, by);
            printf("did not join: server %s, rank%s %s: not in touch with rank 0 (%s) "
                   "within %g s; the other ranks' connects to %s: %s (%s)\n",
                   p->server_name[s], cnt > 1 ? "s" : "", list, p->ep_str[0],
                   p->join_timeout, cnt > 1 ? "them" : "it",
                   reach_counts(by, counts, sizeof counts),
                   by[PROBE_R_OK] ? "listening, so cut off from rank 0: its own "
                                    "output says what it reaches"
                                  : "not started, or its port is blocked");
            lines++;
        }
        if (p->nservers < 2)
            continue;
        inbound(p, s, 0, by);
        int tried = 0;
        for (int k = PROBE_R_OK; k < PROBE_R_COUNT; k++)
            tried += by[k];
        if (tried && !by[PROBE_R_OK]) {
            printf("cut off: server %s (ranks %s): no rank of another server reaches "
                   "its ports (%s)\n", p->server_name[s],
                   server_ranks(p, s, 0, list, sizeof list, NULL),
                   reach_counts(by, counts, sizeof counts));
            lines++;
        }
        outbound(p, s, by);
        tried = 0;
        for (int k = PROBE_R_OK; k < PROBE_R_COUNT; k++)
            tried += by[k];
        if (tried && !by[PROBE_R_OK]) {
            printf("cut off: server %s (ranks %s) reaches no rank of another server "
                   "(%s)\n", p->server_name[s],
                   server_ranks(p, s, 0, list, sizeof list, NULL),
                   reach_counts(by, counts, sizeof counts));
            lines++;
        }
    }
    return lines;
}

/* ---- matrices ---------------------------------------------------------------- */

/* The cell (r, j): a number when measured both ways, else what r's connect
 * to j did. */
static void print_cell(const struct probe *p, int r, int j, int bw, int *legend)
{
    const struct probe_link *l = PROBE_LINK(p, r, j);
    if (r == j) {
        printf(" %8s", "-");
    } else if (probe_pair_ok(p, r, j)) {
        printf(bw ? " %8.2f" : " %8.1f", bw ? l->bw_gbps : l->lat_us);
    } else if (l->state == PROBE_FAILED) {
        printf(" %8s", "X");
        *legend |= 1;
    } else if (l->state == PROBE_UNKNOWN) {
        printf(" %8s", "?");
        *legend |= 4;
    } else {
        printf(" %8s", "+");
        *legend |= 2;
    }
}

static void print_matrix(const struct probe *p, const char *title, int bw, int *legend)
{
    printf("\n%s\n%6s", title, "");
    for (int j = 0; j < p->n; j++)
        printf(" %8d", j);
    printf("\n");
    for (int r = 0; r < p->n; r++) {
        printf("%6d", r);
        for (int j = 0; j < p->n; j++)
            print_cell(p, r, j, bw, legend);
        printf("\n");
    }
}

/* ---- summary per server ---------------------------------------------------------- */

static int cmp_group_bw(const void *a, const void *b)
{
    const struct probe_group *x = a, *y = b;
    double u = x->measured ? x->bw_min : -1, v = y->measured ? y->bw_min : -1;
    return (u > v) - (u < v);
}

static void print_group(const struct probe *p, const struct probe_group *g)
{
    char name[160], slow[64] = "-";
    if (g->a == g->b)
        snprintf(name, sizeof name, "%s", p->server_name[g->a]);
    else
        snprintf(name, sizeof name, "%s <-> %s", p->server_name[g->a],
                 p->server_name[g->b]);
    if (g->slow_from >= 0)
        snprintf(slow, sizeof slow, "%d<->%d %.2f", g->slow_from, g->slow_to, g->bw_min);
    if (g->measured)
        printf("  %-36s %6d %7d %9.1f %9.2f  %s\n", name, g->links, g->failed, g->lat_med,
               g->bw_med, slow);
    else
        printf("  %-36s %6d %7d %9s %9s  %s\n", name, g->links, g->failed, "-", "-", slow);
}

static void print_summary(const struct probe *p)
{
    struct probe_class intra, inter;
    probe_class_medians(p, &intra, &inter);
    printf("\nsummary (medians over the pairs measured; latency us, bandwidth GB/s):\n");
    if (intra.links)
        printf("  within servers:  %d pairs, %d measured, %d failed; latency %.1f, "
               "bandwidth %.2f\n", intra.links, intra.measured, intra.failed,
               intra.lat_med, intra.bw_med);
    if (inter.links)
        printf("  between servers: %d pairs, %d measured, %d failed; latency %.1f, "
               "bandwidth %.2f\n", inter.links, inter.measured, inter.failed,
               inter.lat_med, inter.bw_med);
    int ng = 0;
    struct probe_group *g = probe_groups(p, &ng);
    if (!g)
        return;
    printf("  %-36s %6s %7s %9s %9s  %s\n", "server (pair)", "pairs", "failed", "latency",
           "bandwidth", "slowest pair (GB/s)");
    int npairs = 0;
    for (int k = 0; k < ng; k++) {
        if (g[k].a == g[k].b)
            print_group(p, &g[k]);
        else
            npairs++;
    }
    /* every server pair while there are few; else the slowest */
    struct probe_group *between = g;
    int nb = 0;
    for (int k = 0; k < ng; k++)
        if (g[k].a != g[k].b)
            between[nb++] = g[k];
    if (nb > REPORT_MAX_GROUPS) {
        qsort(between, (size_t)nb, sizeof *between, cmp_group_bw);
        printf("  (the %d slowest of %d server pairs; --json has them all)\n",
               REPORT_MAX_GROUPS, npairs);
        nb = REPORT_MAX_GROUPS;
    }
    for (int k = 0; k < nb; k++)
        print_group(p, &between[k]);
    free(g);
}

/* ---- lists ---------------------------------------------------------------------------- */

/* Whether to list row x -> column y, the failure of a direction: every
 * one the sweep found; a failed measurement (which both sides see) once,
 * as the lower rank saw it. */
static int listed(const struct probe *p, int x, int y)
{
    const struct probe_link *l = PROBE_LINK(p, x, y);
    if (x == y || l->state != PROBE_FAILED)
        return 0;
    return x < y || l->reach != PROBE_R_OK || PROBE_LINK(p, y, x)->state != PROBE_FAILED;
}

/* Servers sa -> sb in one line when every listed link between them failed
 * the same way (a blocked port, a host cut off): marks them in shown. */
static int print_server_block(const struct probe *p, int sa, int sb, uint8_t *shown)
{
    char first[128], buf[128], la[256], lb[256];
    const char *text = NULL;
    int count = 0;
    for (int x = 0; x < p->n; x++) {
        if (p->server_of[x] != sa || !joined(p, x))
            continue;
        for (int y = 0; y < p->n; y++) {
            if (p->server_of[y] != sb || x == y)
                continue;
            if (!listed(p, x, y))
                return 0;
            const char *t = probe_fail_text(p, x, y, buf, sizeof buf);
            if (!text) {
                snprintf(first, sizeof first, "%s", t);
                text = first;
            } else if (strcmp(t, text) != 0) {
                return 0;
            }
            count++;
        }
    }
    if (count < 2)
        return 0;
    for (int x = 0; x < p->n; x++)
        for (int y = 0; y < p->n; y++)
            if (p->server_of[x] == sa && p->server_of[y] == sb && joined(p, x))
                shown[(size_t)x * p->n + y] = 1;
    printf("unreachable: server %s (ranks %s) -> server %s (ranks %s): %s (all %d links)\n",
           p->server_name[sa], server_ranks(p, sa, 0, la, sizeof la, NULL),
           p->server_name[sb], server_ranks(p, sb, 0, lb, sizeof lb, NULL), text, count);
    return 1;
}

static void print_unreachable(const struct probe *p)
{
    int total = 0, lines = 0;
    char buf[128];
    uint8_t *shown = calloc((size_t)p->n * (size_t)p->n, 1);
    for (int sa = 0; shown && sa < p->nservers; sa++)
        for (int sb = 0; sb < p->nservers; sb++)
            lines += print_server_block(p, sa, sb, shown);
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            for (int d = 0; d < 2; d++) {
                int x = d ? b : a, y = d ? a : b;
                if (!listed(p, x, y) || (shown && shown[(size_t)x * p->n + y]))
                    continue;
                if (++total + lines <= REPORT_MAX_LINES)
                    printf("unreachable: rank %d (%s) -> rank %d (%s): %s\n", x,
                           p->ep_str[x], y, p->ep_str[y],
                           probe_fail_text(p, x, y, buf, sizeof buf));
            }
    if (total + lines > REPORT_MAX_LINES)
        printf("... and %d more unreachable links (--json has them all)\n",
               total + lines - REPORT_MAX_LINES);
    free(shown);
}

static int print_slow(const struct probe *p, double med)
{
    int total = 0;
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (probe_pair_ok(p, a, b) && probe_link_bw(p, a, b) < med / 2 &&
                ++total <= REPORT_MAX_LINES)
                printf("slow link: rank %d <-> rank %d: %.2f GB/s (median %.2f)\n", a, b,
                       probe_link_bw(p, a, b), med);
    if (total > REPORT_MAX_LINES)
        printf("... and %d more slow links (--json has them all)\n",
               total - REPORT_MAX_LINES);
    return total;
}

int probe_report_text(const struct probe *p)
{
    int pairs = p->n * (p->n - 1) / 2, legend = 0;
    double med = probe_median_bw(p);
    printf("probe of %s\n", p->o.file);
    printf("ranks: %d, servers: %d, table hash: 0x%016llx\n", p->n, p->nservers,
           (unsigned long long)p->hash);
    printf("pairs: %d in %d rounds; bandwidth %llu bytes x %u each way; "
           "connect timeout %g s\n", pairs, loom_probe_nrounds(p->n),
           (unsigned long long)p->o.size, p->o.iters, p->o.timeout);
    print_matrix(p, "latency (us, half round trip, median of 200; row pings "
                    "column):", 0, &legend);
    print_matrix(p, "bandwidth (GB/s, row sends to column):", 1, &legend);
    static const char *const keys[3] = {
        "X: the row cannot reach the column",
        "+: the row reaches the column, the pair was not measured",
        "?: not known, the row did not join"};
    for (int k = 0, first = 1; k < 3; k++)
        if (legend & (1 << k)) {
            printf("%s%s", first ? "" : "; ", keys[k]);
            first = 0;
        }
    if (legend)
        printf("\n");
    if (p->n > 1)
        print_summary(p);
    printf("\n");
    print_cut_off(p);
    print_unreachable(p);
    int slow = print_slow(p, med);
    int missing = nmissing(p);
    int bad = pairs_failed(p);
    if (missing)
        printf("result: %d of %d ranks did not join; %d of %d pairs unreachable or "
               "not tested\n", missing, p->n, bad, pairs);
    else if (bad)
        printf("result: %d of %d pairs unreachable\n", bad, pairs);
    else
        printf("result: all %d pairs reachable%s\n", pairs,
               slow ? " (some links slow)" : "");
    return bad ? EXIT_UNREACHABLE : 0;
}

/* ---- JSON ------------------------------------------------------------------------------- */

/* Three decimals are all a measurement here is worth. */
static double round3(double x)
{
    return round(x * 1000.0) / 1000.0;
}

static cJSON *json_matrix(const struct probe *p, int bw)
{
    cJSON *m = cJSON_CreateArray();
    for (int r = 0; m && r < p->n; r++) {
        cJSON *row = cJSON_CreateArray();
        if (!row || !cJSON_AddItemToArray(m, row))
            return m;
        for (int j = 0; j < p->n; j++) {
            const struct probe_link *l = PROBE_LINK(p, r, j);
            cJSON_AddItemToArray(row, r != j && probe_pair_ok(p, r, j)
                                          ? cJSON_CreateNumber(round3(
                                                bw ? l->bw_gbps : l->lat_us))
                                          : cJSON_CreateNull());
        }
    }
    return m;
}

static const char *const reach_names[PROBE_R_COUNT] = {
    [PROBE_R_UNKNOWN] = NULL, [PROBE_R_OK] = "ok", [PROBE_R_REFUSED] = "refused",
    [PROBE_R_TIMEOUT] = "timeout", [PROBE_R_NOROUTE] = "noroute",
    [PROBE_R_OTHER] = "failed"};

/* "reach": row r's connect to column j: "ok", "refused", "timeout",
 * "noroute", "failed", or null (the diagonal; not tried). */
static cJSON *json_reach(const struct probe *p)
{
    cJSON *m = cJSON_CreateArray();
    for (int r = 0; m && r < p->n; r++) {
        cJSON *row = cJSON_CreateArray();
        if (!row || !cJSON_AddItemToArray(m, row))
            return m;
        for (int j = 0; j < p->n; j++) {
            const char *name = r == j ? NULL : reach_names[PROBE_LINK(p, r, j)->reach];
            cJSON_AddItemToArray(row, name ? cJSON_CreateString(name) : cJSON_CreateNull());
        }
    }
    return m;
}

static cJSON *json_groups(const struct probe *p, cJSON *servers)
{
    int ng = 0;
    struct probe_group *g = probe_groups(p, &ng);
    cJSON *pairs = cJSON_CreateArray();
    for (int k = 0; g && pairs && k < ng; k++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        if (g[k].a != g[k].b) {
            cJSON_AddStringToObject(o, "a", p->server_name[g[k].a]);
            cJSON_AddStringToObject(o, "b", p->server_name[g[k].b]);
        }
        cJSON_AddNumberToObject(o, "pairs", g[k].links);
        cJSON_AddNumberToObject(o, "measured", g[k].measured);
        cJSON_AddNumberToObject(o, "unreachable", g[k].failed);
        if (g[k].measured) {
            cJSON_AddNumberToObject(o, "latency_us_median", round3(g[k].lat_med));
            cJSON_AddNumberToObject(o, "bandwidth_gbps_median", round3(g[k].bw_med));
            cJSON *s = cJSON_AddObjectToObject(o, "slowest");
            cJSON_AddNumberToObject(s, "from", g[k].slow_from);
            cJSON_AddNumberToObject(s, "to", g[k].slow_to);
            cJSON_AddNumberToObject(s, "gbps", round3(g[k].bw_min));
        }
        if (g[k].a == g[k].b) /* within a server: goes with the server */
            cJSON_AddItemToObject(cJSON_GetArrayItem(servers, g[k].a), "intra", o);
        else
            cJSON_AddItemToArray(pairs, o);
    }
    free(g);
    return pairs;
}

static cJSON *json_class(const struct probe_class *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "pairs", c->links);
    cJSON_AddNumberToObject(o, "measured", c->measured);
    cJSON_AddNumberToObject(o, "unreachable", c->failed);
    cJSON_AddNumberToObject(o, "latency_us_median", round3(c->lat_med));
    cJSON_AddNumberToObject(o, "bandwidth_gbps_median", round3(c->bw_med));
    return o;
}

int probe_report_json(const struct probe *p)
{
    double med = probe_median_bw(p);
    char hash[32], buf[128];
    snprintf(hash, sizeof hash, "0x%016llx", (unsigned long long)p->hash);
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        fprintf(stderr, "loom-ranktable probe: out of memory\n");
        return EXIT_UNREACHABLE;
    }
    cJSON_AddStringToObject(root, "file", p->o.file);
    cJSON_AddNumberToObject(root, "ranks", p->n);
    cJSON_AddNumberToObject(root, "servers", p->nservers);
    cJSON_AddStringToObject(root, "table_hash", hash);
    cJSON_AddNumberToObject(root, "size", (double)p->o.size);
    cJSON_AddNumberToObject(root, "iters", p->o.iters);
    cJSON_AddNumberToObject(root, "timeout", p->o.timeout);
    cJSON_AddNumberToObject(root, "join_timeout", p->join_timeout);
    cJSON *eps = cJSON_AddArrayToObject(root, "endpoints");
    for (int r = 0; eps && r < p->n; r++)
        cJSON_AddItemToArray(eps, cJSON_CreateString(p->ep_str[r]));
    cJSON *srv = cJSON_AddArrayToObject(root, "server_of");
    for (int r = 0; srv && r < p->n; r++)
        cJSON_AddItemToArray(srv, cJSON_CreateNumber(p->server_of[r]));
    cJSON *servers = cJSON_AddArrayToObject(root, "server_list");
    for (int s = 0; servers && s < p->nservers; s++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "server_id", p->server_name[s]);
        cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
        for (int r = 0; ranks && r < p->n; r++)
            if (p->server_of[r] == s)
                cJSON_AddItemToArray(ranks, cJSON_CreateNumber(r));
        cJSON_AddItemToArray(servers, o);
    }
    cJSON *j = cJSON_AddArrayToObject(root, "joined");
    for (int r = 0; j && r < p->n; r++)
        cJSON_AddItemToArray(j, cJSON_CreateBool(joined(p, r)));
    cJSON_AddItemToObject(root, "latency_us", json_matrix(p, 0));
    cJSON_AddItemToObject(root, "bandwidth_gbps", json_matrix(p, 1));
    cJSON_AddItemToObject(root, "reach", json_reach(p));
    struct probe_class intra, inter;
    probe_class_medians(p, &intra, &inter);
    cJSON_AddItemToObject(root, "within_servers", json_class(&intra));
    cJSON_AddItemToObject(root, "between_servers", json_class(&inter));
    cJSON_AddItemToObject(root, "server_pairs", json_groups(p, servers));
    cJSON *un = cJSON_AddArrayToObject(root, "unreachable");
    cJSON *slow = cJSON_AddArrayToObject(root, "slow");
    for (int a = 0; a < p->n; a++)
        for (int b = 0; b < p->n; b++) {
            const struct probe_link *ab = PROBE_LINK(p, a, b);
            int failed = a != b && ab->state == PROBE_FAILED;
            int is_slow = a < b && probe_pair_ok(p, a, b) && probe_link_bw(p, a, b) < med / 2;
            if (!failed && !is_slow)
                continue;
            cJSON *o = cJSON_CreateObject();
            if (!o)
                continue;
            cJSON_AddNumberToObject(o, "from", a);
            cJSON_AddStringToObject(o, "from_endpoint", p->ep_str[a]);
            cJSON_AddNumberToObject(o, "to", b);
            cJSON_AddStringToObject(o, "to_endpoint", p->ep_str[b]);
            if (failed) {
                cJSON_AddStringToObject(o, "error", probe_fail_text(p, a, b, buf, sizeof buf));
                cJSON_AddItemToArray(un, o);
            } else {
                cJSON_AddNumberToObject(o, "gbps", round3(probe_link_bw(p, a, b)));
                cJSON_AddNumberToObject(o, "median_gbps", round3(med));
                cJSON_AddItemToArray(slow, o);
            }
        }
    int bad = pairs_failed(p);
    cJSON_AddBoolToObject(root, "ok", bad == 0);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "loom-ranktable probe: out of memory\n");
        return EXIT_UNREACHABLE;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return bad ? EXIT_UNREACHABLE : 0;
}
