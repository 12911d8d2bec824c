/* check_regcache.c - the registration cache (src/transport/common/regcache.c) with
 * a fake registrar that records every registration: hits and misses,
 * page rounding, LRU bounds by entries and bytes, entries in use never
 * evicted, overlapping ranges, and the memory monitor: munmap + mmap
 * MAP_FIXED, madvise(DONTNEED), mremap and free + malloc of a large block
 * at the same address each invalidate; an entry dropped while in use is
 * released at its last put; eviction keeps a range watched while another
 * entry covers it; two caches share the monitor; the per-use mode when no
 * monitor runs. Counters are checked throughout. Caching tests SKIP (exit
 * 77) where no userfaultfd can be opened (the per-use tests still run). */
#include "build_config.h"

#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loom.h"
#include "transport/common/regcache.h"

/* ---- the fake registrar --------------------------------------------------- */

#define MAX_REGS 8192

struct fake_reg {
    uintptr_t start, end;
    unsigned long id;
    int live;
};

struct fake {
    struct fake_reg *regs;    /* MAX_REGS; regs[id - 1] is registration id */
    int nregs;
    unsigned long next_id;
    unsigned long nreg, ndereg;
    int fail_next;            /* the next reg fails                        */
    void *unmap_on_dereg;     /* dereg munmaps this page (deadlock check)  */
};

/* Static storage for the fakes' records (each test runs in its own fork). */
static struct fake_reg pool[2][MAX_REGS];
static int pool_used;

static loom_result_t fake_reg(void *ctx, void *buf, size_t len, void **handle)
{
    struct fake *f = ctx;
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    ck_assert_msg(((uintptr_t)buf % ps) == 0 && len % ps == 0,
                  "registration %p+%zu is not page-aligned", buf, len);
    if (f->fail_next) {
        f->fail_next = 0;
        return LOOM_ERROR_SYSTEM;
    }
    if (!f->regs) {
        ck_assert_int_lt(pool_used, 2);
        f->regs = pool[pool_used++];
    }
    ck_assert_int_lt(f->nregs, MAX_REGS);
    struct fake_reg *r = &f->regs[f->nregs++];
    *r = (struct fake_reg){.start = (uintptr_t)buf, .end = (uintptr_t)buf + len,
                           .id = ++f->next_id, .live = 1};
    f->nreg++;
    *handle = r;
    return LOOM_SUCCESS;
}

static void fake_dereg(void *ctx, void *handle)
{
    struct fake *f = ctx;
    struct fake_reg *r = handle;
    ck_assert_msg(r >= f->regs && r < f->regs + f->nregs, "dereg of a foreign handle");
    ck_assert_msg(r->live, "handle %lu deregistered twice", r->id);
    r->live = 0;
    f->ndereg++;
    if (f->unmap_on_dereg) {
        munmap(f->unmap_on_dereg, (size_t)sysconf(_SC_PAGESIZE));
        f->unmap_on_dereg = NULL;
    }
}

static const struct loom_regcache_ops fake_ops = {.reg = fake_reg,
                                                  .dereg = fake_dereg};

static size_t PS;

