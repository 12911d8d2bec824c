/* regcache.c - the registration cache and its process-wide memory monitor.
 *
 * The monitor is one userfaultfd for the whole process (a range can belong
 * to one userfaultfd only, so every cache shares it) and one thread that
 * reads its events. Cached ranges are registered with it in write-protect
 * mode without ever protecting a page: no fault is ever sent to it, only
 * the UNMAP, REMOVE (madvise DONTNEED/REMOVE) and REMAP events asked for.
 *
 * Why a freed-and-reallocated buffer is never served a stale entry: the
 * kernel holds a munmap (madvise, mremap) of a watched range until the
 * event is read, and the thread reads events only while it holds the lock
 * and drops the overlapping entries before releasing it. So once the
 * user's munmap has returned, any later get() takes the lock after the
 * entries are gone.
 *
 * Deadlock freedom: a thread holding the lock never waits for such a
 * munmap. It never calls free() (glibc may trim the heap, which unmaps or
 * madvises pages that may be watched), the registration callbacks, or
 * anything else that could: those run after the lock is released, in the
 * caller's thread (entries the monitor drops wait on the cache's dead
 * list for the owner's next call). The monitor thread itself frees nothing
 * and registers nothing. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__) && defined(__NR_userfaultfd)
#include <linux/userfaultfd.h>
#define RC_HAVE_UFFD 1
#endif

#include "log.h"
#include "transport/common/regcache.h"

struct rc_entry {
    struct rc_entry *prev, *next; /* the cache's LRU list, most recent first */
    struct rc_entry *dead_next;   /* the cache's dead list                   */
    uintptr_t start, end;         /* page-aligned                            */
    void *handle;
    int refs;
    int cached;  /* on the LRU list: lookups find it        */
    int watched; /* its range is registered with the monitor */
};

struct loom_regcache {
    struct loom_regcache_ops ops;
    void *ctx;
    size_t max_entries, max_bytes;
    int monitored; /* caching, with the monitor of gen        */
    unsigned gen;
    char why[160];       /* why not monitored                       */
    struct rc_entry lru; /* sentinel: lru.next is the most recent   */
    size_t nentries, bytes;
    struct rc_entry *dead;      /* dropped by the monitor, unreferenced    */
    struct loom_regcache *next; /* the monitor's list of caches            */
    struct loom_regcache_stats st;
};

/* The process-wide monitor. `life` serialises starting and stopping it
 * (held across thread creation and join); `lock` guards everything else,
 * including every cache's lists and counters. Order: life, then lock. */
static struct {
    pthread_mutex_t life;
    pthread_mutex_t lock;
    int users; /* monitored caches attached               */
    int uffd;
    int stop_fd; /* eventfd: the thread leaves             */
    pthread_t thread;
    int thread_up;
    unsigned gen; /* bumped in a forked child               */
    int atfork_set;
    int test_disabled;
    struct loom_regcache *caches;
    char why[160]; /* why the last start failed              */
} mon = {
    .life = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .uffd = -1,
    .stop_fd = -1,
};

static size_t page_size(void)
{
    static size_t ps;
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
    }
    return ps;
}

/* ---- the range bookkeeping (under mon.lock) ------------------------------ */

static void lru_unlink(struct loom_regcache *rc, struct rc_entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = NULL;
    e->cached = 0;
    rc->nentries--;
    rc->bytes -= e->end - e->start;
}

static void lru_push_front(struct loom_regcache *rc, struct rc_entry *e)
{
    e->prev = &rc->lru;
    e->next = rc->lru.next;
    rc->lru.next->prev = e;
    rc->lru.next = e;
}

static int covered_by_watched(uintptr_t at, uintptr_t *upto)
{
    int found = 0;
    for (struct loom_regcache *c = mon.caches; c; c = c->next)
        for (struct rc_entry *e = c->lru.next; e != &c->lru; e = e->next)
            if (e->watched && e->start <= at && at < e->end && (!found || e->end > *upto)) {
                *upto = e->end;
                found = 1;
            }
    return found;
}

