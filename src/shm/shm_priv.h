/* shm_priv.h - the segment layout and the state shared by src/shm files. */
#ifndef LOOM_SHM_PRIV_H
#define LOOM_SHM_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "comm/algo.h"
#include "shm.h"
#include "comm/comm.h"
#include "reduce/reduce.h"

#define LOOM_SHM_MAGIC 0x4c4f4f4d53484d31ull /* "LOOMSHM1" */
#define LOOM_SHM_LINE 64
/* Staging bytes per rank and parity (two-copy path and small messages). */
#define LOOM_SHM_SLOT (1024u << 10)
/* Bytes per step when a rank reduces what it read from peers. */
#define LOOM_SHM_CHUNK (128u << 10)
/* Up to this many bytes per rank, allreduce goes through the slots (one
 * step, no system call) even when cross-memory attach works. */
#define LOOM_SHM_SMALL (16u << 10)
/* Buffers in a rank's ring of the pipelined path (pipe.c), which takes
 * both its staging slots: 128 KiB each. */
#define LOOM_SHM_PIPE_BUFS 4u
/* Small messages (ll.c): a cache line carries 56 bytes of data and, stored
 * after them with release order, the 64-bit number of the piece they
 * belong to; the first line of a piece starts with the call's fingerprint
 * (desc, count) instead of 16 data bytes. Lines per set: */
#define LOOM_SHM_LL_LINES 512u
/* Line sets per rank (1 MiB in all), taken in turn by successive pieces:
 * many, because where ranks outnumber cores a root runs ahead for as long
 * as its peers are off the CPU; calls over LOOM_SHM_LL_BIG bytes per rank
 * take turns on the last LOOM_SHM_LL_BIG_SETS only, so that a stream of
 * them stays in cache (docs/shm.md has the measurements). */
#define LOOM_SHM_LL_SETS 32u
#define LOOM_SHM_LL_BIG_SETS 4u
#define LOOM_SHM_LL_BIG (2u << 10)
/* Pieces whose set, epoch and call a rank remembers (a power of two over
 * the most a rank can be ahead of a peer, LOOM_SHM_LL_SETS + 1). */
#define LOOM_SHM_LL_RECORD 64u
#define LOOM_SHM_LL_DATA 56u /* data bytes in a line                    */
#define LOOM_SHM_LL_HEAD 16u /* fingerprint bytes in a piece's line 0  */
/* Data bytes in one piece. */
#define LOOM_SHM_LL_CAP (LOOM_SHM_LL_DATA * LOOM_SHM_LL_LINES - LOOM_SHM_LL_HEAD)
/* Up to this many bytes written per rank, ops may take the small-message
 * path: by default the calls of a line or so per rank
 * (LOOM_SHM_LL_ALL), above which one copy through the slots is faster; a
 * broadcast and a reduce up to LOOM_SHM_LL_MAX where ranks outnumber the
 * CPUs, as their root (or non-roots) then run ahead while peers are off the
 * CPU (docs/shm.md, "Choosing the small-message path"). */
#define LOOM_SHM_LL_MAX (16u << 10)
#define LOOM_SHM_LL_ALL 64u

/* Fingerprints a rank keeps of its latest calls (see fp below). */
#define LOOM_SHM_FPS (2 * LOOM_SHM_LL_SETS)

struct loom_shm_ll_line {
    _Alignas(LOOM_SHM_LINE) uint64_t data[LOOM_SHM_LL_DATA / 8];
    uint64_t flag; /* the piece number these bytes belong to; 0: none yet */
};

/* One per local rank, in the segment. Only its owner writes epoch, the
 * published addresses and failed/blame; readers bump waiters. */
