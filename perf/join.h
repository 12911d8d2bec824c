/* join.h - how a perf program joins its group (perf/join.c, docs/launch.md). */
#ifndef LOOM_PERF_JOIN_H
#define LOOM_PERF_JOIN_H

#include <stddef.h>

#include "loom.h"

/* Join by the first of: url (--url), a rank table, MASTER_ADDR and
 * MASTER_PORT, a one-host launcher's job id, or alone when no launcher
 * started this process. 0 with *comm set and how describing the way (for
 * the header), or -1 after printing why: once (by rank 0) when every rank
 * would say the same, else by each rank. */
int perf_join(const char *prog, const char *url, loom_comm_t *comm, char *how,
              size_t howlen);

/* 1 when this process prints what every rank would print alike: rank 0 by
 * its launcher's variables, or a process no launcher started. */
int perf_speaks(void);

/* A rank that kept quiet about an error every rank has (rank 0 says it)
 * waits this long before it exits: launchers end the job at the first
 * exit that fails (mpirun, loom-run), which must not come before rank 0
 * has printed its line. */
#define PERF_QUIET_WAIT_S 2
void perf_quiet_wait(void);

#endif
