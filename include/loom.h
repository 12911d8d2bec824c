/*
 * loom.h - the one public header of Loom, a collective-communication library.
 *
 * Every call returns loom_result_t: LOOM_SUCCESS (0), a positive status that is
 * not an error (LOOM_NOT_READY), or a negative error. loom_result_string()
 * names each; loom_get_error_string() gives the full message of the last error
 * of one communicator.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOOM_BUILDING_LIBRARY) && defined(__GNUC__)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif

#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0
#define LOOM_VERSION_CODE                                                      \
    (LOOM_VERSION_MAJOR * 10000 + LOOM_VERSION_MINOR * 100 + LOOM_VERSION_PATCH)

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum loom_result {
    LOOM_SUCCESS = 0,
    LOOM_NOT_READY = 1,                /* event/request not complete yet     */
    LOOM_ERROR_INVALID_ARGUMENT = -1,  /* bad pointer, count, dtype, rank... */
    LOOM_ERROR_NO_MEMORY = -2,
    LOOM_ERROR_SYSTEM = -3,            /* a system call failed (errno named) */
    LOOM_ERROR_IO = -4,                /* a file could not be read           */
    LOOM_ERROR_INVALID_RANKTABLE = -5, /* the rank table broke a rule        */
    LOOM_ERROR_CONFIG = -6,            /* bad configuration value            */
    LOOM_ERROR_TIMEOUT = -7,           /* a peer did not answer in time      */
    LOOM_ERROR_REMOTE = -8,            /* a peer closed or reset the link    */
    LOOM_ERROR_PROTOCOL = -9,          /* malformed or unexpected bytes      */
    LOOM_ERROR_MISMATCH = -10,         /* ranks disagree (table, call, size) */
    LOOM_ERROR_ABORTED = -11,          /* loom_comm_abort() was called       */
    LOOM_ERROR_NOT_SUPPORTED = -12,    /* not built in / not on this system  */
    LOOM_ERROR_INTERNAL = -13,
    LOOM_ERROR_REVOKED = -14           /* loom_comm_revoke() (here or a peer) */
} loom_result_t;

/* A short, static name for a result ("invalid argument"). Never NULL. */
LOOM_API const char *loom_result_string(loom_result_t res);

/* Version as "MAJOR.MINOR.PATCH" and the features built in ("tcp shm ..."). */
LOOM_API loom_result_t loom_get_version(int *code, const char **version_string);
LOOM_API loom_result_t loom_get_features(const char **features);

/* ------------------------------------------------------------------------ */
/* Rank tables (HCCL's JSON cluster description)                             */
/* ------------------------------------------------------------------------ */

typedef struct loom_ranktable loom_ranktable_t;

/* Every error and warning found while loading a table. Paths are JSON paths
 * ("server_list[1].device[3].rank_id"; "" for the document itself). */
typedef struct loom_diag loom_diag_t;

typedef enum loom_diag_severity {
    LOOM_DIAG_ERROR = 0,
    LOOM_DIAG_WARNING = 1
} loom_diag_severity_t;

/* Load and validate a table. On success *table is set (warnings, if any, are in
 * *diag). On failure *table is NULL, the result says why (LOOM_ERROR_IO for an
 * unreadable file, LOOM_ERROR_INVALID_RANKTABLE for a table that breaks a rule)
 * and *diag holds every error found, not only the first. diag may be NULL;
 * otherwise the caller frees *diag with loom_diag_free(). */
LOOM_API loom_result_t loom_ranktable_load(const char *path,
                                           loom_ranktable_t **table,
                                           loom_diag_t **diag);
/* The same from a string of len bytes; name is used in messages (may be NULL). */
LOOM_API loom_result_t loom_ranktable_parse(const char *json, size_t len,
                                            const char *name,
                                            loom_ranktable_t **table,
                                            loom_diag_t **diag);
LOOM_API loom_result_t loom_ranktable_free(loom_ranktable_t *table);

LOOM_API loom_result_t loom_diag_count(const loom_diag_t *diag, size_t *count);
/* Entry i (0-based, in the order found). Strings live as long as diag. */
LOOM_API loom_result_t loom_diag_get(const loom_diag_t *diag, size_t i,
                                     loom_diag_severity_t *severity,
                                     const char **path, const char **message);
LOOM_API loom_result_t loom_diag_free(loom_diag_t *diag);

/* "1.0", "1.2" or "2.0" ("group_list" for a legacy group_list table). The string
 * lives as long as the table. */
LOOM_API loom_result_t loom_ranktable_version(const loom_ranktable_t *table,
                                              const char **version);
LOOM_API loom_result_t loom_ranktable_nranks(const loom_ranktable_t *table,
                                             int *nranks);
LOOM_API loom_result_t loom_ranktable_nservers(const loom_ranktable_t *table,
                                               int *nservers);

