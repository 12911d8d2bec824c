/* diag.c - the list of errors and warnings found while loading a rank table. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "ranktable/ranktable_internal.h"

void loom_rt_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, LOOM_RT_MAX_PATH, fmt, ap);
    va_end(ap);
}

struct loom_diag *loom_rt_diag_new(void)
{
    return calloc(1, sizeof(struct loom_diag));
}

void loom_rt_diag_vadd(struct loom_diag *d, loom_diag_severity_t sev,
                       const char *path, const char *fmt, va_list ap)
{
    if (!d)
        return;
    if (sev == LOOM_DIAG_ERROR)
        d->nerrors++; /* counted even if it cannot be stored */
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        struct loom_diag_entry *e = realloc(d->entries, cap * sizeof *e);
        if (!e) {
            d->out_of_memory = 1;
            return;
        }
        d->entries = e;
        d->cap = cap;
    }
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) {
        d->out_of_memory = 1;
        return;
    }
    char *p = strdup(path ? path : "");
    if (!p) {
        free(msg);
        d->out_of_memory = 1;
        return;
    }
    d->entries[d->count++] = (struct loom_diag_entry){
        .severity = sev, .path = p, .message = msg};
}

void loom_rt_diag_add(struct loom_diag *d, loom_diag_severity_t sev,
                      const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    loom_rt_diag_vadd(d, sev, path, fmt, ap);
    va_end(ap);
}

LOOM_API loom_result_t loom_diag_count(const loom_diag_t *diag, size_t *count)
{
    if (!diag || !count)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *count = diag->count;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_diag_get(const loom_diag_t *diag, size_t i,
                                     loom_diag_severity_t *severity,
                                     const char **path, const char **message)
{
    if (!diag || i >= diag->count)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (severity)
        *severity = diag->entries[i].severity;
    if (path)
        *path = diag->entries[i].path;
    if (message)
        *message = diag->entries[i].message;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_diag_free(loom_diag_t *diag)
{
    if (!diag)
        return LOOM_SUCCESS;
    for (size_t i = 0; i < diag->count; i++) {
        free(diag->entries[i].path);
        free(diag->entries[i].message);
    }
    free(diag->entries);
    free(diag);
    return LOOM_SUCCESS;
}
