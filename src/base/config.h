/* config.h - every LOOM_* variable, read once.
 *
 * One table in config.c holds each variable's name, type, default and a
 * one-line doc. Values come from the environment first, then from the file
 * named by LOOM_CONF_FILE (default /etc/loom.conf; lines "NAME=value", '#'
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
    int nsocks;                   /* LOOM_NSOCKS sockets per peer (2, 1..16)   */
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
    char ofi_provider[128];       /* LOOM_OFI_PROVIDER: "" = best available    */
    char ib_hca[128];             /* LOOM_IB_HCA: verbs device[:port] ("" auto) */
    int ib_gid_index;             /* LOOM_IB_GID_INDEX (-1 = by device_ip)     */
    int cuda_device;              /* LOOM_CUDA_DEVICE (-1 = the table's device_id) */
    size_t stage_chunk;           /* LOOM_STAGE_CHUNK: bytes staged per piece  */
    int stage_slots;              /* LOOM_STAGE_SLOTS: staging pieces per stream */
};

/* The configuration, read on first use (thread-safe); never NULL. */
const struct loom_config *loom_config(void);

/* Whether the user set the variable name (environment or file): a value a
 * caller passes for one communicator yields to it. */
int loom_config_is_set(const char *name);

/* For tests: forget what was read so the next loom_config() reads again. */
void loom_config_reset(void);

/* Print every variable: name, value, where it came from (env, file, default),
 * and its doc. Used by `loom-info -c`. */
void loom_config_print(FILE *out);

/* Parse "512K", "4M", "1G", "123" into bytes. 0 on success, -1 if malformed. */
int loom_parse_size(const char *s, size_t *out);

#endif