static uint8_t *map_pages(size_t n)
{
    void *p = mmap(NULL, n * PS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memset(p, 1, n * PS); /* populated, as a real buffer would be */
    return p;
}

static struct loom_regcache *new_cache(struct fake *f, size_t entries, size_t bytes)
{
    struct loom_regcache *rc = NULL;
    ck_assert_int_eq(loom_regcache_new(&fake_ops, f, entries, bytes, &rc), LOOM_SUCCESS);
    ck_assert_ptr_nonnull(rc);
    return rc;
}

static struct fake_reg *get(struct loom_regcache *rc, void *buf, size_t len, void **ref)
{
    void *h = NULL;
    ck_assert_int_eq(loom_regcache_get(rc, buf, len, &h, ref), LOOM_SUCCESS);
    struct fake_reg *r = h;
    ck_assert_msg(r->live, "served a released registration");
    ck_assert_msg(r->start <= (uintptr_t)buf && (uintptr_t)buf + len <= r->end,
                  "registration does not cover the buffer");
    return r;
}

/* get + put; returns the registration's id */
static unsigned long touch(struct loom_regcache *rc, void *buf, size_t len)
{
    void *ref;
    unsigned long id = get(rc, buf, len, &ref)->id;
    loom_regcache_put(rc, ref);
    return id;
}

static void check_stats(struct loom_regcache *rc, unsigned long hits,
                        unsigned long misses, unsigned long inval, unsigned long evict)
{
    struct loom_regcache_stats st;
    loom_regcache_stats(rc, &st);
    ck_assert_msg(st.hits == hits && st.misses == misses && st.invalidated == inval &&
                      st.evicted == evict,
                  "stats hits %lu misses %lu invalidated %lu evicted %lu, expected "
                  "%lu %lu %lu %lu", st.hits, st.misses, st.invalidated, st.evicted,
                  hits, misses, inval, evict);
}

/* ---- per use (no monitor) ------------------------------------------------- */

START_TEST(test_per_use)
{
    loom_regcache_test_monitor(0);
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 1 << 20);
    char why[160];
    ck_assert_int_eq(loom_regcache_cached(rc, why, sizeof why), 0);
    ck_assert_msg(strstr(why, "disabled"), "why: %s", why);
    uint8_t *p = map_pages(2);
    void *r1, *r2;
    struct fake_reg *a = get(rc, p + 10, 100, &r1);
    struct fake_reg *b = get(rc, p + 10, 100, &r2);
    ck_assert_ptr_ne(a, b);
    ck_assert_uint_eq(f.nreg, 2);
    loom_regcache_put(rc, r1);
    ck_assert_uint_eq(f.ndereg, 1); /* released at put */
    loom_regcache_put(rc, r2);
    ck_assert_uint_eq(f.ndereg, 2);
    check_stats(rc, 0, 2, 0, 0);
    /* a failing registration is returned as is and leaves nothing behind */
    f.fail_next = 1;
    void *h, *ref;
    ck_assert_int_eq(loom_regcache_get(rc, p, 1, &h, &ref), LOOM_ERROR_SYSTEM);
    ck_assert_int_eq(loom_regcache_get(rc, NULL, 1, &h, &ref),
                     LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_regcache_get(rc, (void *)(UINTPTR_MAX - 10), 100, &h, &ref),
                     LOOM_ERROR_INVALID_ARGUMENT);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    /* bounds of 0 turn caching off too */
    loom_regcache_test_monitor(1);
    rc = new_cache(&f, 0, 0);
    ck_assert_int_eq(loom_regcache_cached(rc, why, sizeof why), 0);
    touch(rc, p, 1);
    touch(rc, p, 1);
    check_stats(rc, 0, 2, 0, 0);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 2 * PS);
}
END_TEST

/* ---- cached ----------------------------------------------------------------- */

START_TEST(test_hits_and_rounding)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 64 * PS);
    ck_assert_int_eq(loom_regcache_cached(rc, NULL, 0), 1);
    uint8_t *p = map_pages(4);
    void *ref;
    struct fake_reg *r = get(rc, p + 100, PS, &ref); /* spans pages 0 and 1 */
    ck_assert_uint_eq(r->start, (uintptr_t)p);
    ck_assert_uint_eq(r->end, (uintptr_t)p + 2 * PS);
    loom_regcache_put(rc, ref);
    ck_assert_uint_eq(touch(rc, p + 100, PS), r->id);
    ck_assert_uint_eq(touch(rc, p, 2 * PS), r->id);   /* same pages    */
    ck_assert_uint_eq(touch(rc, p + PS, 1), r->id);   /* inside        */
    ck_assert_uint_ne(touch(rc, p + PS, PS + 1), r->id); /* reaches page 2 */
    ck_assert_uint_eq(f.ndereg, 0);
    check_stats(rc, 3, 2, 0, 0);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 4 * PS);
}
END_TEST

START_TEST(test_lru_entries)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 3, 64 * PS);
    uint8_t *p = map_pages(8);
    uint8_t *A = p, *B = p + 2 * PS, *C = p + 4 * PS, *D = p + 6 * PS;
    unsigned long a = touch(rc, A, 1), b = touch(rc, B, 1);
    touch(rc, C, 1);
    ck_assert_uint_eq(touch(rc, A, 1), a); /* A is now the most recent */
    touch(rc, D, 1);                       /* B, the least recent, goes */
    check_stats(rc, 1, 4, 0, 1);
    ck_assert_uint_eq(f.ndereg, 1);
    ck_assert_int_eq(f.regs[b - 1].live, 0);
    ck_assert_uint_eq(touch(rc, A, 1), a);
    ck_assert_uint_ne(touch(rc, B, 1), b); /* registered again; C goes */
    check_stats(rc, 2, 5, 0, 2);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 8 * PS);
}
END_TEST

