/* verbs_model.c - a software model of the verbs subset the verbs transport
 * uses (verbs_model.h), for tests.
 *
 * Shape: a segment shared by the processes of a test (mapped before they
 * fork) holds the devices' configuration, one slot per queue pair with an
 * inbound request ring and an inbound response ring, and one doorbell per
 * process. Everything else (PDs, MRs, CQs, the queues of work requests)
 * lives in the process that created it, as it would in a process and its
 * adapter. Each process runs one adapter thread: it takes posted work
 * requests, checks their local keys, cuts them into packets it puts in the
 * destination queue pair's request ring, and, for packets that arrive in
 * its own queue pairs' rings, checks remote keys and ranges, writes memory,
 * consumes receives, answers with ACK/NAK packets and produces completions.
 * One mutex per process guards its objects (the adapter thread and the
 * application's verbs calls take it); the rings are single-consumer and
 * take a process-shared robust mutex to produce (a process may be killed).
 *
 * Citations: [post_send] ibv_post_send(3), [post_recv] ibv_post_recv(3),
 * [poll_cq] ibv_poll_cq(3), [modify_qp] ibv_modify_qp(3), [create_qp]
 * ibv_create_qp(3), [create_cq] ibv_create_cq(3), [resize_cq]
 * ibv_resize_cq(3), [reg_mr] ibv_reg_mr(3), [get_cq_event]
 * ibv_get_cq_event(3), [alloc_pd] ibv_alloc_pd(3); where they are silent,
 * [IBA] the InfiniBand Architecture Specification vol. 1 (chapter 9/10/11
 * rules the man pages summarise) and [rxe] the kernel's soft-RoCE driver
 * (drivers/infiniband/sw/rxe), whose behaviour the model follows. */
#include "build_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "verbs_model.h"

#define VM_MAGIC 0x314d564cu /* "LVM1" */
#define VM_MAX_PROCS 64
#define VM_MAX_QPS 128
#define VM_REQ_RING (256 * 1024)
#define VM_RESP_RING (32 * 1024)
#define VM_SEG (16 * 1024) /* payload bytes per packet           */
#define VM_QPN_BASE 0x100
#define VM_MAX_SGE 4
#define VM_MAX_WR 4096
#define VM_MAX_INLINE 256
#define VM_MAX_CQE 65536
#define VM_MAX_MSG (1u << 30) /* port max_msg_sz                    */
#define VM_VENDOR 0x4d00u     /* vendor_err = VM_VENDOR | syndrome  */

/* ---- the shared segment ---- */

struct vm_ring {
    pthread_mutex_t lock;        /* producers; robust, process-shared  */
    _Atomic uint64_t head, tail; /* bytes consumed / produced          */
};

struct vm_slot {
    _Atomic int used;
    _Atomic uint32_t gen; /* bumped at each allocation          */
    _Atomic int pid;
    _Atomic int proc;
    _Atomic int state; /* the QP's state, for its peers      */
    _Atomic int dev, port;
    struct vm_ring req, resp;
    uint8_t req_data[VM_REQ_RING];
    uint8_t resp_data[VM_RESP_RING];
};

struct vm_proc {
    _Atomic int pid;
    _Atomic uint32_t bell; /* futex: something for its adapter   */
};

struct vm_port_sh {
    int ethernet, down;
    uint16_t lid;
    int mtu;
    int ngids;
    uint8_t gid[VMODEL_MAX_GIDS][16];
};

struct vm_dev_sh {
    char name[64];
    int nports;
    struct vm_port_sh ports[VMODEL_MAX_PORTS];
};

struct vm_shm {
    uint32_t magic;
    int ndevs;
    struct vm_dev_sh devs[VMODEL_MAX_DEVS];
    double time_scale;
    _Atomic uint32_t next_key;
    struct vm_proc procs[VM_MAX_PROCS];
    struct vm_slot slots[VM_MAX_QPS];
};

/* ---- packets ---- */

enum vm_pkt_type {
    VM_PKT_REQ = 1,
    VM_PKT_ACK = 2,
    VM_PKT_NAK = 3,
    VM_PKT_PAD = 4, /* skip to the ring's start           */
};
enum vm_nak {
    VM_NAK_SEQ = 1,    /* PSN sequence error [IBA 9.7.5.2.2] */
    VM_NAK_RNR = 2,    /* receiver not ready                 */
    VM_NAK_ACCESS = 3, /* remote access error                */
    VM_NAK_INVREQ = 4, /* invalid request                    */
    VM_NAK_LOST = 5,   /* model: no answer will come (the    */
                       /* requester's ACK timer runs out)    */
};
#define VM_F_FIRST 0x1u
#define VM_F_LAST 0x2u

struct vm_pkt {
    uint32_t type, op, psn, src_qpn;
    uint32_t len, flags, rkey, imm;
    uint64_t raddr, msg_len;
    uint32_t syndrome, size; /* size: header + payload, 8-aligned  */
};

/* ---- process-local objects ---- */

struct vm_ctx {
    struct ibv_context ib;
    int dev;
};

struct vm_pd {
    struct ibv_pd ib;
    int refs;
};

struct vm_mr {
    struct ibv_mr ib;
    struct vm_pd *pd;
    int access;
    struct vm_mr *next;
};

struct vm_channel {
    struct ibv_comp_channel ib;
    struct vm_cq *events[64]; /* CQs with an event not yet taken    */
    int nevents;
    int cqs;
};

/* What a completion frees when it is polled: real adapters reclaim send
 * queue entries (unsignalled ones included) only as completions are
 * consumed, so a sender that never signals runs out of send queue. */
struct vm_cqe_meta {
    struct vm_qp *qp;
    uint32_t sq_idx; /* send entries up to this one are free */
    int is_send;
};

struct vm_cq {
    struct ibv_cq ib;
    struct ibv_wc *wc;
    struct vm_cqe_meta *meta;
    int cap; /* what it really holds               */
    int head, count;
    int error; /* overran: unusable [poll_cq]        */
    int armed;
    int qps;
    struct vm_channel *ch;
    struct vm_cq *next;
};

struct vm_wqe {
    uint64_t wr_id;
    int opcode;
    int signaled;
    int nsge;
    struct ibv_sge sge[VM_MAX_SGE];
    int inl;
    uint8_t inl_data[VM_MAX_INLINE];
    uint64_t len, raddr;
    uint32_t rkey, imm;
    uint32_t first_psn, last_psn;
    int started; /* its first packet went out          */
    int sent;    /* every packet is out                */
    int checked; /* local keys checked                 */
};

struct vm_rwqe {
    uint64_t wr_id;
    int nsge;
    struct ibv_sge sge[VM_MAX_SGE];
};

struct vm_qp {
    struct ibv_qp ib;
    int slot;
    uint32_t gen;
    struct vm_pd *pd;
    struct vm_cq *scq, *rcq;
    int sig_all;
    struct ibv_qp_cap cap;
    /* attributes */
    int port;
    unsigned access;
    uint32_t dest_qpn, rq_psn, sq_psn;
    int path_mtu;
    struct ibv_ah_attr ah;
    int timeout, retry_cnt, rnr_retry, min_rnr_timer;
    uint32_t dest_gen;
    /* send queue: a ring of cap.max_send_wr entries */
    struct vm_wqe *sq;
    uint32_t sq_free; /* entries before it may be reused    */
    uint32_t sq_head, sq_tail, sq_tx;
    uint64_t tx_off;
    uint32_t next_psn;
    double loss_since; /* no answer expected since (0: none) */
    double resend_at;
    double next_alive_check;
    int rnr_left;
    /* receive queue */
    struct vm_rwqe *rq;
    uint32_t rq_head, rq_tail;
    /* responder */
    uint32_t epsn;
    int nak_sent;
    int in_msg;
    int cur_op;
    struct vm_mr *cur_mr;
    uint64_t cur_len, cur_off;
    struct vm_qp *next;
};

static struct vm_shm *shm;
static size_t shm_size;
static char sysfs_dir[256];
static pid_t creator;

