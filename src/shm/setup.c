/* setup.c - finding the ranks of this server (and, with several servers,
 * every server's), creating and sharing the segment, probing cross-memory
 * attach.
 *
 * The segment is a memfd of the local leader (lowest rank): the others
 * open it through /proc/<pid>/fd/<n>, so it never has a name and vanishes
 * with the last process that maps it, however that process ends. Where
 * /proc does not allow that, a POSIX segment /dev/shm/loom-<id>-<server> is
 * used instead; the leader unlinks it as soon as every local rank has
 * opened it (one allreduce over the network later), which is the only
 * time a crash can leave it behind. */
#include "build_config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap/oob.h"
#include "config.h"
#include "shm.h"
#include "shm_priv.h"
#include "util.h"

#define PROBE_VALUE 0x70726f6265d00d11ull

int loom_shm_test_no_cma;
int loom_shm_test_exit;

/* What each rank tells the others at setup. */
struct shm_hello {
    uint64_t pid;
    uint64_t fd;        /* leader: memfd number; others: unused            */
    uint64_t probe;     /* address of a word holding PROBE_VALUE           */
    uint64_t crowded;   /* leader: its host has more ranks than CPUs       */
};

static void shm_free(struct loom_shm *s)
{
    if (!s)
        return;
    if (s->base)
        munmap(s->base, s->size);
    free(s->ranks);
    free(s->grank);
    free(s->pids);
    free(s->tmp);
    free(s->out);
    free(s->ll_ok);
    free(s->ll_chk);
    free(s);
}

static size_t seg_size(int n)
{
    size_t ctrl = (sizeof(struct loom_shm_hdr) + LOOM_SHM_LINE - 1) / LOOM_SHM_LINE *
                  LOOM_SHM_LINE;
    return ctrl + (size_t)n * sizeof(struct loom_shm_ctrl) + (size_t)n * 2 * LOOM_SHM_SLOT +
           (size_t)n * LOOM_SHM_LL_SETS * LOOM_SHM_LL_LINES * sizeof(struct loom_shm_ll_line);
}

static int seg_map(struct loom_shm *s, int fd, int init)
{
    s->size = seg_size(s->n);
    if (init && ftruncate(fd, (off_t)s->size) < 0) {
        LOOM_WARN(LOOM_SUB_INIT, "shm: ftruncate to %zu bytes: %s", s->size,
                  strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size != s->size) {
        LOOM_WARN(LOOM_SUB_INIT, "shm: segment is not %zu bytes", s->size);
        return -1;
    }
    void *p = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        LOOM_WARN(LOOM_SUB_INIT, "shm: mmap of %zu bytes: %s", s->size, strerror(errno));
        return -1;
    }
    s->base = p;
    struct loom_shm_hdr *h = p;
    size_t hdr = (sizeof *h + LOOM_SHM_LINE - 1) / LOOM_SHM_LINE * LOOM_SHM_LINE;
    s->ctrl = (struct loom_shm_ctrl *)((char *)p + hdr);
    s->slots = (char *)(s->ctrl + s->n);
    s->slot_bytes = LOOM_SHM_SLOT;
    s->ll = (struct loom_shm_ll_line *)(s->slots + (size_t)s->n * 2 * LOOM_SHM_SLOT);
    if (init) {
        memset(p, 0, hdr + (size_t)s->n * sizeof(struct loom_shm_ctrl));
        h->size = s->size;
        h->nlocal = (uint32_t)s->n;
        h->slot_bytes = LOOM_SHM_SLOT;
        for (int k = 0; k < s->n; k++)
            s->ctrl[k].blame = -1;
        __atomic_store_n(&h->magic, LOOM_SHM_MAGIC, __ATOMIC_RELEASE);
        return 0;
    }
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != LOOM_SHM_MAGIC ||
        h->size != s->size || h->nlocal != (uint32_t)s->n) {
        LOOM_WARN(LOOM_SUB_INIT, "shm: the segment's header does not match");
        return -1;
    }
    return 0;
}