/* What the table says about one rank. Strings live as long as the table. */
typedef struct loom_rank_info {
    int rank;
    int server_index;      /* index into server_list                       */
    const char *server_id;
    int device_id;
    const char *address;   /* endpoint address: device_ip (first of a list),
                              else host_ip, else server_id when an address  */
    int port;              /* with device_ip: device_port; else host_port,
                              else device_port; else LOOM_PORT_BASE +
                              device_id + LOOM_PORT_OFFSET                  */
    int local_rank;        /* index among the ranks of the same server      */
    int local_size;        /* number of ranks on that server                */
} loom_rank_info_t;

LOOM_API loom_result_t loom_ranktable_rank_info(const loom_ranktable_t *table,
                                                int rank,
                                                loom_rank_info_t *info);

/* Both addresses the table gives a rank, before LOOM_ADDRESS (auto, device
 * or host) picks the one it uses: its device's and its host's. A host-NIC
 * table (a host_ip on every server, no device_ip) gives only the host's.
 * The caller sets struct_size to sizeof(loom_rank_addrs_t); the struct
 * grows compatibly. Strings live as long as the table. */
typedef struct loom_rank_addrs {
    size_t struct_size;
    const char *device_address; /* first address of device_ip; NULL: none  */
    int device_port;            /* device_port, else LOOM_PORT_BASE +
                                   device_id + LOOM_PORT_OFFSET             */
    const char *host_address;   /* host_ip, else server_id when an IP
                                   address; NULL: none                      */
    int host_port;              /* host_port, else as device_port           */
} loom_rank_addrs_t;

LOOM_API loom_result_t loom_ranktable_rank_addrs(const loom_ranktable_t *table,
                                                 int rank,
                                                 loom_rank_addrs_t *addrs);
/* The ranks that share server server_index, ascending. Writes at most max
 * ranks to ranks[] and the number there are to *count. */
LOOM_API loom_result_t loom_ranktable_server_ranks(const loom_ranktable_t *table,
                                                   int server_index, int *ranks,
                                                   int max, int *count);
/* A stable 64-bit hash of the table's content: the same for the same servers,
 * devices, ranks and addresses, whatever the JSON's spacing or key order. */
LOOM_API loom_result_t loom_ranktable_hash(const loom_ranktable_t *table,
                                           uint64_t *hash);

/* ------------------------------------------------------------------------ */
/* Types for collectives                                                     */
/* ------------------------------------------------------------------------ */

typedef struct loom_comm *loom_comm_t;
typedef struct loom_stream *loom_stream_t;
typedef struct loom_event *loom_event_t;

typedef enum loom_dtype {
    LOOM_INT8 = 0,
    LOOM_UINT8 = 1,
    LOOM_INT32 = 2,
    LOOM_UINT32 = 3,
    LOOM_INT64 = 4,
    LOOM_UINT64 = 5,
    LOOM_FLOAT16 = 6,   /* IEEE binary16                                   */
    LOOM_BFLOAT16 = 7,  /* reduced in float32, rounded to nearest even     */
    LOOM_FLOAT32 = 8,
    LOOM_FLOAT64 = 9,
    LOOM_INT16 = 10,
    LOOM_UINT16 = 11,
    LOOM_DTYPE_COUNT = 12
} loom_dtype_t;

/* LOOM_AVG is the sum divided by the number of ranks; for integer types the
 * division truncates toward zero (as C's / does).
 *
 * float16 and bfloat16 today: every step that combines two values widens
 * both to float32, combines them and rounds the result back to the 16-bit
 * type (nearest even) before it is stored or sent on. A sum over n ranks
 * therefore rounds up to n - 1 times (ring: once per hop; recursive
 * doubling: log2 n times), and which values are added first depends on
 * the algorithm, so the last bits may differ from a sum done in float32
 * and rounded once. LOOM_AVG divides the 16-bit sum (one more rounding).
 * loom_redop_create() with LOOM_ACCUM_FLOAT32 (below) sums in float32 and
 * rounds once. */
typedef enum loom_redop {
    LOOM_SUM = 0,
    LOOM_PROD = 1,
    LOOM_MIN = 2,
    LOOM_MAX = 3,
    LOOM_AVG = 4,
    LOOM_REDOP_COUNT = 5
} loom_redop_t;

/* Size in bytes of one element (0 for an unknown dtype), and names. */
LOOM_API size_t loom_dtype_size(loom_dtype_t dtype);
LOOM_API const char *loom_dtype_name(loom_dtype_t dtype);
LOOM_API const char *loom_redop_name(loom_redop_t op);