/* The first start of a watched entry in (at, end), else end. */
static uintptr_t next_watched(uintptr_t at, uintptr_t end)
{
    uintptr_t best = end;
    for (struct loom_regcache *c = mon.caches; c; c = c->next)
        for (struct rc_entry *e = c->lru.next; e != &c->lru; e = e->next)
            if (e->watched && e->start > at && e->start < best)
                best = e->start;
    return best;
}

#ifdef RC_HAVE_UFFD
static int uffd_watch(uintptr_t start, uintptr_t end)
{
    struct uffdio_register r = {
        .range = {.start = start, .len = end - start},
        .mode = UFFDIO_REGISTER_MODE_WP,
    };
    return ioctl(mon.uffd, UFFDIO_REGISTER, &r) == 0 ? 0 : -1;
}

static void uffd_unwatch(uintptr_t start, uintptr_t end)
{
    struct uffdio_range r = {.start = start, .len = end - start};
    (void)ioctl(mon.uffd, UFFDIO_UNREGISTER, &r); /* gone already: fine */
}
#else
static int uffd_watch(uintptr_t start, uintptr_t end)
{
    (void)start;
    (void)end;
    return -1;
}
static void uffd_unwatch(uintptr_t start, uintptr_t end)
{
    (void)start;
    (void)end;
}
#endif

/* Stop watching e's range, except the parts other watched entries cover. */
static void unwatch_entry(struct rc_entry *e)
{
    if (!e->watched)
        return;
    e->watched = 0;
    if (mon.uffd < 0)
        return;
    uintptr_t at = e->start;
    while (at < e->end) {
        uintptr_t upto = at;
        if (covered_by_watched(at, &upto)) {
            at = upto;
            continue;
        }
        uintptr_t next = next_watched(at, e->end);
        uffd_unwatch(at, next);
        at = next;
    }
}

/* Drop every cached entry overlapping [start, end): unreferenced ones go
 * to their cache's dead list for the owner to release. */
static void invalidate_locked(uintptr_t start, uintptr_t end)
{
    for (struct loom_regcache *c = mon.caches; c; c = c->next) {
        struct rc_entry *e = c->lru.next;
        while (e != &c->lru) {
            struct rc_entry *next = e->next;
            if (e->start < end && start < e->end) {
                lru_unlink(c, e);
                e->watched = 0; /* the kernel's registration may outlive it */
                c->st.invalidated++;
                if (e->refs == 0) {
                    e->dead_next = c->dead;
                    c->dead = e;
                }
            }
            e = next;
        }
    }
}

/* ---- the monitor thread ------------------------------------------------- */

#ifdef RC_HAVE_UFFD
/* Read and act on every pending event. Under mon.lock. */
static void drain_locked(void)
{
    struct uffd_msg msgs[16];
    for (;;) {
        ssize_t n = read(mon.uffd, msgs, sizeof msgs);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        for (size_t i = 0; i < (size_t)n / sizeof msgs[0]; i++) {
            const struct uffd_msg *m = &msgs[i];
            switch (m->event) {
            case UFFD_EVENT_UNMAP:
            case UFFD_EVENT_REMOVE:
                invalidate_locked(m->arg.remove.start, m->arg.remove.end);
                break;
            case UFFD_EVENT_REMAP:
                invalidate_locked(m->arg.remap.from, m->arg.remap.from + m->arg.remap.len);
                invalidate_locked(m->arg.remap.to, m->arg.remap.to + m->arg.remap.len);
                break;
            case UFFD_EVENT_PAGEFAULT: {
                /* Never expected (no page is protected); if one comes, lift
                 * the protection so the faulting thread goes on. */
                uintptr_t pg = m->arg.pagefault.address & ~(uintptr_t)(page_size() - 1);
                struct uffdio_writeprotect wp = {.range = {.start = pg, .len = page_size()},
                                                 .mode = 0};
                if (ioctl(mon.uffd, UFFDIO_WRITEPROTECT, &wp) != 0) {
                    struct uffdio_range r = {.start = pg, .len = page_size()};
                    (void)ioctl(mon.uffd, UFFDIO_WAKE, &r);
                }
                break;
            }
            default: break;
            }
        }
    }
}