/* Can we read each local peer's memory, and write it? (yama's
 * ptrace_scope, containers and seccomp may say no; then the two-copy path
 * is used, or reads only.) all[k] is local rank k's hello. Returns 0 (two
 * copies), 1 (process_vm_readv) or 2 (process_vm_writev as well). The
 * write puts the value the word already holds. */
static int probe_cma(struct loom_shm *s, const struct shm_hello *all)
{
    int level = 2;
    for (int k = 0; k < s->n; k++) {
        if (k == s->me)
            continue;
        uint64_t got = 0;
        struct iovec l = {.iov_base = &got, .iov_len = sizeof got};
        struct iovec r = {.iov_base = (void *)(uintptr_t)all[k].probe,
                          .iov_len = sizeof got};
        ssize_t n = process_vm_readv(s->pids[k], &l, 1, &r, 1, 0);
        if (n != (ssize_t)sizeof got || got != PROBE_VALUE) {
            LOOM_INFO(LOOM_SUB_INIT, "shm: process_vm_readv from pid %d: %s; using "
                      "two copies", (int)s->pids[k], n < 0 ? strerror(errno) : "short read");
            return 0;
        }
        if (level == 2 && process_vm_writev(s->pids[k], &l, 1, &r, 1, 0) != (ssize_t)sizeof got) {
            LOOM_INFO(LOOM_SUB_INIT, "shm: process_vm_writev to pid %d: %s; peers read "
                      "only", (int)s->pids[k], strerror(errno));
            level = 1;
        }
    }
    return level;
}

/* Gather len bytes from every local rank at the leader and hand the whole
 * set back to each (through the out-of-band service: nothing touches the
 * network transport, and ranks of other servers are not involved). The
 * answer's first byte is 1, then the set; or 0, then the leader's error:
 * a rank that never reported leaves the others waiting on the leader,
 * which is alive, unless it tells them. */
static loom_result_t local_allgather(struct loom_comm *comm, struct loom_shm *s,
                                     uint32_t tag, const void *mine, void *all, size_t len)
{
    double timeout = comm->bootstrap_timeout;
    size_t total = (size_t)s->n * len;
    memcpy((char *)all + (size_t)s->me * len, mine, len);
    if (s->me != 0) {
        LOOM_CHECK(loom_oob_send(comm->oob, s->ranks[0], tag, mine, len));
        uint8_t *buf = NULL;
        size_t got = 0;
        loom_result_t res = loom_oob_recv(comm->oob, tag, s->ranks[0], timeout, NULL, (void **)&buf,
                                          &got);
        if (res == LOOM_SUCCESS && got >= 1 && buf[0] == 0) {
            loom_comm_set_error(comm, LOOM_ERROR_REMOTE, "the local leader (rank %d) gave up: %.*s",
                                s->ranks[0], (int)(got - 1), (const char *)buf + 1);
            free(buf);
            return LOOM_ERROR_REMOTE;
        }
        if (res == LOOM_SUCCESS && (got != 1 + total || buf[0] != 1))
            res = LOOM_ERROR_PROTOCOL;
        if (res == LOOM_SUCCESS)
            memcpy(all, buf + 1, total);
        free(buf);
        if (res < 0)
            loom_comm_set_error(
                comm, res, "the local leader (rank %d) did not answer: %s", s->ranks[0],
                res == LOOM_ERROR_PROTOCOL ? "a malformed answer" : loom_oob_error(comm->oob));
        return res;
    }
    loom_result_t res = LOOM_SUCCESS;
    for (int k = 1; k < s->n && res == LOOM_SUCCESS; k++) {
        void *buf = NULL;
        size_t got = 0;
        res = loom_oob_recv(comm->oob, tag, s->ranks[k], timeout, NULL, &buf, &got);
        if (res == LOOM_SUCCESS && got != len)
            res = LOOM_ERROR_PROTOCOL;
        if (res == LOOM_SUCCESS)
            memcpy((char *)all + (size_t)k * len, buf, len);
        free(buf);
        if (res < 0)
            loom_comm_set_error(
                comm, res, "%s did not report: %s", loom_comm_describe(comm, s->ranks[k]),
                res == LOOM_ERROR_PROTOCOL ? "a malformed report" : loom_oob_error(comm->oob));
    }
    /* set-up runs before the progress thread: errmsg is this thread's */
    size_t n = res == LOOM_SUCCESS ? 1 + total : 1 + strlen(comm->errmsg);
    uint8_t *out = malloc(n);
    if (!out)
        return LOOM_ERROR_NO_MEMORY;
    out[0] = res == LOOM_SUCCESS;
    memcpy(out + 1, res == LOOM_SUCCESS ? all : (const void *)comm->errmsg, n - 1);
    /* a send that fails names a rank gone: its peers carry on, and whoever
     * waits on it next finds it gone */
    for (int k = 1; k < s->n; k++)
        loom_oob_send(comm->oob, s->ranks[k], tag, out, n);
    free(out);
    return res;
}

