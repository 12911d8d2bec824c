/* config.c - the LOOM_* variables of every section, read once.
 *
 * This file's own table is the first section, "core" (struct loom_config);
 * modules add theirs before main (config.h). Every step below (defaults,
 * file, environment, warnings, printing) runs over the rows of all sections.
 *
 * Precedence: environment, then the config file (LOOM_CONF_FILE, default
 * /etc/loom.conf), then the table's default. A value that does not parse or is
 * out of range is a warning naming the variable, the value and where it came
 * from; the next source down is used instead (file, then default).
 * Variables without a struct field (LOOM_CONF_FILE, LOOM_RANK_TABLE, ...) are
 * read with getenv() where they are used; they are listed here so they are
 * known, checked and printed, and are not accepted from the file.
 *
 * Warnings found while reading are queued and written once the logger knows
 * its level and output: log.c reads this configuration to set itself up, so
 * logging from inside the read would recurse. */
#include "build_config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "loom.h"
#include "config.h"
#include "log.h"

extern char **environ;

#define CONFIG_DEFAULT_FILE "/etc/loom.conf"
#define CONFIG_VALUE_MAX 1024 /* longest value kept for any variable     */
#define CONFIG_LINE_MAX 4096  /* longest line accepted in the config file */
#define CONFIG_WARN_MAX 32    /* queued warnings; more are counted only   */
#define CONFIG_WARN_LEN 600

#define CONFIG_MAX_SECTIONS 8 /* sections beyond core's                  */
#define CONFIG_MAX_EXTRA 32   /* rows of those sections, all together     */

#define NO_FIELD LOOM_CONFIG_NO_FIELD
#define FIELD(m) LOOM_CONFIG_FIELD(struct loom_config, m)