static void *mon_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    struct pollfd p[2] = {{.fd = mon.uffd, .events = POLLIN},
                          {.fd = mon.stop_fd, .events = POLLIN}};
    for (;;) {
        int rc = poll(p, 2, -1);
        if (rc < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (rc > 0 && p[0].revents) {
            pthread_mutex_lock(&mon.lock);
            drain_locked();
            pthread_mutex_unlock(&mon.lock);
        }
    }
    return NULL;
}

static int uffd_open(uint64_t features)
{
    int fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL) /* before Linux 5.11 */
        fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
#ifdef USERFAULTFD_IOC_NEW
    if (fd < 0 && (errno == EPERM || errno == ENOSYS)) {
        int saved = errno;
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev >= 0) {
            fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
            close(dev);
        }
        if (fd < 0)
            errno = saved;
    }
#endif
    if (fd < 0)
        return -1;
    struct uffdio_api api = {.api = UFFD_API, .features = features};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}
#endif

static void atfork_prepare(void)
{
    pthread_mutex_lock(&mon.life);
    pthread_mutex_lock(&mon.lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_unlock(&mon.life);
}

/* The child has no monitor thread, and its mappings left the parent's
 * userfaultfd: caches made before the fork stop caching (their generation
 * is old); new caches start a monitor of their own. */
static void atfork_child(void)
{
    if (mon.uffd >= 0)
        close(mon.uffd);
    if (mon.stop_fd >= 0)
        close(mon.stop_fd);
    mon.uffd = mon.stop_fd = -1;
    mon.thread_up = 0;
    mon.users = 0;
    mon.caches = NULL;
    mon.gen++;
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_unlock(&mon.life);
}

/* Start the monitor if it is not running. Under mon.life. 0 or -1 with
 * mon.why set. */
static int mon_start(void)
{
    if (mon.thread_up)
        return 0;
#ifdef RC_HAVE_UFFD
    const uint64_t need = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
                          UFFD_FEATURE_EVENT_REMAP;
    uint64_t extra = 0;
#ifdef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
    extra |= UFFD_FEATURE_WP_HUGETLBFS_SHMEM; /* watch shared memory too */
#endif
    int fd = uffd_open(need | extra);
    if (fd < 0 && errno == EINVAL && extra)
        fd = uffd_open(need);
    if (fd < 0) {
        snprintf(mon.why, sizeof mon.why, "userfaultfd: %s", strerror(errno));
        return -1;
    }
    int sfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sfd < 0) {
        snprintf(mon.why, sizeof mon.why, "eventfd: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!mon.atfork_set) {
        if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0) {
            snprintf(mon.why, sizeof mon.why, "pthread_atfork failed");
            close(fd);
            close(sfd);
            return -1;
        }
        mon.atfork_set = 1;
    }
    mon.uffd = fd;
    mon.stop_fd = sfd;
    int err = pthread_create(&mon.thread, NULL, mon_main, NULL);
    if (err) {
        snprintf(mon.why, sizeof mon.why, "monitor thread: %s", strerror(err));
        close(fd);
        close(sfd);
        mon.uffd = mon.stop_fd = -1;
        return -1;
    }
    mon.thread_up = 1;
    LOOM_INFO(LOOM_SUB_NET, "regcache: memory monitor up (userfaultfd)");
    return 0;
#else
    snprintf(mon.why, sizeof mon.why, "userfaultfd is not available on this system");
    return -1;
#endif
}

/* Stop the monitor. Under mon.life, not mon.lock. */
static void mon_stop(void)
{
    if (!mon.thread_up)
        return;
    uint64_t one = 1;
    if (write(mon.stop_fd, &one, sizeof one) != sizeof one)
        LOOM_WARN(LOOM_SUB_NET, "regcache: cannot wake the monitor: %s", strerror(errno));
    pthread_join(mon.thread, NULL);
    pthread_mutex_lock(&mon.lock);
    close(mon.uffd); /* the kernel drops every range still registered */
    close(mon.stop_fd);
    mon.uffd = mon.stop_fd = -1;
    mon.thread_up = 0;
    pthread_mutex_unlock(&mon.lock);
}

