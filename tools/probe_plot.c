/* probe_plot.c - `probe --plot FILE.png`: the bandwidth matrix as a heat
 * map, drawn by gnuplot (not linked: run as a program, as perf/plot does).
 *
 * Cell (row r, column c) is the bandwidth r measured sending to c, in a
 * blue scale (darker is faster); ranks are in table order, which keeps a
 * server's ranks together, and white lines and axis labels mark the
 * servers. Links that are not plain numbers stand out in colours the
 * scale does not use: red where the row cannot reach the column, orange
 * for slow links (below half the median), light grey where the row reaches
 * the column but the pair was not measured, dark grey where nothing is
 * known (the row did not join). At 8 ranks every rank is labelled; at
 * 1,024 a cell is a pixel and only servers are labelled, some of them. */
#include "build_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"
#include "probe_internal.h"

#define PLOT_MAX_LABELS 40    /* server labels on an axis                 */
#define PLOT_PIXELS 900.0     /* about the plot area's side, in pixels    */

enum plot_mark { MARK_NONE, MARK_UNREACH, MARK_SLOW, MARK_CONN, MARK_UNKNOWN, MARK_COUNT };

static const struct {
    const char *file, *colour, *title;
} plot_marks[MARK_COUNT] = {
    [MARK_UNREACH] = {"unreach.dat", "#d62728", "cannot reach"},
    [MARK_SLOW] = {"slow.dat", "#ff9f1c", "slow (< half the median)"},
    [MARK_CONN] = {"conn.dat", "#c8c8c8", "reaches, not measured"},
    [MARK_UNKNOWN] = {"unknown.dat", "#6e6e6e", "not known (did not join)"},
};

static enum plot_mark plot_mark_of(const struct probe *p, int r, int c, double med)
{
    const struct probe_link *l = PROBE_LINK(p, r, c);
    if (r == c)
        return MARK_NONE;
    if (probe_pair_ok(p, r, c))
        return probe_link_bw(p, r, c) < med / 2 ? MARK_SLOW : MARK_NONE;
    return l->state == PROBE_FAILED    ? MARK_UNREACH
           : l->state == PROBE_UNKNOWN ? MARK_UNKNOWN
                                       : MARK_CONN;
}

/* A gnuplot double-quoted string: backslash and quote escaped, a newline
 * as \n (which gnuplot turns back into a line break). */
static void gp_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The data files: bw.dat (the matrix, NaN where a mark or nothing goes)
 * and one file of "column row" per mark; counts[] per mark. */
static int plot_data(const struct probe *p, const char *dir, double med, int *counts,
                     double *lo, double *hi)
{
    char path[4200];
    FILE *mf[MARK_COUNT] = {NULL};
    snprintf(path, sizeof path, "%s/bw.dat", dir);
    FILE *bw = fopen(path, "w");
    int rc = bw ? 0 : -1;
    for (int m = 1; m < MARK_COUNT && rc == 0; m++) {
        snprintf(path, sizeof path, "%s/%s", dir, plot_marks[m].file);
        if (!(mf[m] = fopen(path, "w")))
            rc = -1;
    }
    *lo = INFINITY;
    *hi = 0;
    for (int r = 0; r < p->n && rc == 0; r++) {
        for (int c = 0; c < p->n; c++) {
            enum plot_mark m = plot_mark_of(p, r, c, med);
            if (m == MARK_NONE && r != c) {
                double v = PROBE_LINK(p, r, c)->bw_gbps;
                fprintf(bw, "%s%.4g", c ? " " : "", v);
                if (v < *lo)
                    *lo = v;
                if (v > *hi)
                    *hi = v;
                continue;
            }
            fprintf(bw, "%sNaN", c ? " " : "");
            if (m != MARK_NONE) {
                fprintf(mf[m], "%d %d\n", c, r);
                counts[m]++;
            }
        }
        fputc('\n', bw);
    }
    if (bw && fclose(bw) != 0)
        rc = -1;
    for (int m = 1; m < MARK_COUNT; m++) {
        /* an empty file makes gnuplot complain: one point off the map */
        if (mf[m] && !counts[m])
            fprintf(mf[m], "-10 -10\n");
        if (mf[m] && fclose(mf[m]) != 0)
            rc = -1;
    }
    if (!(*lo <= *hi))
        *lo = *hi = 0;
    return rc;
}