/* Reduction ops with attributes: a sum (or average) that scales, as DDP's
 * gradient pre-divide, NCCL's premul-sum and Horovod's prescale_factor /
 * postscale_factor; and float32 accumulation of 16-bit floats. The op
 * loom_redop_create() returns is used as a loom_redop_t in allreduce,
 * reduce and reduce_scatter on any communicator; its attributes are read
 * when a call is issued, so it may be destroyed as soon as the calls that
 * use it have returned (also stream calls still in flight). Every rank
 * must pass an op with the same base and accumulation (the scale factors
 * are each rank's own).
 *
 *   result = postscale * SUM_r (prescale * x_r)      (base LOOM_SUM)
 *   result = postscale * SUM_r (prescale * x_r) / n  (base LOOM_AVG)
 *
 * Scaling is for floating-point dtypes (INVALID_ARGUMENT otherwise); it is
 * done in float32 for 16-bit floats (the product rounded once) and in the
 * dtype otherwise. prescale costs one pass over the input (it is applied
 * while the input is copied into the receive buffer, or into Loom's
 * staging when a group packs calls); postscale one pass over the result.
 *
 * LOOM_ACCUM_FLOAT32, for float16 and bfloat16 (other dtypes ignore it):
 * inputs are widened to float32 once, every partial sum is kept and sent
 * in float32, and each element's sum is rounded to the 16-bit type once.
 * Results are the float32 sum (in Loom's order) rounded, identical on every
 * rank. Cost: float32 staging of count elements, a pass to widen and one to
 * round; on the wire, an allreduce of up to 64 KiB of float32 moves the
 * widened buffer whole (twice the call's bytes, where latency dominates);
 * a larger one runs as a reduce-scatter of float32 partial sums and an
 * allgather of the rounded 16-bit results (1.5 times the bytes, and two
 * collective call numbers). reduce and reduce_scatter move float32 (twice
 * the bytes). */
typedef enum loom_accum {
    LOOM_ACCUM_NATIVE = 0,   /* as above: each step rounds                 */
    LOOM_ACCUM_FLOAT32 = 1   /* 16-bit floats summed in float32            */
} loom_accum_t;

typedef struct loom_redop_attr {
    size_t struct_size;      /* sizeof(loom_redop_attr_t): grows compatibly */
    loom_redop_t base;       /* LOOM_SUM or LOOM_AVG                        */
    double prescale;         /* inputs multiplied by this first (1.0: none) */
    double postscale;        /* the result multiplied by this (1.0: none)   */
    loom_accum_t accumulate;
} loom_redop_attr_t;

LOOM_API loom_result_t loom_redop_create(const loom_redop_attr_t *attr,
                                         loom_redop_t *op);
LOOM_API loom_result_t loom_redop_destroy(loom_redop_t op);

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

/* Join the group described by the rank table at path as rank. Rank 0's
 * endpoint is the rendezvous; blocks until every rank has arrived or
 * LOOM_BOOTSTRAP_TIMEOUT expires (the error names the missing ranks). */
LOOM_API loom_result_t loom_comm_init_ranktable(const char *path, int rank,
                                                loom_comm_t *comm);
/* loom_comm_init_env checks the launcher's size variable (WORLD_SIZE,
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS, RANK_SIZE, LOOM_NRANKS) against
 * the table, and loom_comm_init_ranktable_opts the caller's opts->nranks: a
 * table of another number of ranks fails at once, naming both numbers,
 * instead of waiting for ranks that never start. */
/* url is "tcp://host:port" (rank 0 listens there) or "env://" (MASTER_ADDR,
 * MASTER_PORT). nranks and rank may be -1 to take them from the launcher:
 * RANK and WORLD_SIZE, OMPI_COMM_WORLD_RANK and _SIZE, ... (docs/launch.md). */
LOOM_API loom_result_t loom_comm_init_url(const char *url, int nranks, int rank,
                                          loom_comm_t *comm);
/* The table from LOOM_RANK_TABLE or RANK_TABLE_FILE; the rank from LOOM_RANK,
 * RANK_ID, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID. Without a
 * table, env:// when MASTER_ADDR and MASTER_PORT are set. */
LOOM_API loom_result_t loom_comm_init_env(loom_comm_t *comm);

/* Wait for pending work, then free. After an error or abort it does not wait. */
LOOM_API loom_result_t loom_comm_destroy(loom_comm_t comm);
/* From any thread: every pending and later call on comm returns
 * LOOM_ERROR_ABORTED promptly. The caller still destroys comm. */
LOOM_API loom_result_t loom_comm_abort(loom_comm_t comm);
LOOM_API loom_result_t loom_comm_rank(loom_comm_t comm, int *rank);
LOOM_API loom_result_t loom_comm_size(loom_comm_t comm, int *size);
/* MPI_Comm_split: ranks with the same color form a group, ordered by key then
 * by rank in comm. color < 0 (LOOM_SPLIT_NOCOLOR) joins none: *newcomm = NULL.
 * Collective over comm. */
#define LOOM_SPLIT_NOCOLOR (-1)
LOOM_API loom_result_t loom_comm_split(loom_comm_t comm, int color, int key,
                                       loom_comm_t *newcomm);

/* The ranks of comm that share this rank's server (the rank table's
 * server_id; the host for tcp://, env:// and unique-id communicators):
 * this rank's index among them (ascending comm rank) and their number. */
LOOM_API loom_result_t loom_comm_local_rank(loom_comm_t comm, int *local_rank);
LOOM_API loom_result_t loom_comm_local_size(loom_comm_t comm, int *local_size);

