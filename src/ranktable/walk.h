/* walk.h - the object walker that parse.c and legacy.c share: each JSON
 * object is matched once against a table of the fields it may hold. */
#ifndef LOOM_RANKTABLE_WALK_H
#define LOOM_RANKTABLE_WALK_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "ranktable/ranktable_internal.h"

enum loom_rt_kind {
    LOOM_RT_STRING,
    LOOM_RT_ARRAY,
    LOOM_RT_INTEGER, /* a JSON number with no fraction (version 2.0) */
    LOOM_RT_ANY,    /* known, of any type, and not used (no warning) */
};

struct loom_rt_field {
    const char *name;
    enum loom_rt_kind kind;
    int v12_only; /* part of version 1.2 only */
    int required;
};

struct loom_rt_walk {
    struct loom_diag *d;
    int is_v10;   /* version "1.0": 1.2 fields are warned about */
    int nomem;
};

/* Match obj's members against fields[] (at most 16): a field of the wrong
 * type is an error naming its path, one that appears twice is an error, a
 * required one that is absent is an error, an unknown one is a warning.
 * found[i] gets the member of the right type, or NULL. */
void loom_rt_walk_object(struct loom_rt_walk *w, const cJSON *obj,
                         const char *path, const struct loom_rt_field *fields,
                         size_t nfields, const cJSON **found);
/* strdup of a found string member (NULL stays NULL). */
char *loom_rt_dup_member(struct loom_rt_walk *w, const cJSON *m);
/* item when it is an object; else reports it and returns NULL. */
const cJSON *loom_rt_array_object(struct loom_rt_walk *w, const cJSON *item,
                                  const char *path);
/* "base.key" ("key" at the top) and "base[i]". */
void loom_rt_path_key(char *out, const char *base, const char *key);
void loom_rt_path_index(char *out, const char *base, size_t i);

#endif