static struct {
    pid_t pid; /* whose state this is (fork resets)  */
    pthread_mutex_t lock;
    int proc; /* our doorbell slot                  */
    pthread_t thread;
    int running, stop;
    int nctx;
    struct vm_qp *qps;
    struct vm_mr *mrs;
    struct vm_cq *cqs;
    struct ibv_device devs[VMODEL_MAX_DEVS];
    int bad_rkey; /* faults                             */
    int cq_size;
    struct vmodel_stats st;
} vm = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A fork copies this process's objects but not its adapter thread: the
 * child starts from nothing (its parent's queue pairs are not its own). */
static void local_reset_if_forked(void)
{
    if (vm.pid == getpid())
        return;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memset(&vm, 0, sizeof vm);
    vm.lock = fresh;
    vm.pid = getpid();
    vm.proc = -1;
}

static void bell_ring(int proc)
{
    if (proc < 0 || proc >= VM_MAX_PROCS)
        return;
    atomic_fetch_add(&shm->procs[proc].bell, 1);
    syscall(SYS_futex, &shm->procs[proc].bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static int pid_alive(int pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* ---- rings ---- */

static void ring_lock(struct vm_ring *r)
{
    if (pthread_mutex_lock(&r->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&r->lock); /* a producer was killed */
}

/* Room for a packet of `size` bytes (plus a pad to wrap)? */
static int ring_room(struct vm_ring *r, uint32_t cap, uint32_t size)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t off = tail % cap;
    uint64_t need = size + (off + size > cap ? cap - off : 0);
    return tail - head + need <= cap;
}

/* Reserve size bytes (lock held, room checked): where to write them. */
static uint8_t *ring_reserve(struct vm_ring *r, uint8_t *data, uint32_t cap, uint32_t size)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t off = tail % cap;
    if (off + size > cap) { /* pad to the end and wrap */
        struct vm_pkt pad = {.type = VM_PKT_PAD, .size = (uint32_t)(cap - off)};
        memcpy(data + off, &pad, sizeof pad < cap - off ? sizeof pad : cap - off);
        tail += cap - off;
        atomic_store_explicit(&r->tail, tail, memory_order_release);
        off = 0;
    }
    return data + off;
}

static void ring_commit(struct vm_ring *r, uint32_t size)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    atomic_store_explicit(&r->tail, tail + size, memory_order_release);
}

/* The packet at the consumer's front, or NULL. */
static struct vm_pkt *ring_front(struct vm_ring *r, uint8_t *data, uint32_t cap)
{
    for (;;) {
        uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head == tail)
            return NULL;
        uint64_t off = head % cap;
        if (cap - off < sizeof(struct vm_pkt)) { /* a pad too short to hold a header */
            atomic_store_explicit(&r->head, head + (cap - off), memory_order_release);
            continue;
        }
        struct vm_pkt *p = (struct vm_pkt *)(data + off);
        if (p->type == VM_PKT_PAD) {
            atomic_store_explicit(&r->head, head + p->size, memory_order_release);
            continue;
        }
        return p;
    }
}

static void ring_pop(struct vm_ring *r, const struct vm_pkt *p)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, head + p->size, memory_order_release);
}

static void ring_init(struct vm_ring *r)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&r->lock, &a);
    pthread_mutexattr_destroy(&a);
    atomic_store(&r->head, 0);
    atomic_store(&r->tail, 0);
}

/* ---- completions ---- */

static void cq_push(struct vm_cq *cq, const struct ibv_wc *wc, struct vm_qp *qp, uint32_t sq_idx);

