/* probe_report.c - rank 0's report for `loom-ranktable probe`: the latency and
 * bandwidth matrices (row = the rank that measured), unreachable pairs with
 * both endpoints, links below half the median bandwidth; text or JSON. */
#include "build_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "loom.h"
#include "probe.h"
#include "probe_internal.h"

static int pair_ok(const struct probe *p, int a, int b)
{
    return p->links[(size_t)a * p->n + b].ok && p->links[(size_t)b * p->n + a].ok;
}

/* Why a pair failed: the connecting (lower) rank's reason when it has one. */
static const char *pair_error(const struct probe *p, int a, int b)
{
    const struct probe_link *ab = &p->links[(size_t)a * p->n + b];
    const struct probe_link *ba = &p->links[(size_t)b * p->n + a];
    if (!ab->ok && ab->err[0])
        return ab->err;
    if (!ba->ok && ba->err[0])
        return ba->err;
    return "failed";
}

/* A link's bandwidth is its slower direction. */
static double link_bw(const struct probe *p, int a, int b)
{
    double x = p->links[(size_t)a * p->n + b].bw_gbps;
    double y = p->links[(size_t)b * p->n + a].bw_gbps;
    return x < y ? x : y;
}

/* Median over reachable links; 0 when there are none. */
static double median_bw(const struct probe *p)
{
    size_t cnt = 0, cap = (size_t)p->n * (size_t)p->n / 2 + 1;
    double *v = malloc(cap * sizeof *v);
    if (!v)
        return 0;
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (pair_ok(p, a, b))
                v[cnt++] = link_bw(p, a, b);
    double m = 0;
    if (cnt) {
        qsort(v, cnt, sizeof *v, probe_cmp_double);
        m = cnt % 2 ? v[cnt / 2] : (v[cnt / 2 - 1] + v[cnt / 2]) / 2;
    }
    free(v);
    return m;
}

static void print_matrix(const struct probe *p, const char *title, int bw)
{
    printf("\n%s\n%6s", title, "");
    for (int j = 0; j < p->n; j++)
        printf(" %8d", j);
    printf("\n");
    for (int r = 0; r < p->n; r++) {
        printf("%6d", r);
        for (int j = 0; j < p->n; j++) {
            const struct probe_link *l = &p->links[(size_t)r * p->n + j];
            if (r == j)
                printf(" %8s", "-");
            else if (!pair_ok(p, r, j))
                printf(" %8s", "X");
            else
                printf(bw ? " %8.2f" : " %8.1f", bw ? l->bw_gbps : l->lat_us);
        }
        printf("\n");
    }
}

int probe_report_text(const struct probe *p)
{
    int bad = 0, slow = 0, pairs = p->n * (p->n - 1) / 2;
    double med = median_bw(p);
    printf("probe of %s\n", p->o.file);
    printf("ranks: %d, servers: %d, table hash: 0x%016llx\n", p->n, p->nservers,
           (unsigned long long)p->hash);
    printf("pairs: %d in %d rounds; bandwidth %llu bytes x %u each way; "
           "connect timeout %g s\n", pairs, loom_probe_nrounds(p->n),
           (unsigned long long)p->o.size, p->o.iters, p->o.timeout);
    print_matrix(p, "latency (us, half round trip, median of 200; row pings "
                    "column):", 0);
    print_matrix(p, "bandwidth (GB/s, row sends to column):", 1);
    printf("\n");
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (!pair_ok(p, a, b)) {
                printf("unreachable: rank %d (%s) -> rank %d (%s): %s\n", a,
                       p->ep_str[a], b, p->ep_str[b], pair_error(p, a, b));
                bad++;
            }
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (pair_ok(p, a, b) && link_bw(p, a, b) < med / 2) {
                printf("slow link: rank %d <-> rank %d: %.2f GB/s (median "
                       "%.2f)\n", a, b, link_bw(p, a, b), med);
                slow++;
            }
    if (bad)
        printf("result: %d of %d pairs unreachable\n", bad, pairs);
    else
        printf("result: all %d pairs reachable%s\n", pairs,
               slow ? " (some links slow)" : "");
    return bad ? EXIT_UNREACHABLE : 0;
}

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
            const struct probe_link *l = &p->links[(size_t)r * p->n + j];
            cJSON_AddItemToArray(row, r != j && pair_ok(p, r, j)
                                          ? cJSON_CreateNumber(round3(
                                                bw ? l->bw_gbps : l->lat_us))
                                          : cJSON_CreateNull());
        }
    }
    return m;
}

int probe_report_json(const struct probe *p)
{
    int bad = 0;
    double med = median_bw(p);
    char hash[32];
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
    cJSON *eps = cJSON_AddArrayToObject(root, "endpoints");
    for (int r = 0; eps && r < p->n; r++)
        cJSON_AddItemToArray(eps, cJSON_CreateString(p->ep_str[r]));
    cJSON_AddItemToObject(root, "latency_us", json_matrix(p, 0));
    cJSON_AddItemToObject(root, "bandwidth_gbps", json_matrix(p, 1));
    cJSON *un = cJSON_AddArrayToObject(root, "unreachable");
    cJSON *slow = cJSON_AddArrayToObject(root, "slow");
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++) {
            cJSON *o = cJSON_CreateObject();
            if (!o)
                continue;
            cJSON_AddNumberToObject(o, "from", a);
            cJSON_AddStringToObject(o, "from_endpoint", p->ep_str[a]);
            cJSON_AddNumberToObject(o, "to", b);
            cJSON_AddStringToObject(o, "to_endpoint", p->ep_str[b]);
            if (!pair_ok(p, a, b)) {
                cJSON_AddStringToObject(o, "error", pair_error(p, a, b));
                cJSON_AddItemToArray(un, o);
                bad++;
            } else if (link_bw(p, a, b) < med / 2) {
                cJSON_AddNumberToObject(o, "gbps", round3(link_bw(p, a, b)));
                cJSON_AddNumberToObject(o, "median_gbps", round3(med));
                cJSON_AddItemToArray(slow, o);
            } else {
                cJSON_Delete(o);
            }
        }
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