/* The accelerator device this rank drives (for stream adapters such as
 * libloom_cuda): LOOM_CUDA_DEVICE when set (>= 0), else the rank table's
 * device_id of this rank, else (tcp://, env://, unique-id communicators)
 * its local rank. A communicator from loom_comm_split keeps its parent's. */
LOOM_API loom_result_t loom_comm_device(loom_comm_t comm, int *device);

/* What comm runs on, for tools and benchmarks. The caller sets struct_size
 * to sizeof(loom_comm_info_t); fields past it are left alone, so a program
 * built against an older loom.h keeps working. The strings belong to comm. */
typedef struct loom_comm_info {
    size_t struct_size;
    const char *transport;        /* "tcp", "ofi", "verbs" (LOOM_TRANSPORT
                                     with one rank, which has no instance) */
    const char *transport_detail; /* e.g. "ofi tcp;ofi_rxm"; NULL with one rank */
    const char *address;          /* this rank's address, e.g. "10.0.0.1"  */
    int nhosts;                   /* hosts the ranks found themselves on   */
    size_t chunk_size;            /* bytes per pipelined chunk             */
} loom_comm_info_t;
LOOM_API loom_result_t loom_comm_get_info(loom_comm_t comm, loom_comm_info_t *info);

/* The algorithm comm selects for one call: collective as LOOM_ALGO names
 * it ("allreduce", "broadcast", ...), count elements of dtype reduced with
 * op. *algo is a name LOOM_ALGO takes ("ring", "tree", "shm", "hier", ...),
 * static. Neither waits nor communicates. */
LOOM_API loom_result_t loom_comm_algo(loom_comm_t comm, const char *collective, uint64_t count,
                                      loom_dtype_t dtype, loom_redop_t op, const char **algo);

/* Rendezvous through an id that a framework passes around itself (as
 * NCCL's ncclGetUniqueId + ncclCommInitRank; torch puts it in its store).
 * loom_get_unique_id, on one process (usually rank 0's), picks this host's
 * address (LOOM_SOCKET_IFNAME; else the one on the route to MASTER_ADDR when
 * set; else the first interface up other than loopback), opens the
 * rendezvous listener there and writes its address and a fresh random job
 * nonce into *id; the listener is kept for rank 0 of that
 * id in this process. Every rank then calls loom_comm_init_rank with the
 * same id and nranks. The id holds no pointer: copy it byte for byte. */
#define LOOM_UNIQUE_ID_BYTES 128
typedef struct loom_unique_id {
    char internal[LOOM_UNIQUE_ID_BYTES];
} loom_unique_id_t;
LOOM_API loom_result_t loom_get_unique_id(loom_unique_id_t *id);
/* The same, with the address on the route to host: the framework's own
 * rendezvous host, which every rank reaches (torch's init_method or store
 * host; "127.0.0.1" keeps the job on loopback, as gloo does). host NULL:
 * as loom_get_unique_id. LOOM_SOCKET_IFNAME still overrides. */
LOOM_API loom_result_t loom_get_unique_id_toward(const char *host, loom_unique_id_t *id);
LOOM_API loom_result_t loom_comm_init_rank(loom_comm_t *comm, int nranks,
                                           const loom_unique_id_t *id, int rank);

/* Settings of one communicator that a framework chooses (as torch's
 * init_process_group(timeout=...)). Zero-initialise, set struct_size to
 * sizeof(loom_comm_opts_t); a field left 0 takes Loom's configuration.
 *  timeout: seconds; bounds the rendezvous (as LOOM_BOOTSTRAP_TIMEOUT) and
 *           each call's wait for its peers (as LOOM_TIMEOUT). Where the user
 *           has set LOOM_BOOTSTRAP_TIMEOUT or LOOM_TIMEOUT (environment or
 *           loom.conf), that variable wins for its part.
 *  nranks:  the number of ranks the caller expects; a rank table of
 *           another size fails at once, naming both. */
typedef struct loom_comm_opts {
    size_t struct_size;
    double timeout;
    int nranks;
} loom_comm_opts_t;
/* loom_comm_init_rank and loom_comm_init_ranktable with opts (NULL: none). */
LOOM_API loom_result_t loom_comm_init_rank_opts(loom_comm_t *comm, int nranks,
                                                const loom_unique_id_t *id, int rank,
                                                const loom_comm_opts_t *opts);
LOOM_API loom_result_t loom_comm_init_ranktable_opts(const char *path, int rank,
                                                     const loom_comm_opts_t *opts,
                                                     loom_comm_t *comm);

/* The full message of the last call on comm that failed, as NCCL's
 * ncclGetLastError: each collective or point-to-point call starts by
 * clearing it, so after a call that succeeds it is "" — unless comm is
 * broken (loom_comm_get_async_error), whose message stays, as every call
 * returns that error. Valid until the next call on comm. comm may be NULL
 * for errors of a failed init on this thread. */
LOOM_API const char *loom_get_error_string(loom_comm_t comm);

/* The error that has broken comm (sticky, see below), or LOOM_SUCCESS in
 * *error while it works: an op that failed on a stream, a peer lost, an
 * abort. Neither waits nor communicates (HCCL's HcclGetCommAsyncError,
 * NCCL's ncclCommGetAsyncError). */