/* One attempt to share a segment: by memfd (method 0) or by name (1).
 * Sets *ok_out to 1 when every local rank succeeded (to 0 when some did
 * not; then nothing is mapped), or returns an error. */
static loom_result_t attempt(struct loom_comm *comm, struct loom_shm *s, int method,
                             int want, loom_shm_agree_fn agree, int *ok_out)
{
    static volatile uint64_t probe_word = PROBE_VALUE;
    int leader = s->me == 0, fd = -1, ok = want;
    char name[96];
    snprintf(name, sizeof name, "/loom-%016llx-%d-%d", (unsigned long long)comm->comm_id,
             s->group, (int)getpid());
    struct shm_hello mine = {.pid = (uint64_t)getpid(),
                             .fd = (uint64_t)-1,
                             .probe = (uint64_t)(uintptr_t)&probe_word,
                             .crowded = (uint64_t)comm->oversubscribed};
    if (leader && ok) {
        if (method == 0)
            fd = (int)syscall(SYS_memfd_create, "loom-shm", MFD_CLOEXEC);
        else
            fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || seg_map(s, fd, 1) < 0) {
            LOOM_INFO(LOOM_SUB_INIT, "shm: %s: %s", method == 0 ? "memfd_create" : name,
                      strerror(errno));
            ok = 0;
        }
        mine.fd = (uint64_t)fd;
    }
    struct shm_hello *all = calloc((size_t)s->n, sizeof *all);
    if (!all) {
        if (fd >= 0)
            close(fd);
        if (method == 1 && fd >= 0)
            shm_unlink(name);
        return LOOM_ERROR_NO_MEMORY;
    }
    if (loom_shm_test_exit)
        _exit(loom_shm_test_exit);
    loom_result_t res = local_allgather(comm, s, LOOM_OOB_TAG_SHM_HELLO + (uint32_t)method,
                                        &mine, all, sizeof mine);
    if (res < 0)
        goto out;
    for (int k = 0; k < s->n; k++)
        s->pids[k] = (pid_t)all[k].pid;
    const struct shm_hello *lead = &all[0];
    /* the leader's view, so that every rank picks the same paths */
    s->crowded = lead->crowded != 0;
    if (!leader && ok) {
        if (lead->fd == (uint64_t)-1) {
            ok = 0;
        } else if (method == 0) {
            char path[64];
            snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)lead->pid, (int)lead->fd);
            fd = open(path, O_RDWR | O_CLOEXEC);
        } else {
            snprintf(name, sizeof name, "/loom-%016llx-%d-%d",
                     (unsigned long long)comm->comm_id, s->group, (int)lead->pid);
            fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
        }
        if (ok && (fd < 0 || seg_map(s, fd, 0) < 0)) {
            LOOM_INFO(LOOM_SUB_INIT, "shm: cannot open the leader's segment (%s): %s",
                      method == 0 ? "memfd" : name, strerror(errno));
            ok = 0;
        }
    }
    /* every local peer must be a process we can see (same pid namespace) */
    for (int k = 0; k < s->n && ok; k++)
        if (k != s->me && loom_shm_pid_gone(s->pids[k]))
            ok = 0;
    int cma = ok && loom_shm_test_no_cma != 1 ? probe_cma(s, all) : 0;
    if (loom_shm_test_no_cma == 2 && cma > 1)
        cma = 1;
    int32_t flags[2] = {ok, cma};
    /* s->n counts this rank, so is at least 1; said here for GCC 14, whose
     * -Walloc-size-larger-than cannot see it */
    size_t nlocal = s->n > 0 ? (size_t)s->n : 1;
    int32_t *each = calloc(nlocal, sizeof flags);
    if (!each) {
        res = LOOM_ERROR_NO_MEMORY;
        goto out;
    }
    res = local_allgather(comm, s, LOOM_OOB_TAG_SHM_AGREE + (uint32_t)method, flags, each,
                          sizeof flags);
    for (int k = 0; res == LOOM_SUCCESS && k < s->n; k++) {
        flags[0] = flags[0] < each[2 * k] ? flags[0] : each[2 * k];
        flags[1] = flags[1] < each[2 * k + 1] ? flags[1] : each[2 * k + 1];
    }
    free(each);
    /* several servers: all of them must agree (hierarchical algorithms
     * span them) */
    if (res == LOOM_SUCCESS && s->ngroups > 1)
        res = agree(comm, flags);
    if (res == LOOM_SUCCESS) {
        *ok_out = flags[0];
        s->cma = flags[1] > 0;
        s->push = flags[1] > 1;
    }
