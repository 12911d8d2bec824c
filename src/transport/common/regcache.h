/* regcache.h - a bounded cache of memory registrations, shared by the ofi and
 * verbs transports.
 *
 * Registering memory pins its pages (or costs a system call); a user who
 * frees a buffer and gets a new one at the same address must never be
 * served the old registration (its pages may differ). The cache therefore
 * drops entries whose range was unmapped, remapped or had its pages removed:
 * one process-wide monitor (a userfaultfd registered in write-protect mode on
 * the cached ranges, asking only for its UNMAP, REMOVE and REMAP events; a
 * thread reads them). Where no monitor can run (no userfaultfd, seccomp,
 * a range it cannot watch), buffers are registered per use and released
 * at put, never cached. Bounded by entries and bytes; the least recently
 * used entry goes first; entries in use are never evicted (when every entry
 * is in use, a new registration is made for that use only).
 *
 * Thread-safe. Registration callbacks run without the cache's lock held, in
 * the thread calling get/put/free, never in the monitor's thread.
 *
 * The first part of this header is the agreed API (/work/spec/regcache.h);
 * the extensions after it are additive. */
#ifndef LOOM_REGCACHE_H
#define LOOM_REGCACHE_H
#include <stddef.h>
#include "loom.h"

struct loom_regcache;
struct loom_regcache_ops {
    /* register [buf, buf+len) (page-aligned by the cache); *handle is what
     * the transport puts in requests (e.g. a struct fid_mr * or ibv_mr *) */
    loom_result_t (*reg)(void *ctx, void *buf, size_t len, void **handle);
    void (*dereg)(void *ctx, void *handle);
};
loom_result_t loom_regcache_new(const struct loom_regcache_ops *ops, void *ctx, size_t max_entries,
                                size_t max_bytes, struct loom_regcache **out);
/* A registration covering [buf, buf+len): a cached one when still valid, else
 * a new one. *ref is released with loom_regcache_put. */
loom_result_t loom_regcache_get(struct loom_regcache *rc, void *buf, size_t len, void **handle,
                                void **ref);
void loom_regcache_put(struct loom_regcache *rc, void *ref);
void loom_regcache_free(struct loom_regcache *rc);
/* counters for tests and perf: hits, misses, invalidations, evictions */
struct loom_regcache_stats {
    unsigned long hits, misses, invalidated, evicted;
};
void loom_regcache_stats(const struct loom_regcache *rc, struct loom_regcache_stats *st);

/* ---- extensions ---------------------------------------------------------- */

/* 1 when rc caches (the monitor runs), 0 when it registers per use; why
 * (may be NULL) then says why ("userfaultfd: Operation not permitted"). */
int loom_regcache_cached(const struct loom_regcache *rc, char *why, size_t len);
/* Drop every cached entry (of every cache) overlapping [buf, buf+len), as
 * the monitor does on an unmap: for code that knows memory is about to be
 * released or reused, and for tests. Entries in use are dropped from the
 * lookup at once and released at their last put. */
void loom_regcache_invalidate(void *buf, size_t len);
/* For tests: 0 makes caches created afterwards run without a monitor (per
 * use), 1 restores the default. */
void loom_regcache_test_monitor(int enable);

#endif
