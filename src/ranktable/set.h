/* set.h - a fixed-size string set that remembers where each key was first
 * seen, for "used twice (also ...)" messages. Sized once; never grows. */
#ifndef LOOM_RANKTABLE_SET_H
#define LOOM_RANKTABLE_SET_H

#include <stddef.h>

struct loom_rt_slot {
    const char *key; /* not owned */
    size_t a, b;     /* where it was first seen (e.g. server, device) */
};

struct loom_rt_set {
    struct loom_rt_slot *slots;
    size_t cap;      /* a power of two, more than twice the keys */
};

/* Room for at most n keys. 0 on success, -1 when out of memory. */
int loom_rt_set_init(struct loom_rt_set *s, size_t n);
/* Insert key (with a, b) and return NULL, or return the slot that already
 * holds key. key must outlive the set. */
const struct loom_rt_slot *loom_rt_set_put(struct loom_rt_set *s,
                                           const char *key, size_t a,
                                           size_t b);
void loom_rt_set_free(struct loom_rt_set *s);

#endif