START_TEST(test_lru_bytes)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 100, 5 * PS);
    uint8_t *p = map_pages(16);
    unsigned long a = touch(rc, p, 2 * PS);
    unsigned long b = touch(rc, p + 4 * PS, 2 * PS);
    touch(rc, p + 8 * PS, 2 * PS); /* 6 pages > 5: a goes */
    check_stats(rc, 0, 3, 0, 1);
    ck_assert_int_eq(f.regs[a - 1].live, 0);
    ck_assert_uint_eq(touch(rc, p + 4 * PS, 1), b);
    /* larger than the whole bound: registered for this use only */
    void *ref;
    struct fake_reg *big = get(rc, p, 6 * PS, &ref);
    unsigned long before = f.ndereg;
    loom_regcache_put(rc, ref);
    ck_assert_uint_eq(f.ndereg, before + 1);
    ck_assert_int_eq(big->live, 0);
    ck_assert_uint_eq(touch(rc, p + 4 * PS, 1), b); /* not evicted for it */
    check_stats(rc, 2, 4, 0, 1);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 16 * PS);
}
END_TEST

START_TEST(test_in_use_never_evicted)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 2, 64 * PS);
    uint8_t *p = map_pages(8);
    void *ra, *rb, *rc3;
    struct fake_reg *a = get(rc, p, 1, &ra);
    struct fake_reg *b = get(rc, p + 2 * PS, 1, &rb);
    /* full of entries in use: the third is for this use only */
    struct fake_reg *c = get(rc, p + 4 * PS, 1, &rc3);
    ck_assert(a->live && b->live && c->live);
    loom_regcache_put(rc, rc3);
    ck_assert_int_eq(c->live, 0);
    check_stats(rc, 0, 3, 0, 0);
    /* b released: the next new range evicts b, never a */
    loom_regcache_put(rc, rb);
    unsigned long d = touch(rc, p + 6 * PS, 1);
    ck_assert_int_eq(b->live, 0);
    ck_assert_int_eq(a->live, 1);
    ck_assert_uint_eq(touch(rc, p + 6 * PS, 1), d);
    check_stats(rc, 1, 4, 0, 1);
    /* the same buffer held twice: one entry, two references */
    void *r2;
    ck_assert_ptr_eq(get(rc, p, 1, &r2), a);
    loom_regcache_put(rc, ra);
    loom_regcache_put(rc, r2);
    ck_assert_int_eq(a->live, 1); /* cached, not released */
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 8 * PS);
}
END_TEST

START_TEST(test_overlapping_ranges)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 64 * PS);
    uint8_t *p = map_pages(6);
    unsigned long x = touch(rc, p, 2 * PS);          /* X = pages 0-1 */
    unsigned long y = touch(rc, p + PS, 2 * PS);     /* Y = pages 1-2 */
    ck_assert_uint_ne(x, y);
    unsigned long in1 = touch(rc, p + PS, 1);        /* page 1: either */
    ck_assert(in1 == x || in1 == y);
    ck_assert_uint_eq(touch(rc, p + 2 * PS, 1), y);
    ck_assert_uint_eq(touch(rc, p, 1), x);
    check_stats(rc, 3, 2, 0, 0);
    /* page 2 goes: Y overlaps it and is dropped, X is not */
    ck_assert_int_eq(munmap(p + 2 * PS, PS), 0);
    check_stats(rc, 3, 2, 1, 0);
    ck_assert_uint_eq(touch(rc, p + PS, 1), x);
    ck_assert_int_eq(f.regs[y - 1].live, 0);
    ck_assert_int_eq(f.regs[x - 1].live, 1);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 6 * PS);
}
END_TEST

/* Evicting X must not stop watching the pages Y still covers. */
START_TEST(test_evict_keeps_shared_pages_watched)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 2, 64 * PS);
    uint8_t *p = map_pages(8);
    touch(rc, p, 2 * PS);                            /* X = pages 0-1 */
    unsigned long y = touch(rc, p + PS, 2 * PS);     /* Y = pages 1-2 */
    touch(rc, p + 5 * PS, 1);                        /* Z evicts X    */
    check_stats(rc, 0, 3, 0, 1);
    ck_assert_int_eq(munmap(p + PS, PS), 0);         /* page 1: Y's   */
    check_stats(rc, 0, 3, 1, 1);
    touch(rc, p + 5 * PS, 1);                        /* reaps Y       */
    ck_assert_int_eq(f.regs[y - 1].live, 0);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 8 * PS);
}
END_TEST

/* The heart of it: a buffer freed and a new one mapped at the same address
 * is never served the old registration. */