/* Tics at each labelled server's middle: at most PLOT_MAX_LABELS, every
 * k-th server. */
static void plot_server_tics(const struct probe *p, FILE *f, const char *axis,
                             const char *style, const int *lo, const int *hi)
{
    int step = (p->nservers + PLOT_MAX_LABELS - 1) / PLOT_MAX_LABELS, lab = 0;
    fprintf(f, "set %s %s (", axis, style);
    for (int s = 0; s < p->nservers; s += step) {
        if (hi[s] < 0)
            continue;
        fprintf(f, "%s", lab++ ? ", " : "");
        gp_string(f, p->server_name[s]);
        fprintf(f, " %.1f", (lo[s] + hi[s]) / 2.0);
    }
    fprintf(f, ")\n");
}

/* Server labels, lines where the server changes (when a server is wide
 * enough to see), and rank numbers on the other two axes. */
static int plot_servers(const struct probe *p, FILE *f)
{
    int *lo = malloc((size_t)p->nservers * sizeof *lo);
    int *hi = malloc((size_t)p->nservers * sizeof *hi);
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return -1;
    }
    for (int s = 0; s < p->nservers; s++)
        lo[s] = p->n, hi[s] = -1;
    for (int r = 0; r < p->n; r++) {
        int s = p->server_of[r];
        lo[s] = r < lo[s] ? r : lo[s];
        hi[s] = r > hi[s] ? r : hi[s];
    }
    plot_server_tics(p, f, "xtics", "rotate by 90 right nomirror out scale 0.5 font ',8'",
                     lo, hi);
    plot_server_tics(p, f, "ytics", "nomirror out scale 0.5 font ',8'", lo, hi);
    free(lo);
    free(hi);
    /* lines where the server changes: every server's while a server is
     * 20 pixels or more, else every k-th (thinner) so they do not hide
     * the cells */
    double block = PLOT_PIXELS / p->nservers;
    int every = block >= 20 ? 1 : (int)ceil(20 / block);
    double lw = block >= 20 ? 1.5 : 0.7;
    for (int r = 1, seen = 0; p->nservers > 1 && r < p->n; r++) {
        if (p->server_of[r] == p->server_of[r - 1] || ++seen % every)
            continue;
        fprintf(f, "set arrow from %g,-0.5 to %g,%g nohead front lc rgb 'white' lw %g\n"
                   "set arrow from -0.5,%g to %g,%g nohead front lc rgb 'white' lw %g\n",
                r - 0.5, r - 0.5, p->n - 0.5, lw, r - 0.5, p->n - 0.5, r - 0.5, lw);
    }
    int rstep = p->n <= 32 ? 1 : (p->n + 15) / 16;
    const char *axes[2] = {"x2tics", "y2tics"};
    for (int a = 0; a < 2; a++) {
        fprintf(f, "set %s out scale 0.5 font ',8' (", axes[a]);
        for (int r = 0; r < p->n; r += rstep)
            fprintf(f, "%s'%d' %d", r ? ", " : "", r, r);
        fprintf(f, ")\n");
    }
    return 0;
}

