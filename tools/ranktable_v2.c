/* ranktable_v2.c - write a version 2.0 (rank_list) table: each rank's one
 * net_layer 0 level names its server as the instance and carries its
 * address; numbers are JSON integers. Ports are derived at run time
 * (LOOM_PORT_BASE + device_id), so ranks of a server may share an address. */
#include "build_config.h"

#include <string.h>

#include "ranktable_v2.h"

/* An item added to a live array or object belongs to it from then on. */
static cJSON *add_object(cJSON *array)
{
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddItemToArray(array, o);
    return o;
}

static int add_level0(cJSON *rank, const char *instance, const char *addr)
{
    cJSON *levels = cJSON_AddArrayToObject(rank, "level_list");
    cJSON *level = levels ? add_object(levels) : NULL;
    cJSON *addrs = NULL, *a = NULL, *ports = NULL, *port = NULL;
    if (!level ||
        !cJSON_AddNumberToObject(level, "net_layer", 0) ||
        !cJSON_AddStringToObject(level, "net_instance_id", instance) ||
        !cJSON_AddStringToObject(level, "net_type", "TOPO_FILE_DESC") ||
        !cJSON_AddStringToObject(level, "net_attr", "") ||
        !(addrs = cJSON_AddArrayToObject(level, "rank_addr_list")) ||
        !(a = add_object(addrs)) ||
        !cJSON_AddStringToObject(a, "addr_type",
                                 strchr(addr, ':') ? "IPV6" : "IPV4") ||
        !cJSON_AddStringToObject(a, "addr", addr) ||
        !(ports = cJSON_AddArrayToObject(a, "ports")) ||
        /* the NPU's die 0 port 0: HCCL wants a port name; Loom does not
         * use it */
        !(port = cJSON_CreateString("0/0")))
        return 0;
    cJSON_AddItemToArray(ports, port);
    return 1;
}

cJSON *loom_rt_generate_v2(const char *const *servers, size_t nservers,
                           size_t ndev, const char *const *dev_ips,
                           const char *const *host_ips)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *list = NULL;
    int ok = root && cJSON_AddStringToObject(root, "version", "2.0") &&
             cJSON_AddStringToObject(root, "status", "completed") &&
             cJSON_AddNumberToObject(root, "rank_count",
                                     (double)(nservers * ndev)) &&
             (list = cJSON_AddArrayToObject(root, "rank_list"));
    for (size_t s = 0; ok && s < nservers; s++) {
        for (size_t d = 0; ok && d < ndev; d++) {
            size_t r = s * ndev + d;
            const char *addr = dev_ips    ? dev_ips[r]
                               : host_ips ? host_ips[s]
                                          : servers[s];
            cJSON *rank = add_object(list);
            ok = rank && cJSON_AddNumberToObject(rank, "rank_id", (double)r) &&
                 cJSON_AddNumberToObject(rank, "device_id", (double)d) &&
                 cJSON_AddNumberToObject(rank, "local_id", (double)d) &&
                 add_level0(rank, servers[s], addr);
        }
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
