/* loom-run - start N local ranks of a command.
 *
 *   loom-run -n N [--rank-table FILE] [--timeout S] [--port-base P] -- CMD ARGS...
 *
 * Each rank gets LOOM_RANK_TABLE, LOOM_RANK, LOOM_NRANKS, and torchrun's
 * RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1) and
 * MASTER_PORT (a free port of its own, apart from the table's), so that
 * env:// programs run under it as well as rank-table ones (docs/launch.md).
 * Without --rank-table a single-server table for 127.0.0.1 is
 * written to a temporary directory (removed at exit) and, unless the port base
 * is given, a free port region outside the kernel's ephemeral range is chosen
 * so that concurrent jobs and other connections do not collide with it.
 * Every output line of rank r is prefixed "[r] " (stdout to stdout, stderr to
 * stderr). The first rank that fails ends the job: the others get SIGTERM,
 * then SIGKILL after 2 s, and loom-run exits with the failed rank's status
 * (128 + signal for a signal). --timeout ends the job with status 124. A
 * signal loom-run gets itself (SIGINT, SIGTERM, SIGHUP) goes to the ranks,
 * and loom-run then exits 128 + that signal, whatever the ranks' statuses
 * (a rank may see a peer die before its own signal lands): the status says
 * why the job ended, as a shell's does.
 *
 * Each rank is the leader of its own process group so that ending it also ends
 * what it started (a shell's children); signals go to that group by its id. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"
#include "bootstrap/bootstrap.h"
#include "net/net.h"
#include "base/util.h"

#define RUN_MAX_RANKS 1024
#define RUN_LINE_MAX 65536   /* a longer line is passed on in pieces      */
#define RUN_KILL_GRACE 2.0   /* seconds between SIGTERM and SIGKILL        */
#define RUN_DRAIN_SECS 0.5   /* output still read after the last rank exits */

struct run_stream {
    int fd;             /* read end, -1 when closed */
    int out_fd;         /* 1 or 2 */
    char *buf;          /* partial line */
    size_t len;
    int mid_line;       /* a piece of an over-long line was already written */
};

struct run_rank {
    pid_t pid;          /* 0 once reaped */
    int status;         /* wait status once reaped */
    struct run_stream out, err;
};

struct run_job {
    int nranks;
    struct run_rank *ranks;
    int nrunning;
    int failed_rank;    /* first rank that failed, -1 */
    int exit_code;
    int timed_out;
    int killing;        /* SIGTERM sent; SIGKILL at kill_deadline */
    double kill_deadline;
    int nsignals;     /* SIGINT/SIGTERM/SIGHUP received */
    int first_signal; /* the first of them */
    char tmpdir[PATH_MAX];
    char table[PATH_MAX];
    int master_port;    /* MASTER_PORT for env:// programs */
};

/* 0: --no-prefix, lines pass as the rank wrote them (JSON stays JSON) */
static int run_prefix = 1;

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: loom-run -n N [--rank-table FILE] [--timeout S] [--port-base P]\n"
            "                [--master-port P] [--no-prefix] -- CMD [ARGS...]\n"
            "  -n N               number of local ranks (1..%d)\n"
            "  --rank-table FILE  rank table to give the ranks (default: a temporary\n"
            "                     single-server table for 127.0.0.1)\n"
            "  --timeout S        end the job after S seconds (exit status 124)\n"
            "  --port-base P      LOOM_PORT_BASE for the ranks (default: LOOM_PORT_BASE,\n"
            "                     else a free region when the table is temporary)\n"
            "  --master-port P    MASTER_PORT for env:// programs (default: a free port)\n"
            "  --no-prefix        pass output lines without the \"[r] \" prefix (still\n"
            "                     whole lines: `probe --json` output stays JSON)\n"
            "  -h, --help         this help\n"
            "  -V, --version      print Loom's version\n"
            "Each rank r gets LOOM_RANK_TABLE, LOOM_RANK=RANK=LOCAL_RANK=r,\n"
            "WORLD_SIZE=LOCAL_WORLD_SIZE=LOOM_NRANKS=N, MASTER_ADDR=127.0.0.1 and\n"
            "MASTER_PORT; its output lines are prefixed \"[r] \". See loom-run(1).\n",
            RUN_MAX_RANKS);
}

