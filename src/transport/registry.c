/* registry.c - the list of built transports and instance open/close. */
#include "build_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "loom.h"
#include "util.h"
#include "log.h"
#include "transport/transport.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/oob.h"

/* Fixed slots so core code has no #ifdef: tcp, ofi, verbs. A slot is NULL
 * when that transport is not built (configure's --with-ofi/--with-verbs). */
const struct loom_transport *const loom_transports[LOOM_TRANSPORT_SLOTS] = {
    &loom_tcp_transport,
#ifdef LOOM_HAVE_OFI_TRANSPORT
    &loom_ofi_transport,
#else
    NULL,
#endif
#ifdef LOOM_HAVE_VERBS_TRANSPORT
    &loom_verbs_transport,
#else
    NULL,
#endif
};

const struct loom_transport *loom_transport_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < LOOM_TRANSPORT_SLOTS; i++)
        if (loom_transports[i] && strcasecmp(loom_transports[i]->name, name) == 0)
            return loom_transports[i];
    return NULL;
}

loom_result_t loom_tx_open(const struct loom_transport *ops,
                           const struct loom_tx_params *params,
                           struct loom_tx **txp)
{
    if (!ops || !params || !txp)
        return LOOM_ERROR_INVALID_ARGUMENT;
    *txp = NULL;
    struct loom_tx *tx = calloc(1, sizeof *tx);
    if (!tx)
        return LOOM_ERROR_NO_MEMORY;
    tx->ops = ops;
    tx->caps = ops->caps;
    tx->notice_culprit = -1;
    snprintf(tx->info, sizeof tx->info, "%s", ops->name);
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
    loom_result_t res = ops->init(tx);
    if (res < 0) {
        loom_set_thread_error("%s", tx->errmsg[0] ? tx->errmsg
                                                  : loom_result_string(res));
        ops->finalize(tx);
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

loom_result_t loom_tx_bootstrap(const struct loom_transport *ops, int rank, int nranks,
                                const char *addr, const char *root_host, int root_port,
                                double timeout, struct loom_oob **oob,
                                struct loom_tx **tx, char *err, size_t errlen)
{
    uint8_t entry[LOOM_OOB_ENTRY_LEN];
    *oob = NULL;
    *tx = NULL;
    loom_result_t res = loom_oob_open(rank, nranks, rank == 0 ? root_host : addr,
                                      rank == 0 ? root_port : 0, oob, entry, err, errlen);
    if (res < 0)
        return res;
    struct loom_boot_params bp = {.struct_size = sizeof bp, .rank = rank,
                                  .nranks = nranks, .root_host = root_host,
                                  .root_port = root_port, .timeout = timeout};
    uint64_t id = 0;
    res = loom_bootstrap(&bp, *oob, entry, &id, NULL, err, errlen);
    if (res == LOOM_SUCCESS) {
        struct loom_tx_params tp = {.struct_size = sizeof tp, .rank = rank,
                                    .nranks = nranks, .comm_id = id, .local_addr = addr,
                                    .connect_timeout = timeout, .oob = *oob};
        res = loom_tx_open(ops, &tp, tx);
        if (res < 0)
            snprintf(err, errlen, "%s", loom_thread_error());
    }
    if (res < 0) {
        loom_oob_close(*oob);
        *oob = NULL;
    }
    return res;
}

void loom_tx_stop_reason(char *buf, size_t len, loom_result_t code,
                         unsigned long long seq, const char *who)
{
    if (!who)
        snprintf(buf, len, "failed in call #%llu (%s)", seq, loom_result_string(code));
    else if (code == LOOM_ERROR_MISMATCH)
        snprintf(buf, len, "stopped in call #%llu: it and %s are in different "
                 "collective calls", seq, who);
    else if (code == LOOM_ERROR_TIMEOUT)
        snprintf(buf, len, "stopped in call #%llu: it timed out waiting for %s", seq, who);
    else
        snprintf(buf, len, "stopped in call #%llu after losing %s (%s)", seq, who,
                 loom_result_string(code));
}