static const char *status_str(enum ibv_wc_status s)
{
    static const char *names[] = {
        [IBV_WC_SUCCESS] = "success",
        [IBV_WC_LOC_LEN_ERR] = "local length error",
        [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
        [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
        [IBV_WC_LOC_PROT_ERR] = "local protection error",
        [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
        [IBV_WC_MW_BIND_ERR] = "memory management operation error",
        [IBV_WC_BAD_RESP_ERR] = "bad response error",
        [IBV_WC_LOC_ACCESS_ERR] = "local access error",
        [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
        [IBV_WC_REM_ACCESS_ERR] = "remote access error",
        [IBV_WC_REM_OP_ERR] = "remote operation error",
        [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
        [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
    };
    if ((unsigned)s < sizeof names / sizeof names[0] && names[s])
        return names[s];
    return "unknown";
}

static void qp_set_state(struct vm_qp *qp, enum ibv_qp_state s)
{
    qp->ib.state = s;
    atomic_store(&shm->slots[qp->slot].state, (int)s);
}

/* Into the error state: every outstanding work request completes flushed
 * [IBA 10.3.1: "Error: ... all outstanding and subsequently posted WRs are
 * completed with flush error"; errors always complete, signalled or not]. */
static void qp_error(struct vm_qp *qp)
{
    if (qp->ib.state == IBV_QPS_ERR)
        return;
    qp_set_state(qp, IBV_QPS_ERR);
    for (; qp->sq_head != qp->sq_tail; qp->sq_head++) {
        struct vm_wqe *w = &qp->sq[qp->sq_head % qp->cap.max_send_wr];
        struct ibv_wc wc = {.wr_id = w->wr_id,
                            .status = IBV_WC_WR_FLUSH_ERR,
                            .vendor_err = VM_VENDOR | 0x5,
                            .qp_num = qp->ib.qp_num};
        cq_push(qp->scq, &wc, qp, qp->sq_head);
    }
    qp->sq_tx = qp->sq_head;
    for (; qp->rq_head != qp->rq_tail; qp->rq_head++) {
        struct vm_rwqe *w = &qp->rq[qp->rq_head % qp->cap.max_recv_wr];
        struct ibv_wc wc = {.wr_id = w->wr_id,
                            .status = IBV_WC_WR_FLUSH_ERR,
                            .opcode = IBV_WC_RECV,
                            .vendor_err = VM_VENDOR | 0x5,
                            .qp_num = qp->ib.qp_num};
        cq_push(qp->rcq, &wc, NULL, 0);
    }
    qp->in_msg = 0;
}

/* A completion into cq. A full CQ overruns: it becomes unusable and its
 * queue pairs go to the error state [poll_cq NOTES: "In case of a CQ
 * overrun, the async event IBV_EVENT_CQ_ERR will be triggered, and the CQ
 * cannot be used"; rxe: CQ overflow is a class G error, QP to error]. */
static void cq_push(struct vm_cq *cq, const struct ibv_wc *wc, struct vm_qp *qp, uint32_t sq_idx)
{
    if (cq->error)
        return;
    if (cq->count == cq->cap) {
        cq->error = 1;
        for (struct vm_qp *q = vm.qps; q; q = q->next)
            if (q->scq == cq || q->rcq == cq)
                qp_error(q); /* its flushes are lost with the CQ */
        return;
    }
    int at = (cq->head + cq->count) % cq->cap;
    cq->wc[at] = *wc;
    cq->meta[at] = (struct vm_cqe_meta){.qp = qp, .sq_idx = sq_idx, .is_send = qp != NULL};
    cq->count++;
    /* a completion on an armed CQ is an event on its channel, once per
     * arming [get_cq_event: request notification, then wait] */
    if (cq->armed && cq->ch && cq->ch->nevents < 64) {
        cq->armed = 0;
        cq->ch->events[cq->ch->nevents++] = cq;
        uint64_t one = 1;
        if (write(cq->ch->ib.fd, &one, sizeof one) < 0) {
            /* an eventfd write only fails at 2^64 - 2 pending */
        }
    }
}

static void complete_send(struct vm_qp *qp, uint32_t idx, enum ibv_wc_status st, uint32_t syndrome)
{
    struct vm_wqe *w = &qp->sq[idx % qp->cap.max_send_wr];
    /* unsignalled WRs that succeed leave no completion [post_send:
     * IBV_SEND_SIGNALED "relevant only if QP was created with sq_sig_all=0"];
     * failures always do [IBA 10.8.3] */
    if (st == IBV_WC_SUCCESS && !w->signaled && !qp->sig_all)
        return;
    struct ibv_wc wc = {
        .wr_id = w->wr_id,
        .status = st,
        .qp_num = qp->ib.qp_num,
        .vendor_err = st == IBV_WC_SUCCESS ? 0 : VM_VENDOR | syndrome,
        .opcode = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM
                      ? IBV_WC_RDMA_WRITE
                      : IBV_WC_SEND,
        .byte_len = (uint32_t)w->len,
    };
    cq_push(qp->scq, &wc, qp, idx);
}

/* ---- memory ---- */

static struct vm_mr *mr_by_lkey(uint32_t lkey)
{
    for (struct vm_mr *m = vm.mrs; m; m = m->next)
        if (m->ib.lkey == lkey)
            return m;
    return NULL;
}

static struct vm_mr *mr_by_rkey(uint32_t rkey)
{
    for (struct vm_mr *m = vm.mrs; m; m = m->next)
        if (m->ib.rkey == rkey)
            return m;
    return NULL;
}

static int mr_covers(const struct vm_mr *m, uint64_t addr, uint64_t len)
{
    uint64_t base = (uint64_t)(uintptr_t)m->ib.addr;
    return addr >= base && len <= m->ib.length && addr - base <= m->ib.length - len;
}

/* Copy len bytes at offset off of a gather list into out. */
static void gather(const struct vm_wqe *w, uint64_t off, uint8_t *out, uint64_t len)
{
    if (w->inl) {
        memcpy(out, w->inl_data + off, len);
        return;
    }
    for (int i = 0; i < w->nsge && len; i++) {
        uint64_t l = w->sge[i].length;
        if (off >= l) {
            off -= l;
            continue;
        }
        uint64_t n = l - off < len ? l - off : len;
        memcpy(out, (uint8_t *)(uintptr_t)w->sge[i].addr + off, n);
        out += n;
        len -= n;
        off = 0;
    }
}

/* ---- the adapter: sending ---- */

static uint32_t psn_add(uint32_t psn, uint32_t n)
{
    return (psn + n) & 0xffffffu;
}
/* a <= b in 24-bit serial arithmetic */
static int psn_le(uint32_t a, uint32_t b)
{
    return ((b - a) & 0xffffffu) < 0x800000u;
}

/* The RC local ACK timeout x (retries + 1) [IBA 9.7.6.1.3: 4.096 us x
 * 2^timeout], scaled for tests. */
static double retry_window(const struct vm_qp *qp)
{
    double t = 4.096e-6 * (double)(1ull << (qp->timeout ? qp->timeout : 14));
    return t * (qp->retry_cnt + 1) * (shm->time_scale > 0 ? shm->time_scale : 1.0);
}

/* Is dest reachable along qp's address vector? A wrong GID or LID reaches
 * nobody (the packets are lost and the requester retries). */
static int path_ok(const struct vm_qp *qp, const struct vm_slot *d)
{
    int dev = atomic_load(&d->dev), port = atomic_load(&d->port);
    if (dev < 0 || dev >= shm->ndevs || port < 1 || port > shm->devs[dev].nports)
        return 0;
    const struct vm_port_sh *p = &shm->devs[dev].ports[port - 1];
    if (p->down)
        return 0;
    if (p->ethernet || qp->ah.is_global) {
        for (int g = 0; g < p->ngids; g++)
            if (memcmp(p->gid[g], qp->ah.grh.dgid.raw, 16) == 0)
                return 1;
        return 0;
    }
    return qp->ah.dlid == p->lid;
}

static void send_resp(struct vm_qp *qp, uint32_t type, uint32_t psn, uint32_t syndrome);

/* Note that no answer will come for what is in flight: retransmit after a
 * pause, until the retry window closes. */
static void lost(struct vm_qp *qp, double now, double pause)
{
    if (qp->loss_since == 0)
        qp->loss_since = now;
    qp->resend_at = now + pause;
    /* go back to the oldest unacknowledged request */
    qp->sq_tx = qp->sq_head;
    qp->tx_off = 0;
    if (qp->sq_head != qp->sq_tail && qp->sq[qp->sq_head % qp->cap.max_send_wr].started)
        qp->next_psn = qp->sq[qp->sq_head % qp->cap.max_send_wr].first_psn;
    /* what went out stays "started" with its PSNs: an answer still on its
     * way (a NAK for a remote access error) is for it, and a resend gives
     * it the same PSNs again */
    for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++)
        qp->sq[i % qp->cap.max_send_wr].sent = 0;
}

/* Fail the oldest request with st and the queue pair with it. */
static void fail_head(struct vm_qp *qp, enum ibv_wc_status st, uint32_t syndrome)
{
    if (qp->sq_head != qp->sq_tail) {
        complete_send(qp, qp->sq_head, st, syndrome);
        qp->sq_head++;
    }
    qp_error(qp);
}

/* Put out what fits of qp's send queue. 1 when it did something. */
static int requester(struct vm_qp *qp, double now)
{
    if (qp->ib.state != IBV_QPS_RTS)
        return 0;
    int busy = 0;
    /* retries running out end in an error [IBA 9.7.6.1.3; rxe: "retry
     * counter exceeded"], whatever was being retried */
    if (qp->loss_since && now - qp->loss_since > retry_window(qp)) {
        fail_head(qp, IBV_WC_RETRY_EXC_ERR, 0x81);
        return 1;
    }
    /* a peer whose process ended, or whose queue pair is gone, answers
     * nothing more: what is in flight is lost */
    if (qp->sq_head != qp->sq_tail && now >= qp->next_alive_check) {
        qp->next_alive_check = now + 0.02;
        struct vm_slot *d = &shm->slots[qp->dest_qpn - VM_QPN_BASE];
        if (!atomic_load(&d->used) || atomic_load(&d->gen) != qp->dest_gen ||
            !pid_alive(atomic_load(&d->pid)))
            lost(qp, now, 0.01);
    }
    if (now < qp->resend_at)
        return 0;
    while (qp->sq_tx != qp->sq_tail) {
        struct vm_wqe *w = &qp->sq[qp->sq_tx % qp->cap.max_send_wr];
        if (!w->checked) {
            /* local keys: a gather entry outside its MR, or an MR of
             * another PD, is a local protection error [IBA 10.6.3.1;
             * post_send: "The L_Key will not be checked" only for INLINE] */
            int ok = w->len <= VM_MAX_MSG;
            for (int i = 0; ok && !w->inl && i < w->nsge; i++) {
                struct vm_mr *m = mr_by_lkey(w->sge[i].lkey);
                ok = m && m->pd == qp->pd && mr_covers(m, w->sge[i].addr, w->sge[i].length);
            }
            if (!ok) {
                /* everything before it completes first (in order) */
                if (qp->sq_tx != qp->sq_head)
                    return busy;
                fail_head(qp, w->len > VM_MAX_MSG ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR, 0x41);
                return 1;
            }
            w->checked = 1;
        }
        struct vm_slot *d = &shm->slots[qp->dest_qpn - VM_QPN_BASE];
        int dstate = atomic_load(&d->state);
        if (!atomic_load(&d->used) || atomic_load(&d->gen) != qp->dest_gen ||
            (dstate != IBV_QPS_RTR && dstate != IBV_QPS_RTS) || !path_ok(qp, d)) {
            /* nobody takes these packets (not yet ready, gone, or the
             * path is wrong): they are lost and will be retried */
            lost(qp, now, 0.002);
            return 1;
        }
        uint64_t seg = w->len - qp->tx_off < VM_SEG ? w->len - qp->tx_off : VM_SEG;
        uint32_t size = (uint32_t)((sizeof(struct vm_pkt) + seg + 7) & ~7ull);
        ring_lock(&d->req);
        if (!ring_room(&d->req, VM_REQ_RING, size)) {
            pthread_mutex_unlock(&d->req.lock);
            break; /* the peer's adapter has not caught up */
        }
        struct vm_pkt *p = (struct vm_pkt *)ring_reserve(&d->req, d->req_data, VM_REQ_RING, size);
        uint32_t rkey = w->rkey;
        if (qp->tx_off == 0 && vm.bad_rkey > 0 &&
            (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
            vm.bad_rkey--;
            w->rkey = rkey = w->rkey ^ 0x00ff0000u; /* the fault: a key nobody holds */
        }
        *p = (struct vm_pkt){.type = VM_PKT_REQ,
                             .op = (uint32_t)w->opcode,
                             .psn = qp->next_psn,
                             .src_qpn = qp->ib.qp_num,
                             .len = (uint32_t)seg,
                             .flags = (qp->tx_off == 0 ? VM_F_FIRST : 0) |
                                      (qp->tx_off + seg == w->len ? VM_F_LAST : 0),
                             .rkey = rkey,
                             .imm = w->imm,
                             .raddr = w->raddr + qp->tx_off,
                             .msg_len = w->len,
                             .size = size};
        gather(w, qp->tx_off, (uint8_t *)(p + 1), seg);
        if (qp->tx_off == 0) {
            w->first_psn = qp->next_psn;
            w->started = 1;
        }
        ring_commit(&d->req, size);
        pthread_mutex_unlock(&d->req.lock);
        bell_ring(atomic_load(&d->proc));
        vm.st.bytes_out += seg;
        busy = 1;
        qp->next_psn = psn_add(qp->next_psn, 1);
        qp->tx_off += seg;
        if (qp->tx_off == w->len) {
            w->last_psn = psn_add(qp->next_psn, 0xffffff); /* next_psn - 1 */
            w->sent = 1;
            qp->sq_tx++;
            qp->tx_off = 0;
        }
    }
    return busy;
}

/* An ACK or NAK from the responder for qp's requests. */
static void on_response(struct vm_qp *qp, const struct vm_pkt *p, double now)
{
    if (qp->ib.state != IBV_QPS_RTS)
        return;
    if (p->type == VM_PKT_ACK) {
        /* acknowledgements are cumulative [IBA 9.7.5.1]: everything up to
         * that PSN completes, in order */
        while (qp->sq_head != qp->sq_tx) {
            struct vm_wqe *w = &qp->sq[qp->sq_head % qp->cap.max_send_wr];
            if (!w->sent || !psn_le(w->last_psn, p->psn))
                break;
            complete_send(qp, qp->sq_head, IBV_WC_SUCCESS, 0);
            qp->sq_head++;
        }
        qp->loss_since = 0;
        qp->rnr_left = qp->rnr_retry;
        return;
    }
    /* a NAK names the PSN it refused; one for a request no longer in
     * flight is stale */
    if (qp->sq_head == qp->sq_tail)
        return;
    struct vm_wqe *h = &qp->sq[qp->sq_head % qp->cap.max_send_wr];
    if (!h->started || !psn_le(h->first_psn, p->psn))
        return;
    switch (p->syndrome) {
    case VM_NAK_ACCESS:
        /* "Remote Access Error Nak: results in an error completion and may
         * not be retried" [IBA 9.7.5.2.4] */
        fail_head(qp, IBV_WC_REM_ACCESS_ERR, 0x88);
        break;
    case VM_NAK_INVREQ: fail_head(qp, IBV_WC_REM_INV_REQ_ERR, 0x8a); break;
    case VM_NAK_RNR:
        /* rnr_retry 7 retries for ever [modify_qp; IBA 9.7.5.2.8] */
        if (qp->rnr_retry != 7 && qp->rnr_left-- <= 0) {
            fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR, 0x89);
            break;
        }
        lost(qp, now, 0.00064);
        qp->loss_since = 0; /* RNR waits do not count as lost */
        break;
    default: /* sequence error, lost: retransmit from there */ lost(qp, now, 0.001); break;
    }
}

/* ---- the adapter: receiving ---- */

/* Answer the requester (lock held). 0 when there was no room: try later. */
static int resp_room(struct vm_qp *qp)
{
    struct vm_slot *s = &shm->slots[qp->dest_qpn - VM_QPN_BASE];
    return ring_room(&s->resp, VM_RESP_RING, sizeof(struct vm_pkt));
}

static void send_resp(struct vm_qp *qp, uint32_t type, uint32_t psn, uint32_t syndrome)
{
    struct vm_slot *s = &shm->slots[qp->dest_qpn - VM_QPN_BASE];
    if (!atomic_load(&s->used))
        return;
    ring_lock(&s->resp);
    if (ring_room(&s->resp, VM_RESP_RING, sizeof(struct vm_pkt))) {
        struct vm_pkt *p = (struct vm_pkt *)ring_reserve(&s->resp, s->resp_data, VM_RESP_RING,
                                                         sizeof *p);
        *p = (struct vm_pkt){.type = type,
                             .psn = psn,
                             .src_qpn = qp->ib.qp_num,
                             .syndrome = syndrome,
                             .size = sizeof *p};
        ring_commit(&s->resp, sizeof *p);
    }
    pthread_mutex_unlock(&s->resp.lock);
    bell_ring(atomic_load(&s->proc));
}

/* Scatter len bytes at offset off into a receive's list. */
static void scatter(const struct vm_rwqe *w, uint64_t off, const uint8_t *in, uint64_t len)
{
    for (int i = 0; i < w->nsge && len; i++) {
        uint64_t l = w->sge[i].length;
        if (off >= l) {
            off -= l;
            continue;
        }
        uint64_t n = l - off < len ? l - off : len;
        memcpy((uint8_t *)(uintptr_t)w->sge[i].addr + off, in, n);
        in += n;
        len -= n;
        off = 0;
    }
}

/* A request packet for qp. Returns 0 when it must wait (no room to
 * answer), 1 when it was consumed. */
static int on_request(struct vm_qp *qp, const struct vm_pkt *p)
{
    int op = (int)p->op;
    int takes_recv = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
                     op == IBV_WR_RDMA_WRITE_WITH_IMM;
    /* packets for a queue pair not ready to receive are dropped [IBA
     * 10.3.1: Init "if the QP receives any inbound request packets, they
     * shall be silently dropped"; Error stops responding]; the requester
     * learns of it through its ACK timer (here: a LOST answer) */
    if (qp->ib.state != IBV_QPS_RTR && qp->ib.state != IBV_QPS_RTS) {
        if (qp->ib.state != IBV_QPS_RESET && p->src_qpn == qp->dest_qpn) {
            if (!resp_room(qp))
                return 0;
            send_resp(qp, VM_PKT_NAK, p->psn, VM_NAK_LOST);
        }
        return 1;
    }
    if (p->src_qpn != qp->dest_qpn)
        return 1; /* not our connection's peer: dropped */
    if (!resp_room(qp))
        return 0;
    if (p->psn != qp->epsn && psn_le(p->psn, psn_add(qp->epsn, 0xffffff))) {
        /* a duplicate (the requester went back after a loss): acknowledge
         * it again if it ends a message, execute nothing [IBA C9-105] */
        if (p->flags & VM_F_LAST)
            send_resp(qp, VM_PKT_ACK, p->psn, 0);
        return 1;
    }
    if (p->psn != qp->epsn) {
        /* out of sequence: one NAK, then silence until the expected PSN
         * comes again [IBA 9.7.5.2.2; rxe check_psn] */
        if (!qp->nak_sent)
            send_resp(qp, VM_PKT_NAK, qp->epsn, VM_NAK_SEQ);
        qp->nak_sent = 1;
        return 1;
    }
    qp->nak_sent = 0;
    if (p->flags & VM_F_FIRST) {
        qp->in_msg = 1;
        qp->cur_op = op;
        qp->cur_len = p->msg_len;
        qp->cur_off = 0;
        qp->cur_mr = NULL;
        if (takes_recv && qp->rq_head == qp->rq_tail) {
            /* no receive posted: receiver not ready [IBA 9.7.5.2.8] */
            send_resp(qp, VM_PKT_NAK, p->psn, VM_NAK_RNR);
            qp->nak_sent = 1;
            qp->in_msg = 0;
            return 1;
        }
        if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
            /* the rkey names an MR of this adapter, in the QP's PD, with
             * remote write, allowed by the QP, covering the whole range
             * [IBA 10.6.3.2; rxe check_rkey]; otherwise NAK remote access
             * and the responder's QP goes to error too (class C, rxe
             * RESPST_ERR_RKEY_VIOLATION) */
            struct vm_mr *m = mr_by_rkey(p->rkey);
            if (!m || m->pd != qp->pd || !(m->access & IBV_ACCESS_REMOTE_WRITE) ||
                !(qp->access & IBV_ACCESS_REMOTE_WRITE) || !mr_covers(m, p->raddr, p->msg_len)) {
                send_resp(qp, VM_PKT_NAK, p->psn, VM_NAK_ACCESS);
                qp_error(qp);
                return 1;
            }
            qp->cur_mr = m;
        } else if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM) {
            struct vm_rwqe *w = &qp->rq[qp->rq_head % qp->cap.max_recv_wr];
            uint64_t room = 0;
            int ok = 1;
            for (int i = 0; i < w->nsge; i++) {
                struct vm_mr *m = mr_by_lkey(w->sge[i].lkey);
                ok &= m && m->pd == qp->pd && (m->access & IBV_ACCESS_LOCAL_WRITE) &&
                      mr_covers(m, w->sge[i].addr, w->sge[i].length);
                room += w->sge[i].length;
            }
            if (!ok || room < p->msg_len) {
                /* the receive cannot take it: local length/protection
                 * error on the receive, invalid request to the sender */
                struct ibv_wc wc = {.wr_id = w->wr_id,
                                    .status = ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR,
                                    .opcode = IBV_WC_RECV,
                                    .vendor_err = VM_VENDOR | 0x42,
                                    .qp_num = qp->ib.qp_num};
                qp->rq_head++;
                cq_push(qp->rcq, &wc, NULL, 0);
                send_resp(qp, VM_PKT_NAK, p->psn, VM_NAK_INVREQ);
                qp_error(qp);
                return 1;
            }
        }
    } else if (!qp->in_msg || op != qp->cur_op) {
        send_resp(qp, VM_PKT_NAK, p->psn, VM_NAK_INVREQ);
        qp_error(qp);
        return 1;
    }
    const uint8_t *payload = (const uint8_t *)(p + 1);
    if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
        /* the MR may have been deregistered since the first packet */
        struct vm_mr *m = mr_by_rkey(p->rkey);
        if (m != qp->cur_mr || !mr_covers(m, p->raddr, p->len)) {
            send_resp(qp, VM_PKT_NAK, p->psn, VM_NAK_ACCESS);
            qp_error(qp);
            return 1;
        }
        memcpy((void *)(uintptr_t)p->raddr, payload, p->len);
    } else {
        scatter(&qp->rq[qp->rq_head % qp->cap.max_recv_wr], qp->cur_off, payload, p->len);
    }
    qp->cur_off += p->len;
    qp->epsn = psn_add(qp->epsn, 1);
    if (!(p->flags & VM_F_LAST))
        return 1;
    qp->in_msg = 0;
    if (takes_recv) {
        /* the receive completes after its data is placed, in RQ order;
         * write with immediate carries the length written and the
         * immediate (network order, as posted) [poll_cq: IBV_WC_WITH_IMM] */
        struct vm_rwqe *w = &qp->rq[qp->rq_head % qp->cap.max_recv_wr];
        qp->rq_head++;
        struct ibv_wc wc = {
            .wr_id = w->wr_id,
            .status = IBV_WC_SUCCESS,
            .opcode = op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
            .byte_len = (uint32_t)qp->cur_len,
            .qp_num = qp->ib.qp_num,
            .src_qp = p->src_qpn,
            .wc_flags = op == IBV_WR_SEND ? 0 : IBV_WC_WITH_IMM,
        };
        wc.imm_data = p->imm;
        cq_push(qp->rcq, &wc, NULL, 0);
    }
    send_resp(qp, VM_PKT_ACK, p->psn, 0);
    return 1;
}

/* Take what arrived for qp. 1 when it did something. */
static int responder(struct vm_qp *qp, double now)
{
    struct vm_slot *s = &shm->slots[qp->slot];
    int busy = 0;
    struct vm_pkt *p;
    while ((p = ring_front(&s->resp, s->resp_data, VM_RESP_RING))) {
        on_response(qp, p, now);
        ring_pop(&s->resp, p);
        busy = 1;
    }
    for (int n = 0; n < 64 && (p = ring_front(&s->req, s->req_data, VM_REQ_RING)); n++) {
        if (!on_request(qp, p))
            break;
        ring_pop(&s->req, p);
        busy = 1;
    }
    return busy;
}

static void *adapter(void *arg)
{
    (void)arg;
    _Atomic uint32_t *bell = &shm->procs[vm.proc].bell;
    for (;;) {
        uint32_t seen = atomic_load(bell);
        pthread_mutex_lock(&vm.lock);
        if (vm.stop) {
            pthread_mutex_unlock(&vm.lock);
            return NULL;
        }
        double now = now_s();
        int busy = 0, timers = 0;
        for (struct vm_qp *qp = vm.qps; qp; qp = qp->next) {
            busy |= responder(qp, now);
            busy |= requester(qp, now);
            timers |= qp->sq_head != qp->sq_tail;
        }
        pthread_mutex_unlock(&vm.lock);
        if (busy)
            continue;
        struct timespec ts = {0, timers ? 1000000 : 50000000};
        syscall(SYS_futex, bell, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
}

/* ---- the verbs ---- */

static int claim_proc(void)
{
    for (int i = 0; i < VM_MAX_PROCS; i++) {
        int pid = atomic_load(&shm->procs[i].pid);
        if (pid == 0 || (pid != getpid() && !pid_alive(pid))) {
            if (atomic_compare_exchange_strong(&shm->procs[i].pid, &pid, getpid()))
                return i;
        }
    }
    return -1;
}

static struct ibv_device **m_get_device_list(int *n)
{
    local_reset_if_forked();
    struct ibv_device **list = calloc((size_t)shm->ndevs + 1, sizeof *list);
    if (!list) {
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < shm->ndevs; i++) {
        struct ibv_device *d = &vm.devs[i];
        memset(d, 0, sizeof *d);
        d->node_type = IBV_NODE_CA;
        d->transport_type = IBV_TRANSPORT_IB;
        snprintf(d->name, sizeof d->name, "%.60s", shm->devs[i].name);
        snprintf(d->ibdev_path, sizeof d->ibdev_path, "%.100s/%.60s", sysfs_dir, shm->devs[i].name);
        list[i] = d;
    }
    if (n)
        *n = shm->ndevs;
    return list;
}

static void m_free_device_list(struct ibv_device **list)
{
    free(list);
}

static const char *m_get_device_name(struct ibv_device *d)
{
    return d->name;
}

static struct ibv_context *m_open_device(struct ibv_device *d)
{
    local_reset_if_forked();
    int dev = (int)(d - vm.devs);
    if (dev < 0 || dev >= shm->ndevs) {
        errno = ENODEV;
        return NULL;
    }
    struct vm_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    c->ib.device = d;
    c->ib.num_comp_vectors = 1;
    c->ib.async_fd = -1;
    c->ib.cmd_fd = -1;
    c->dev = dev;
    pthread_mutex_lock(&vm.lock);
    if (vm.proc < 0)
        vm.proc = claim_proc();
    if (vm.proc < 0) {
        pthread_mutex_unlock(&vm.lock);
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    if (!vm.running) {
        vm.stop = 0;
        if (pthread_create(&vm.thread, NULL, adapter, NULL) != 0) {
            pthread_mutex_unlock(&vm.lock);
            free(c);
            errno = EAGAIN;
            return NULL;
        }
        vm.running = 1;
    }
    vm.nctx++;
    pthread_mutex_unlock(&vm.lock);
    return &c->ib;
}

static int m_close_device(struct ibv_context *ctx)
{
    pthread_mutex_lock(&vm.lock);
    int last = --vm.nctx == 0 && vm.running;
    if (last)
        vm.stop = 1;
    pthread_mutex_unlock(&vm.lock);
    if (last) {
        bell_ring(vm.proc);
        pthread_join(vm.thread, NULL);
        vm.running = 0;
    }
    free(ctx);
    return 0;
}

static struct vm_dev_sh *ctx_dev(struct ibv_context *ctx)
{
    return &shm->devs[((struct vm_ctx *)ctx)->dev];
}

static int m_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
    memset(a, 0, sizeof *a);
    snprintf(a->fw_ver, sizeof a->fw_ver, "verbs-model");
    a->max_mr_size = 1ull << 40;
    a->page_size_cap = 4096;
    a->max_qp = VM_MAX_QPS;
    a->max_qp_wr = VM_MAX_WR;
    a->max_sge = VM_MAX_SGE;
    a->max_cq = 1024;
    a->max_cqe = VM_MAX_CQE;
    a->max_mr = 1 << 20;
    a->max_pd = 1 << 16;
    a->max_qp_rd_atom = 16;
    a->max_qp_init_rd_atom = 16;
    a->phys_port_cnt = (uint8_t)ctx_dev(ctx)->nports;
    return 0;
}

static int m_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a)
{
    struct vm_dev_sh *d = ctx_dev(ctx);
    if (port < 1 || port > d->nports)
        return EINVAL;
    const struct vm_port_sh *p = &d->ports[port - 1];
    memset(a, 0, sizeof *a);
    a->state = p->down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
    a->max_mtu = IBV_MTU_4096;
    a->active_mtu = (enum ibv_mtu)p->mtu;
    a->gid_tbl_len = VMODEL_MAX_GIDS;
    a->max_msg_sz = VM_MAX_MSG;
    a->pkey_tbl_len = 1;
    a->lid = p->lid;
    a->phys_state = p->down ? 3 : 5; /* Disabled / LinkUp */
    a->link_layer = p->ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

static int m_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    struct vm_dev_sh *d = ctx_dev(ctx);
    if (port < 1 || port > d->nports || index < 0 || index >= VMODEL_MAX_GIDS)
        return EINVAL;
    memcpy(gid->raw, d->ports[port - 1].gid[index], 16);
    return 0;
}

static struct ibv_pd *m_alloc_pd(struct ibv_context *ctx)
{
    struct vm_pd *pd = calloc(1, sizeof *pd);
    if (!pd) {
        errno = ENOMEM;
        return NULL;
    }
    pd->ib.context = ctx;
    return &pd->ib;
}

static int m_dealloc_pd(struct ibv_pd *ibpd)
{
    struct vm_pd *pd = (struct vm_pd *)ibpd;
    /* "fails if any other resources are still associated" [alloc_pd] */
    if (pd->refs)
        return EBUSY;
    free(pd);
    return 0;
}

static struct ibv_mr *m_reg_mr(struct ibv_pd *ibpd, void *addr, size_t len, int access)
{
    const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;
    /* "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC is set, then
     * IBV_ACCESS_LOCAL_WRITE must be set too" [reg_mr] */
    if ((access & ~known) || len == 0 ||
        ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
         !(access & IBV_ACCESS_LOCAL_WRITE))) {
        errno = EINVAL;
        return NULL;
    }
    /* registering pins pages: memory that is not mapped cannot be
     * registered (EFAULT, as the kernel's get_user_pages fails) */
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a0 = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
    uintptr_t a1 = ((uintptr_t)addr + len + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    size_t npages = (a1 - a0) / (size_t)pg;
    unsigned char *vec = malloc(npages ? npages : 1);
    if (!vec) {
        errno = ENOMEM;
        return NULL;
    }
    int mapped = mincore((void *)a0, a1 - a0, vec) == 0;
    free(vec);
    if (!mapped) {
        errno = EFAULT;
        return NULL;
    }
    struct vm_mr *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    uint32_t k = atomic_fetch_add(&shm->next_key, 1);
    m->ib.context = ibpd->context;
    m->ib.pd = ibpd;
    m->ib.addr = addr;
    m->ib.length = len;
    /* distinct lkey and rkey (even / odd): using one for the other fails */
    m->ib.lkey = (k << 1) & 0x00ffffffu;
    m->ib.rkey = m->ib.lkey | 1u;
    m->pd = (struct vm_pd *)ibpd;
    m->access = access;
    pthread_mutex_lock(&vm.lock);
    m->pd->refs++;
    m->next = vm.mrs;
    vm.mrs = m;
    vm.st.reg_mr++;
    pthread_mutex_unlock(&vm.lock);
    return &m->ib;
}

static int m_dereg_mr(struct ibv_mr *ibmr)
{
    struct vm_mr *m = (struct vm_mr *)ibmr;
    pthread_mutex_lock(&vm.lock);
    for (struct vm_mr **pp = &vm.mrs; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    m->pd->refs--;
    vm.st.dereg_mr++;
    pthread_mutex_unlock(&vm.lock);
    free(m);
    return 0;
}

static struct ibv_comp_channel *m_create_comp_channel(struct ibv_context *ctx)
{
    struct vm_channel *ch = calloc(1, sizeof *ch);
    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    /* one readable count per event: get_cq_event takes one at a time */
    ch->ib.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ib.fd < 0) {
        free(ch);
        return NULL;
    }
    ch->ib.context = ctx;
    return &ch->ib;
}

static int m_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
    struct vm_channel *ch = (struct vm_channel *)ibch;
    if (ch->cqs)
        return EBUSY;
    close(ch->ib.fd);
    free(ch);
    return 0;
}

static int cq_capacity(int cqe)
{
    int cap = 1;
    while (cap < cqe + 1)
        cap <<= 1;
    return cap - 1; /* "at least cqe entries" [create_cq] */
}

static struct ibv_cq *m_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                  struct ibv_comp_channel *ch, int vec)
{
    if (cqe < 1 || cqe > VM_MAX_CQE || vec < 0 || vec >= ctx->num_comp_vectors) {
        errno = EINVAL;
        return NULL;
    }
    struct vm_cq *cq = calloc(1, sizeof *cq);
    int cap = cq_capacity(cqe);
    if (cq) {
        cq->wc = calloc((size_t)cap, sizeof *cq->wc);
        cq->meta = calloc((size_t)cap, sizeof *cq->meta);
    }
    if (!cq || !cq->wc || !cq->meta) {
        if (cq) {
            free(cq->wc);
            free(cq->meta);
            free(cq);
        }
        errno = ENOMEM;
        return NULL;
    }
    cq->ib.context = ctx;
    cq->ib.channel = ch;
    cq->ib.cq_context = cq_context;
    cq->ib.cqe = cap;
    pthread_mutex_lock(&vm.lock);
    cq->cap = vm.cq_size > 0 && vm.cq_size < cap ? vm.cq_size : cap;
    cq->ch = (struct vm_channel *)ch;
    if (cq->ch)
        cq->ch->cqs++;
    cq->next = vm.cqs;
    vm.cqs = cq;
    pthread_mutex_unlock(&vm.lock);
    return &cq->ib;
}

static int m_resize_cq(struct ibv_cq *ibcq, int cqe)
{
    struct vm_cq *cq = (struct vm_cq *)ibcq;
    pthread_mutex_lock(&vm.lock);
    /* "cqe must be at least the number of unpolled entries" [resize_cq] */
    if (cqe < 1 || cqe > VM_MAX_CQE || cqe < cq->count || cq->error) {
        pthread_mutex_unlock(&vm.lock);
        return EINVAL;
    }
    int cap = cq_capacity(cqe);
    int real = vm.cq_size > 0 && vm.cq_size < cap ? vm.cq_size : cap;
    struct ibv_wc *wc = calloc((size_t)real, sizeof *wc);
    struct vm_cqe_meta *meta = calloc((size_t)real, sizeof *meta);
    if (!wc || !meta) {
        free(wc);
        free(meta);
        pthread_mutex_unlock(&vm.lock);
        return ENOMEM;
    }
    for (int i = 0; i < cq->count && i < real; i++) {
        wc[i] = cq->wc[(cq->head + i) % cq->cap];
        meta[i] = cq->meta[(cq->head + i) % cq->cap];
    }
    free(cq->wc);
    free(cq->meta);
    cq->wc = wc;
    cq->meta = meta;
    cq->head = 0;
    cq->cap = real;
    cq->ib.cqe = cap;
    pthread_mutex_unlock(&vm.lock);
    return 0;
}

static int m_destroy_cq(struct ibv_cq *ibcq)
{
    struct vm_cq *cq = (struct vm_cq *)ibcq;
    pthread_mutex_lock(&vm.lock);
    /* "fails if any queue pair is still associated with this CQ" [create_cq] */
    if (cq->qps) {
        pthread_mutex_unlock(&vm.lock);
        return EBUSY;
    }
    for (struct vm_cq **pp = &vm.cqs; *pp; pp = &(*pp)->next)
        if (*pp == cq) {
            *pp = cq->next;
            break;
        }
    if (cq->ch) {
        cq->ch->cqs--;
        for (int i = 0; i < cq->ch->nevents; i++)
            if (cq->ch->events[i] == cq)
                cq->ch->events[i] = NULL;
    }
    pthread_mutex_unlock(&vm.lock);
    free(cq->wc);
    free(cq->meta);
    free(cq);
    return 0;
}

static int m_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
    (void)solicited_only; /* every completion counts (the transport asks 0) */
    struct vm_cq *cq = (struct vm_cq *)ibcq;
    pthread_mutex_lock(&vm.lock);
    cq->armed = 1;
    pthread_mutex_unlock(&vm.lock);
    return 0;
}