static int run_write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* ---- rank table and ports ------------------------------------------------ */

static int run_write_table(struct run_job *job)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if (snprintf(job->tmpdir, sizeof(job->tmpdir), "%s/loom-run.XXXXXX", tmp) >=
        (int)sizeof(job->tmpdir)) {
        fprintf(stderr, "loom-run: TMPDIR %s is too long\n", tmp);
        job->tmpdir[0] = '\0';
        return -1;
    }
    if (!mkdtemp(job->tmpdir)) {
        fprintf(stderr, "loom-run: cannot create a temporary directory in %s: %s\n", tmp,
                strerror(errno));
        job->tmpdir[0] = '\0';
        return -1;
    }
    if (snprintf(job->table, sizeof(job->table), "%s/ranktable.json", job->tmpdir) >=
        (int)sizeof(job->table)) {
        fprintf(stderr, "loom-run: temporary path %s is too long\n", job->tmpdir);
        job->table[0] = '\0';
        return -1;
    }
    FILE *f = fopen(job->table, "w");
    if (!f) {
        fprintf(stderr, "loom-run: cannot create %s: %s\n", job->table, strerror(errno));
        job->table[0] = '\0';
        return -1;
    }
    fprintf(f, "{\n  \"version\": \"1.0\",\n  \"server_count\": \"1\",\n"
               "  \"server_list\": [\n    {\n      \"server_id\": \"127.0.0.1\",\n"
               "      \"device\": [\n");
    for (int r = 0; r < job->nranks; r++)
        fprintf(f, "        {\"device_id\": \"%d\", \"rank_id\": \"%d\"}%s\n", r, r,
                r + 1 < job->nranks ? "," : "");
    fprintf(f, "      ]\n    }\n  ],\n  \"status\": \"completed\"\n}\n");
    if (ferror(f) | fclose(f)) {
        fprintf(stderr, "loom-run: cannot write %s: %s\n", job->table, strerror(errno));
        return -1;
    }
    return 0;
}

static void run_remove_table(struct run_job *job)
{
    if (job->table[0] && job->tmpdir[0])
        unlink(job->table);
    if (job->tmpdir[0])
        rmdir(job->tmpdir);
    job->table[0] = job->tmpdir[0] = '\0';
}

/* ---- children -------------------------------------------------------------- */

static void run_child(const struct run_job *job, int rank, int out_w, int err_w,
                      const sigset_t *oldmask, char **cmd)
{
    char num[16], size[16], mport[16];
    snprintf(num, sizeof(num), "%d", rank);
    snprintf(size, sizeof(size), "%d", job->nranks);
    snprintf(mport, sizeof(mport), "%d", job->master_port);

    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);

    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0)
        _exit(127);
    if ((job->table[0] && setenv("LOOM_RANK_TABLE", job->table, 1) != 0) ||
        setenv("LOOM_RANK", num, 1) != 0 || setenv("RANK", num, 1) != 0 ||
        setenv("LOCAL_RANK", num, 1) != 0 || setenv("WORLD_SIZE", size, 1) != 0 ||
        setenv("LOOM_NRANKS", size, 1) != 0 ||
        setenv("LOCAL_WORLD_SIZE", size, 1) != 0 ||
        setenv("MASTER_ADDR", "127.0.0.1", 1) != 0 ||
        setenv("MASTER_PORT", mport, 1) != 0) {
        fprintf(stderr, "loom-run: rank %d: cannot set the environment: %s\n", rank,
                strerror(errno));
        _exit(127);
    }
    execvp(cmd[0], cmd);
    fprintf(stderr, "loom-run: rank %d: cannot run %s: %s\n", rank, cmd[0], strerror(errno));
    _exit(127);
}