START_TEST(test_unmap_map_fixed)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 1 << 30);
    for (int i = 0; i < 200; i++) {
        uint8_t *p = map_pages(4);
        unsigned long id = touch(rc, p, 4 * PS);
        ck_assert_uint_eq(touch(rc, p, 4 * PS), id);
        ck_assert_int_eq(munmap(p, 4 * PS), 0);
        void *q = mmap(p, 4 * PS, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        ck_assert_ptr_eq(q, p);
        unsigned long id2 = touch(rc, q, 4 * PS);
        ck_assert_msg(id2 != id, "iteration %d: the old registration was served", i);
        ck_assert_int_eq(f.regs[id - 1].live, 0);
        munmap(q, 4 * PS);
    }
    check_stats(rc, 200, 400, 400, 0);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
}
END_TEST

START_TEST(test_madvise_and_mremap)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 1 << 30);
    uint8_t *p = map_pages(4);
    unsigned long id = touch(rc, p, 4 * PS);
    ck_assert_int_eq(madvise(p + PS, PS, MADV_DONTNEED), 0);
    check_stats(rc, 0, 1, 1, 0);
    ck_assert_int_eq(f.regs[id - 1].live, 1); /* released at the next call */
    unsigned long id2 = touch(rc, p, 4 * PS);
    ck_assert_uint_ne(id2, id);
    ck_assert_int_eq(f.regs[id - 1].live, 0);
    /* mremap moves the pages away: the old address is gone */
    uint8_t *q = mremap(p, 4 * PS, 8 * PS, MREMAP_MAYMOVE);
    ck_assert_ptr_ne(q, MAP_FAILED);
    check_stats(rc, 0, 2, 2, 0);
    munmap(q, 8 * PS);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
}
END_TEST

START_TEST(test_free_malloc_same_address)
{
    /* a fixed threshold: large blocks come from (and go back to) mmap. An
     * allocator that is not glibc's refuses it: AddressSanitizer's keeps a
     * freed block in quarantine and never hands it straight back, so there
     * the case cannot happen; the plain build proves it. */
    if (mallopt(M_MMAP_THRESHOLD, 256 * 1024) != 1) {
        fprintf(stderr, "free_malloc_same_address: not run: the allocator is not "
                        "glibc's (mallopt refused), so a freed block is not handed "
                        "back at once\n");
        return;
    }
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 1 << 30);
    const size_t len = 4u << 20;
    int same = 0;
    for (int i = 0; i < 20; i++) {
        uint8_t *p = malloc(len);
        ck_assert_ptr_nonnull(p);
        memset(p, i, len);
        unsigned long id = touch(rc, p, len);
        free(p);
        uint8_t *q = malloc(len);
        ck_assert_ptr_nonnull(q);
        memset(q, i + 1, len);
        same += q == p;
        unsigned long id2 = touch(rc, q, len);
        ck_assert_msg(id2 != id, "block %d: the freed block's registration was served", i);
        free(q);
    }
    ck_assert_msg(same > 0, "malloc never returned the freed address: test proves nothing");
    struct loom_regcache_stats st;
    loom_regcache_stats(rc, &st);
    ck_assert_uint_eq(st.hits, 0);
    ck_assert_uint_ge(st.invalidated, 20);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
}
END_TEST

START_TEST(test_invalidated_in_use)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 16, 1 << 30);
    uint8_t *p = map_pages(2);
    void *ref;
    struct fake_reg *r = get(rc, p, PS, &ref);
    ck_assert_int_eq(munmap(p, 2 * PS), 0);
    check_stats(rc, 0, 1, 1, 0);
    ck_assert_int_eq(r->live, 1); /* still in use: kept until put */
    loom_regcache_put(rc, ref);
    ck_assert_int_eq(r->live, 0);
    ck_assert_uint_eq(f.ndereg, 1);
    /* the explicit call does the same */
    p = map_pages(2);
    unsigned long id = touch(rc, p, PS);
    loom_regcache_invalidate(p + PS - 1, 1);
    ck_assert_uint_ne(touch(rc, p, PS), id);
    check_stats(rc, 0, 3, 2, 0);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 2 * PS);
}
END_TEST

