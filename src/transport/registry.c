/* registry.c - the list of built transports and instance open/close. */
#include "build_config.h"

#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "transport/transport.h"

/* Fixed slots so core code has no #ifdef: tcp, ofi, verbs, then NULL end.
 * A slot is NULL when that transport is not built; iterate up to
 * LOOM_TRANSPORT_SLOTS and skip NULLs. */
const struct loom_transport *const loom_transports[] = {
    &loom_tcp_transport,
    NULL, /* ofi: not built in this tree */
    NULL, /* verbs: not built in this tree */
    NULL,
};

const struct loom_transport *loom_transport_find(const char *name)
{
    if (!name)
        return NULL;
    size_t n = sizeof loom_transports / sizeof loom_transports[0];
    for (size_t i = 0; i < n; i++)
        if (loom_transports[i] && strcmp(loom_transports[i]->name, name) == 0)
            return loom_transports[i];
    return NULL;
}

loom_result_t loom_tx_open(const struct loom_transport *ops,
                           const struct loom_tx_params *params,
                           struct loom_tx **txp, void *ep, size_t *ep_len)
{
    if (!ops || !params || !txp || !ep || !ep_len)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *txp = NULL;
    struct loom_tx *tx = calloc(1, sizeof *tx);
    if (!tx)
        return LOOM_ERROR_NO_MEMORY;
    tx->ops = ops;
    tx->notice_culprit = -1;
    /* Copy what both sides know of the params struct; zero the rest. */
    size_t n = params->struct_size && params->struct_size < sizeof tx->params
                   ? params->struct_size
                   : sizeof tx->params;
    memcpy(&tx->params, params, n);
    tx->params.struct_size = sizeof tx->params;
    if (ops->priv_size) {
        tx->priv = calloc(1, ops->priv_size);
        if (!tx->priv) {
            free(tx);
            return LOOM_ERROR_NO_MEMORY;
        }
    }
    loom_result_t res = ops->init(tx, ep, ep_len);
    if (res < 0) {
        LOOM_INFO(LOOM_SUB_NET, "%s transport init failed: %s", ops->name,
                  tx->errmsg[0] ? tx->errmsg : loom_result_string(res));
        loom_set_thread_error("%s", tx->errmsg[0] ? tx->errmsg
                                                  : loom_result_string(res));
        free(tx->priv);
        free(tx);
        return res;
    }
    *txp = tx;
    return LOOM_SUCCESS;
}

void loom_tx_close(struct loom_tx *tx)
{
    if (!tx)
        return;
    tx->ops->finalize(tx);
    free(tx->priv);
    free(tx);
}
