/* info.c - what this build of Loom holds: the features string. */
#include "build_config.h"

#include <pthread.h>
#include <stdio.h>

#include "loom.h"
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