START_TEST(test_two_caches)
{
    struct fake f1 = {0}, f2 = {0};
    struct loom_regcache *c1 = new_cache(&f1, 16, 1 << 30);
    struct loom_regcache *c2 = new_cache(&f2, 16, 1 << 30);
    uint8_t *p = map_pages(4);
    touch(c1, p, 4 * PS);
    unsigned long b = touch(c2, p + PS, PS);
    loom_regcache_free(c1); /* c2 still watches page 1 */
    ck_assert_uint_eq(f1.nreg, f1.ndereg);
    ck_assert_int_eq(munmap(p, 4 * PS), 0);
    check_stats(c2, 0, 1, 1, 0);
    touch(c2, map_pages(1), 1);
    ck_assert_int_eq(f2.regs[b - 1].live, 0);
    loom_regcache_free(c2);
    ck_assert_uint_eq(f2.nreg, f2.ndereg);
}
END_TEST

/* A dereg callback that unmaps watched memory must not deadlock: callbacks
 * run outside the lock, and the monitor thread can take it. */
START_TEST(test_dereg_unmaps_watched)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 1, 1 << 30);
    uint8_t *p = map_pages(4);
    touch(rc, p, 1);                 /* A: page 0 */
    void *ref;
    get(rc, p + 2 * PS, 1, &ref);    /* B: page 2, held; evicts A */
    loom_regcache_put(rc, ref);
    f.unmap_on_dereg = p + 2 * PS;   /* releasing A's successor unmaps B's page */
    touch(rc, p, 1);                 /* evicts B: dereg unmaps page 2 */
    ck_assert_ptr_null(f.unmap_on_dereg);
    struct loom_regcache_stats st;
    loom_regcache_stats(rc, &st);
    ck_assert_uint_eq(st.evicted, 2);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(p, 4 * PS);
}
END_TEST

/* Another thread unmaps and maps while this one keeps asking. */
struct churn {
    uint8_t *p;
    atomic_int stop;
    volatile unsigned long cycles;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    while (!atomic_load(&c->stop)) {
        munmap(c->p, 2 * PS);
        void *q = mmap(c->p, 2 * PS, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (q != c->p)
            abort();
        __atomic_add_fetch(&c->cycles, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

START_TEST(test_concurrent_unmap)
{
    struct fake f = {0};
    struct loom_regcache *rc = new_cache(&f, 4, 1 << 30);
    struct churn c = {.p = map_pages(2)};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, churn_main, &c), 0);
    for (int i = 0; i < 2000; i++) {
        void *ref;
        get(rc, c.p, PS, &ref); /* checks the handle is live and covers */
        loom_regcache_put(rc, ref);
    }
    atomic_store(&c.stop, 1);
    pthread_join(t, NULL);
    ck_assert_uint_gt(c.cycles, 0);
    struct loom_regcache_stats st;
    loom_regcache_stats(rc, &st);
    ck_assert_uint_gt(st.invalidated, 0);
    loom_regcache_free(rc);
    ck_assert_uint_eq(f.nreg, f.ndereg);
    munmap(c.p, 2 * PS);
}
END_TEST

static Suite *regcache_suite(int cached)
{
    Suite *s = suite_create("regcache");
    TCase *tc = tcase_create("per_use");
    tcase_add_test(tc, test_per_use);
    suite_add_tcase(s, tc);
    if (cached) {
        tc = tcase_create("cached");
        tcase_add_test(tc, test_hits_and_rounding);
        tcase_add_test(tc, test_lru_entries);
        tcase_add_test(tc, test_lru_bytes);
        tcase_add_test(tc, test_in_use_never_evicted);
        tcase_add_test(tc, test_overlapping_ranges);
        tcase_add_test(tc, test_evict_keeps_shared_pages_watched);
        tcase_add_test(tc, test_unmap_map_fixed);
        tcase_add_test(tc, test_madvise_and_mremap);
        tcase_add_test(tc, test_free_malloc_same_address);
        tcase_add_test(tc, test_invalidated_in_use);
        tcase_add_test(tc, test_two_caches);
        tcase_add_test(tc, test_dereg_unmaps_watched);
        tcase_add_test(tc, test_concurrent_unmap);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    PS = (size_t)sysconf(_SC_PAGESIZE);
    /* Can this process watch memory? Ask a throwaway cache. */
    struct fake f = {0};
    struct loom_regcache *probe = NULL;
    char why[160] = "";
    int cached = 0;
    if (loom_regcache_new(&fake_ops, &f, 1, 1, &probe) == LOOM_SUCCESS) {
        cached = loom_regcache_cached(probe, why, sizeof why);
        loom_regcache_free(probe);
    }
    SRunner *sr = srunner_create(regcache_suite(cached));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed)
        return 1;
    if (!cached) {
        printf("SKIP: the caching tests: no memory monitor here (%s); the per-use "
               "tests passed\n", why);
        return 77;
    }
    return 0;
}
