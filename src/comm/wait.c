/* wait.c - LOOM_TIMEOUT and LOOM_STALL_WARN for every wait (wait.h). */
#include "build_config.h"

#include "wait.h"
#include "base/util.h"

loom_result_t loom_wait_check(struct loom_wait *w, struct loom_comm *comm,
                              const struct loom_op *op, uint64_t now_ns,
                              const char *waiting, int blame)
{
    if (!w->since_ns)
        return LOOM_SUCCESS;
    double idle = (double)(now_ns - w->since_ns) * 1e-9;
    char what[160];
    if (comm->timeout > 0 && idle > comm->timeout) {
        loom_op_describe(op, what, sizeof what);
        if (blame >= 0)
            comm->blame = blame;
        if (waiting && *waiting)
            loom_comm_set_error(comm, LOOM_ERROR_TIMEOUT,
                                "%s: no progress for %.0f s (LOOM_TIMEOUT, or the timeout its "
                                "caller gave) waiting %s", what,
                                comm->timeout, waiting);
        else
            loom_comm_set_error(comm, LOOM_ERROR_TIMEOUT,
                                "%s: no progress for %.0f s (LOOM_TIMEOUT, or the timeout its "
                                "caller gave)", what,
                                comm->timeout);
        return LOOM_ERROR_TIMEOUT;
    }
    if (comm->stall_warn > 0 && !w->stall_warned && idle > comm->stall_warn) {
        w->stall_warned = 1;
        loom_op_describe(op, what, sizeof what);
        LOOM_WARN(LOOM_SUB_COLL, "%s: no progress for %.0f s (LOOM_STALL_WARN): waiting %s",
                  what, idle, waiting && *waiting ? waiting : "(for its peers)");
    }
    return LOOM_SUCCESS;
}
