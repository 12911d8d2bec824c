/* log.c - one line per message, written with a single write().
 *
 * The level and subsystem mask come from loom_config(). Reading the
 * configuration may itself produce warnings; config.c queues them and writes
 * them through loom_log_write() once this file's setup is done (see
 * config_flush_warnings), so nothing here logs while setting up. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"
#include "config.h"
#include "log.h"

#define LOG_LINE_MAX 2048
#define LOG_PATH_MAX 1024

int loom_log_level_cur = -1;
unsigned loom_log_subsys_cur = LOOM_SUB_ALL;

/* Guards setup. Not pthread_once: loom_config_reset() sets the level back to
 * -1 so that tests can make the logger read the configuration again. */
static pthread_mutex_t log_setup_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int log_in_setup; /* this thread is inside log_setup     */
static __thread int log_rank = -1;
static int log_fd = STDERR_FILENO;
static char log_host[64] = "unknown";

/* Expand %h (host) and %p (pid) and %% in a LOOM_DEBUG_FILE pattern. */
static int log_expand_path(const char *pattern, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = pattern; *p; p++) {
        char piece[80];
        const char *add = piece;
        if (p[0] == '%' && p[1] == 'h') {
            add = log_host;
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof(piece), "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            piece[0] = '%';
            piece[1] = '\0';
            p++;
        } else {
            piece[0] = *p;
            piece[1] = '\0';
        }
        size_t len = strlen(add);
        if (n + len >= cap)
            return -1;
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

/* "2026-12-05 08:48:00.123456": local wall-clock time to the microsecond,
 * so lines of several ranks and hosts can be merged and read in order. */
static void log_stamp(char *out, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + n, len - n, ".%06ld", ts.tv_nsec / 1000);
}

/* Report a problem with the log file itself, straight to stderr. */
static void log_setup_error(const char *what, const char *path, int err)
{
    char line[LOG_LINE_MAX], stamp[40];
    log_stamp(stamp, sizeof stamp);
    int n = snprintf(line, sizeof(line), "%s %s:%ld LOOM WARN CONFIG %s %s: %s; logging to stderr\n",
                     stamp, log_host, (long)getpid(), what, path, strerror(err));
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n
                                                                         : sizeof(line) - 1);
        (void)w;
    }
}

static void log_setup(void)
{
    log_in_setup = 1;

    if (gethostname(log_host, sizeof(log_host)) != 0)
        snprintf(log_host, sizeof(log_host), "unknown");
    log_host[sizeof(log_host) - 1] = '\0';
    char *dot = strchr(log_host, '.');
    if (dot)
        *dot = '\0';

    const struct loom_config *cfg = loom_config();
    if (log_fd != STDERR_FILENO) { /* set up again after loom_config_reset() */
        close(log_fd);
        log_fd = STDERR_FILENO;
    }
    if (cfg->debug_file[0] != '\0') {
        char path[LOG_PATH_MAX];
        if (log_expand_path(cfg->debug_file, path, sizeof(path)) != 0) {
            log_setup_error("LOOM_DEBUG_FILE too long after expansion:", cfg->debug_file,
                            ENAMETOOLONG);
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0)
                log_setup_error("cannot open LOOM_DEBUG_FILE", path, errno);
            else
                log_fd = fd;
        }
    }
    __atomic_store_n(&loom_log_subsys_cur, cfg->debug_subsys, __ATOMIC_RELAXED);
    __atomic_store_n(&loom_log_level_cur, cfg->debug_level, __ATOMIC_RELEASE);

    log_in_setup = 0;
    loom_config(); /* writes warnings queued while reading */
}

void loom_log_init(void)
{
    int saved = errno;
    if (!log_in_setup) {
        pthread_mutex_lock(&log_setup_lock);
        if (__atomic_load_n(&loom_log_level_cur, __ATOMIC_ACQUIRE) < 0)
            log_setup();
        pthread_mutex_unlock(&log_setup_lock);
    }
    errno = saved;
}

void loom_log_set_rank(int rank)
{
    log_rank = rank;
}

static const char *log_level_name(int level)
{
    switch (level) {
    case LOOM_LOG_WARN: return "WARN";
    case LOOM_LOG_INFO: return "INFO";
    case LOOM_LOG_TRACE: return "TRACE";
    default: return "NONE";
    }
}

static const char *log_subsys_name(unsigned subsys)
{
    if (subsys == LOOM_SUB_ALL)
        return "ALL";
    if (subsys & LOOM_SUB_INIT) return "INIT";
    if (subsys & LOOM_SUB_BOOT) return "BOOT";
    if (subsys & LOOM_SUB_NET) return "NET";
    if (subsys & LOOM_SUB_COLL) return "COLL";
    if (subsys & LOOM_SUB_RT) return "RT";
    if (subsys & LOOM_SUB_STREAM) return "STREAM";
    if (subsys & LOOM_SUB_CONFIG) return "CONFIG";
    return "ALL";
}

void loom_log_write(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
{
    int saved = errno;
    char buf[LOG_LINE_MAX];
    size_t cap = sizeof(buf) - 1; /* room for the newline */
    int n;

    char rank[24] = "", stamp[40];
    if (log_rank >= 0)
        snprintf(rank, sizeof(rank), " [%d]", log_rank);
    log_stamp(stamp, sizeof stamp);
    n = snprintf(buf, cap, "%s %s:%ld:%ld%s LOOM %s %s ", stamp, log_host, (long)getpid(),
                 (long)syscall(SYS_gettid), rank, log_level_name(level),
                 log_subsys_name(subsys));
    size_t len = n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : cap - 1);

    if (__atomic_load_n(&loom_log_level_cur, __ATOMIC_RELAXED) >= LOOM_LOG_TRACE && file &&
        len < cap) {
        const char *base = strrchr(file, '/');
        n = snprintf(buf + len, cap - len, "%s:%d ", base ? base + 1 : file, line);
        if (n > 0)
            len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }

    if (len < cap) {
        va_list ap;
        va_start(ap, fmt);
        n = vsnprintf(buf + len, cap - len, fmt, ap);
        va_end(ap);
        if (n > 0) {
            if ((size_t)n >= cap - len) {
                len = cap - 1;
                memcpy(buf + len - 3, "...", 3);
            } else {
                len += (size_t)n;
            }
        }
    }
    while (len > 0 && buf[len - 1] == '\n')
        len--;
    buf[len++] = '\n';

    /* One write so lines from other threads and processes do not interleave
     * (atomic for pipes up to PIPE_BUF; O_APPEND files). */
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(log_fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    errno = saved;
}