static const struct loom_config_var config_vars[] = {
    {"LOOM_DEBUG", LOOM_CONFIG_LEVEL, "WARN", FIELD(debug_level), 0, 0, 0,
     "log level: NONE, WARN, INFO or TRACE", NULL},
    {"LOOM_DEBUG_SUBSYS", LOOM_CONFIG_SUBSYS, "ALL", FIELD(debug_subsys), 0, 0, 0,
     "subsystems logged: INIT,BOOT,NET,COLL,RT,STREAM,CONFIG,ALL; ^ = all but", NULL},
    {"LOOM_DEBUG_FILE", LOOM_CONFIG_STRING, "", FIELD(debug_file), 0, 0, 0,
     "log to this file instead of stderr; %h = host, %p = pid", NULL},
    {"LOOM_PORT_BASE", LOOM_CONFIG_INT, "29600", FIELD(port_base), 1, 65535, 0,
     "first TCP port used for bootstrap listeners", NULL},
    {"LOOM_PORT_OFFSET", LOOM_CONFIG_INT, "0", FIELD(port_offset), 0, 65535, 0,
     "added to LOOM_PORT_BASE, to separate jobs on one host", NULL},
    {"LOOM_BOOTSTRAP_TIMEOUT", LOOM_CONFIG_DOUBLE, "120", FIELD(bootstrap_timeout), 0, 1e9, 1,
     "seconds to wait for all ranks to meet at init", NULL},
    {"LOOM_TIMEOUT", LOOM_CONFIG_DOUBLE, "300", FIELD(timeout), 0, 1e9, 0,
     "seconds a collective may wait on a peer; 0 = never time out", NULL},
    {"LOOM_STALL_WARN", LOOM_CONFIG_DOUBLE, "60", FIELD(stall_warn), 0, 1e9, 0,
     "seconds without progress before a rank logs what it waits for (0 = never)", NULL},
    {"LOOM_TRACE_DIR", LOOM_CONFIG_STRING, "", FIELD(trace_dir), 0, 0, 0,
     "directory for flight-recorder dumps (last 64 calls) on timeout, abort, SIGUSR1", NULL},
    {"LOOM_SOCKET_IFNAME", LOOM_CONFIG_STRING, "", FIELD(socket_ifname), 0, 0, 0,
     "interfaces to use: prefix list, ^ = exclude, = = exact; \"\" = auto", NULL},
    {"LOOM_CHUNK_SIZE", LOOM_CONFIG_SIZE, "1M", FIELD(chunk_size), 1024.0, 1073741824.0, 0,
     "bytes per pipelined chunk (K/M/G suffixes, 1K..1G)", NULL},
    {"LOOM_SOCKET_SNDBUF", LOOM_CONFIG_SIZE, "512K", FIELD(socket_sndbuf), 0.0, 1073741824.0, 0,
     "SO_SNDBUF of each TCP data socket, Loom's and ofi's tcp provider's (Linux doubles it); "
     "0 = kernel autotuning",
     NULL},
    {"LOOM_ALGO", LOOM_CONFIG_STRING, "", FIELD(algo), 0, 0, 0,
     "algorithm override: \"ring\" or \"allreduce=ring,broadcast=tree\"", NULL},
    {"LOOM_TRANSPORT", LOOM_CONFIG_STRING, "tcp", FIELD(transport), 0, 0, 0,
     "transport to use: tcp, ofi or verbs (as built; another name is an error listing them)", NULL},
    {"LOOM_SPIN_US", LOOM_CONFIG_INT, "-1", FIELD(spin_us), -1, 1000000, 0,
     "microseconds to busy-poll before yielding; -1: 50, or 0 when this host has more ranks than CPUs",
     NULL},
    {"LOOM_JOB_KEY", LOOM_CONFIG_STRING, "", FIELD(job_key), 0, 0, 0,
     "job secret: connections must prove it (HMAC); \"\" = job identity checks only", NULL},
    {"LOOM_JOB_KEY_FILE", LOOM_CONFIG_STRING, "", FIELD(job_key_file), 0, 0, 0,
     "file holding the job secret (trailing newline dropped; keep it mode 0600)", NULL},
    {"LOOM_SHM", LOOM_CONFIG_INT, "1", FIELD(shm), 0, 1, 0,
     "1: ranks of one server move data through shared memory; 0: only the network", NULL},
    {"LOOM_ADDRESS", LOOM_CONFIG_ENUM, "auto", FIELD(address), 0, 0, 0,
     "rank table address a rank uses: auto (device_ip when this host owns it, else host_ip), device or host",
     "auto|device|host"},
    {"LOOM_CUDA_DEVICE", LOOM_CONFIG_INT, "-1", FIELD(cuda_device), -1, 1024, 0,
     "CUDA adapter: device ordinal; -1 = the rank table's device_id", NULL},
    {"LOOM_STAGE_CHUNK", LOOM_CONFIG_SIZE, "4M", FIELD(stage_chunk), 4096.0, 1073741824.0, 0,
     "device buffers on an adapter's stream are staged and run in pieces of this many bytes (same on every rank)",
     NULL},
    {"LOOM_STAGE_SLOTS", LOOM_CONFIG_INT, "4", FIELD(stage_slots), 2, 64, 0,
     "pieces of host staging memory per stream (LOOM_STAGE_CHUNK bytes each), reused by every call",
     NULL},
    {"LOOM_CONF_FILE", LOOM_CONFIG_STRING, CONFIG_DEFAULT_FILE, NO_FIELD, 0, 0, 0,
     "this configuration file (environment only)", NULL},
    {"LOOM_RANK_TABLE", LOOM_CONFIG_STRING, "", NO_FIELD, 0, 0, 0,
     "rank table (JSON) read by loom_comm_init_env", NULL},
    {"LOOM_RANK", LOOM_CONFIG_INT, "-1", NO_FIELD, -1, INT_MAX, 0,
     "this process's rank, read by loom_comm_init_env", NULL},
    {"LOOM_NRANKS", LOOM_CONFIG_INT, "0", NO_FIELD, 0, INT_MAX, 0,
     "number of ranks, set by loom-run for its children", NULL},
    {"LOOM_ACL_DEVICES", LOOM_CONFIG_INT, "0", NO_FIELD, 0, 4096, 0,
     "libloom_acl: the devices aclrtGetDeviceCount reports; 0 = this server's in the rank "
     "table, else 8",
     NULL},
};
#define CONFIG_NVARS (sizeof(config_vars) / sizeof(config_vars[0]))