static int run_start(struct run_job *job, int rank, const sigset_t *oldmask, char **cmd)
{
    struct run_rank *rk = &job->ranks[rank];
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        goto fail;
    if (pipe2(err, O_CLOEXEC) != 0)
        goto fail_out;
    pid_t pid = fork();
    if (pid < 0)
        goto fail_err;
    if (pid == 0)
        run_child(job, rank, out[1], err[1], oldmask, cmd);
    setpgid(pid, pid); /* also in the child: whichever runs first */
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    rk->pid = pid;
    rk->out = (struct run_stream){.fd = out[0], .out_fd = STDOUT_FILENO};
    rk->err = (struct run_stream){.fd = err[0], .out_fd = STDERR_FILENO};
    job->nrunning++;
    return 0;

fail_err:
    close(err[0]);
    close(err[1]);
fail_out:
    close(out[0]);
    close(out[1]);
fail:
    fprintf(stderr, "loom-run: cannot start rank %d: %s\n", rank, strerror(errno));
    return -1;
}

/* Signal a rank's process group (the rank and what it started). */
static void run_signal(const struct run_rank *rk, int sig)
{
    if (rk->pid > 0 && kill(-rk->pid, sig) != 0)
        kill(rk->pid, sig);
}

static void run_terminate_all(struct run_job *job)
{
    for (int r = 0; r < job->nranks; r++)
        run_signal(&job->ranks[r], SIGTERM);
    if (!job->killing) {
        job->killing = 1;
        job->kill_deadline = loom_now() + RUN_KILL_GRACE;
    }
}

/* ---- output ---------------------------------------------------------------- */

static void run_emit(int rank, struct run_stream *s, const char *p, size_t len, int complete)
{
    char prefix[24] = "";
    int n = run_prefix ? snprintf(prefix, sizeof(prefix), "[%d] ", rank) : 0;
    /* One write per line keeps lines of different ranks whole. */
    char *line = malloc((size_t)n + len + 1);
    if (!line) {
        if (!s->mid_line)
            run_write_all(s->out_fd, prefix, (size_t)n);
        run_write_all(s->out_fd, p, len);
        if (complete)
            run_write_all(s->out_fd, "\n", 1);
    } else {
        size_t off = 0;
        if (!s->mid_line) {
            memcpy(line, prefix, (size_t)n);
            off = (size_t)n;
        }
        memcpy(line + off, p, len);
        off += len;
        if (complete)
            line[off++] = '\n';
        run_write_all(s->out_fd, line, off);
        free(line);
    }
    s->mid_line = !complete;
}

/* Add to the partial line; an over-long line is passed on in pieces. */
static void run_append(int rank, struct run_stream *s, const char *p, size_t len)
{
    if (!s->buf && len > 0) {
        s->buf = malloc(RUN_LINE_MAX);
        if (!s->buf) { /* no room to hold it: pass the piece on now */
            run_emit(rank, s, p, len, 0);
            return;
        }
    }
    while (len > 0) {
        size_t part = RUN_LINE_MAX - s->len < len ? RUN_LINE_MAX - s->len : len;
        memcpy(s->buf + s->len, p, part);
        s->len += part;
        p += part;
        len -= part;
        if (s->len == RUN_LINE_MAX) {
            run_emit(rank, s, s->buf, s->len, 0);
            s->len = 0;
        }
    }
}

static void run_close_stream(int rank, struct run_stream *s)
{
    if (s->len > 0 || s->mid_line)
        run_emit(rank, s, s->buf ? s->buf : "", s->len, 1);
    s->len = 0;
    free(s->buf);
    s->buf = NULL;
    close(s->fd);
    s->fd = -1;
}

