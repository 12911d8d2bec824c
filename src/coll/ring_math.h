/* ring_math.h - the ring's rank arithmetic, as pure functions.
 *
 * Positions are places on the ring (0..n-1); comm->ring maps them to ranks.
 * Every rank sends to pos+1 and receives from pos-1. Steps are numbered as in
 * allreduce: 0..n-2 reduce-scatter, n-1..2n-3 allgather. At step t position
 * pos sends segment send_seg(pos, t) and receives recv_seg(pos, t), which is
 * what pos-1 sends; the segment received at step t is the one sent at t+1.
 * After the reduce-scatter steps, position pos holds segment pos reduced. */
#ifndef LOOM_RING_MATH_H
#define LOOM_RING_MATH_H

#include <stdint.h>

static inline int loom_mod(int64_t a, int n)
{
    int64_t r = a % n;
    return (int)(r < 0 ? r + n : r);
}

static inline int loom_ring_send_seg(int pos, int t, int n)
{
    return loom_mod((int64_t)pos - t - 1, n);
}

static inline int loom_ring_recv_seg(int pos, int t, int n)
{
    return loom_mod((int64_t)pos - t - 2, n);
}

/* Balanced split of count elements into n parts; part j is [*off, *off+*len). */
static inline void loom_ring_part(uint64_t count, int n, int j, uint64_t *off,
                                  uint64_t *len)
{
    uint64_t base = count / (uint64_t)n, rem = count % (uint64_t)n;
    uint64_t jj = (uint64_t)j;
    *off = jj * base + (jj < rem ? jj : rem);
    *len = base + (jj < rem ? 1 : 0);
}

/* Chunks of a segment of len elements, chunk elements each (last shorter). */
static inline uint64_t loom_nchunks(uint64_t len, uint64_t chunk)
{
    return (len + chunk - 1) / chunk;
}

/* Binomial tree over virtual ranks v = (rank - root) mod n: the parent of v
 * (-1 for the root) and the lowest bit set in v (the tree level). */
static inline int loom_binomial_parent(int v)
{
    if (v == 0)
        return -1;
    return v & (v - 1);  /* clear the lowest set bit */
}

/* Largest power of two <= n (n >= 1). */
static inline int loom_pow2_floor(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

#endif