out:
    if (method == 1 && leader && fd >= 0)
        shm_unlink(name);
    if (fd >= 0)
        close(fd);
    if ((res < 0 || !*ok_out) && s->base) {
        munmap(s->base, s->size);
        s->base = NULL;
    }
    free(all);
    return res;
}

/* Group ranks by server; check that the servers can run the hierarchical
 * allreduce (every one has the same number of ranks, more than one). */
static int find_group(struct loom_comm *comm, struct loom_shm *s, int *hier)
{
    const int *key = comm->server_of ? comm->server_of : comm->host_of;
    int n = comm->nranks;
    int *first = calloc((size_t)n, sizeof *first); /* group -> lowest rank */
    int *size = calloc((size_t)n, sizeof *size);
    if (!first || !size) {
        free(first);
        free(size);
        return -1;
    }
    s->ngroups = 0;
    s->n = 0;
    for (int r = 0; r < n; r++) {
        int g = -1;
        for (int q = 0; q < s->ngroups && g < 0; q++)
            if (key[first[q]] == key[r])
                g = q;
        if (g < 0) {
            g = s->ngroups++;
            first[g] = r;
        }
        size[g]++;
        if (key[r] == key[comm->rank]) {
            if (r == comm->rank) {
                s->me = s->n;
                s->group = g;
            }
            s->ranks[s->n++] = r;
        }
    }
    /* a server's ranks must share this kernel (boot id and host name) */
    int same_host = 1;
    for (int r = 0; r < n; r++)
        for (int q = 0; q < r; q++)
            if (key[q] == key[r] && comm->host_of[q] != comm->host_of[r])
                same_host = 0;
    *hier = s->ngroups > 1 && same_host;
    for (int g = 0; g < s->ngroups; g++)
        if (size[g] != size[0] || size[g] < 2)
            *hier = 0;
    /* (server, local index) -> comm rank, for the hierarchical algorithms */
    if (*hier || s->ngroups == 1) {
        s->grank = calloc((size_t)s->ngroups * (size_t)s->n, sizeof *s->grank);
        int *fill = calloc((size_t)s->ngroups, sizeof *fill);
        for (int r = 0; s->grank && fill && r < n; r++)
            for (int g = 0; g < s->ngroups; g++)
                if (key[first[g]] == key[r] && fill[g] < s->n)
                    s->grank[g * s->n + fill[g]++] = r;
        if (!s->grank || !fill) {
            free(fill);
            free(first);
            free(size);
            return -1;
        }
        free(fill);
    }
    int useful = same_host && ((s->ngroups == 1 && n > 1) || *hier);
    free(first);
    free(size);
    return useful;
}