/* Read what is there and pass on whole lines; at EOF, the partial line too. */
static void run_read(int rank, struct run_stream *s)
{
    char chunk[8192];
    for (;;) {
        ssize_t n = read(s->fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            run_close_stream(rank, s);
            return;
        }
        const char *p = chunk;
        size_t left = (size_t)n;
        while (left > 0) {
            const char *nl = memchr(p, '\n', left);
            if (!nl) {
                run_append(rank, s, p, left);
                break;
            }
            size_t take = (size_t)(nl - p);
            if (s->len == 0) {
                run_emit(rank, s, p, take, 1);
            } else {
                run_append(rank, s, p, take);
                run_emit(rank, s, s->buf, s->len, 1);
                s->len = 0;
            }
            p += take + 1;
            left -= take + 1;
        }
    }
}

/* ---- the event loop ------------------------------------------------------ */

static void run_describe_status(int rank, int status, char *msg, size_t cap, int *code)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(msg, cap, "loom-run: rank %d was killed by signal %d (%s)", rank, sig,
                 strsignal(sig));
        *code = 128 + sig;
    } else {
        int st = WEXITSTATUS(status);
        snprintf(msg, cap, "loom-run: rank %d exited with status %d", rank, st);
        *code = st;
    }
}

static void run_reap(struct run_job *job)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (int r = 0; r < job->nranks; r++) {
            struct run_rank *rk = &job->ranks[r];
            if (rk->pid != pid)
                continue;
            rk->status = status;
            job->nrunning--;
            int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!ok && job->failed_rank < 0 && !job->timed_out) {
                char msg[160];
                job->failed_rank = r;
                run_describe_status(r, status, msg, sizeof(msg), &job->exit_code);
                fprintf(stderr, "%s\n", msg);
                rk->pid = 0;
                run_terminate_all(job);
            }
            /* Anything it started and left behind goes too. */
            if (job->killing)
                kill(-pid, SIGKILL);
            rk->pid = 0;
            break;
        }
    }
}

static void run_on_timeout(struct run_job *job, double timeout)
{
    char list[512] = "";
    size_t len = 0;
    for (int r = 0; r < job->nranks; r++) {
        if (job->ranks[r].pid <= 0)
            continue;
        int n = snprintf(list + len, sizeof(list) - len, "%s%d", len ? " " : "", r);
        if (n < 0 || (size_t)n >= sizeof(list) - len) {
            snprintf(list + sizeof(list) - 5, 5, "...");
            break;
        }
        len += (size_t)n;
    }
    fprintf(stderr, "loom-run: timeout after %g s; ranks still running: %s\n", timeout, list);
    job->timed_out = 1;
    job->exit_code = 124;
    run_terminate_all(job);
}

