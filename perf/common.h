/* common.h - the shared driver of Loom's nccl-tests-compatible benchmarks.
 *
 * perf/common.c owns main(), the options, the sweep over sizes, types and
 * operations, the timing, the correctness check and the table. Each
 * <coll>_perf.c only fills one struct perf_coll describing its collective:
 * how a table size maps to buffers and counts, how to fill the inputs, how
 * to run one call and how to check the result. */
#ifndef LOOM_PERF_COMMON_H
#define LOOM_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* One row of the sweep, as the driver hands it to the collective's hooks. */
struct perf_case {
    loom_comm_t comm;
    int rank;
    int nranks;
    loom_dtype_t dtype;
    loom_redop_t op;
    int root;
    int in_place;
    uint64_t seed;
    size_t esize;         /* bytes per element                               */
    /* Set by the collective's setup(): */
    uint64_t count;       /* the table's count column (nccl-tests' meaning)  */
    uint64_t op_count;    /* the count argument of the Loom call             */
    size_t size;          /* the table's size column, bytes                  */
    void *sendbuf;        /* what the call reads (points into the buffers)   */
    void *recvbuf;        /* what the call writes                            */
    /* Owned by the driver: two buffers of at least max_bytes each. */
    void *buf_a;
    void *buf_b;
    size_t max_bytes;
};

struct perf_coll {
    const char *name;         /* "all_reduce": headers, JSON "collective"    */
    const char *kind;         /* as LOOM_ALGO names it: "allreduce", for the
                                 algorithm loom_comm_algo selects per size */
    int has_op;               /* takes a reduction operation                 */
    int has_root;             /* takes a root                                */
    /* Bus bandwidth = algorithm bandwidth * bus_factor(nranks). */
    double (*bus_factor)(int nranks);
    /* From c->size (the requested bytes) set count, op_count, size (rounded
     * as the collective needs) and sendbuf/recvbuf inside buf_a/buf_b for
     * c->in_place. Fills nothing. */
    void (*setup)(struct perf_case *c);
    /* Fill this rank's inputs for one checked call (in place: the part of
     * the buffer the call reads). */
    void (*fill)(struct perf_case *c);
    /* Issue one call; stream NULL blocks. */
    loom_result_t (*run)(struct perf_case *c, loom_stream_t stream);
    /* The result this rank checks: where it starts and how many bytes it
     * spans (for the corruption hook); NULL/0 when this rank has none. */
    void *(*result)(struct perf_case *c, size_t *bytes);
    /* Count this rank's wrong result elements. */
    uint64_t (*check)(struct perf_case *c);
};

/* The driver: parse argv, run the sweep, print the table. Returns the exit
 * status (0 all right; 1 wrong values; 2 an error or bad usage). */
int perf_main(const struct perf_coll *coll, int argc, char **argv);

/* Bus bandwidth factors shared by several collectives. */
double perf_factor_one(int nranks);
double perf_factor_gather(int nranks); /* (n-1)/n */

#endif