/* LOOM_* names that are not configuration (test harness); never warned about.
 * Names starting with LOOM_TEST_ are left to tests too. */
static const char *const config_ignored[] = {"LOOM_SRCDIR", "LOOM_BUILDDIR"};

enum config_source { SRC_DEFAULT, SRC_ENV, SRC_FILE };

struct config_state {
    enum config_source source;
    int line;                       /* for SRC_FILE */
    char value[CONFIG_VALUE_MAX];   /* the text accepted */
};

#define CONFIG_MAX_ROWS (CONFIG_NVARS + CONFIG_MAX_EXTRA)

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static struct loom_config config_cur;
static struct loom_config_section config_core = {"core", config_vars, CONFIG_NVARS, &config_cur};

/* Every row of every section, core's first, in the order sections were
 * added; the lock covers the list, its states and each read. */
struct config_row {
    const struct loom_config_var *var;
    void *values; /* its section's struct */
};
static pthread_mutex_t config_rows_lock = PTHREAD_MUTEX_INITIALIZER;
static struct config_row config_rows[CONFIG_MAX_ROWS];
static size_t config_nrows;
static const struct loom_config_section *config_sections[1 + CONFIG_MAX_SECTIONS];
static size_t config_nsections;
static int config_was_read; /* a section added later makes a read again */
static struct config_state config_states[CONFIG_MAX_ROWS];
static char config_file_path[CONFIG_VALUE_MAX]; /* "" when no file was read */

static pthread_mutex_t config_warn_lock = PTHREAD_MUTEX_INITIALIZER;
static char config_warnings[CONFIG_WARN_MAX][CONFIG_WARN_LEN];
static int config_nwarn;
static int config_nwarn_dropped;

static void config_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void config_warn(const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&config_warn_lock);
    if (config_nwarn < CONFIG_WARN_MAX) {
        va_start(ap, fmt);
        vsnprintf(config_warnings[config_nwarn], CONFIG_WARN_LEN, fmt, ap);
        va_end(ap);
        config_nwarn++;
    } else {
        config_nwarn_dropped++;
    }
    pthread_mutex_unlock(&config_warn_lock);
}

/* Write queued warnings once the logger is set up. While log.c is inside its
 * own setup (which calls loom_config()), loom_log_init() returns at once and
 * the level is still -1: the warnings stay queued, and log.c's setup calls
 * loom_config() again when it is done. */
static void config_flush_warnings(void)
{
    char (*batch)[CONFIG_WARN_LEN] = NULL;
    int n = 0, dropped = 0;

    pthread_mutex_lock(&config_warn_lock);
    int pending = config_nwarn > 0 || config_nwarn_dropped > 0;
    pthread_mutex_unlock(&config_warn_lock);
    if (!pending)
        return;
    if (__atomic_load_n(&loom_log_level_cur, __ATOMIC_ACQUIRE) < 0)
        loom_log_init();
    if (__atomic_load_n(&loom_log_level_cur, __ATOMIC_ACQUIRE) < 0)
        return; /* inside the logger's setup */

    pthread_mutex_lock(&config_warn_lock);
    n = config_nwarn;
    dropped = config_nwarn_dropped;
    if (n > 0) {
        batch = malloc((size_t)n * CONFIG_WARN_LEN);
        if (batch)
            memcpy(batch, config_warnings, (size_t)n * CONFIG_WARN_LEN);
        else
            dropped += n;
    }
    config_nwarn = 0;
    config_nwarn_dropped = 0;
    pthread_mutex_unlock(&config_warn_lock);

    if (loom_log_enabled(LOOM_LOG_WARN, LOOM_SUB_CONFIG)) {
        for (int i = 0; batch && i < n; i++)
            loom_log_write(LOOM_LOG_WARN, LOOM_SUB_CONFIG, __FILE__, __LINE__, "%s",
                           batch[i]);
        if (dropped > 0)
            loom_log_write(LOOM_LOG_WARN, LOOM_SUB_CONFIG, __FILE__, __LINE__,
                           "%d more configuration warnings not shown", dropped);
    }
    free(batch);
}