LOOM_API loom_result_t loom_comm_get_async_error(loom_comm_t comm,
                                                 loom_result_t *error);

/* ------------------------------------------------------------------------ */
/* Failures. A call that fails returns an error and loom_get_error_string()  */
/* names the cause: the peer (rank, server, address) that closed, reset or   */
/* timed out, the rank that failed first as told by the others, or both     */
/* ranks' calls when ranks are in different collectives                     */
/* (LOOM_ERROR_MISMATCH). Errors other than LOOM_ERROR_INVALID_ARGUMENT are   */
/* sticky: every later call on the communicator returns the same error at   */
/* once, until it is destroyed. A failed call never writes to a send buffer  */
/* (outside in-place use); its receive buffer holds unspecified data: some   */
/* elements may be final, some partial, some untouched.                      */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Going on after a failure (as ULFM's MPIX_Comm_revoke / MPIX_Comm_shrink   */
/* and NCCL's ncclCommShrink; docs/shrink.md has a recipe and the costs).    */
/* ------------------------------------------------------------------------ */

/* Revoke comm on every rank: this rank's pending calls on it and every
 * later one fail at once (later ones with LOOM_ERROR_REVOKED), and every
 * other live rank is told through the out-of-band service, where the same
 * happens within a message's delay, also on a rank that is not talking to
 * anyone who failed. The rank that notices a failure first calls it (a
 * call on a revoked communicator sends nothing more). It does not end the
 * communicator: shrink it, then destroy it. Any thread. */
LOOM_API loom_result_t loom_comm_revoke(loom_comm_t comm);

#define LOOM_SHRINK_DEFAULT 0x0
/* Revoke comm on this rank first (pending calls fail) instead of waiting
 * for them; the usual flag after a failure. */
#define LOOM_SHRINK_ABORT 0x1

typedef struct loom_shrink_params {
    size_t struct_size;   /* sizeof(loom_shrink_params_t): grows compatibly */
    int flags;            /* LOOM_SHRINK_*                                   */
    /* Ranks of comm to leave out whether alive or not (nexclude of them;
     * exclude may be NULL when 0). They do not call shrink. Every calling
     * rank passes the same set (else LOOM_ERROR_MISMATCH naming two).     */
    const int *exclude;
    int nexclude;
    double timeout;       /* seconds a live rank may take to join; 0:
                             LOOM_TIMEOUT                                   */
} loom_shrink_params_t;

/* Collective over the live ranks of comm (every rank of comm that is alive
 * and not excluded calls it): they agree on one failed set, and each gets
 * *newcomm, a communicator of the others (the survivors), ranked in their
 * order in comm (0, 1, ...), with its own transport connections, shared
 * memory segment and out-of-band namespace, and the guarantees of any
 * communicator (the job key, mismatch detection, failures named: its
 * messages describe a rank also by its rank in comm).
 *  - Failed set: the excluded ranks, and every rank found dead (its port
 *    refuses connections: the process is gone; or no answer within
 *    LOOM_BOOTSTRAP_TIMEOUT). A rank that dies during the agreement is
 *    added; one that dies after the decision fails the shrink within
 *    seconds on the ranks whose set-up of *newcomm waits for it, naming it,
 *    and is named by the first call on *newcomm that needs it where the
 *    set-up was done (shrink *newcomm then). Every rank that returns
 *    LOOM_SUCCESS has the same members: never two answers, never a hang.
 *  - A live rank that does not call it within the timeout makes it fail
 *    on the others with LOOM_ERROR_TIMEOUT naming that rank.
 *  - With no failure and no exclusion, *newcomm has every rank of comm.
 * A communicator can be shrunk once, and not again after a failed shrink
 * (its ranks may have parted ways). Calls on comm in flight are waited
 * for (LOOM_SHRINK_ABORT fails them instead). comm stays to be destroyed;
 * that never waits for a dead rank. On failure loom_get_error_string(NULL)
 * says why. */
LOOM_API loom_result_t loom_comm_shrink(loom_comm_t comm, int flags,
                                        loom_comm_t *newcomm);
LOOM_API loom_result_t loom_comm_shrink_ext(loom_comm_t comm,
                                            const loom_shrink_params_t *params,
                                            loom_comm_t *newcomm);

/* ------------------------------------------------------------------------ */
/* Collectives. Every rank calls the same collectives in the same order.     */
/* stream == NULL: the call blocks until done. Otherwise it returns once the */
/* work is enqueued and completes in order on the stream.                    */
/* In place when send == recv (allgather: when send == recv + rank*count*sz; */
/* reduce_scatter: when recv == send + rank*recvcount*size).                 */
/* ------------------------------------------------------------------------ */

LOOM_API loom_result_t loom_allreduce(const void *sendbuf, void *recvbuf,
                                      uint64_t count, loom_dtype_t dtype,
                                      loom_redop_t op, loom_comm_t comm,
                                      loom_stream_t stream);
LOOM_API loom_result_t loom_allgather(const void *sendbuf, void *recvbuf,
                                      uint64_t sendcount, loom_dtype_t dtype,
                                      loom_comm_t comm, loom_stream_t stream);
LOOM_API loom_result_t loom_broadcast(void *buf, uint64_t count,
                                      loom_dtype_t dtype, int root,
                                      loom_comm_t comm, loom_stream_t stream);
LOOM_API loom_result_t loom_reduce_scatter(const void *sendbuf, void *recvbuf,
                                           uint64_t recvcount,
                                           loom_dtype_t dtype, loom_redop_t op,
                                           loom_comm_t comm,
                                           loom_stream_t stream);
/* recvbuf matters on root only (may be NULL elsewhere). */
LOOM_API loom_result_t loom_reduce(const void *sendbuf, void *recvbuf,
                                   uint64_t count, loom_dtype_t dtype,
                                   loom_redop_t op, int root, loom_comm_t comm,
                                   loom_stream_t stream);
LOOM_API loom_result_t loom_barrier(loom_comm_t comm, loom_stream_t stream);

/* Point-to-point. Not collective: only the two ranks take part, and the
 * communicator's collective call numbers do not move (ranks that are not
 * involved stay in step). Messages between two ranks match in the order
 * they were issued, by count and dtype (a send whose count or dtype
 * differs from the receive it meets is LOOM_ERROR_MISMATCH naming both
 * calls, numbered by their place among the messages between the two).
 * Between two ranks, sends, receives and collectives travel in one order:
 * each rank must issue them in an order the other can match (as on one
 * NCCL stream). Sends and receives on a stream that are queued behind one
 * another progress together: a receive issued before a send never waits
 * for it (two ranks may each receive, then send). A blocking send of a
 * large message waits for the receive, so two ranks that send to each
 * other first with blocking calls must put the pair in a group. Inside a group
 * (below) a rank may post sends and receives to many peers, itself
 * included, that progress together. */
LOOM_API loom_result_t loom_send(const void *buf, uint64_t count,
                                 loom_dtype_t dtype, int peer, loom_comm_t comm,
                                 loom_stream_t stream);
LOOM_API loom_result_t loom_recv(void *buf, uint64_t count, loom_dtype_t dtype,
                                 int peer, loom_comm_t comm,
                                 loom_stream_t stream);

/* Tagged point-to-point (MPI's and gloo's matching; torch's send/recv with
 * tags and from any source). A tagged message matches a tagged receive
 * only, never loom_recv: a receive takes the earliest message of its
 * source and tag not yet taken (FIFO per source and tag; peer
 * LOOM_ANY_SOURCE: the earliest to arrive from any rank; tag LOOM_ANY_TAG:
 * any tag), and its count and dtype must be the message's (else
 * LOOM_ERROR_MISMATCH naming both calls). Tagged messages do not take
 * part in the order of untagged messages and collectives: each is copied
 * and sent whole beside them, so a send completes once its message is
 * queued, whatever the receiver does, and the ranks may post tagged sends
 * and receives in any order. That copy is their cost: they are for
 * control messages and moderate tensors, not a bulk path. A rank may send
 * to itself. tag >= 0. On a
 * stream, the call completes in stream order; *source (may be NULL) gets
 * the sender's rank when the receive completes and must stay valid until
 * then. */
#define LOOM_ANY_SOURCE (-1)
#define LOOM_ANY_TAG (-1)
LOOM_API loom_result_t loom_send_tagged(const void *buf, uint64_t count, loom_dtype_t dtype,
                                        int peer, int tag, loom_comm_t comm, loom_stream_t stream);
LOOM_API loom_result_t loom_recv_tagged(void *buf, uint64_t count, loom_dtype_t dtype, int peer,
                                        int tag, int *source, loom_comm_t comm,
                                        loom_stream_t stream);

/* Every rank sends block j of count elements of sendbuf to rank j and
 * receives rank j's block into block j of recvbuf (equal blocks). */
LOOM_API loom_result_t loom_alltoall(const void *sendbuf, void *recvbuf,
                                     uint64_t count, loom_dtype_t dtype,
                                     loom_comm_t comm, loom_stream_t stream);
/* Blocks of any size: rank i sends sendcounts[j] elements from
 * sendbuf + sdispls[j] to rank j, which receives them at recvbuf +
 * rdispls[i] and must have recvcounts[i] equal to that count (else
 * LOOM_ERROR_MISMATCH naming both counts). Counts and displacements are in
 * elements, nranks of each; zeros are allowed; the arrays are copied at the
 * call. In place when sendbuf == recvbuf (the send blocks are copied
 * first). Not inside a group. */
LOOM_API loom_result_t loom_alltoallv(const void *sendbuf, const uint64_t *sendcounts,
                                      const uint64_t *sdispls, void *recvbuf,
                                      const uint64_t *recvcounts,
                                      const uint64_t *rdispls, loom_dtype_t dtype,
                                      loom_comm_t comm, loom_stream_t stream);
/* root receives rank j's sendcount elements at block j of recvbuf (recvbuf
 * matters on root only). */
LOOM_API loom_result_t loom_gather(const void *sendbuf, void *recvbuf,
                                   uint64_t sendcount, loom_dtype_t dtype,
                                   int root, loom_comm_t comm,
                                   loom_stream_t stream);
/* Rank j receives block j (recvcount elements) of root's sendbuf (sendbuf
 * matters on root only). */
LOOM_API loom_result_t loom_scatter(const void *sendbuf, void *recvbuf,
                                    uint64_t recvcount, loom_dtype_t dtype,
                                    int root, loom_comm_t comm,
                                    loom_stream_t stream);

/* Grouped calls (as NCCL's ncclGroupStart/End): calls issued on this thread
 * between loom_group_start and the matching loom_group_end are collected
 * and run as one op per communicator at loom_group_end; the stream and
 * blocking rules apply to that op. Groups nest; only the outermost end
 * runs them.
 *
 * Inside a group a call only checks its arguments and returns; buffers
 * must stay valid until the group has completed. The calls on one
 * communicator must use one stream (or all NULL). At loom_group_end:
 *  - the sends and receives of a communicator's group are posted together
 *    and progress together (any mix of peers, self included: batched
 *    point-to-point, alltoall-like exchanges);
 *  - then its collectives run in call order. Consecutive allreduces with
 *    the same dtype and op coalesce: calls whose buffers are adjacent in
 *    memory (send and receive) merge into one allreduce with no copy;
 *    other calls of at most 64 KiB each are packed, up to 64 KiB in all,
 *    into one allreduce through Loom's staging buffer (the copy costs less
 *    than a round trip; larger calls run on their own). A bucket of many
 *    small gradients thus costs one collective. Each run takes one
 *    collective call number, so every rank must group the same calls.
 * With stream == NULL loom_group_end blocks until every communicator's op
 * is done (the communicators progress at once); with a stream it returns
 * once they are enqueued, in group order. It returns the first error,
 * whose message is on that communicator. A group whose calls failed
 * their argument checks runs nothing and returns that error. */
LOOM_API loom_result_t loom_group_start(void);
LOOM_API loom_result_t loom_group_end(void);

/* ------------------------------------------------------------------------ */
/* Streams and events                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Hooks that order Loom's work against a compute runtime's stream (a CUDA
 * stream, a host task queue...). For each call enqueued on the stream:
 *   1. mark_ready (caller's thread, at enqueue): record "inputs ready" on the
 *      user's stream; returns a mark.
 *   2. wait_ready (progress thread, before touching the buffers): block until
 *      the mark is reached. Then release_mark frees it.
 *   3. add_wait (caller's thread, at enqueue, after mark_ready): make the
 *      user's stream wait for the op; returns a wait handle.
 *   4. complete (progress thread, after the op): release that wait, passing
 *      the op's result; the handle is not used again. It is called for every
 *      op whose add_wait succeeded, also when the op failed or never ran, so
 *      that the user's stream is never left waiting.
 * mark_ready and add_wait of one loom stream are called as a pair under that
 * stream's lock, in the order of the ops; the ops of one loom stream run and
 * complete one at a time in that order.
 * A hook left NULL is skipped (the host stream needs only 3 and 4).
 * Optional staging for buffers the host cannot read (device memory):
 *   is_device_ptr tells (called at enqueue). A call with device buffers runs
 *   as pieces of LOOM_STAGE_CHUNK bytes through host staging memory, every
 *   rank splitting it the same way: every rank must then pass device memory
 *   for that call (as Gloo's CUDA algorithms require), or it fails with
 *   LOOM_ERROR_MISMATCH naming both ranks' pieces. The pieces' copies go
 *   through copy_to_host / copy_to_device (synchronous), or, when the adapter
 *   has them, through stage_alloc / copy_async / copy_query, which let the
 *   copies of one piece run while another piece is on the network.
 */
typedef struct loom_stream_hooks {
    size_t struct_size; /* sizeof(loom_stream_hooks): grows compatibly */
    const char *name;
    loom_result_t (*mark_ready)(void *user_stream, void **mark);
    loom_result_t (*wait_ready)(void *user_stream, void *mark);
    loom_result_t (*release_mark)(void *user_stream, void *mark);
    loom_result_t (*add_wait)(void *user_stream, void **wait_handle);
    loom_result_t (*complete)(void *user_stream, void *wait_handle,
                              loom_result_t status);
    int (*is_device_ptr)(void *user_stream, const void *ptr);
    loom_result_t (*copy_to_host)(void *user_stream, void *host,
                                  const void *dev, size_t bytes);
    loom_result_t (*copy_to_device)(void *user_stream, void *dev,
                                    const void *host, size_t bytes);
    /* Called once when the loom stream is destroyed. */
    loom_result_t (*destroy)(void *user_stream);

    /* ---- added in 0.1 (absent from a smaller struct_size: NULL) ---- */
    /* Progress thread, never blocks: LOOM_SUCCESS once the mark is reached,
     * LOOM_NOT_READY before, or an error. When set, Loom polls it (and
     * notices loom_comm_abort while it waits) instead of wait_ready. */
    loom_result_t (*query_ready)(void *user_stream, void *mark);
    /* Pipelined staging (all four, and is_device_ptr, or none). Progress
     * thread. stage_alloc returns bytes of host memory the device copies
     * to and from at full speed (pinned); Loom keeps it for the stream's
     * life and cuts it into LOOM_STAGE_SLOTS slots, and stage_free returns
     * it (on destroy, or to get a larger one). */
    loom_result_t (*stage_alloc)(void *user_stream, size_t bytes, void **host);
    loom_result_t (*stage_free)(void *user_stream, void *host, size_t bytes);
    /* Start a copy of rows rows of width bytes, the rows dpitch bytes apart
     * at dst and spitch bytes apart at src: from device memory into staging
     * (to_device 0) or from staging into device memory (to_device 1). Must
     * not wait for the copy. slot (0 .. LOOM_STAGE_SLOTS-1) tags it: Loom
     * starts a slot's next copy only after copy_query said its last one
     * finished. Copies of different slots may run at the same time. */
    loom_result_t (*copy_async)(void *user_stream, int slot, int to_device,
                                void *dst, size_t dpitch, const void *src,
                                size_t spitch, size_t width, size_t rows);
    /* Never blocks: LOOM_SUCCESS once slot's last copy has finished (its
     * bytes are in place), LOOM_NOT_READY before, or the copy's error. */
    loom_result_t (*copy_query)(void *user_stream, int slot);
    /* The message of the last error a hook returned on the calling thread
     * ("cuMemcpyAsync: CUDA_ERROR_INVALID_VALUE: invalid argument"), or
     * NULL; Loom puts it in the communicator's error string. */
    const char *(*last_error)(void *user_stream);
} loom_stream_hooks;

/* A host stream: calls on it return once enqueued. */
LOOM_API loom_result_t loom_stream_create_host(loom_stream_t *stream);
/* A stream bound to a user's runtime stream through hooks (copied). */
LOOM_API loom_result_t loom_stream_create_hooks(const loom_stream_hooks *hooks,
                                                void *user_stream,
                                                loom_stream_t *stream);
/* Wait for everything enqueued on stream; returns the first error any of
 * those ops returned since the last synchronize. */
LOOM_API loom_result_t loom_stream_synchronize(loom_stream_t stream);
LOOM_API loom_result_t loom_stream_destroy(loom_stream_t stream);

LOOM_API loom_result_t loom_event_create(loom_event_t *event);
/* Mark the point after everything enqueued so far on stream. */
LOOM_API loom_result_t loom_event_record(loom_event_t event,
                                         loom_stream_t stream);
/* LOOM_SUCCESS when reached, LOOM_NOT_READY when not, or the error of an op
 * before it. */
LOOM_API loom_result_t loom_event_query(loom_event_t event);
LOOM_API loom_result_t loom_event_synchronize(loom_event_t event);
LOOM_API loom_result_t loom_event_destroy(loom_event_t event);

/* Requests: a handle on the calls enqueued on a stream so far (in practice
 * the call just issued on it, or a group), that a framework can poll, wait
 * on, or be called back by. It completes once they have; its result is
 * LOOM_SUCCESS, or the first error of a call on the stream up to it since
 * the stream's last synchronize (as an event's).
 *
 * fn (may be NULL) is called exactly once, with arg and the result, by the
 * thread that completes the last of those calls: Loom's progress thread, a
 * thread in loom_request_wait (which runs calls still queued itself rather
 * than wake the progress thread: a call waited for at once costs no
 * hand-off), or loom_request_create itself when they are already complete.
 * It must
 * be short and must not call Loom (hand the news to a thread of your own,
 * as the PyTorch backend does). loom_stream_synchronize returns once the
 * callbacks of the calls it waited for have returned. A request may be
 * freed at any time (a pending callback still runs); test and wait need
 * its stream alive until it is complete. */
typedef struct loom_request *loom_request_t;
typedef void (*loom_request_fn)(void *arg, loom_result_t result);
LOOM_API loom_result_t loom_request_create(loom_stream_t stream,
                                           loom_request_fn fn, void *arg,
                                           loom_request_t *request);
/* LOOM_SUCCESS or the error when complete, LOOM_NOT_READY before. */
LOOM_API loom_result_t loom_request_test(loom_request_t request);
LOOM_API loom_result_t loom_request_wait(loom_request_t request);
/* As loom_request_wait for at most timeout_ms milliseconds (>= 0), then
 * LOOM_NOT_READY. It sleeps while the progress thread runs the calls (it
 * never runs one itself, which could outlast timeout_ms): a binding waits
 * in slices this way so that its signal handlers run meanwhile (Python's
 * Ctrl-C). */
LOOM_API loom_result_t loom_request_wait_timeout(loom_request_t request, int timeout_ms);
LOOM_API loom_result_t loom_request_free(loom_request_t request);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H */