static int m_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **cq, void **ctx)
{
    struct vm_channel *ch = (struct vm_channel *)ibch;
    uint64_t v;
    /* blocks unless the caller made the fd non-blocking; -1 on error
     * [get_cq_event] */
    if (read(ch->ib.fd, &v, sizeof v) != (ssize_t)sizeof v)
        return -1;
    pthread_mutex_lock(&vm.lock);
    struct vm_cq *c = NULL;
    while (ch->nevents && !c) {
        c = ch->events[0];
        memmove(ch->events, ch->events + 1, sizeof ch->events[0] * (size_t)(ch->nevents - 1));
        ch->nevents--;
    }
    pthread_mutex_unlock(&vm.lock);
    if (!c) {
        errno = EAGAIN;
        return -1;
    }
    *cq = &c->ib;
    *ctx = c->ib.cq_context;
    return 0;
}

static void m_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
    (void)cq;
    (void)n;
}

static struct ibv_qp *m_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *a)
{
    /* RC only (all the transport uses); an SRQ is not modelled */
    if (a->qp_type != IBV_QPT_RC || a->srq || !a->send_cq || !a->recv_cq ||
        a->cap.max_send_wr < 1 || a->cap.max_send_wr > VM_MAX_WR ||
        a->cap.max_recv_wr > VM_MAX_WR || a->cap.max_send_sge > VM_MAX_SGE ||
        a->cap.max_recv_sge > VM_MAX_SGE || a->cap.max_inline_data > VM_MAX_INLINE) {
        errno = EINVAL;
        return NULL;
    }
    struct vm_qp *qp = calloc(1, sizeof *qp);
    if (!qp) {
        errno = ENOMEM;
        return NULL;
    }
    /* "ibv_create_qp() will update the qp_init_attr->cap struct with the
     * actual QP values" [create_qp] */
    a->cap.max_inline_data = VM_MAX_INLINE;
    if (a->cap.max_recv_wr < 1)
        a->cap.max_recv_wr = 1;
    qp->cap = a->cap;
    qp->sq = calloc(qp->cap.max_send_wr, sizeof *qp->sq);
    qp->rq = calloc(qp->cap.max_recv_wr, sizeof *qp->rq);
    if (!qp->sq || !qp->rq) {
        free(qp->sq);
        free(qp->rq);
        free(qp);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_lock(&vm.lock);
    int slot = -1;
    for (int pass = 0; pass < 2 && slot < 0; pass++)
        for (int i = 0; i < VM_MAX_QPS && slot < 0; i++) {
            struct vm_slot *s = &shm->slots[i];
            int used = atomic_load(&s->used);
            if (used && pass == 1 && !pid_alive(atomic_load(&s->pid))) {
                atomic_store(&s->used, 0); /* reclaim a dead owner's */
                used = 0;
            }
            int zero = 0;
            if (!used && atomic_compare_exchange_strong(&s->used, &zero, 1))
                slot = i;
        }
    if (slot < 0) {
        pthread_mutex_unlock(&vm.lock);
        free(qp->sq);
        free(qp->rq);
        free(qp);
        errno = ENOMEM;
        return NULL;
    }
    struct vm_slot *s = &shm->slots[slot];
    ring_init(&s->req);
    ring_init(&s->resp);
    atomic_store(&s->pid, getpid());
    atomic_store(&s->proc, vm.proc);
    atomic_store(&s->state, IBV_QPS_RESET);
    atomic_store(&s->dev, ((struct vm_ctx *)ibpd->context)->dev);
    atomic_store(&s->port, 0);
    qp->gen = atomic_fetch_add(&s->gen, 1) + 1;
    qp->slot = slot;
    qp->pd = (struct vm_pd *)ibpd;
    qp->pd->refs++;
    qp->scq = (struct vm_cq *)a->send_cq;
    qp->rcq = (struct vm_cq *)a->recv_cq;
    qp->scq->qps++;
    qp->rcq->qps++;
    qp->sig_all = a->sq_sig_all;
    qp->ib.context = ibpd->context;
    qp->ib.qp_context = a->qp_context;
    qp->ib.pd = ibpd;
    qp->ib.send_cq = a->send_cq;
    qp->ib.recv_cq = a->recv_cq;
    qp->ib.qp_num = VM_QPN_BASE + (uint32_t)slot;
    qp->ib.state = IBV_QPS_RESET;
    qp->ib.qp_type = IBV_QPT_RC;
    qp->next = vm.qps;
    vm.qps = qp;
    pthread_mutex_unlock(&vm.lock);
    return &qp->ib;
}

/* Attributes each RC transition requires and allows [modify_qp: "minimum
 * list of attributes that must be changed"; the optional ones as the
 * kernel's qp_state_table in drivers/infiniband/core/verbs.c lists them]. */
static int transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next, int mask)
{
    int req = 0, opt = 0;
    mask &= ~IBV_QP_STATE;
    if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
        return mask == 0; /* from any state */
    if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT)
        req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT)
        opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
        req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    } else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
        req = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
              IBV_QP_MAX_QP_RD_ATOMIC;
        opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
              IBV_QP_PATH_MIG_STATE;
    } else if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
        opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
              IBV_QP_MIN_RNR_TIMER;
    } else {
        return 0; /* no such transition */
    }
    return (mask & req) == req && (mask & ~(req | opt)) == 0;
}