/* Core's rows first; called with config_rows_lock held. */
static void config_add_core(void)
{
    if (config_nsections > 0)
        return;
    for (size_t i = 0; i < CONFIG_NVARS; i++)
        config_rows[i] = (struct config_row){&config_vars[i], &config_cur};
    config_nrows = CONFIG_NVARS;
    config_sections[config_nsections++] = &config_core;
}

static const struct config_row *config_find(const char *name, size_t len)
{
    for (size_t i = 0; i < config_nrows; i++) {
        const char *vname = config_rows[i].var->name;
        if (strlen(vname) == len && strncmp(vname, name, len) == 0)
            return &config_rows[i];
    }
    return NULL;
}

static int config_is_ignored(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(config_ignored) / sizeof(config_ignored[0]); i++)
        if (strlen(config_ignored[i]) == len && strncmp(config_ignored[i], name, len) == 0)
            return 1;
    return len >= 10 && strncmp(name, "LOOM_TEST_", 10) == 0;
}

int loom_parse_size(const char *s, size_t *out)
{
    if (!s || !out)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1; /* no sign, no empty string */
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -1;
    unsigned long long mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    if (v > (unsigned long long)SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

static int config_parse_level(const char *s, int *out)
{
    static const char *const names[] = {"NONE", "WARN", "INFO", "TRACE"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

static int config_parse_subsys(const char *s, unsigned *out, char *why, size_t whylen)
{
    static const struct { const char *name; unsigned bit; } subs[] = {
        {"INIT", LOOM_SUB_INIT},   {"BOOT", LOOM_SUB_BOOT},     {"NET", LOOM_SUB_NET},
        {"COLL", LOOM_SUB_COLL},   {"RT", LOOM_SUB_RT},         {"STREAM", LOOM_SUB_STREAM},
        {"CONFIG", LOOM_SUB_CONFIG}, {"ALL", LOOM_SUB_ALL},
    };
    int invert = 0;
    unsigned mask = 0;
    int ntok = 0;

    if (*s == '^') {
        invert = 1;
        s++;
    }
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        const char *tok = s;
        size_t tlen = len;
        while (tlen > 0 && isspace((unsigned char)*tok)) {
            tok++;
            tlen--;
        }
        while (tlen > 0 && isspace((unsigned char)tok[tlen - 1]))
            tlen--;
        if (tlen > 0) {
            size_t i;
            for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
                if (strlen(subs[i].name) == tlen && strncasecmp(subs[i].name, tok, tlen) == 0)
                    break;
            if (i == sizeof(subs) / sizeof(subs[0])) {
                snprintf(why, whylen, "unknown subsystem '%.*s'", (int)(tlen > 32 ? 32 : tlen),
                         tok);
                return -1;
            }
            mask |= subs[i].bit;
            ntok++;
        }
        s += len;
        if (*s == ',')
            s++;
    }
    if (ntok == 0) {
        snprintf(why, whylen, "no subsystem named");
        return -1;
    }
    *out = invert ? ~mask : mask;
    return 0;
}

/* Parse text for var into values, its section's struct (when the var has a
 * field). On failure writes a reason into why and leaves the struct
 * untouched. */
static int config_parse(const struct loom_config_var *var, const char *text, void *values,
                        char *why, size_t whylen)
{
    int nofield = var->offset == LOOM_CONFIG_NO_OFFSET;
    char *field = nofield ? NULL : (char *)values + var->offset;
    size_t cap = nofield ? CONFIG_VALUE_MAX : var->size;

    if (strlen(text) >= CONFIG_VALUE_MAX) {
        snprintf(why, whylen, "longer than %d characters", CONFIG_VALUE_MAX - 1);
        return -1;
    }
    switch (var->type) {
    case LOOM_CONFIG_INT: {
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (end == text || *end != '\0' || errno == ERANGE) {
            snprintf(why, whylen, "not an integer");
            return -1;
        }
        if ((double)v < var->min || (double)v > var->max) {
            snprintf(why, whylen, "out of range %.0f..%.0f", var->min, var->max);
            return -1;
        }
        if (field)
            *(int *)field = (int)v;
        return 0;
    }
    case LOOM_CONFIG_DOUBLE: {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        while (isspace((unsigned char)*end))
            end++;
        if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) {
            snprintf(why, whylen, "not a number");
            return -1;
        }
        if ((var->min_open ? v <= var->min : v < var->min) || v > var->max) {
            snprintf(why, whylen, "out of range: must be %s %g and <= %g",
                     var->min_open ? ">" : ">=", var->min, var->max);
            return -1;
        }
        if (field)
            *(double *)field = v;
        return 0;
    }
    case LOOM_CONFIG_SIZE: {
        size_t v;
        if (loom_parse_size(text, &v) != 0) {
            snprintf(why, whylen, "not a size (a number with an optional K, M or G)");
            return -1;
        }
        if ((double)v < var->min || (double)v > var->max) {
            snprintf(why, whylen, "out of range %.0f..%.0f bytes", var->min, var->max);
            return -1;
        }
        if (field)
            *(size_t *)field = v;
        return 0;
    }
    case LOOM_CONFIG_STRING:
        if (strlen(text) >= cap) {
            snprintf(why, whylen, "longer than %zu characters", cap - 1);
            return -1;
        }
        if (field)
            memcpy(field, text, strlen(text) + 1);
        return 0;
    case LOOM_CONFIG_LEVEL: {
        int v;
        if (config_parse_level(text, &v) != 0) {
            snprintf(why, whylen, "not one of NONE, WARN, INFO, TRACE");
            return -1;
        }
        if (field)
            *(int *)field = v;
        return 0;
    }
    case LOOM_CONFIG_SUBSYS: {
        unsigned v;
        if (config_parse_subsys(text, &v, why, whylen) != 0)
            return -1;
        if (field)
            *(unsigned *)field = v;
        return 0;
    }
    case LOOM_CONFIG_ENUM:
        for (const char *c = var->choices; c && *c;) {
            const char *bar = strchr(c, '|');
            size_t clen = bar ? (size_t)(bar - c) : strlen(c);
            if (strlen(text) == clen && strncasecmp(text, c, clen) == 0 && clen < cap) {
                if (field) {
                    memcpy(field, c, clen);
                    field[clen] = '\0';
                }
                return 0;
            }
            c += clen + (bar ? 1 : 0);
        }
        snprintf(why, whylen, "not one of %s", var->choices ? var->choices : "(none)");
        return -1;
    }
    snprintf(why, whylen, "internal: unknown type");
    return -1;
}

static void config_set(size_t idx, const char *text, enum config_source src, int line,
                       const char *where)
{
    const struct loom_config_var *var = config_rows[idx].var;
    char why[160];
    if (config_parse(var, text, config_rows[idx].values, why, sizeof(why)) != 0) {
        config_warn("%s=\"%.200s\" (%s): %s; keeping %s", var->name, text, where, why,
                    config_states[idx].source == SRC_DEFAULT ? "the default" : "the file's value");
        return;
    }
    config_states[idx].source = src;
    config_states[idx].line = line;
    snprintf(config_states[idx].value, sizeof(config_states[idx].value), "%s", text);
}

static char *config_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static void config_read_file(const char *path, int explicit)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (explicit || errno != ENOENT)
            config_warn("cannot read config file %.300s (LOOM_CONF_FILE): %s", path,
                        strerror(errno));
        return;
    }
    snprintf(config_file_path, sizeof(config_file_path), "%s", path);

    char buf[CONFIG_LINE_MAX];
    int lineno = 0;
    while (fgets(buf, sizeof(buf), f)) {
        lineno++;
        size_t len = strlen(buf);
        if (len == sizeof(buf) - 1 && buf[len - 1] != '\n' && !feof(f)) {
            config_warn("%.300s:%d: line longer than %d characters; ignored", path, lineno,
                        CONFIG_LINE_MAX - 2);
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        char *line = config_trim(buf);
        if (*line == '\0' || *line == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            config_warn("%.300s:%d: malformed line \"%.100s\": expected NAME=value", path,
                        lineno, line);
            continue;
        }
        *eq = '\0';
        char *name = config_trim(line);
        char *value = config_trim(eq + 1);
        if (*name == '\0') {
            config_warn("%.300s:%d: malformed line: no name before '='", path, lineno);
            continue;
        }
        const struct config_row *row = config_find(name, strlen(name));
        if (!row) {
            config_warn("%.300s:%d: unknown variable %.100s=\"%.200s\"; ignored", path, lineno,
                        name, value);
            continue;
        }
        if (row->var->offset == LOOM_CONFIG_NO_OFFSET) { /* read with getenv() elsewhere */
            config_warn("%.300s:%d: %s is read from the environment only; ignored", path, lineno,
                        row->var->name);
            continue;
        }
        char where[CONFIG_VALUE_MAX + 32];
        snprintf(where, sizeof(where), "%.900s:%d", path, lineno);
        config_set((size_t)(row - config_rows), value, SRC_FILE, lineno, where);
    }
    if (ferror(f))
        config_warn("error reading config file %.300s: %s", path, strerror(errno));
    fclose(f);
}

/* Called with config_rows_lock held. */
static void config_read_locked(void)
{
    config_add_core();
    memset(&config_cur, 0, sizeof(config_cur));
    config_file_path[0] = '\0';

    /* Defaults: the tables' own strings must parse. */
    for (size_t i = 0; i < config_nrows; i++) {
        config_states[i].source = SRC_DEFAULT;
        config_states[i].line = 0;
        config_set(i, config_rows[i].var->defval, SRC_DEFAULT, 0, "default");
    }

    const char *conf = getenv("LOOM_CONF_FILE");
    int explicit = conf && *conf;
    config_read_file(explicit ? conf : CONFIG_DEFAULT_FILE, explicit);

    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "LOOM_", 5) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        size_t nlen = (size_t)(eq - *e);
        const struct config_row *row = config_find(*e, nlen);
        if (!row) {
            if (!config_is_ignored(*e, nlen))
                config_warn("unknown variable %.*s=\"%.200s\" in the environment; ignored",
                            (int)(nlen > 100 ? 100 : nlen), *e, eq + 1);
            continue;
        }
        config_set((size_t)(row - config_rows), eq + 1, SRC_ENV, 0, "environment");
    }
    config_was_read = 1;
}

