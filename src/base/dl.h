/* dl.h - an optional library opened at first use: dlopen, then a table of
 * function pointers filled by name, with a message that names the library
 * or the symbol that was missing.
 *
 * Loom links none of its optional libraries (libibverbs, libfabric): a
 * process that never chooses the transport that needs one never maps it,
 * nor what it pulls in (libfabric's providers install signal handlers from
 * their constructors), and a build with the transport runs on hosts
 * without the library. The handle stays open for the life of the process:
 * the table's pointers, and handlers a library installed, point into it. */
#ifndef LOOM_DL_H
#define LOOM_DL_H

#include <pthread.h>
#include <stddef.h>

/* One entry of a table: the symbol's name and where its pointer goes
 * (offsetof in the table). */
struct loom_dl_sym {
    const char *name;
    size_t offset;
};

struct loom_dl {
    const char *lib;                   /* "libfabric.so.1"                  */
    /* symbol versions to look up, first found wins (dlvsym), NULL-ended;
     * NULL: the library's default version of each name (dlsym) */
    const char *const *versions;
    const struct loom_dl_sym *syms;
    size_t nsyms;
    void *table;                       /* filled at syms[i].offset          */
    /* runs once, just before dlopen (the library's constructors run in
     * dlopen: what they read must be set by then); may be NULL */
    void (*before)(void);
    /* state: static initialisation with LOOM_DL_STATE */
    pthread_mutex_t lock;
    int tried, ok;
    char why[256];
};
#define LOOM_DL_STATE .lock = PTHREAD_MUTEX_INITIALIZER

/* Open d->lib and fill d->table, once (thread-safe; a failure is
 * remembered). 0 when the table is usable; -1 with why ("libfabric.so.1:
 * cannot open shared object file: ...", "libibverbs.so.1 has no
 * ibv_reg_mr") otherwise. */
int loom_dl_load(struct loom_dl *d, char *why, size_t len);

#endif