static int m_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
    struct vm_qp *qp = (struct vm_qp *)ibqp;
    pthread_mutex_lock(&vm.lock);
    enum ibv_qp_state cur = qp->ib.state;
    enum ibv_qp_state next = mask & IBV_QP_STATE ? a->qp_state : cur;
    int err = 0;
    /* "If any of the modify attributes or the modify mask are invalid,
     * none of the attributes will be modified" [modify_qp] */
    if (!transition_ok(cur, next, mask))
        err = EINVAL;
    struct vm_dev_sh *d = ctx_dev(ibqp->context);
    int port = mask & IBV_QP_PORT ? a->port_num : qp->port;
    if (!err && (mask & IBV_QP_PORT) && (a->port_num < 1 || a->port_num > d->nports))
        err = EINVAL;
    if (!err && (mask & IBV_QP_ACCESS_FLAGS) &&
        (a->qp_access_flags & ~(unsigned)(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                          IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE)))
        err = EINVAL;
    if (!err && (mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
        err = EINVAL; /* one P_Key */
    if (!err && next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
        const struct vm_port_sh *p = &d->ports[port - 1];
        /* the path MTU cannot exceed the port's; RoCE needs a GRH
         * [modify_qp: "If port flag IBV_QPF_GRH_REQUIRED is set then
         * ah_attr ... must be passed with ... is_global = 1"], whose
         * source GID index names an entry of the port's table */
        if (a->path_mtu < IBV_MTU_256 || a->path_mtu > (enum ibv_mtu)p->mtu)
            err = EINVAL;
        else if (a->dest_qp_num < VM_QPN_BASE || a->dest_qp_num >= VM_QPN_BASE + VM_MAX_QPS)
            err = EINVAL; /* no such queue pair on this fabric */
        else if (a->ah_attr.port_num && a->ah_attr.port_num != port)
            err = EINVAL;
        else if (p->ethernet && !a->ah_attr.is_global)
            err = EINVAL;
        else if (a->ah_attr.is_global) {
            int g = a->ah_attr.grh.sgid_index;
            static const uint8_t zero[16];
            if (g >= p->ngids || memcmp(p->gid[g], zero, 16) == 0)
                err = EINVAL;
        }
        if ((a->rq_psn & ~0xffffffu) || a->max_dest_rd_atomic > 16)
            err = err ? err : EINVAL;
    }
    if (!err && next == IBV_QPS_RTS && cur == IBV_QPS_RTR &&
        ((a->sq_psn & ~0xffffffu) || a->timeout > 31 || a->retry_cnt > 7 || a->rnr_retry > 7 ||
         a->max_rd_atomic > 16))
        err = EINVAL;
    if (err) {
        pthread_mutex_unlock(&vm.lock);
        return err;
    }
    if (mask & IBV_QP_PORT) {
        qp->port = a->port_num;
        atomic_store(&shm->slots[qp->slot].port, a->port_num);
    }
    if (mask & IBV_QP_ACCESS_FLAGS)
        qp->access = a->qp_access_flags;
    if (mask & IBV_QP_AV)
        qp->ah = a->ah_attr;
    if (mask & IBV_QP_PATH_MTU)
        qp->path_mtu = a->path_mtu;
    if (mask & IBV_QP_DEST_QPN) {
        qp->dest_qpn = a->dest_qp_num;
        qp->dest_gen = atomic_load(&shm->slots[a->dest_qp_num - VM_QPN_BASE].gen);
    }
    if (mask & IBV_QP_RQ_PSN)
        qp->rq_psn = qp->epsn = a->rq_psn;
    if (mask & IBV_QP_SQ_PSN)
        qp->sq_psn = qp->next_psn = a->sq_psn;
    if (mask & IBV_QP_TIMEOUT)
        qp->timeout = a->timeout;
    if (mask & IBV_QP_RETRY_CNT)
        qp->retry_cnt = a->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY)
        qp->rnr_retry = qp->rnr_left = a->rnr_retry;
    if (mask & IBV_QP_MIN_RNR_TIMER)
        qp->min_rnr_timer = a->min_rnr_timer;
    if (next == IBV_QPS_ERR) {
        qp_error(qp);
    } else if (next == IBV_QPS_RESET) {
        /* back to reset: the queues are emptied without completions */
        qp->sq_head = qp->sq_tail = qp->sq_tx = qp->sq_free = 0;
        qp->rq_head = qp->rq_tail = 0;
        qp->tx_off = 0;
        qp->loss_since = 0;
        qp->in_msg = 0;
        qp_set_state(qp, IBV_QPS_RESET);
    } else {
        qp_set_state(qp, next);
    }
    pthread_mutex_unlock(&vm.lock);
    bell_ring(vm.proc);
    return 0;
}