static void config_read(void)
{
    pthread_mutex_lock(&config_rows_lock);
    config_read_locked();
    pthread_mutex_unlock(&config_rows_lock);
}

/* Whether s can join: room is left and none of its names is taken; if not,
 * why says which. Called with config_rows_lock held. */
static int config_can_add(const struct loom_config_section *s, char *why, size_t len)
{
    if (config_nsections >= 1 + CONFIG_MAX_SECTIONS) {
        snprintf(why, len, "more than %d sections", CONFIG_MAX_SECTIONS);
        return 0;
    }
    if (s->nvars > CONFIG_MAX_ROWS - config_nrows) {
        snprintf(why, len, "more than %d rows beyond core's", CONFIG_MAX_EXTRA);
        return 0;
    }
    for (size_t i = 0; i < s->nvars; i++) {
        const char *name = s->vars[i].name;
        int twice = config_find(name, strlen(name)) != NULL;
        for (size_t j = 0; j < i && !twice; j++)
            twice = strcmp(s->vars[j].name, name) == 0;
        if (twice) {
            snprintf(why, len, "%.100s is a row already", name);
            return 0;
        }
    }
    return 1;
}

void loom_config_add(struct loom_config_section *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&config_rows_lock);
    config_add_core();
    for (size_t i = 0; i < config_nsections; i++)
        if (config_sections[i] == s) {
            pthread_mutex_unlock(&config_rows_lock);
            return;
        }
    char why[160];
    if (!config_can_add(s, why, sizeof why)) {
        pthread_mutex_unlock(&config_rows_lock);
        /* Runs before main, where the logger is not set up: stderr. The
         * section still gets its defaults, so its module runs as shipped. */
        fprintf(stderr,
                "loom: configuration section %s left out (%s); its rows keep their "
                "defaults\n",
                s->name, why);
        for (size_t i = 0; i < s->nvars; i++)
            config_parse(&s->vars[i], s->vars[i].defval, s->values, why, sizeof why);
        return;
    }
    for (size_t i = 0; i < s->nvars; i++)
        config_rows[config_nrows++] = (struct config_row){&s->vars[i], s->values};
    config_sections[config_nsections++] = s;
    if (config_was_read) {
        /* A constructor read the configuration before this one ran: read it
         * all again, so these rows have their values (and the warnings
         * about their names as unknown go). */
        pthread_mutex_lock(&config_warn_lock);
        config_nwarn = 0;
        config_nwarn_dropped = 0;
        pthread_mutex_unlock(&config_warn_lock);
        config_read_locked();
    }
    pthread_mutex_unlock(&config_rows_lock);
}

