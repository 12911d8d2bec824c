/* tree_math.h - rank arithmetic of the double binary tree, recursive
 * halving-doubling and Bruck, as pure functions (unit-tested without a
 * network in tests/unit/check_algos.c).
 *
 * Double binary tree: nodes are labelled 1..n. In tree 0, position pos has
 * label pos + 1; in tree 1, label (pos + 1) mod n + 1 (shifted by one). A
 * label's level is its lowest set bit: odd labels are leaves, the root is
 * the largest power of two p <= n, and children of x (lowest bit b) are
 * x - b/2 and x + b/2 (or the nearest label below that fits when x + b/2
 * is past n). The shift makes the leaves of one tree the inner nodes of the
 * other, so no position forwards data in both trees.
 *
 * When n is itself a power of two (n >= 4), p = n would have the single
 * child n/2 and add a level for one rank; instead n/2 is the root and n its
 * third child, a leaf. 8 ranks: 2 hops up and 2 down, not 3 and 3. */
#ifndef LOOM_TREE_MATH_H
#define LOOM_TREE_MATH_H

#include <stdint.h>

#include "ring_math.h"

static inline int loom_tree_label(int pos, int tree, int n)
{
    return tree == 0 ? pos + 1 : (pos + 1) % n + 1;
}

static inline int loom_tree_pos(int label, int tree, int n)
{
    return tree == 0 ? label - 1 : (label - 2 + n) % n;
}

/* Most children a label has (the root, when n is a power of two). */
#define LOOM_BTREE_MAXKIDS 3

/* Is n a power of two >= 4, whose label n hangs under the root n/2? */
static inline int loom_btree_folded(int n)
{
    return n >= 4 && (n & (n - 1)) == 0;
}

/* The root's label. */
static inline int loom_btree_root(int n)
{
    return loom_btree_folded(n) ? n / 2 : loom_pow2_floor(n);
}

/* Parent label of x in a tree over 1..n; 0 for the root. */
static inline int loom_btree_parent(int x, int n)
{
    int top = loom_btree_root(n);
    if (x == top)
        return 0;
    if (x == n && loom_btree_folded(n))
        return top; /* n hangs under the root */
    for (;;) {
        int b = x & -x;
        int p = (x & ~(3 * b)) | (2 * b);
        if (p <= n)
            return p;
        x = p;
    }
}

/* Children labels of x, in increasing order, into kids[0..); returns how
 * many (at most LOOM_BTREE_MAXKIDS). */
static inline int loom_btree_children(int x, int n, int kids[LOOM_BTREE_MAXKIDS])
{
    int folded = loom_btree_folded(n), k = 0;
    if (x == n && folded)
        return 0;
    int b = x & -x;
    if (b > 1)
        kids[k++] = x - b / 2;
    for (int d = b / 2; d >= 1; d /= 2)
        if (x + d <= n) {
            kids[k++] = x + d;
            break;
        }
    if (folded && x == n / 2)
        kids[k++] = n;
    return k;
}

/* Recursive halving-doubling over p (a power of two) virtual ranks and p
 * blocks. In halving step s (s = 0..log2 p - 1, mask = p >> (s + 1)),
 * virtual rank v exchanges with v ^ mask; before the step it holds blocks
 * [*lo, *hi) and keeps the half on its side of the mask. */
static inline void loom_rhd_range(int v, int p, int s, int *lo, int *hi)
{
    int size = p >> s;
    *lo = v & ~(size - 1);
    *hi = *lo + size;
}

/* The half of [lo, hi) that v keeps at the step with this mask (the other
 * half is sent to v ^ mask). */
static inline void loom_rhd_keep(int v, int mask, int lo, int hi, int *klo,
                                 int *khi)
{
    int mid = lo + (hi - lo) / 2;
    if (v & mask) {
        *klo = mid;
        *khi = hi;
    } else {
        *klo = lo;
        *khi = mid;
    }
}

/* Folding a rank count n into the largest power of two p <= n: the first
 * 2(n - p) ranks pair up, the even one of a pair hands its data to the odd
 * one. Virtual rank of a rank (-1 for the even ones folded out), and the
 * rank of a virtual rank. */
static inline int loom_fold_vrank(int rank, int n, int p)
{
    int r = n - p;
    if (rank < 2 * r)
        return rank % 2 ? rank / 2 : -1;
    return rank - r;
}

static inline int loom_fold_rank(int v, int n, int p)
{
    int r = n - p;
    return v < r ? 2 * v + 1 : v + r;
}

/* Bruck allgather, step with distance dist (1, 2, 4, ... < n): rank r sends
 * the blocks of ranks r .. r+cnt-1 (mod n) to r - dist and receives those
 * of r+dist .. r+dist+cnt-1 from r + dist, cnt = min(dist, n - dist). */
static inline int loom_bruck_count(int n, int dist)
{
    return dist < n - dist ? dist : n - dist;
}

static inline int loom_bruck_send_peer(int r, int n, int dist)
{
    return (r - dist % n + n) % n;
}

static inline int loom_bruck_recv_peer(int r, int n, int dist)
{
    return (r + dist) % n;
}

/* A run of cnt blocks from block first, wrapping past n, as at most two
 * contiguous pieces: [first, first+*len0) and [0, *len1). */
static inline void loom_wrap_split(int first, int cnt, int n, int *len0,
                                   int *len1)
{
    *len0 = first + cnt <= n ? cnt : n - first;
    *len1 = cnt - *len0;
}

#endif
