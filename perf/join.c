/* join.c - how a perf program finds its group, first match wins
 * (docs/launch.md):
 *   1. --url tcp://HOST:PORT        rank 0 listens there
 *   2. a rank table                 --ranktable, LOOM_RANK_TABLE, RANK_TABLE_FILE
 *   3. MASTER_ADDR + MASTER_PORT    env:// (torchrun, loom-run)
 *   4. a launcher that put every rank on this host and names its job
 *                                   127.0.0.1, port derived from the job id
 *   5. no launcher at all           one rank, as nccl-tests runs on one GPU
 * Ranks and sizes come from the launcher's variables (core/launch.h). */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "core/launch.h"
#include "join.h"

static const char *join_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int perf_speaks(void)
{
    int rank = -1;
    char err[64];
    return loom_launch_rank(&rank, NULL, err, sizeof err) != 0 || rank == 0;
}

void perf_quiet_wait(void)
{
    sleep(PERF_QUIET_WAIT_S);
}

int perf_join(const char *prog, const char *url, loom_comm_t *comm, char *how,
              size_t howlen)
{
    struct loom_launch l;
    char err[256] = "";
    if (loom_launch_read(&l, err, sizeof err) < 0) {
        if (perf_speaks())
            fprintf(stderr, "%s: %s\n", prog, err);
        else
            perf_quiet_wait();
        return -1;
    }
    const char *table = join_env("LOOM_RANK_TABLE");
    if (!table)
        table = join_env("RANK_TABLE_FILE");
    const char *maddr = join_env("MASTER_ADDR"), *mport = join_env("MASTER_PORT");
    char where[512];
    loom_result_t res;
    if (url) {
        snprintf(how, howlen, "%s (--url)", url);
        snprintf(where, sizeof where, "at %s", url);
        res = loom_comm_init_url(url, l.rank < 0 ? 1 : -1, l.rank < 0 ? 0 : -1, comm);
    } else if (table) {
        snprintf(how, howlen, "rank table %s", table);
        snprintf(where, sizeof where, "of rank table %s", table);
        res = loom_comm_init_env(comm);
    } else if (maddr && mport) {
        snprintf(how, howlen, "env:// (MASTER_ADDR=%s, MASTER_PORT=%s)", maddr, mport);
        snprintf(where, sizeof where, "at env:// (MASTER_ADDR=%s, MASTER_PORT=%s)",
                 maddr, mport);
        res = loom_comm_init_url("env://", -1, -1, comm);
    } else if (l.rank < 0) {
        snprintf(how, howlen, "none (no launcher: one rank)");
        snprintf(where, sizeof where, "of one rank");
        res = loom_comm_init_url("tcp://127.0.0.1:1", 1, 0, comm);
    } else if (l.nranks < 0) {
        if (perf_speaks())
            fprintf(stderr, "%s: %s gives rank %d but %s is not set\n", prog,
                    l.rank_var, l.rank, l.size_var);
        else
            perf_quiet_wait();
        return -1;
    } else if (l.one_host && l.job_id[0]) {
        char u[64];
        snprintf(u, sizeof u, "tcp://127.0.0.1:%d", loom_launch_job_port(l.job_id));
        snprintf(how, howlen, "%s (%s, one host; port from %s=%s)", u, l.launcher,
                 l.job_id_var, l.job_id);
        snprintf(where, sizeof where, "at %s (port derived from %s=%s; another on "
                 "--url or MASTER_PORT)", u, l.job_id_var, l.job_id);
        res = loom_comm_init_url(u, l.nranks, l.rank, comm);
    } else {
        if (perf_speaks())
            fprintf(stderr, "%s: %d ranks from %s %s: give --url tcp://HOST:PORT "
                    "(HOST: rank 0's host), or set MASTER_ADDR and MASTER_PORT, or "
                    "give a rank table (--ranktable)\n", prog, l.nranks, l.launcher,
                    l.one_host ? "on this host, which names no job to derive a port "
                                 "from"
                               : "on more than one host (or the launcher does not "
                                 "say) and no address to meet at");
        else
            perf_quiet_wait();
        return -1;
    }
    if (res != LOOM_SUCCESS) {
        if (l.rank <= 0 || res != LOOM_ERROR_INVALID_ARGUMENT)
            fprintf(stderr, "%s: joining the group %s failed: %s\n", prog, where,
                    loom_get_error_string(NULL));
        else
            perf_quiet_wait();
        return -1;
    }
    return 0;
}