const struct loom_config *loom_config(void)
{
    pthread_once(&config_once, config_read);
    config_flush_warnings();
    return &config_cur;
}

const void *loom_config_values(const struct loom_config_section *s)
{
    loom_config();
    return s->values;
}

int loom_config_is_set(const char *name)
{
    pthread_once(&config_once, config_read);
    int set = 0;
    pthread_mutex_lock(&config_rows_lock);
    const struct config_row *row = config_find(name, strlen(name));
    if (row)
        set = config_states[row - config_rows].source != SRC_DEFAULT;
    pthread_mutex_unlock(&config_rows_lock);
    return set;
}

void loom_config_reset(void)
{
    pthread_once_t fresh = PTHREAD_ONCE_INIT;
    config_once = fresh;
    /* The logger reads its level, subsystems and file again on next use. */
    __atomic_store_n(&loom_log_level_cur, -1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&config_warn_lock);
    config_nwarn = 0;
    config_nwarn_dropped = 0;
    pthread_mutex_unlock(&config_warn_lock);
}

/* Where row i's value came from, as loom_config_print shows it. */
static void config_source_text(size_t i, char *buf, size_t len)
{
    const struct config_state *st = &config_states[i];
    if (st->source == SRC_ENV)
        snprintf(buf, len, "env");
    else if (st->source == SRC_FILE)
        snprintf(buf, len, "file:%.900s:%d", config_file_path, st->line);
    else
        snprintf(buf, len, "default");
}

