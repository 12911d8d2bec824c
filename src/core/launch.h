/* launch.h - what a launcher tells a process about its job.
 *
 * Launchers announce a process's rank and the job's size in environment
 * variables of their own. loom_launch_read looks for them in one fixed
 * order (docs/launch.md), a rank variable together with its own size
 * variable, so that a stale RANK left in a shell does not mix with
 * mpirun's OMPI_COMM_WORLD_SIZE:
 *
 *   LOOM_RANK            LOOM_NRANKS            loom-run
 *   RANK_ID              RANK_SIZE              HCCL scripts
 *   RANK                 WORLD_SIZE             torchrun, loom-run
 *   OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE   Open MPI's mpirun
 *   PMI_RANK             PMI_SIZE               MPICH, Intel MPI
 *   SLURM_PROCID         SLURM_NTASKS           srun
 *
 * It also reads whether the launcher placed every rank on this host and
 * an id of the job that every rank of it sees (Open MPI's job id, Slurm's
 * job and step, the PMIx namespace), from which ranks that were given no
 * address can derive one port on 127.0.0.1 to meet at. */
#ifndef LOOM_LAUNCH_H
#define LOOM_LAUNCH_H

#include "loom.h"

struct loom_launch {
    int rank;               /* -1: no launcher variable set                  */
    int nranks;             /* -1: the rank's partner variable is not set    */
    const char *rank_var;   /* the variable rank came from (NULL: none)      */
    const char *size_var;   /* its partner, read into nranks                 */
    const char *launcher;   /* "loom-run", "torchrun", "mpirun", ...         */
    int one_host;           /* 1: the launcher says every rank is on this host;
                               0: it says not, or does not say              */
    char job_id[128];       /* "" when the launcher gives none               */
    const char *job_id_var; /* where job_id came from                        */
};

/* Read the launcher's variables. A rank or size variable that is set but
 * not a number, a size below 1 or a rank outside 0..size-1 is an error
 * naming the variable (LOOM_ERROR_INVALID_ARGUMENT, message in err). Finding
 * no launcher at all is success with rank = nranks = -1. */
loom_result_t loom_launch_read(struct loom_launch *l, char *err, size_t errlen);

/* The rank from the first set rank variable of the table above, for a rank
 * table (which gives the size): 0 and *rank, 1 when none is set, or -1 with
 * the reason in err when the first set one is not a rank number. */
int loom_launch_rank(int *rank, const char **var, char *err, size_t errlen);

/* The port on which ranks of job_id meet on 127.0.0.1: a hash of the id
 * into the ports between 10000 and the kernel's ephemeral range (above it
 * when there is no room below), so every rank of the job computes the same
 * port and no outgoing connection on this host takes it first. */
int loom_launch_job_port(const char *job_id);

/* "OMPI_COMM_WORLD_RANK, ..., SLURM_PROCID": the rank variables, for
 * messages. */
extern const char loom_launch_rank_vars[];

#endif