loom_result_t loom_shm_setup(struct loom_comm *comm, loom_shm_agree_fn agree)
{
    comm->shm = NULL;
    if (comm->nranks < 2)
        return LOOM_SUCCESS;
    struct loom_shm *s = calloc(1, sizeof *s);
    if (!s)
        return LOOM_ERROR_NO_MEMORY;
    s->ranks = calloc((size_t)comm->nranks, sizeof *s->ranks);
    s->pids = calloc((size_t)comm->nranks, sizeof *s->pids);
    s->ll_ok = calloc((size_t)comm->nranks * LOOM_SHM_LL_RECORD, sizeof *s->ll_ok);
    s->ll_chk = calloc((size_t)comm->nranks, sizeof *s->ll_chk);
    if (!s->ranks || !s->pids || !s->ll_ok || !s->ll_chk ||
        posix_memalign((void **)&s->tmp, 64, LOOM_SHM_CHUNK) ||
        posix_memalign((void **)&s->out, 64, LOOM_SHM_CHUNK)) {
        shm_free(s);
        return LOOM_ERROR_NO_MEMORY;
    }
    int hier = 0;
    int useful = find_group(comm, s, &hier);
    if (useful < 0) {
        shm_free(s);
        return LOOM_ERROR_NO_MEMORY;
    }
    if (!useful) {
        /* decided from what every rank knows alike: no collective needed */
        shm_free(s);
        return LOOM_SUCCESS;
    }
    /* every rank said at bootstrap whether it would share memory: where one
     * would not, nobody tries (every rank decides alike, with no exchange) */
    int want = 1;
    for (int r = 0; r < comm->nranks; r++)
        if (!(loom_oob_flags(comm->oob, r) & LOOM_OOB_FLAG_SHM))
            want = 0;
    if (!want) {
        LOOM_INFO(LOOM_SUB_INIT, "rank %d: shared memory off (LOOM_SHM=0 on a rank)",
                  comm->rank);
        shm_free(s);
        return LOOM_SUCCESS;
    }
    int ok = 0;
    loom_result_t res = LOOM_SUCCESS;
    for (int method = 0; method < 2 && !ok && res == LOOM_SUCCESS; method++) {
        res = attempt(comm, s, method, want, agree, &ok);
        if (!want)
            break;
    }
    if (res < 0 || !ok) {
        if (!want)
            LOOM_INFO(LOOM_SUB_INIT, "rank %d: shared memory off (LOOM_SHM=0)", comm->rank);
        else if (res == LOOM_SUCCESS)
            LOOM_WARN(LOOM_SUB_INIT, "rank %d: shared memory could not be set up on every "
                      "rank; same-server ranks use the network", comm->rank);
        shm_free(s);
        if (res < 0)
            loom_set_thread_error("rank %d: shared-memory setup: %s", comm->rank,
                                  comm->errmsg);
        return res;
    }
    s->ctrl[s->me].pid = (int32_t)getpid();
    comm->shm = s;
    LOOM_INFO(LOOM_SUB_INIT, "rank %d: shared memory with %d local ranks (local index %d "
              "of server %d/%d), %s%s", comm->rank, s->n, s->me, s->group, s->ngroups,
              s->push  ? "single copy (process_vm_readv and process_vm_writev)"
              : s->cma ? "single copy (process_vm_readv)"
                       : "two copies",
              s->ngroups > 1 ? ", hierarchical algorithms across servers" : "");
    return LOOM_SUCCESS;
}

void loom_shm_destroy(struct loom_comm *comm)
{
    struct loom_shm *s = comm->shm;
    if (!s)
        return;
    /* a peer that finds this process gone later knows it did not die */
    __atomic_store_n(&s->ctrl[s->me].left, 1, __ATOMIC_RELEASE);
    shm_free(s);
    comm->shm = NULL;
}
