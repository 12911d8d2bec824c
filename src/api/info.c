/* info.c - what this build of Loom holds (the features string) and what a
 * communicator runs on (its transport, endpoint, the algorithm it selects). */
#include "build_config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "loom.h"
#include "base/config.h"
#include "coll/coll.h"
#include "comm/comm.h"
#include "transport/transport.h"

static char features[256];
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

/* Transports built (the registry's slots), then what every build has:
 * shared memory between ranks of a server, job-key authentication, stream
 * hooks. */
static void features_make(void)
{
    size_t off = 0;
    for (int i = 0; i < LOOM_TRANSPORT_SLOTS; i++)
        if (loom_transports[i] && off < sizeof features)
            off += (size_t)snprintf(features + off, sizeof features - off, "%s ",
                                    loom_transports[i]->name);
    if (off < sizeof features)
        snprintf(features + off, sizeof features - off, "shm hmac-job-key stream-hooks");
}

LOOM_API loom_result_t loom_get_features(const char **out)
{
    if (!out)
        return LOOM_ERROR_INVALID_ARGUMENT;
    pthread_once(&features_once, features_make);
    *out = features;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_get_info(loom_comm_t comm, loom_comm_info_t *info)
{
    if (!comm || !info)
        return LOOM_ERROR_INVALID_ARGUMENT;
    size_t have = info->struct_size;
    if (have < offsetof(loom_comm_info_t, transport) + sizeof info->transport) {
        loom_comm_set_arg_error(comm,
                                "loom_comm_get_info: info->struct_size %zu is "
                                "not a loom_comm_info_t size",
                                have);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    loom_comm_info_t all = {
        .struct_size = sizeof all,
        .transport = comm->tx ? comm->tx->ops->name : loom_config()->transport,
        .transport_detail = comm->tx ? comm->tx->info : NULL,
        .address = comm->local_addr,
        .nhosts = comm->nhosts,
        .chunk_size = comm->chunk_size,
    };
    memcpy(info, &all, have < sizeof all ? have : sizeof all);
    info->struct_size = have;
    return LOOM_SUCCESS;
}

LOOM_API loom_result_t loom_comm_algo(loom_comm_t comm, const char *collective, uint64_t count,
                                      loom_dtype_t dtype, loom_redop_t op, const char **algo)
{
    if (!comm || !collective || !algo)
        return LOOM_ERROR_INVALID_ARGUMENT;
    if (loom_dtype_size(dtype) == 0) {
        loom_comm_set_arg_error(comm, "loom_comm_algo: dtype %d is not a Loom data type",
                                (int)dtype);
        return LOOM_ERROR_INVALID_ARGUMENT;
    }
    for (int k = 0; k < LOOM_OP_KIND_COUNT; k++) {
        const char *name = loom_op_kind_name((enum loom_op_kind)k);
        if (k == LOOM_OP_GROUP || loom_op_kind_is_p2p((enum loom_op_kind)k) ||
            strcasecmp(name, collective) != 0)
            continue;
        struct loom_op o = {.kind = (enum loom_op_kind)k, .count = count, .dtype = dtype, .op = op};
        *algo = loom_algo_name(loom_coll_select(comm, &o));
        return LOOM_SUCCESS;
    }
    loom_comm_set_arg_error(comm,
                            "loom_comm_algo: '%s' is not a collective LOOM_ALGO "
                            "names (allreduce, allgather, broadcast, ...)",
                            collective);
    return LOOM_ERROR_INVALID_ARGUMENT;
}