/* ---- the API -------------------------------------------------------------- */

loom_result_t loom_regcache_new(const struct loom_regcache_ops *ops, void *ctx, size_t max_entries,
                                size_t max_bytes, struct loom_regcache **out)
{
    if (!out)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    if (!ops || !ops->reg || !ops->dereg)
        return LOOM_ERROR_INVALID_ARGUMENT;
    struct loom_regcache *rc = calloc(1, sizeof *rc);
    if (!rc)
        return LOOM_ERROR_NO_MEMORY;
    rc->ops = *ops;
    rc->ctx = ctx;
    rc->max_entries = max_entries;
    rc->max_bytes = max_bytes;
    rc->lru.next = rc->lru.prev = &rc->lru;

    pthread_mutex_lock(&mon.life);
    int ok = 0;
    if (max_entries == 0 || max_bytes == 0)
        snprintf(rc->why, sizeof rc->why, "caching is off (bounds of 0)");
    else if (mon.test_disabled)
        snprintf(rc->why, sizeof rc->why, "the memory monitor is disabled for tests");
    else if (mon_start() != 0)
        snprintf(rc->why, sizeof rc->why, "%s", mon.why);
    else
        ok = 1;
    pthread_mutex_lock(&mon.lock);
    rc->gen = mon.gen;
    if (ok) {
        rc->monitored = 1;
        mon.users++;
        rc->next = mon.caches;
        mon.caches = rc;
    }
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_unlock(&mon.life);
    if (!ok)
        LOOM_INFO(LOOM_SUB_NET, "regcache: registering per use, not caching: %s", rc->why);
    *out = rc;
    return LOOM_SUCCESS;
}

/* Release a list of entries (outside the lock). */
static void release_list(struct loom_regcache *rc, struct rc_entry *e)
{
    while (e) {
        struct rc_entry *next = e->dead_next;
        rc->ops.dereg(rc->ctx, e->handle);
        free(e);
        e = next;
    }
}

static int rc_caching(const struct loom_regcache *rc)
{
    return rc->monitored && rc->gen == mon.gen;
}

loom_result_t loom_regcache_get(struct loom_regcache *rc, void *buf, size_t len, void **handle,
                                void **ref)
{
    if (!rc || !buf || !handle || !ref)
        return LOOM_ERROR_INVALID_ARGUMENT;
    const uintptr_t a = (uintptr_t)buf;
    const uintptr_t b = a + (len ? len : 1);
    const uintptr_t pm = (uintptr_t)page_size() - 1;
    if (b < a || b + pm < b)
        return LOOM_ERROR_INVALID_ARGUMENT;
    const uintptr_t start = a & ~pm, end = (b + pm) & ~pm;

    pthread_mutex_lock(&mon.lock);
    struct rc_entry *dead = rc->dead;
    rc->dead = NULL;
    if (rc_caching(rc)) {
        for (struct rc_entry *e = rc->lru.next; e != &rc->lru; e = e->next) {
            if (e->start <= a && b <= e->end) {
                e->refs++;
                e->prev->next = e->next; /* to the front */
                e->next->prev = e->prev;
                lru_push_front(rc, e);
                rc->st.hits++;
                *handle = e->handle;
                *ref = e;
                pthread_mutex_unlock(&mon.lock);
                release_list(rc, dead);
                return LOOM_SUCCESS;
            }
        }
    }
    rc->st.misses++;
    pthread_mutex_unlock(&mon.lock);
    release_list(rc, dead);

    struct rc_entry *e = calloc(1, sizeof *e);
    if (!e)
        return LOOM_ERROR_NO_MEMORY;
    e->start = start;
    e->end = end;
    e->refs = 1;
    loom_result_t res = rc->ops.reg(rc->ctx, (void *)start, end - start, &e->handle);
    if (res < 0) {
        free(e);
        return res;
    }

    struct rc_entry *evicted = NULL;
    pthread_mutex_lock(&mon.lock);
    const size_t size = end - start;
    if (rc_caching(rc) && size <= rc->max_bytes) {
        /* Make room: least recently used first, never an entry in use. */
        struct rc_entry *v = rc->lru.prev;
        while ((rc->nentries >= rc->max_entries || rc->bytes + size > rc->max_bytes) &&
               v != &rc->lru) {
            struct rc_entry *prev = v->prev;
            if (v->refs == 0) {
                lru_unlink(rc, v);
                unwatch_entry(v);
                rc->st.evicted++;
                v->dead_next = evicted;
                evicted = v;
            }
            v = prev;
        }
        if (rc->nentries < rc->max_entries && rc->bytes + size <= rc->max_bytes &&
            uffd_watch(start, end) == 0) {
            e->watched = 1;
            e->cached = 1;
            lru_push_front(rc, e);
            rc->nentries++;
            rc->bytes += size;
        }
    }
    pthread_mutex_unlock(&mon.lock);
    release_list(rc, evicted);
    *handle = e->handle;
    *ref = e;
    return LOOM_SUCCESS;
}

