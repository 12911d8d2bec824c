/* alltoallv.c - alltoall with a block of its own size for every pair of
 * ranks (zero included), pairwise as alltoall.c: every rank posts its
 * n - 1 receives, then its n - 1 sends (to rank + 1, rank + 2, ...), and
 * copies its own block meanwhile.
 *
 * Every pair exchanges a message even when it is empty: each carries the
 * call's fingerprint with its own element count, so a rank whose receive
 * count for a peer is not what that peer sends fails with both counts
 * named (a skipped empty message could only hang). */
#include "build_config.h"

#include <string.h>

#include "coll.h"
#include "base/util.h"

/* The bytes the send blocks span (the in-place copy). */
static size_t send_extent(const uint64_t *counts, const uint64_t *displs, int n,
                          size_t esz)
{
    uint64_t end = 0;
    for (int j = 0; j < n; j++)
        if (counts[j] && displs[j] + counts[j] > end)
            end = displs[j] + counts[j];
    return (size_t)end * esz;
}

loom_result_t loom_pairwise_alltoallv(struct loom_comm *comm, struct loom_op *op)
{
    int n = comm->nranks, me = comm->rank;
    size_t esz = loom_dtype_size(op->dtype);
    const uint64_t *scount = op->vcounts, *sdispl = scount + n;
    const uint64_t *rcount = sdispl + n, *rdispl = rcount + n;
    const char *src = op->sendbuf;
    char *dst = op->recvbuf;
    if (src && src == dst) {
        /* in place: send from a copy of what the send blocks span */
        size_t ext = send_extent(scount, sdispl, n, esz);
        char *tmp = ext ? loom_comm_scratch(comm, ext) : NULL;
        if (ext && !tmp) {
            loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY,
                                "alltoallv: cannot allocate %zu bytes", ext);
            return LOOM_ERROR_NO_MEMORY;
        }
        if (ext)
            memcpy(tmp, src, ext);
        src = tmp;
    }
    struct loom_tx_req *req = n > 1 ? loom_comm_reqs(comm, 2 * (size_t)(n - 1)) : NULL;
    if (n > 1 && !req) {
        loom_comm_set_error(comm, LOOM_ERROR_NO_MEMORY, "alltoallv: out of memory");
        return LOOM_ERROR_NO_MEMORY;
    }
    struct loom_waiter w;
    loom_waiter_init(&w, comm, op);
    uint32_t desc = loom_op_desc_vmsg(op);
    int k = 0;
    for (int s = 1; s < n; s++) {
        int from = (me - s + n) % n;
        char *b = rcount[from] ? dst + (size_t)rdispl[from] * esz : NULL;
        LOOM_CHECK(loom_p2p_post_msg(&w, &req[k++], from, 0, b, (size_t)rcount[from] * esz,
                                     desc, rcount[from]));
    }
    for (int s = 1; s < n; s++) {
        int to = (me + s) % n;
        const char *b = scount[to] ? src + (size_t)sdispl[to] * esz : NULL;
        LOOM_CHECK(loom_p2p_post_msg(&w, &req[k++], to, 1, (void *)b,
                                     (size_t)scount[to] * esz, desc, scount[to]));
    }
    /* the call checked that this rank sends itself what it receives */
    if (scount[me])
        memmove(dst + (size_t)rdispl[me] * esz, src + (size_t)sdispl[me] * esz,
                (size_t)scount[me] * esz);
    return k ? loom_p2p_wait_all(&w, req, k) : LOOM_SUCCESS;
}
