/* bootstrap.h - rendezvous: every rank learns every rank's out-of-band
 * entry (its address and host), and the job gets an id.
 *
 * Rank 0's out-of-band service listens on (root_host, root_port). Every other
 * rank connects there, retrying refused connections with backoff until the
 * timeout, and sends its rank, the job's nranks, the rank table hash and its
 * entry, signed with the job key when there is one (boot_wire.h). Rank 0
 * checks the key, then the rest: a rank of this job whose hash or nranks
 * differs (or a rank number out of range) makes rank 0 refuse every rank, by
 * name, and every rank fails at once; a connection with a wrong key or that
 * is not a Loom hello is logged and dropped. While ranks are missing, rank 0
 * names them every few seconds; at the timeout its error names every
 * missing rank (through describe); the others' error names the root. Once
 * all have arrived rank 0 answers each with the job id and its parent in a
 * tree of fan-out 8; each rank takes the table of all entries from its parent
 * through the out-of-band service and serves it to its children: rank 0
 * sends and receives O(N) bytes in all. */
#ifndef LOOM_BOOTSTRAP_H
#define LOOM_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include "loom.h"

struct loom_auth_key;
struct loom_oob;

struct loom_boot_params {
    size_t struct_size;
    int rank;
    int nranks;
    const char *root_host;       /* numeric address or host name            */
    int root_port;
    uint64_t table_hash;         /* 0 when no rank table                    */
    double timeout;              /* seconds                                 */
    const char *(*describe)(void *ctx, int rank);  /* may be NULL */
    void *describe_ctx;
    /* The job key every connection proves (auth.h); NULL: read it from
     * LOOM_JOB_KEY / LOOM_JOB_KEY_FILE (an unreadable file is an error). */
    const struct loom_auth_key *key;
    double report_first;         /* seconds before rank 0 names missing ranks (0: 3) */
    double report_every;         /* and then every so often (0: 5)          */
};

/* What this rank's bootstrap moved: bytes on its bootstrap socket and
 * through its out-of-band service, and how long it took. */
struct loom_boot_stats {
    uint64_t sent, received;
    double seconds;
};

/* oob: this rank's out-of-band service (loom_oob_open; rank 0's listens at
 * root_port), entry: what loom_oob_open wrote. On success the service knows
 * every rank's entry and serves the table, and *comm_id is the same on
 * every rank, new for every rendezvous. Aborting the service (loom_oob_abort)
 * makes it return LOOM_ERROR_ABORTED. err: the full message on failure. */
loom_result_t loom_bootstrap(const struct loom_boot_params *p, struct loom_oob *oob,
                             const uint8_t *entry, uint64_t *comm_id,
                             struct loom_boot_stats *stats, char *err,
                             size_t errlen);

/* Unique ids (uniqueid.c; loom_get_unique_id's format). create opens and
 * holds the rendezvous listener; parse reads an id back; take_listener
 * hands rank 0 the listener held for port in this process (-1: none). */
loom_result_t loom_boot_uid_create(uint8_t id[LOOM_UNIQUE_ID_BYTES], const char *toward,
                                   char *err, size_t errlen);
loom_result_t loom_boot_uid_parse(const uint8_t id[LOOM_UNIQUE_ID_BYTES], char *host,
                                  size_t hostlen, int *port, uint64_t *nonce,
                                  char *err, size_t errlen);
int loom_boot_uid_take_listener(int port);

#endif