struct loom_shm_ctrl {
    _Alignas(LOOM_SHM_LINE) uint32_t epoch; /* futex word: phases done   */
    _Alignas(LOOM_SHM_LINE) uint32_t waiters; /* peers asleep on epoch    */
    _Alignas(LOOM_SHM_LINE) uint64_t sendbuf; /* this op's buffers, valid */
    uint64_t recvbuf;                       /* once epoch says published */
    int32_t pid;
    uint32_t failed;                        /* this rank's op failed      */
    int32_t blame;                          /* comm rank it blames, -1    */
    uint32_t left;                          /* destroyed its communicator */
    uint64_t failed_seq;                    /* in which call (0: unknown) */
    /* the fingerprint of this rank's call #seq, at [seq % LOOM_SHM_FPS]: a
     * peer is fewer calls ahead (small calls let it run up to
     * LOOM_SHM_LL_SETS pieces ahead), so the entry for a reader's call
     * stays intact */
    struct {
        uint64_t seq, count;
        uint32_t desc, pad;
    } fp[LOOM_SHM_FPS];
};

struct loom_shm_hdr {
    uint64_t magic;
    uint64_t size;
    uint32_t nlocal;
    uint32_t pad;
    uint64_t slot_bytes;
};

struct loom_shm {
    void *base;
    size_t size;
    struct loom_shm_ctrl *ctrl;   /* [n]                                    */
    char *slots;                  /* [n][2][slot_bytes]                     */
    struct loom_shm_ll_line *ll;  /* [n][LOOM_SHM_LL_SETS][LOOM_SHM_LL_LINES] */
    uint64_t ll_seq;              /* small-message pieces begun (all alike) */
    /* of each of my last LOOM_SHM_LL_RECORD pieces, at [piece % RECORD]:
     * its set (every rank's alike), my epoch once written (a peer's too)
     * and the seq of its call */
    struct {
        uint32_t set, ep;
        uint64_t call;
    } ll_rec[LOOM_SHM_LL_RECORD];
    uint64_t ll_last[LOOM_SHM_LL_SETS]; /* the last piece in each set      */
    uint32_t ll_turn[2];                /* pieces placed: small calls, big ones   */
    uint64_t *ll_ok;                    /* [n][RECORD]: peer's piece whose line 0
                                     I read and checked, [piece % RECORD]   */
    uint64_t *ll_chk;                   /* [n]: peer's pieces up to this checked  */
    uint32_t ll_end;                    /* my epoch when my last small call ended */
    uint64_t ll_first;                  /* first piece after another path ran     */
    int ll_dirty;                       /* peers may still be in that path        */
    size_t slot_bytes;
    int n, me;                    /* local group size, my index in it       */
    int *ranks;                   /* comm rank of each local index          */
    pid_t *pids;
    int crowded;                  /* more ranks than CPUs (the leader's view) */
    int cma;                      /* process_vm_readv works between us      */
    int push;                     /* and process_vm_writev                  */
    uint32_t epoch;               /* my phases done (mirrors ctrl[me])      */
    int ngroups, group;           /* servers, and mine                      */
    int *grank;                   /* [ngroups][n]: comm rank of (server, index) */
    char *tmp;                    /* LOOM_SHM_CHUNK bytes: a peer's chunk   */
    char *out;                    /* LOOM_SHM_CHUNK bytes: a reduced chunk  */
};

/* How the engine moves an op's data (LOOM_ALGO names: shm_copy, shm_read,
 * shm_push; shm lets the engine choose). */
enum loom_shm_path {
    LOOM_SHM_PATH_COPY, /* through the segment's slots: two copies           */
    LOOM_SHM_PATH_READ, /* each rank reads what it needs from its peers      */
    LOOM_SHM_PATH_PUSH, /* work split evenly: ranks read and write peers     */
    LOOM_SHM_PATH_LL,   /* small messages: data and its number in one line  */
    LOOM_SHM_PATH_PIPE, /* through the segment, chunks pipelined by stage    */
};
enum loom_shm_path loom_shm_path_of(const struct loom_comm *comm, const struct loom_shm *s,
                                    const struct loom_op *op);

/* What one running op needs. */
struct loom_shm_ctx {
    struct loom_comm *comm;
    struct loom_shm *s;
    const struct loom_op *op;
    uint32_t start;               /* epoch when the op began                */
    int stall_warned;             /* LOOM_STALL_WARN said once for this op  */
    /* when a peer has failed: find and name (loom_shm_differ_call) a
     * mismatch it may have seen that this rank has not; NULL: none */
    loom_result_t (*differs)(struct loom_shm_ctx *x);
};

