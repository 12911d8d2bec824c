/* redop.c - reduction ops with attributes (loom_redop_create): a table,
 * process-wide, of scaled sums and float32 accumulation. Calls copy the
 * attributes into their descriptor when issued (redop.h), so an op may be
 * destroyed while calls that used it are still in flight. */
#include "build_config.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "redop.h"
#include "base/util.h"

/* User ops are LOOM_REDOP_USER_FIRST + their slot: far from the built-in
 * values, so that a stale or made-up value is told apart. */
#define LOOM_REDOP_USER_FIRST 0x4000

struct slot {
    int used;
    loom_redop_attr_t attr;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *table;
static size_t table_len;

LOOM_API loom_result_t loom_redop_create(const loom_redop_attr_t *attr,
                                         loom_redop_t *op)
{
    if (!attr || !op) {
        loom_set_thread_error("loom_redop_create: %s is NULL", attr ? "op" : "attr");
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (attr->struct_size < sizeof *attr || attr->struct_size > 4096) {
        loom_set_thread_error("loom_redop_create: attr->struct_size %zu is not "
                              "sizeof(loom_redop_attr_t)", attr->struct_size);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (attr->base != LOOM_SUM && attr->base != LOOM_AVG) {
        loom_set_thread_error("loom_redop_create: base %d is not LOOM_SUM or LOOM_AVG",
                              (int)attr->base);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (!isfinite(attr->prescale) || !isfinite(attr->postscale)) {
        loom_set_thread_error("loom_redop_create: scale factors must be finite "
                              "(prescale %g, postscale %g)", attr->prescale,
                              attr->postscale);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    if (attr->accumulate != LOOM_ACCUM_NATIVE && attr->accumulate != LOOM_ACCUM_FLOAT32) {
        loom_set_thread_error("loom_redop_create: accumulate %d is not a loom_accum_t",
                              (int)attr->accumulate);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&table_lock);
    size_t i = 0;
    while (i < table_len && table[i].used)
        i++;
    if (i == table_len) {
        size_t len = table_len ? 2 * table_len : 16;
        struct slot *t = LOOM_REDOP_USER_FIRST + len < INT32_MAX
                             ? realloc(table, len * sizeof *t)
                             : NULL;
        if (!t) {
            pthread_mutex_unlock(&table_lock);
            loom_set_thread_error("loom_redop_create: no room for %zu ops", len);
            return LOOM_ERROR_NO_MEMORY;
        }
        for (size_t j = table_len; j < len; j++)
            t[j].used = 0;
        table = t;
        table_len = len;
    }
    table[i].used = 1;
    table[i].attr = *attr;
    table[i].attr.struct_size = sizeof *attr;
    pthread_mutex_unlock(&table_lock);
    *op = (loom_redop_t)(LOOM_REDOP_USER_FIRST + (int)i);
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_redop_destroy(loom_redop_t op)
{
    long i = (long)op - LOOM_REDOP_USER_FIRST;
    loom_result_t res = LOOM_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&table_lock);
    if (i >= 0 && (size_t)i < table_len && table[i].used) {
        table[i].used = 0;
        res = LOOM_SUCCESS;
    }
    pthread_mutex_unlock(&table_lock);
    if (res != LOOM_SUCCESS)
        loom_set_thread_error("loom_redop_destroy: %d is not a live reduction op",
                              (int)op);
    return res;
}

int loom_redop_resolve(loom_redop_t op, struct loom_op *d)
{
    d->prescale = 1.0;
    d->postscale = 1.0;
    d->scaled = 0;
    d->accum = LOOM_ACCUM_NATIVE;
    if ((unsigned)op < LOOM_REDOP_COUNT) {
        d->op = op;
        return 0;
    }
    long i = (long)op - LOOM_REDOP_USER_FIRST;
    int ok = 0;
    pthread_mutex_lock(&table_lock);
    if (i >= 0 && (size_t)i < table_len && table[i].used) {
        d->op = table[i].attr.base;
        d->prescale = table[i].attr.prescale;
        d->postscale = table[i].attr.postscale;
        d->accum = table[i].attr.accumulate;
        d->scaled = d->prescale != 1.0 || d->postscale != 1.0;
        ok = 1;
    }
    pthread_mutex_unlock(&table_lock);
    return ok ? 0 : -1;
}
