/* ranktable_v2.h - `loom-ranktable generate --version 2.0`. */
#ifndef LOOM_TOOLS_RANKTABLE_V2_H
#define LOOM_TOOLS_RANKTABLE_V2_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* HCCL's bound on device_id and local_id (0..64): devices per server. */
#define LOOM_RT_V2_MAX_DEVICES 65

/* A version 2.0 table of nservers x ndev ranks, rank s*ndev + d being
 * device d of server s: net_layer 0 instance servers[s], address
 * dev_ips[rank] when dev_ips is given, else host_ips[s] when given, else
 * servers[s] (which must then be an address). NULL: out of memory. */
cJSON *loom_rt_generate_v2(const char *const *servers, size_t nservers,
                           size_t ndev, const char *const *dev_ips,
                           const char *const *host_ips);

#endif
