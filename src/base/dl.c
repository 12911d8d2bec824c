/* dl.c - an optional library opened at first use (dl.h). */
#include "build_config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "dl.h"

static void *find(const struct loom_dl *d, void *h, const char *name)
{
    if (!d->versions)
        return dlsym(h, name);
    for (const char *const *v = d->versions; *v; v++) {
        void *p = dlvsym(h, name, *v);
        if (p)
            return p;
    }
    return NULL;
}

static void load(struct loom_dl *d)
{
    if (d->before)
        d->before();
    void *h = dlopen(d->lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror names the library ("libfabric.so.1: cannot open shared
         * object file: ..."), or the path it found ("/lib/.../libfabric.so.1:
         * file too short") */
        const char *e = dlerror();
        if (e && strstr(e, d->lib))
            snprintf(d->why, sizeof d->why, "%s", e);
        else
            snprintf(d->why, sizeof d->why, "%s: %.200s", d->lib, e ? e : "cannot be loaded");
        return;
    }
    for (size_t i = 0; i < d->nsyms; i++) {
        void *p = find(d, h, d->syms[i].name);
        if (!p) {
            /* h stays open: the library's constructors may have installed
             * handlers that point into it */
            snprintf(d->why, sizeof d->why, "%s has no %s", d->lib, d->syms[i].name);
            return;
        }
        /* a function pointer stored from dlsym's void *: POSIX gives them
         * one representation */
        memcpy((char *)d->table + d->syms[i].offset, &p, sizeof p);
    }
    d->ok = 1; /* h stays open for the life of the process */
}

int loom_dl_load(struct loom_dl *d, char *why, size_t len)
{
    pthread_mutex_lock(&d->lock);
    if (!d->tried) {
        d->tried = 1;
        load(d);
    }
    int ok = d->ok;
    pthread_mutex_unlock(&d->lock);
    if (ok)
        return 0;
    if (why && len)
        snprintf(why, len, "%s", d->why);
    return -1;
}