static int m_destroy_qp(struct ibv_qp *ibqp)
{
    struct vm_qp *qp = (struct vm_qp *)ibqp;
    pthread_mutex_lock(&vm.lock);
    for (struct vm_qp **pp = &vm.qps; *pp; pp = &(*pp)->next)
        if (*pp == qp) {
            *pp = qp->next;
            break;
        }
    qp->scq->qps--;
    qp->rcq->qps--;
    qp->pd->refs--;
    for (int i = 0; i < qp->scq->cap; i++)
        if (qp->scq->meta[i].qp == qp)
            qp->scq->meta[i].qp = NULL;
    struct vm_slot *s = &shm->slots[qp->slot];
    atomic_store(&s->state, IBV_QPS_RESET);
    atomic_store(&s->used, 0);
    pthread_mutex_unlock(&vm.lock);
    free(qp->sq);
    free(qp->rq);
    free(qp);
    return 0;
}

static int m_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct vm_qp *qp = (struct vm_qp *)ibqp;
    int err = 0;
    pthread_mutex_lock(&vm.lock);
    vm.st.post_send_calls++;
    for (; wr; wr = wr->next) {
        /* the send queue is processed in RTS only: posting in Reset, Init
         * or RTR fails (rxe and mlx5 return EINVAL); in Error a WR is
         * accepted and completes flushed [IBA 10.3.1] */
        if (qp->ib.state != IBV_QPS_RTS && qp->ib.state != IBV_QPS_ERR) {
            err = EINVAL;
            break;
        }
        int op = wr->opcode;
        if ((op != IBV_WR_RDMA_WRITE && op != IBV_WR_RDMA_WRITE_WITH_IMM && op != IBV_WR_SEND &&
             op != IBV_WR_SEND_WITH_IMM) ||
            wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge) {
            err = EINVAL;
            break;
        }
        /* the send queue is full (ENOMEM, as rxe and mlx5 say) while
         * max_send_wr entries are not yet reclaimed: an entry is reclaimed
         * when its completion, or a later one of the same queue, is polled
         * (an unsignalled WR holds its entry until then) */
        if (qp->sq_tail - qp->sq_free >= qp->cap.max_send_wr) {
            err = ENOMEM;
            break;
        }
        struct vm_wqe w = {.wr_id = wr->wr_id,
                           .opcode = op,
                           .signaled = !!(wr->send_flags & IBV_SEND_SIGNALED),
                           .nsge = wr->num_sge,
                           .imm = wr->imm_data,
                           .raddr = wr->wr.rdma.remote_addr,
                           .rkey = wr->wr.rdma.rkey};
        for (int i = 0; i < wr->num_sge; i++) {
            w.sge[i] = wr->sg_list[i];
            w.len += wr->sg_list[i].length;
        }
        if (wr->send_flags & IBV_SEND_INLINE) {
            /* "Valid only for Send and RDMA Write. The L_Key will not be
             * checked"; the buffer "can be reused immediately after the
             * call returns" [post_send]: copied now */
            if (w.len > qp->cap.max_inline_data) {
                err = EINVAL;
                break;
            }
            w.inl = 1;
            uint64_t off = 0;
            for (int i = 0; i < wr->num_sge; i++) {
                memcpy(w.inl_data + off, (void *)(uintptr_t)wr->sg_list[i].addr,
                       wr->sg_list[i].length);
                off += wr->sg_list[i].length;
            }
            vm.st.inline_wrs++;
        }
        vm.st.send_wrs++;
        vm.st.signaled_wrs += w.signaled || qp->sig_all;
        vm.st.writes += op == IBV_WR_RDMA_WRITE;
        vm.st.writes_imm += op == IBV_WR_RDMA_WRITE_WITH_IMM;
        vm.st.sends += op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
        if (qp->ib.state == IBV_QPS_ERR) {
            struct ibv_wc wc = {.wr_id = w.wr_id,
                                .status = IBV_WC_WR_FLUSH_ERR,
                                .vendor_err = VM_VENDOR | 0x5,
                                .qp_num = qp->ib.qp_num};
            cq_push(qp->scq, &wc, qp, qp->sq_tail);
            qp->sq_head = qp->sq_tx = ++qp->sq_tail;
            continue;
        }
        qp->sq[qp->sq_tail % qp->cap.max_send_wr] = w;
        qp->sq_tail++;
    }
    if (err && bad)
        *bad = wr; /* "returns this failing WR through bad_wr" [post_send] */
    pthread_mutex_unlock(&vm.lock);
    bell_ring(vm.proc);
    return err;
}