static int run_loop(struct run_job *job, int sigfd, double timeout)
{
    double start = loom_now();
    struct pollfd *pfds = calloc((size_t)job->nranks * 2 + 1, sizeof(*pfds));
    struct run_stream **streams = calloc((size_t)job->nranks * 2 + 1, sizeof(*streams));
    int *stream_rank = calloc((size_t)job->nranks * 2 + 1, sizeof(*stream_rank));
    if (!pfds || !streams || !stream_rank) {
        fprintf(stderr, "loom-run: out of memory\n");
        free(pfds);
        free(streams);
        free(stream_rank);
        run_terminate_all(job);
        return -1;
    }
    double drain_until = 0;

    for (;;) {
        double now = loom_now();
        if (job->nrunning == 0) {
            if (drain_until == 0)
                drain_until = now + RUN_DRAIN_SECS;
            else if (now >= drain_until)
                break;
        }
        if (timeout > 0 && !job->timed_out && job->failed_rank < 0 && job->nrunning > 0 &&
            now - start >= timeout)
            run_on_timeout(job, timeout);
        if (job->killing && job->nrunning > 0 && now >= job->kill_deadline) {
            for (int r = 0; r < job->nranks; r++)
                run_signal(&job->ranks[r], SIGKILL);
            job->kill_deadline = now + RUN_KILL_GRACE;
        }

        int n = 0;
        pfds[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
        for (int r = 0; r < job->nranks; r++) {
            struct run_stream *ss[2] = {&job->ranks[r].out, &job->ranks[r].err};
            for (int k = 0; k < 2; k++) {
                if (ss[k]->fd < 0)
                    continue;
                streams[n] = ss[k];
                stream_rank[n] = r;
                pfds[n++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
            }
        }
        if (n == 1 && job->nrunning == 0)
            break; /* every rank reaped, every stream closed */

        double wait = 1.0;
        if (timeout > 0 && !job->timed_out && job->nrunning > 0)
            wait = start + timeout - now;
        if (job->killing && job->nrunning > 0 && job->kill_deadline - now < wait)
            wait = job->kill_deadline - now;
        if (drain_until > 0 && drain_until - now < wait)
            wait = drain_until - now;
        int ms = wait <= 0 ? 0 : (int)(wait * 1000.0) + 1;

        int rc = poll(pfds, (nfds_t)n, ms);
        if (rc < 0 && errno != EINTR) {
            fprintf(stderr, "loom-run: poll: %s\n", strerror(errno));
            run_terminate_all(job);
            break;
        }
        if (rc <= 0)
            continue;
        for (int i = 1; i < n; i++)
            if (pfds[i].revents)
                run_read(stream_rank[i], streams[i]);
        if (pfds[0].revents) {
            struct signalfd_siginfo si;
            while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                if (job->nsignals++ == 0)
                    job->first_signal = (int)si.ssi_signo;
                int sig = job->nsignals > 1 ? SIGKILL : (int)si.ssi_signo;
                fprintf(stderr, "loom-run: got signal %u; sending %s to the ranks\n",
                        si.ssi_signo, sig == SIGKILL ? "SIGKILL" : strsignal(sig));
                for (int r = 0; r < job->nranks; r++)
                    run_signal(&job->ranks[r], sig);
            }
            run_reap(job);
        }
    }

    /* Whatever is left over after the drain: close it, flushing partial lines. */
    for (int r = 0; r < job->nranks; r++) {
        if (job->ranks[r].out.fd >= 0)
            run_close_stream(r, &job->ranks[r].out);
        if (job->ranks[r].err.fd >= 0)
            run_close_stream(r, &job->ranks[r].err);
    }
    free(pfds);
    free(streams);
    free(stream_rank);
    return 0;
}

/* ---- main -------------------------------------------------------------------- */

static int run_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"rank-table", required_argument, NULL, 'r'},
        {"timeout", required_argument, NULL, 't'},
        {"port-base", required_argument, NULL, 'p'},
        {"master-port", required_argument, NULL, 'm'},
        {"no-prefix", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    long nranks = 0, port_base = 0, master_port = 0;
    double timeout = 0;
    const char *table = NULL;
    int opt;

    while ((opt = getopt_long(argc, argv, "+n:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            if (run_parse_int(optarg, 1, RUN_MAX_RANKS, &nranks) != 0) {
                fprintf(stderr, "loom-run: -n %s: expected a rank count in 1..%d\n", optarg,
                        RUN_MAX_RANKS);
                return 2;
            }
            break;
        case 'r':
            table = optarg;
            break;
        case 't': {
            char *end;
            errno = 0;
            timeout = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || errno == ERANGE || !(timeout > 0) ||
                timeout > 1e7) {
                fprintf(stderr, "loom-run: --timeout %s: expected seconds > 0\n", optarg);
                return 2;
            }
            break;
        }
        case 'p':
            if (run_parse_int(optarg, 1, 65535, &port_base) != 0) {
                fprintf(stderr, "loom-run: --port-base %s: expected a port in 1..65535\n",
                        optarg);
                return 2;
            }
            break;
        case 'm':
            if (run_parse_int(optarg, 1, 65535, &master_port) != 0) {
                fprintf(stderr, "loom-run: --master-port %s: expected a port in 1..65535\n",
                        optarg);
                return 2;
            }
            break;
        case 'P':
            run_prefix = 0;
            break;
        case 'h':
            run_usage(stdout);
            return 0;
        case 'V': {
            /* The features name the transports: this also links them in,
             * so their LOOM_* rows are known here (config.h). */
            const char *features = "";
            loom_get_features(&features);
            printf("loom-run (Loom) %s\nfeatures: %s\n", PACKAGE_VERSION, features);
            return 0;
        }
        default:
            run_usage(stderr);
            return 2;
        }
    }
    if (nranks == 0) {
        fprintf(stderr, "loom-run: -n N is required\n");
        run_usage(stderr);
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "loom-run: no command given (loom-run -n N -- CMD ARGS...)\n");
        return 2;
    }
    if (table && access(table, R_OK) != 0) {
        fprintf(stderr, "loom-run: --rank-table %s: %s\n", table, strerror(errno));
        return 2;
    }

    struct run_job job = {.nranks = (int)nranks, .failed_rank = -1};
    job.ranks = calloc((size_t)nranks, sizeof(*job.ranks));
    if (!job.ranks) {
        fprintf(stderr, "loom-run: out of memory for %ld ranks\n", nranks);
        return 1;
    }
    for (int r = 0; r < job.nranks; r++)
        job.ranks[r].out.fd = job.ranks[r].err.fd = -1;

    /* Signals arrive through a signalfd; children get the old mask back. */
    sigset_t mask, oldmask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, &oldmask) != 0) {
        fprintf(stderr, "loom-run: sigprocmask: %s\n", strerror(errno));
        return 1;
    }
    int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0) {
        fprintf(stderr, "loom-run: signalfd: %s\n", strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    int code = 1;
    if (table) {
        if (strlen(table) >= sizeof(job.table)) {
            fprintf(stderr, "loom-run: --rank-table path too long\n");
            goto out;
        }
        snprintf(job.table, sizeof(job.table), "%s", table); /* not ours: tmpdir stays "" */
    } else if (run_write_table(&job) != 0) {
        goto out;
    }

    char portstr[24];
    if (port_base > 0) {
        snprintf(portstr, sizeof(portstr), "%ld", port_base);
        setenv("LOOM_PORT_BASE", portstr, 1);
    } else if (!getenv("LOOM_PORT_BASE") && !table) {
        /* one more port than ranks: the last is MASTER_PORT */
        int base = loom_net_pick_port_base(job.nranks + 1);
        if (base == 0) {
            fprintf(stderr, "loom-run: found no %d consecutive free ports on 127.0.0.1 "
                    "outside the ephemeral range; give --port-base\n", job.nranks + 1);
            goto out;
        }
        snprintf(portstr, sizeof(portstr), "%d", base);
        setenv("LOOM_PORT_BASE", portstr, 1);
        if (!master_port)
            master_port = base + job.nranks;
    }
    if (!master_port)
        master_port = loom_net_pick_port_base(1);
    if (!master_port) {
        fprintf(stderr, "loom-run: found no free port on 127.0.0.1 outside the "
                "ephemeral range for MASTER_PORT; give --master-port\n");
        goto out;
    }
    job.master_port = (int)master_port;

    for (int r = 0; r < job.nranks; r++) {
        if (run_start(&job, r, &oldmask, argv + optind) != 0) {
            run_terminate_all(&job);
            job.failed_rank = r;
            job.exit_code = 1;
            break;
        }
    }
    run_loop(&job, sigfd, timeout);
    /* A rank that is somehow still there after the loop is ended now. */
    for (int r = 0; r < job.nranks; r++) {
        if (job.ranks[r].pid > 0) {
            run_signal(&job.ranks[r], SIGKILL);
            waitpid(job.ranks[r].pid, NULL, 0);
            job.ranks[r].pid = 0;
        }
    }
    code = (job.failed_rank >= 0 || job.timed_out) ? job.exit_code : 0;
    if (job.nsignals > 0)
        code = 128 + job.first_signal;

out:
    run_remove_table(&job);
    free(job.ranks);
    close(sigfd);
    return code;
}
