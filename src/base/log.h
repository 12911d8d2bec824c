/* log.h - leveled, per-subsystem logging (LOOM_DEBUG, LOOM_DEBUG_SUBSYS).
 *
 * The macros test level and subsystem before anything is formatted, so a
 * disabled message costs one load and a compare. Lines look like
 *   2026-12-05 08:48:00.123456 host:pid:tid [rank] LOOM WARN NET message
 * and go to stderr (or LOOM_DEBUG_FILE). errno is preserved across a call. */
#ifndef LOOM_LOG_H
#define LOOM_LOG_H

enum loom_log_level {
    LOOM_LOG_NONE = 0,
    LOOM_LOG_WARN = 1,
    LOOM_LOG_INFO = 2,
    LOOM_LOG_TRACE = 3
};

enum loom_log_subsys {
    LOOM_SUB_INIT = 1u << 0,   /* communicator lifecycle              */
    LOOM_SUB_BOOT = 1u << 1,   /* bootstrap / rendezvous              */
    LOOM_SUB_NET = 1u << 2,    /* transports                          */
    LOOM_SUB_COLL = 1u << 3,   /* algorithms, selection               */
    LOOM_SUB_RT = 1u << 4,     /* rank tables                         */
    LOOM_SUB_STREAM = 1u << 5, /* streams, events, hooks              */
    LOOM_SUB_CONFIG = 1u << 6, /* configuration                       */
    LOOM_SUB_ALL = 0xffffffffu
};

/* -1 until the first use reads the configuration. */
extern int loom_log_level_cur;
extern unsigned loom_log_subsys_cur;

void loom_log_init(void);
/* The rank shown in this thread's log lines (-1: none). */
void loom_log_set_rank(int rank);
void loom_log_write(int level, unsigned subsys, const char *file, int line,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The level and subsystems are read atomically: another thread may be
 * setting them up (the first log line of a process, or after
 * loom_config_reset). */
static inline int loom_log_enabled(int level, unsigned subsys)
{
    int cur = __atomic_load_n(&loom_log_level_cur, __ATOMIC_ACQUIRE);
    if (__builtin_expect(cur < 0, 0)) {
        loom_log_init();
        cur = __atomic_load_n(&loom_log_level_cur, __ATOMIC_ACQUIRE);
    }
    return cur >= level && (__atomic_load_n(&loom_log_subsys_cur, __ATOMIC_RELAXED) & subsys);
}

#define LOOM_LOG(level, subsys, ...)                                           \
    do {                                                                       \
        if (loom_log_enabled((level), (subsys)))                               \
            loom_log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#define LOOM_WARN(subsys, ...) LOOM_LOG(LOOM_LOG_WARN, subsys, __VA_ARGS__)
#define LOOM_INFO(subsys, ...) LOOM_LOG(LOOM_LOG_INFO, subsys, __VA_ARGS__)
#define LOOM_TRACE(subsys, ...) LOOM_LOG(LOOM_LOG_TRACE, subsys, __VA_ARGS__)

#endif