static int m_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct vm_qp *qp = (struct vm_qp *)ibqp;
    int err = 0;
    pthread_mutex_lock(&vm.lock);
    vm.st.post_recv_calls++;
    for (; wr; wr = wr->next) {
        /* receives may be posted from Init on, not in Reset [IBA 10.3.1;
         * rxe post_recv: EINVAL below Init]; in Error they are flushed */
        if (qp->ib.state == IBV_QPS_RESET || wr->num_sge < 0 ||
            (uint32_t)wr->num_sge > qp->cap.max_recv_sge) {
            err = EINVAL;
            break;
        }
        if (qp->rq_tail - qp->rq_head >= qp->cap.max_recv_wr) {
            err = ENOMEM;
            break;
        }
        vm.st.recv_wrs++;
        if (qp->ib.state == IBV_QPS_ERR) {
            struct ibv_wc wc = {.wr_id = wr->wr_id,
                                .status = IBV_WC_WR_FLUSH_ERR,
                                .opcode = IBV_WC_RECV,
                                .vendor_err = VM_VENDOR | 0x5,
                                .qp_num = qp->ib.qp_num};
            cq_push(qp->rcq, &wc, NULL, 0);
            continue;
        }
        struct vm_rwqe *w = &qp->rq[qp->rq_tail % qp->cap.max_recv_wr];
        w->wr_id = wr->wr_id;
        w->nsge = wr->num_sge;
        for (int i = 0; i < wr->num_sge; i++)
            w->sge[i] = wr->sg_list[i];
        qp->rq_tail++;
    }
    if (err && bad)
        *bad = wr;
    pthread_mutex_unlock(&vm.lock);
    bell_ring(vm.proc); /* a receive may end an RNR wait */
    return err;
}

static int m_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
    struct vm_cq *cq = (struct vm_cq *)ibcq;
    pthread_mutex_lock(&vm.lock);
    vm.st.poll_calls++;
    if (cq->error) {
        /* "On failure, a negative value is returned" [poll_cq]: an
         * overrun CQ "cannot be used" */
        pthread_mutex_unlock(&vm.lock);
        return -1;
    }
    int k = 0;
    for (; k < n && cq->count; k++) {
        wc[k] = cq->wc[cq->head];
        const struct vm_cqe_meta *m = &cq->meta[cq->head];
        if (m->is_send && m->qp && m->sq_idx + 1 - m->qp->sq_free <= m->qp->cap.max_send_wr)
            m->qp->sq_free = m->sq_idx + 1;
        cq->head = (cq->head + 1) % cq->cap;
        cq->count--;
    }
    vm.st.cqes += (uint64_t)k;
    pthread_mutex_unlock(&vm.lock);
    return k;
}

