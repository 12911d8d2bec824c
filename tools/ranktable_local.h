/* ranktable_local.h - `loom-ranktable check --local`: which of a valid
 * table's ranks belong to this host, whether it owns their addresses, which
 * address LOOM_ADDRESS makes each use, and whether its port is free. */
#ifndef LOOM_TOOLS_RANKTABLE_LOCAL_H
#define LOOM_TOOLS_RANKTABLE_LOCAL_H

#include <cjson/cJSON.h>

#include "ranktable/ranktable_internal.h"

/* Print the report for every rank (rank < 0) or one rank. Returns 0 when
 * some rank belongs here and every such rank can use its address and port,
 * else 1. */
int loom_rt_local_text(const struct loom_ranktable *t, int rank);

/* The same as an object {"address_mode", "ranks": [...], "ok"} added to
 * root as "local". Returns as loom_rt_local_text. */
int loom_rt_local_json(const struct loom_ranktable *t, int rank, cJSON *root);

#endif