static int plot_script(const struct probe *p, const char *dir, const char *png, double med,
                       const int *counts, double lo, double hi)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/plot.gp", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double cell = PLOT_PIXELS / p->n;
    fprintf(f, "set terminal pngcairo size 1150,1080 noenhanced font 'sans,10'\n"
               "set output ");
    gp_string(f, png);
    fprintf(f, "\nset title ");
    char title[512];
    snprintf(title, sizeof title,
             "%s: bandwidth, row sends to column (GB/s)\n%d ranks on %d server%s; "
             "median %.2f GB/s; %d cannot reach, %d slow",
             p->o.file, p->n, p->nservers, p->nservers == 1 ? "" : "s", med,
             counts[MARK_UNREACH], counts[MARK_SLOW]);
    gp_string(f, title);
    fprintf(f, "\nset size ratio -1\n"
               "set xrange [-0.5:%g]\nset yrange [%g:-0.5]\n"
               "set x2range [-0.5:%g]\nset y2range [%g:-0.5]\n",
            p->n - 0.5, p->n - 0.5, p->n - 0.5, p->n - 0.5);
    fprintf(f, "set xlabel 'receiving rank, by server'\n"
               "set ylabel 'sending rank, by server' offset -2,0\n"
               "set lmargin 14\nset bmargin 10\nset rmargin 20\n");
    if (plot_servers(p, f) < 0) {
        fclose(f);
        return -1;
    }
    /* a blue scale: light is slow, dark is fast; none of the marks' hues */
    fprintf(f, "set palette defined (0 '#deebf7', 0.5 '#6baed6', 1 '#08306b')\n"
               "set cbrange [%g:%g]\nset cblabel 'GB/s'\nset colorbox user origin "
               "0.895,0.25 size 0.022,0.5\n",
            lo, hi > lo ? hi : lo + 1);
    fprintf(f, "set key at screen 0.5,0.012 center bottom horizontal samplen 1 font ',9'\n"
               "set border lw 0.5\nset style fill solid 1.0 noborder\n");
    fprintf(f, "plot '%s/bw.dat' matrix with image notitle", dir);
    /* a mark is a filled box of one cell; a lone slow or unreachable link
     * must still show among 1,024 ranks, so those are 6 pixels at least */
    for (int m = 1; m < MARK_COUNT; m++) {
        if (!counts[m] && m != MARK_UNREACH && m != MARK_SLOW)
            continue;
        double px = m == MARK_UNREACH || m == MARK_SLOW ? 6 : 2;
        double half = cell >= px ? 0.5 : 0.5 * px / cell;
        fprintf(f, ", \\\n  '%s/%s' using 1:2:(%g):(%g) with boxxyerror fc rgb '%s' title ",
                dir, plot_marks[m].file, half, half, plot_marks[m].colour);
        char t[96];
        snprintf(t, sizeof t, "%s (%d)", plot_marks[m].title, counts[m]);
        gp_string(f, t);
    }
    fprintf(f, "\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Run gnuplot on the script; its messages go to dir/gnuplot.err. */
static int plot_run(const char *dir)
{
    char script[4200], errs[4200];
    snprintf(script, sizeof script, "%s/plot.gp", dir);
    snprintf(errs, sizeof errs, "%s/gnuplot.err", dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        FILE *e = freopen(errs, "w", stderr);
        (void)e;
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(errno == ENOENT ? 127 : 126);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void plot_cleanup(const char *dir)
{
    static const char *const files[] = {"bw.dat", "unreach.dat", "slow.dat", "conn.dat",
                                        "unknown.dat", "plot.gp", "gnuplot.err"};
    char path[4200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int probe_plot(const struct probe *p, const char *png)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/loom-probe-plot.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "loom-ranktable probe: --plot: cannot create %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    int counts[MARK_COUNT] = {0};
    double med = probe_median_bw(p), lo, hi;
    int rc = -1;
    if (plot_data(p, dir, med, counts, &lo, &hi) < 0 ||
        plot_script(p, dir, png, med, counts, lo, hi) < 0) {
        fprintf(stderr, "loom-ranktable probe: --plot: cannot write in %s: %s\n", dir,
                strerror(errno));
        goto out;
    }
    int st = plot_run(dir);
    if (st == 127) {
        fprintf(stderr, "loom-ranktable probe: --plot: gnuplot not found (Debian: "
                "apt-get install gnuplot-nox); the report above is complete\n");
        goto out;
    }
    if (st != 0) {
        char path[4200], line[512];
        snprintf(path, sizeof path, "%s/gnuplot.err", dir);
        FILE *e = fopen(path, "r");
        fprintf(stderr, "loom-ranktable probe: --plot: gnuplot failed (status %d)%s\n", st,
                e ? ":" : "");
        while (e && fgets(line, sizeof line, e))
            fprintf(stderr, "  %s", line);
        if (e)
            fclose(e);
        goto out;
    }
    fprintf(stderr, "loom-ranktable probe: wrote %s\n", png);
    rc = 0;
out:
    plot_cleanup(dir);
    return rc;
}
