/* launch.c - a launcher's rank, size, placement and job id (launch.h). */
#include "build_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "util.h"

/* The pairs, in the order they are looked for, with where each launcher
 * says how many of the ranks share this host (local: that many here, to
 * compare with the size; nodes: the number of hosts) and what names the
 * job (ids: the first of them that is set). */
static const struct launch_pair {
    const char *rank, *size, *launcher;
    const char *local, *nodes;
    const char *ids[2];
} launch_pairs[] = {
    {"LOOM_RANK", "LOOM_NRANKS", "loom-run", "LOCAL_WORLD_SIZE", NULL, {NULL, NULL}},
    {"RANK_ID", "RANK_SIZE", "HCCL variables", NULL, NULL, {NULL, NULL}},
    {"RANK", "WORLD_SIZE", "torchrun-style variables", "LOCAL_WORLD_SIZE", NULL,
     {"TORCHELASTIC_RUN_ID", NULL}},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes",
     {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}},
    {"PMI_RANK", "PMI_SIZE", "PMI (MPICH, Intel MPI)", "MPI_LOCALNRANKS", NULL,
     {"PMIX_NAMESPACE", "PMI_KVSNAME"}},
    {"SLURM_PROCID", "SLURM_NTASKS", "srun", NULL, "SLURM_STEP_NUM_NODES",
     {"SLURM_JOB_ID", NULL}},
};
#define LAUNCH_NPAIRS (sizeof launch_pairs / sizeof launch_pairs[0])

const char loom_launch_rank_vars[] =
    "LOOM_RANK, RANK_ID, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID";

static const char *launch_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A whole decimal in lo..hi, else -1. */
static int launch_int(const char *s, int lo, int hi)
{
    if (!s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    return (int)v;
}

int loom_launch_rank(int *rank, const char **var, char *err, size_t errlen)
{
    for (size_t i = 0; i < LAUNCH_NPAIRS; i++) {
        const char *v = launch_env(launch_pairs[i].rank);
        if (!v)
            continue;
        *rank = launch_int(v, 0, 1 << 30);
        if (var)
            *var = launch_pairs[i].rank;
        if (*rank < 0) {
            snprintf(err, errlen, "%s=%s is not a rank number", launch_pairs[i].rank, v);
            return -1;
        }
        return 0;
    }
    return 1;
}

/* Whether the launcher says all ranks share this host: one node, or as
 * many ranks here as in the job. srun without SLURM_STEP_NUM_NODES: an
 * allocation of one node (SLURM_NNODES) holds the whole step. */
static int launch_one_host(const struct launch_pair *p, int nranks)
{
    int nodes = p->nodes ? launch_int(launch_env(p->nodes), 1, 1 << 30) : -1;
    if (nodes < 0 && strcmp(p->rank, "SLURM_PROCID") == 0 &&
        launch_int(launch_env("SLURM_NNODES"), 1, 1 << 30) == 1)
        nodes = 1;
    if (nodes > 0)
        return nodes == 1;
    int local = p->local ? launch_int(launch_env(p->local), 1, 1 << 30) : -1;
    return local > 0 && local == nranks;
}

/* The job's id: the first of the pair's id variables that is set; for
 * srun "JOB.STEP", since the steps of one allocation run side by side. */
static void launch_job_id(struct loom_launch *l, const struct launch_pair *p)
{
    if (strcmp(p->rank, "SLURM_PROCID") == 0) {
        const char *job = launch_env("SLURM_JOB_ID"), *step = launch_env("SLURM_STEP_ID");
        if (job) {
            snprintf(l->job_id, sizeof l->job_id, "%s.%s", job, step ? step : "-");
            l->job_id_var = "SLURM_JOB_ID";
        }
        return;
    }
    for (int i = 0; i < 2 && p->ids[i]; i++) {
        const char *v = launch_env(p->ids[i]);
        if (v) {
            snprintf(l->job_id, sizeof l->job_id, "%s", v);
            l->job_id_var = p->ids[i];
            return;
        }
    }
}

loom_result_t loom_launch_read(struct loom_launch *l, char *err, size_t errlen)
{
    *l = (struct loom_launch){.rank = -1, .nranks = -1};
    for (size_t i = 0; i < LAUNCH_NPAIRS; i++) {
        const struct launch_pair *p = &launch_pairs[i];
        const char *r = launch_env(p->rank);
        if (!r)
            continue;
        l->rank_var = p->rank;
        l->size_var = p->size;
        l->launcher = p->launcher;
        l->rank = launch_int(r, 0, 1 << 30);
        if (l->rank < 0) {
            snprintf(err, errlen, "%s=%s is not a rank number", p->rank, r);
            return LOOM_ERROR_INVALID_ARGUMENT;
        }
        const char *s = launch_env(p->size);
        if (s) {
            l->nranks = launch_int(s, 1, 1 << 30);
            if (l->nranks < 0) {
                snprintf(err, errlen, "%s=%s is not a number of ranks", p->size, s);
                return LOOM_ERROR_INVALID_ARGUMENT;
            }
            if (l->rank >= l->nranks) {
                snprintf(err, errlen, "%s=%d is not below %s=%d", p->rank, l->rank,
                         p->size, l->nranks);
                return LOOM_ERROR_INVALID_ARGUMENT;
            }
        }
        l->one_host = launch_one_host(p, l->nranks);
        launch_job_id(l, p);
        break;
    }
    return LOOM_SUCCESS;
}

int loom_launch_job_port(const char *job_id)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    int first = 10000, count = lo - 10000;
    if (count < 1024) { /* no room below the ephemeral range: above it */
        first = hi + 1;
        count = 65536 - first;
    }
    if (count < 1024) { /* none above either: any unprivileged port */
        first = 1024;
        count = 65536 - 1024;
    }
    uint64_t h = loom_fnv1a(LOOM_FNV_INIT, job_id, strlen(job_id));
    return first + (int)(h % (uint64_t)count);
}