/* wait.c */
/* Finish a phase: epoch++, wake sleepers. */
void loom_shm_bump(struct loom_shm *s);
/* Wait until local rank j has done target phases. */
loom_result_t loom_shm_wait(struct loom_shm_ctx *x, int j, uint32_t target);
/* The same without spinning first (the caller has spun on something else). */
loom_result_t loom_shm_wait_sleep(struct loom_shm_ctx *x, int j, uint32_t target);
/* Local rank j is in another call (desc, count) than x->op: name both on
 * x->comm, tell the peers, and return LOOM_ERROR_MISMATCH. */
loom_result_t loom_shm_differ(struct loom_shm_ctx *x, int j, uint32_t desc, uint64_t count);
/* The same for an earlier call of this rank, #seq (mine_desc, mine_count). */
loom_result_t loom_shm_differ_call(struct loom_shm_ctx *x, int j, uint32_t mine_desc,
                                   uint64_t mine_count, uint64_t seq, uint32_t desc,
                                   uint64_t count);
/* Wait for every local rank (me included: no-op). */
loom_result_t loom_shm_wait_all(struct loom_shm_ctx *x, uint32_t target);
/* Copy len bytes between local_buf and remote address addr of local rank
 * j: into local_buf (write 0, process_vm_readv) or out of it (write 1,
 * process_vm_writev). A dead peer or a refusal is named on x->comm. */
loom_result_t loom_shm_cma_xfer(struct loom_shm_ctx *x, int j, void *local_buf,
                                uint64_t addr, size_t len, int write);
static inline loom_result_t loom_shm_cma_read(struct loom_shm_ctx *x, int j, void *dst,
                                              uint64_t addr, size_t len)
{
    return loom_shm_cma_xfer(x, j, dst, addr, len, 0);
}
static inline loom_result_t loom_shm_cma_write(struct loom_shm_ctx *x, int j,
                                               uint64_t addr, const void *src, size_t len)
{
    return loom_shm_cma_xfer(x, j, (void *)(uintptr_t)src, addr, len, 1);
}
/* Record a failure on comm (message already set) and tell local peers;
 * the failure is in call x->op (none: not known). */
void loom_shm_mark_failed(struct loom_shm_ctx *x, int blame);
/* Whether local rank k has failed in a way that concerns the call x->op:
 * a rank that failed in a later call finished its part of this one. */
int loom_shm_peer_failed(const struct loom_shm_ctx *x, int k);
/* Publish this rank's call (every call, network ones too). */
void loom_shm_publish_call(struct loom_shm *s, const struct loom_op *op);
/* Whether the process pid has ended (gone or a zombie). */
int loom_shm_pid_gone(pid_t pid);

/* Spinning before sleeping: busy-poll for LOOM_SPIN_US or, where ranks
 * outnumber cores (the peer may need this core), a few sched_yields. */
struct loom_shm_spin {
    uint64_t start, ns;
    unsigned i;
    int yield;
};
#define LOOM_SHM_YIELDS 64 /* oversubscribed: yields before sleep */
static inline void loom_shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
static inline void loom_shm_spin_init(struct loom_shm_spin *sp, const struct loom_comm *comm)
{
    sp->start = 0;
    sp->ns = (uint64_t)comm->spin_us * 1000u;
    sp->i = 0;
    sp->yield = comm->oversubscribed;
}
/* Pause once between two polls; 0 when the budget is spent. */
int loom_shm_spin_more(struct loom_shm_spin *sp);

static inline char *loom_shm_slot(struct loom_shm *s, int j, uint32_t epoch)
{
    return s->slots + ((size_t)j * 2 + (epoch & 1)) * s->slot_bytes;
}

/* Slice j of count elements over n parts: first element and length. */
static inline void loom_shm_slice(uint64_t count, int n, int j, uint64_t *off,
                                  uint64_t *len)
{
    uint64_t q = count / (uint64_t)n, r = count % (uint64_t)n, uj = (uint64_t)j;
    *off = uj * q + (uj < r ? uj : r);
    *len = q + (uj < r ? 1 : 0);
}