void loom_config_print(FILE *out)
{
    loom_config();
    pthread_mutex_lock(&config_rows_lock);

    char source[CONFIG_VALUE_MAX + 32];
    int wname = 4, wvalue = 5, wsource = 6;
    for (size_t i = 0; i < config_nrows; i++) {
        config_source_text(i, source, sizeof source);
        int n = (int)strlen(config_rows[i].var->name);
        if (n > wname)
            wname = n;
        n = (int)strlen(config_states[i].value) + 2;
        if (n > wvalue && n <= 40)
            wvalue = n;
        n = (int)strlen(source);
        if (n > wsource && n <= 60)
            wsource = n;
    }
    fprintf(out, "%-*s  %-*s  %-*s  %s\n", wname, "NAME", wvalue, "VALUE", wsource, "SOURCE",
            "DOC");
    for (size_t i = 0; i < config_nrows; i++) {
        const struct loom_config_var *var = config_rows[i].var;
        char quoted[CONFIG_VALUE_MAX + 3];
        /* The job key is a secret: say whether it is set, never what it is. */
        if (strcmp(var->name, "LOOM_JOB_KEY") == 0 && config_states[i].value[0])
            snprintf(quoted, sizeof(quoted), "(set, hidden)");
        else
            snprintf(quoted, sizeof(quoted), "\"%s\"", config_states[i].value);
        config_source_text(i, source, sizeof source);
        fprintf(out, "%-*s  %-*s  %-*s  %s\n", wname, var->name, wvalue, quoted, wsource, source,
                var->doc);
    }
    pthread_mutex_unlock(&config_rows_lock);
}
