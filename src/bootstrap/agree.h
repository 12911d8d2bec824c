/* agree.h - fault-tolerant agreement on a set of failed ranks, over the
 * out-of-band service (the step of loom_comm_shrink that must give every
 * live rank one answer).
 *
 * Every live rank of a view calls loom_agree_failed. A coordinator - the
 * lowest rank that this rank does not know to be dead or excluded - takes
 * one proposal from every other live rank, confirms deaths by the service's
 * own evidence (a connection its port refused, or none within the connect
 * timeout: loom_oob_peer_error; ranks that have not proposed are pinged),
 * and publishes the decision; the others fetch it with a lookup. Whoever
 * decides publishes the decision before returning, and keeps it published
 * while the view lives, so that:
 *   - a coordinator that dies before publishing is replaced by the next
 *     lowest live rank (every waiting rank pings its coordinator), which
 *     starts over with itself added to the failed set;
 *   - a coordinator that dies after some ranks took its decision is
 *     replaced by one that first asks every live rank for a decision it
 *     took (a lookup answered by that rank's service even after it has
 *     returned) and adopts it: never two answers.
 * A rank that dies during the agreement is in the failed set unless the
 * decision was published before its death was seen; then the ranks of the
 * new communicator learn it at their first call on it (as of any later
 * death). A live rank that does not join within the timeout fails the
 * agreement on every rank with LOOM_ERROR_TIMEOUT naming it; ranks whose
 * exclude lists differ fail with LOOM_ERROR_MISMATCH naming both.
 *
 * Cost with n ranks and no coordinator failure: n - 1 proposals and n - 1
 * lookups in, n - 1 answers out, at the coordinator; two message delays
 * (docs/shrink.md has the model). */
#ifndef LOOM_AGREE_H
#define LOOM_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

struct loom_oob;

struct loom_agree_params {
    size_t struct_size;          /* sizeof(struct loom_agree_params)        */
    struct loom_oob *oob;        /* the view of the ranks that agree        */
    const uint8_t *suspect;      /* n bytes: 1 where this rank saw a failure
                                    (a hint the coordinator checks)         */
    const uint8_t *exclude;      /* n bytes: 1 to leave out, alive or not;
                                    the same on every rank                  */
    double timeout;              /* seconds a live rank may take to join    */
    const char *(*describe)(void *ctx, int rank); /* for messages; may be NULL */
    void *describe_ctx;
};

struct loom_agree_stats {
    int coordinator;             /* the rank whose decision was taken       */
    int takeovers;               /* coordinators found dead on the way      */
    uint64_t sent;               /* messages and lookups this rank sent     */
    double seconds;
};

/* Agree on the failed set: failed (n bytes) gets 1 for every rank found
 * dead or excluded, the same on every rank that returns LOOM_SUCCESS. On
 * an error err says why (naming ranks) and every live rank that joined
 * gets the same error. stats may be NULL. */
loom_result_t loom_agree_failed(const struct loom_agree_params *p, uint8_t *failed,
                                struct loom_agree_stats *stats, char *err, size_t errlen);

#endif
