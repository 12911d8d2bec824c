/* config.h - every LOOM_* variable, read once.
 *
 * Each variable is a row (name, type, default, range, one-line doc) of a
 * section. config.c's own section, "core", fills struct loom_config; a module
 * whose knobs are its own (a transport) keeps its rows and a small struct
 * beside its code and registers them with LOOM_CONFIG_SECTION, which runs
 * before main whenever the module's object is linked. A program that links
 * no transport (a static link that never references the registry) does not
 * know the transports' rows: it warns about them as unknown names.
 *
 * Values come from the environment first, then from the file named by
 * LOOM_CONF_FILE (default /etc/loom.conf; lines "NAME=value", '#'
 * comments), then the default. An unknown LOOM_* name or a malformed value is
 * a warning naming it; the default is kept. */
#ifndef LOOM_CONFIG_H
#define LOOM_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct loom_config {
    int debug_level;              /* LOOM_DEBUG: NONE|WARN|INFO|TRACE (WARN)   */
    unsigned debug_subsys;        /* LOOM_DEBUG_SUBSYS: INIT,BOOT,..., ^ = not */
    char debug_file[256];         /* LOOM_DEBUG_FILE: "" = stderr; %h %p      */
    int port_base;                /* LOOM_PORT_BASE (29600)                    */
    int port_offset;              /* LOOM_PORT_OFFSET (0)                      */
    double bootstrap_timeout;     /* LOOM_BOOTSTRAP_TIMEOUT seconds (120)      */
    double timeout;               /* LOOM_TIMEOUT seconds (300, 0 = never)     */
    double stall_warn;            /* LOOM_STALL_WARN seconds (60, 0 = never)   */
    char trace_dir[256];          /* LOOM_TRACE_DIR: flight-recorder dumps     */
    char socket_ifname[256];      /* LOOM_SOCKET_IFNAME: prefix, ^not, =exact  */
    size_t chunk_size;            /* LOOM_CHUNK_SIZE bytes (K/M/G ok)          */
    size_t socket_sndbuf;         /* LOOM_SOCKET_SNDBUF bytes (0 = autotuned)  */
    char algo[256];               /* LOOM_ALGO: "ring" or "allreduce=ring,..." */
    char transport[32];           /* LOOM_TRANSPORT: tcp (default)             */
    char job_key[256];            /* LOOM_JOB_KEY: shared secret ("" = none)  */
    char job_key_file[256];       /* LOOM_JOB_KEY_FILE: file holding the key  */
    int spin_us;                  /* LOOM_SPIN_US: busy-poll before yielding (-1 auto) */
    int shm;                      /* LOOM_SHM: same-server ranks share memory (1) */
    char address[16];             /* LOOM_ADDRESS: auto|device|host            */
    int cuda_device;              /* LOOM_CUDA_DEVICE (-1 = the table's device_id) */
    size_t stage_chunk;           /* LOOM_STAGE_CHUNK: bytes staged per piece  */
    int stage_slots;              /* LOOM_STAGE_SLOTS: staging pieces per stream */
};

/* How a row's text is parsed and stored. */
enum loom_config_type {
    LOOM_CONFIG_INT,    /* long in [min, max], stored as int                */
    LOOM_CONFIG_DOUBLE, /* finite double in [min, max]; min_open: > min     */
    LOOM_CONFIG_SIZE,   /* bytes with K/M/G suffix, in [min, max], size_t   */
    LOOM_CONFIG_STRING, /* text shorter than the field (or 1024 bytes)      */
    LOOM_CONFIG_LEVEL,  /* NONE|WARN|INFO|TRACE, stored as int              */
    LOOM_CONFIG_SUBSYS, /* comma list of subsystems, leading ^ inverts      */
    LOOM_CONFIG_ENUM    /* one of the '|'-separated choices (any case), kept
                         * lowercase in a string field                      */
};

/* A row's field: where in its section's struct, and how big (a string's
 * capacity). A row without one is read with getenv() where it is used. */
#define LOOM_CONFIG_FIELD(type, member) offsetof(type, member), sizeof(((type *)0)->member)
#define LOOM_CONFIG_NO_OFFSET ((size_t)-1)
#define LOOM_CONFIG_NO_FIELD LOOM_CONFIG_NO_OFFSET, 0

struct loom_config_var {
    const char *name;
    enum loom_config_type type;
    const char *defval; /* must parse: every read starts from it */
    size_t offset;      /* into the section's struct, or LOOM_CONFIG_NO_OFFSET */
    size_t size;        /* of the field (a string's capacity) */
    double min, max;
    int min_open;        /* doubles: the value must be > min, not >= min */
    const char *doc;     /* one line, printed by loom-info -c */
    const char *choices; /* LOOM_CONFIG_ENUM: "a|b|c" */
};

/* A module's rows and the struct their offsets index (values: written on
 * every read, read by the module through loom_config_values). */
struct loom_config_section {
    const char *name;
    const struct loom_config_var *vars;
    size_t nvars;
    void *values;
};

/* Make s's rows known. Called before main (LOOM_CONFIG_SECTION); a section
 * added after the configuration was read makes it be read again. Past the
 * fixed room for sections, or with a name another row has, s is left out
 * with one line on stderr. */
void loom_config_add(struct loom_config_section *s);

/* Define a constructor that adds sec (a struct loom_config_section). */
#define LOOM_CONFIG_SECTION(sec)                                                                   \
    __attribute__((constructor)) static void loom_config_add_##sec(void)                           \
    {                                                                                              \
        loom_config_add(&(sec));                                                                   \
    }

/* s's values, reading the configuration first if it was not read yet. */
const void *loom_config_values(const struct loom_config_section *s);

/* The configuration, read on first use (thread-safe); never NULL. */
const struct loom_config *loom_config(void);

/* Whether the user set the variable name (environment or file): a value a
 * caller passes for one communicator yields to it. */
int loom_config_is_set(const char *name);

/* For tests: forget what was read so the next loom_config() reads again. */
void loom_config_reset(void);

/* Print every variable of every section (core's first): name, value, where
 * it came from (env, file, default), and its doc. Used by `loom-info -c`. */
void loom_config_print(FILE *out);

/* Parse "512K", "4M", "1G", "123" into bytes. 0 on success, -1 if malformed. */
int loom_parse_size(const char *s, size_t *out);

#endif
