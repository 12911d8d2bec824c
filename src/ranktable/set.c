/* set.c - open-addressing string set (see set.h). */
#include "build_config.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "ranktable/set.h"

int loom_rt_set_init(struct loom_rt_set *s, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 1)
        cap *= 2;
    s->slots = calloc(cap, sizeof *s->slots);
    s->cap = s->slots ? cap : 0;
    return s->slots ? 0 : -1;
}

const struct loom_rt_slot *loom_rt_set_put(struct loom_rt_set *s,
                                           const char *key, size_t a, size_t b)
{
    size_t mask = s->cap - 1;
    size_t i = (size_t)loom_fnv1a(LOOM_FNV_INIT, key, strlen(key)) & mask;
    for (;; i = (i + 1) & mask) {
        struct loom_rt_slot *slot = &s->slots[i];
        if (!slot->key) {
            *slot = (struct loom_rt_slot){.key = key, .a = a, .b = b};
            return NULL;
        }
        if (strcmp(slot->key, key) == 0)
            return slot;
    }
}

void loom_rt_set_free(struct loom_rt_set *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = 0;
}