static const struct loom_ibv model_ibv = {
    .struct_size = sizeof(struct loom_ibv),
    .name = "verbs model",
    .sysfs = sysfs_dir,
    .get_device_list = m_get_device_list,
    .free_device_list = m_free_device_list,
    .get_device_name = m_get_device_name,
    .open_device = m_open_device,
    .close_device = m_close_device,
    .query_device = m_query_device,
    .query_port = m_query_port,
    .query_gid = m_query_gid,
    .alloc_pd = m_alloc_pd,
    .dealloc_pd = m_dealloc_pd,
    .reg_mr = m_reg_mr,
    .dereg_mr = m_dereg_mr,
    .create_comp_channel = m_create_comp_channel,
    .destroy_comp_channel = m_destroy_comp_channel,
    .create_cq = m_create_cq,
    .resize_cq = m_resize_cq,
    .destroy_cq = m_destroy_cq,
    .get_cq_event = m_get_cq_event,
    .ack_cq_events = m_ack_cq_events,
    .create_qp = m_create_qp,
    .modify_qp = m_modify_qp,
    .destroy_qp = m_destroy_qp,
    .wc_status_str = status_str,
    .req_notify_cq = m_req_notify_cq,
    .post_send = m_post_send,
    .post_recv = m_post_recv,
    .poll_cq = m_poll_cq,
};

const struct loom_ibv *vmodel_ibv(void)
{
    return &model_ibv;
}

const char *vmodel_sysfs(void)
{
    return sysfs_dir;
}

/* ---- set-up ---- */

static int write_file(const char *dir, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    /* make the parents */
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", text);
    return fclose(f);
}

static void gid_text(const uint8_t g[16], char *out)
{
    for (int i = 0; i < 8; i++)
        sprintf(out + 5 * i, "%02x%02x%s", g[2 * i], g[2 * i + 1], i < 7 ? ":" : "");
}

static int parse_gid(const char *s, uint8_t g[16])
{
    unsigned v[8];
    if (sscanf(s, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7]) != 8)
        return -1;
    for (int i = 0; i < 8; i++) {
        g[2 * i] = (uint8_t)(v[i] >> 8);
        g[2 * i + 1] = (uint8_t)v[i];
    }
    return 0;
}

void vmodel_cfg_loopback(struct vmodel_cfg *cfg)
{
    *cfg = (struct vmodel_cfg){
        .ndevs = 1,
        .devs = {{.name = "mlx5_0",
                  .nports = 1,
                  .ports = {{.ethernet = 1,
                             .mtu = IBV_MTU_4096,
                             .ngids = 4,
                             .gids = {{"fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1"},
                                      {"fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2"},
                                      {"0000:0000:0000:0000:0000:ffff:7f00:0001", "IB/RoCE v1"},
                                      {"0000:0000:0000:0000:0000:ffff:7f00:0001", "RoCE v2"}}}}}},
    };
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw);

/* Trees left by a creator that did not reach vmodel_destroy (a test that
 * failed and exited at once): removed once that process is gone. */
static void sweep_stale(void)
{
    DIR *d = opendir("/tmp");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = 0;
        if (sscanf(e->d_name, "loom-vmodel.%d.", &pid) != 1 || pid <= 0 || pid_alive(pid))
            continue;
        char path[300];
        snprintf(path, sizeof path, "/tmp/%.250s", e->d_name);
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

int vmodel_create(const struct vmodel_cfg *cfg)
{
    if (cfg->ndevs < 1 || cfg->ndevs > VMODEL_MAX_DEVS) {
        fprintf(stderr, "vmodel: %d devices (1..%d)\n", cfg->ndevs, VMODEL_MAX_DEVS);
        return -1;
    }
    shm_size = sizeof *shm;
    void *p = mmap(NULL, shm_size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("vmodel: mmap");
        return -1;
    }
    shm = p;
    shm->magic = VM_MAGIC;
    shm->ndevs = cfg->ndevs;
    shm->time_scale = cfg->time_scale;
    atomic_store(&shm->next_key, 0x100);
    sweep_stale();
    snprintf(sysfs_dir, sizeof sysfs_dir, "/tmp/loom-vmodel.%d.XXXXXX", (int)getpid());
    if (!mkdtemp(sysfs_dir)) {
        perror("vmodel: mkdtemp");
        return -1;
    }
    for (int i = 0; i < cfg->ndevs; i++) {
        const struct vmodel_dev_cfg *dc = &cfg->devs[i];
        struct vm_dev_sh *d = &shm->devs[i];
        snprintf(d->name, sizeof d->name, "%s", dc->name);
        d->nports = dc->nports;
        for (int k = 0; k < dc->nports; k++) {
            const struct vmodel_port_cfg *pc = &dc->ports[k];
            struct vm_port_sh *ps = &d->ports[k];
            char rel[256], txt[64];
            ps->ethernet = pc->ethernet;
            ps->down = pc->down;
            ps->lid = pc->lid;
            ps->mtu = pc->mtu ? (int)pc->mtu : IBV_MTU_4096;
            ps->ngids = pc->ngids;
            snprintf(rel, sizeof rel, "%s/ports/%d/state", dc->name, k + 1);
            write_file(sysfs_dir, rel, pc->down ? "1: DOWN" : "4: ACTIVE");
            snprintf(rel, sizeof rel, "%s/ports/%d/link_layer", dc->name, k + 1);
            write_file(sysfs_dir, rel, pc->ethernet ? "Ethernet" : "InfiniBand");
            snprintf(rel, sizeof rel, "%s/ports/%d/lid", dc->name, k + 1);
            snprintf(txt, sizeof txt, "0x%x", pc->lid);
            write_file(sysfs_dir, rel, txt);
            for (int g = 0; g < VMODEL_MAX_GIDS; g++) {
                if (g < pc->ngids && pc->gids[g].gid &&
                    parse_gid(pc->gids[g].gid, ps->gid[g]) != 0) {
                    fprintf(stderr, "vmodel: bad GID %s\n", pc->gids[g].gid);
                    return -1;
                }
                gid_text(ps->gid[g], txt);
                snprintf(rel, sizeof rel, "%s/ports/%d/gids/%d", dc->name, k + 1, g);
                write_file(sysfs_dir, rel, txt);
                if (g < pc->ngids && pc->gids[g].type) {
                    snprintf(rel, sizeof rel, "%s/ports/%d/gid_attrs/types/%d", dc->name, k + 1, g);
                    write_file(sysfs_dir, rel, pc->gids[g].type);
                }
            }
        }
    }
    creator = getpid();
    local_reset_if_forked();
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void vmodel_destroy(void)
{
    if (!shm)
        return;
    /* this process's adapter must not outlive the segment it polls, even
     * when a test leaves devices open */
    if (vm.pid == getpid() && vm.running) {
        pthread_mutex_lock(&vm.lock);
        vm.stop = 1;
        pthread_mutex_unlock(&vm.lock);
        bell_ring(vm.proc);
        pthread_join(vm.thread, NULL);
        vm.running = 0;
        vm.nctx = 0;
    }
    if (getpid() == creator && sysfs_dir[0])
        nftw(sysfs_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    munmap(shm, shm_size);
    shm = NULL;
}

/* ---- LOOM_TEST_VERBS_MODEL=1: the model in place of libibverbs ----
 * libloom's verbs_dl.c calls this (a weak reference it has) when the
 * variable is set. The model is made once per process, with the loopback
 * configuration, in the process that first asks (before it forks ranks:
 * Check's test process in check_transport, or at start-up below for
 * programs that fork at once), and its sysfs tree removed at that
 * process's exit. */
static pthread_once_t auto_once = PTHREAD_ONCE_INIT;
static int auto_ok;

static void auto_cleanup(void)
{
    vmodel_destroy();
}

static void auto_create(void)
{
    if (shm) {
        auto_ok = 1; /* a test made its own */
        return;
    }
    struct vmodel_cfg cfg;
    vmodel_cfg_loopback(&cfg);
    if (vmodel_create(&cfg) == 0) {
        auto_ok = 1;
        atexit(auto_cleanup);
    }
}

const struct loom_ibv *loom_verbs_test_model(char *why, size_t len);
const struct loom_ibv *loom_verbs_test_model(char *why, size_t len)
{
    pthread_once(&auto_once, auto_create);
    if (!auto_ok) {
        if (why && len)
            snprintf(why, len, "the software model of verbs could not be set up");
        return NULL;
    }
    return vmodel_ibv();
}

__attribute__((constructor)) static void auto_at_start(void)
{
    const char *v = getenv("LOOM_TEST_VERBS_MODEL");
    if (v && strcmp(v, "1") == 0)
        loom_verbs_test_model(NULL, 0);
}

void vmodel_inject(enum vmodel_fault fault, int n)
{
    local_reset_if_forked();
    pthread_mutex_lock(&vm.lock);
    if (fault == VMODEL_FAULT_BAD_RKEY)
        vm.bad_rkey = n;
    else if (fault == VMODEL_FAULT_CQ_SIZE)
        vm.cq_size = n;
    pthread_mutex_unlock(&vm.lock);
}

void vmodel_stats(struct vmodel_stats *st)
{
    pthread_mutex_lock(&vm.lock);
    *st = vm.st;
    pthread_mutex_unlock(&vm.lock);
}

void vmodel_stats_reset(void)
{
    pthread_mutex_lock(&vm.lock);
    memset(&vm.st, 0, sizeof vm.st);
    pthread_mutex_unlock(&vm.lock);
}