/* cma.c: single-copy collectives (reading peers' buffers). mid != NULL:
 * hierarchical allreduce (each slice goes through mid between the steps). */
loom_result_t loom_shm_cma_allreduce(struct loom_shm_ctx *x, const struct loom_shm_mid *mid);
loom_result_t loom_shm_cma_allgather(struct loom_shm_ctx *x);
loom_result_t loom_shm_cma_broadcast(struct loom_shm_ctx *x);
loom_result_t loom_shm_cma_reduce_scatter(struct loom_shm_ctx *x);
loom_result_t loom_shm_cma_reduce(struct loom_shm_ctx *x);
/* push.c: the same with the work split evenly between the ranks: each
 * writes its share of the result into its peers' buffers. */
loom_result_t loom_shm_push_allreduce(struct loom_shm_ctx *x, const struct loom_shm_mid *mid);
loom_result_t loom_shm_push_broadcast(struct loom_shm_ctx *x);
loom_result_t loom_shm_push_reduce(struct loom_shm_ctx *x);
/* Reduce elements [off, off+len) of every local rank's sendbuf into dst,
 * reading peers a chunk at a time; mine is this rank's input for them. */
loom_result_t loom_shm_reduce_range(struct loom_shm_ctx *x, char *dst, const char *mine,
                                    uint64_t off, uint64_t len);
/* Publish this op's buffers and finish the phase. */
void loom_shm_publish(struct loom_shm *s, const void *send, const void *recv);
/* The first phase of the sliced collectives (read and push paths): publish
 * this op's buffers, wait until every local rank has, and give the epoch the
 * op started at and this rank's slice of op->count. */
loom_result_t loom_shm_publish_slice(struct loom_shm_ctx *x, uint32_t *epoch, uint64_t *off,
                                     uint64_t *len);
/* Local index of comm rank r. */
int loom_shm_local_of(const struct loom_shm *s, int r);

/* copy.c: two-copy collectives through the staging slots. */
loom_result_t loom_shm_copy_allreduce(struct loom_shm_ctx *x, const struct loom_shm_mid *mid);
loom_result_t loom_shm_copy_allgather(struct loom_shm_ctx *x);
loom_result_t loom_shm_copy_broadcast(struct loom_shm_ctx *x);
loom_result_t loom_shm_copy_reduce_scatter(struct loom_shm_ctx *x);
loom_result_t loom_shm_copy_reduce(struct loom_shm_ctx *x);
loom_result_t loom_shm_barrier(struct loom_shm_ctx *x);

/* pipe.c: large messages through the segment in chunks, each stage of a
 * chunk flagged by one bump of the phase counter. */
loom_result_t loom_shm_pipe_allreduce(struct loom_shm_ctx *x);
loom_result_t loom_shm_pipe_reduce(struct loom_shm_ctx *x);
loom_result_t loom_shm_pipe_broadcast(struct loom_shm_ctx *x);
loom_result_t loom_shm_pipe_allgather(struct loom_shm_ctx *x);
loom_result_t loom_shm_pipe_reduce_scatter(struct loom_shm_ctx *x);
/* The hierarchical allreduce: mid on each rank's whole slice in between. */
loom_result_t loom_shm_pipe_allreduce_mid(struct loom_shm_ctx *x, const struct loom_shm_mid *mid);

/* ll.c: small messages, data and its piece number in one line, no system
 * call and no sleep while peers keep up. */
loom_result_t loom_shm_ll_run(struct loom_shm_ctx *x);
/* Bytes each rank writes for op on the small-message path. */
size_t loom_shm_ll_bytes(const struct loom_shm *s, const struct loom_op *op);

/* The inter-server step of the hierarchical allreduce: mid on len elements
 * at buf, in place; errors land on x->comm. */
loom_result_t loom_shm_inter(struct loom_shm_ctx *x, const struct loom_shm_mid *mid,
                             void *buf, uint64_t len);

#endif
