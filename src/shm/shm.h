/* shm.h - the shared-memory engine: ranks of one server talk through a
 * segment they share.
 *
 * Ranks that share a server (the rank table's server_id; the boot-id host
 * hash for tcp:// and split communicators), confirmed at creation to share
 * a kernel and to open one segment, run collectives through that segment
 * and, where the kernel permits, cross-memory attach (process_vm_readv)
 * straight from each other's buffers. With several servers of equal rank
 * counts, coll/hier.c composes the engine with the network (allreduce,
 * broadcast, allgather, reduce). LOOM_SHM=0 turns all of it off. */
#ifndef LOOM_SHM_H
#define LOOM_SHM_H

#include "comm/comm.h"

/* At creation, after the local ranks are known and before the progress
 * thread starts, on the caller's thread. The ranks of this server talk
 * through the out-of-band service only; when several servers share the
 * communicator, agree (provided by the caller, run by every rank of comm)
 * turns this rank's {ok, single-copy} into the minimum over comm, so that
 * every rank decides alike. Sets comm->shm, or leaves it NULL on every rank
 * when shared memory is off or could not be set up everywhere. */
typedef loom_result_t (*loom_shm_agree_fn)(struct loom_comm *comm, int32_t flags[2]);
loom_result_t loom_shm_setup(struct loom_comm *comm, loom_shm_agree_fn agree);

/* Unmaps the segment and frees the state. Safe with comm->shm == NULL. */
void loom_shm_destroy(struct loom_comm *comm);

/* The servers sharing comm (1 when it is one server), this rank's server
 * and its index there, and the number of ranks a server has; 0 without
 * shared memory. With several servers every one has the same number of
 * ranks (else shared memory is not set up). */
int loom_shm_servers(const struct loom_comm *comm, int *server, int *local_index,
                     int *local_size);
/* The comm rank of local index j of server g (-1 out of range). */
int loom_shm_rank_of(const struct loom_comm *comm, int g, int j);
/* Which server rank r is on, and its index there (-1 when unknown). */
int loom_shm_server_of(const struct loom_comm *comm, int r, int *local_index);

/* Whether the engine runs op for the whole communicator (one server,
 * LOOM_ALGO not sending it to the network). The same answer on every rank. */
int loom_shm_usable(const struct loom_comm *comm, const struct loom_op *op);

/* How the engine would move op's data on comm: "copy" (through the
 * segment), "pipe" (through the segment in chunks, pipelined), "ll"
 * (small messages), "read" (ranks read their peers' buffers), "push"
 * (ranks read and write their peers' buffers, the work split evenly); NULL
 * without shared memory. Also LOOM_ALGO's names with "shm_" in front. */
const char *loom_shm_path_name(const struct loom_comm *comm, const struct loom_op *op);

/* Run op through shared memory when usable: *handled = 1 and the result;
 * otherwise *handled = 0 and LOOM_SUCCESS (the caller runs a network
 * algorithm). */
loom_result_t loom_shm_coll_run(struct loom_comm *comm, struct loom_op *op,
                                int *handled);

/* The engine among this server's ranks only, whatever the servers (for the
 * hierarchical algorithms, coll/hier.c): a broadcast from, or a reduce
 * into, op->root (a rank of this server), an allgather that fills this
 * server's blocks of recvbuf (by comm rank). */
loom_result_t loom_shm_run_local(struct loom_comm *comm, struct loom_op *op);

/* The step between servers of a hierarchical allreduce: the engine calls
 * fn with this rank's slice of the reduced data, to be reduced with the
 * other servers' in place. */
struct loom_shm_mid {
    loom_result_t (*fn)(void *ctx, void *buf, uint64_t count);
    void *ctx;
};
/* Allreduce: reduce-scatter among this server's ranks, mid on each rank's
 * slice, allgather among them. */
loom_result_t loom_shm_allreduce_mid(struct loom_comm *comm, struct loom_op *op,
                                     const struct loom_shm_mid *mid);

/* This rank failed in call op outside the engine (a network step between
 * servers): raise its failed flag, blaming comm rank blame (-1: none), so
 * that the ranks of its server waiting on it name the cause rather than
 * find its process gone. */
void loom_shm_fail(struct loom_comm *comm, const struct loom_op *op, int blame);

/* A rank of this server whose process is gone though it neither failed
 * (raised its failed flag) nor destroyed its communicator: it died. For a
 * failure met outside the engine, whose own message may name only the
 * rank that relayed it. Returns its comm rank, described in buf; -1 when
 * there is none (or no shared memory). */
int loom_shm_dead_peer(struct loom_comm *comm, char *buf, size_t len);

/* Announce op, which runs over the network (alltoall, gather, scatter),
 * so that a local rank waiting here in another call can name it. */
void loom_shm_note_call(struct loom_comm *comm, const struct loom_op *op);

/* For tests, before a communicator is created: 1 makes it use the
 * two-copy path even where cross-memory attach works; 2 lets it read its
 * peers but not write them (as where only process_vm_writev is refused). */
extern int loom_shm_test_no_cma;
/* For tests: nonzero makes a rank exit with this status where it would send
 * its hello to its server's leader (as one that dies during set-up). */
extern int loom_shm_test_exit;

#endif