void loom_regcache_put(struct loom_regcache *rc, void *ref)
{
    if (!rc || !ref)
        return;
    struct rc_entry *e = ref, *release = NULL;
    pthread_mutex_lock(&mon.lock);
    struct rc_entry *dead = rc->dead;
    rc->dead = NULL;
    if (e->refs > 0 && --e->refs == 0 && !e->cached) {
        e->dead_next = NULL;
        release = e; /* per use, or dropped by the monitor while in use */
    }
    pthread_mutex_unlock(&mon.lock);
    release_list(rc, release);
    release_list(rc, dead);
}

void loom_regcache_free(struct loom_regcache *rc)
{
    if (!rc)
        return;
    pthread_mutex_lock(&mon.life);
    pthread_mutex_lock(&mon.lock);
    struct rc_entry *all = rc->dead;
    rc->dead = NULL;
    /* Unwatch after every entry is off the list, so that only other
     * caches' entries keep ranges watched. */
    struct rc_entry *mine = NULL;
    while (rc->lru.next != &rc->lru) {
        struct rc_entry *e = rc->lru.next;
        lru_unlink(rc, e);
        e->dead_next = mine;
        mine = e;
    }
    int attached = rc_caching(rc);
    if (attached) {
        for (struct loom_regcache **pp = &mon.caches; *pp; pp = &(*pp)->next)
            if (*pp == rc) {
                *pp = rc->next;
                break;
            }
    }
    struct rc_entry *e = mine;
    while (e) {
        struct rc_entry *next = e->dead_next;
        if (attached)
            unwatch_entry(e);
        e->dead_next = all;
        all = e;
        e = next;
    }
    int last = attached && --mon.users == 0;
    pthread_mutex_unlock(&mon.lock);
    if (last)
        mon_stop();
    pthread_mutex_unlock(&mon.life);
    /* Entries still referenced belong to a caller that forgot to put them:
     * released here all the same, as the cache's owner goes away. */
    release_list(rc, all);
    free(rc);
}

void loom_regcache_stats(const struct loom_regcache *rc, struct loom_regcache_stats *st)
{
    if (!rc || !st)
        return;
    pthread_mutex_lock(&mon.lock);
    *st = rc->st;
    pthread_mutex_unlock(&mon.lock);
}

int loom_regcache_cached(const struct loom_regcache *rc, char *why, size_t len)
{
    if (!rc)
        return 0;
    pthread_mutex_lock(&mon.lock);
    int on = rc_caching(rc);
    if (why && len)
        snprintf(why, len, "%s", on ? "" : rc->why[0] ? rc->why : "forked child");
    pthread_mutex_unlock(&mon.lock);
    return on;
}

void loom_regcache_invalidate(void *buf, size_t len)
{
    const uintptr_t a = (uintptr_t)buf;
    const uintptr_t b = a + len < a ? UINTPTR_MAX : a + len;
    pthread_mutex_lock(&mon.lock);
    invalidate_locked(a, b);
    pthread_mutex_unlock(&mon.lock);
}

void loom_regcache_test_monitor(int enable)
{
    pthread_mutex_lock(&mon.life);
    mon.test_disabled = !enable;
    pthread_mutex_unlock(&mon.life);
}
