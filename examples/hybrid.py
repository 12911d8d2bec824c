#!/usr/bin/env python3
"""hybrid.py - data and model parallelism at once with Loom (numpy): 4 ranks
as 2 data-parallel x 2 model-parallel groups, made by splitting the world.

    rank = 2 * dp + mp        mp group: ranks {0, 1} and {2, 3} (same data)
                              dp group: ranks {0, 2} and {1, 3} (same shard)

The model is y = relu(x W1^T) W2^T with a squared-error loss. W1 [H, D] is
sharded across the model-parallel pair by rows (each rank holds H/2 output
features). Forward: each rank computes its half of the hidden layer and an
allgather over the pair assembles it. Backward: the hidden gradient, the same
on both ranks of the pair since everything after the allgather is replicated,
is reduce-scattered with LOOM_AVG, which hands each rank its features' half
(the transpose of the allgather). Gradients are then averaged over the
data-parallel pair (allreduce avg). After K SGD steps every rank checks that
the sharded model equals the unsharded one trained on the whole batch by a
single process (computed by the rank itself), and that the replicas agree.

    python3 hybrid.py --nprocs 4
"""
import argparse
import os
import sys

import numpy as np

import loom

D, H, O, BATCH, STEPS, LR = 6, 8, 3, 16, 5, 0.1


def problem():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((BATCH, D))
    t = rng.standard_normal((BATCH, O))
    w1 = rng.standard_normal((H, D)) * 0.5
    w2 = rng.standard_normal((O, H)) * 0.5
    return x, t, w1, w2


def grads(x, t, w1, w2, nbatch):
    """Unsharded gradients of 0.5 * sum((y - t)^2) / nbatch."""
    h = x @ w1.T
    a = np.maximum(h, 0)
    dy = (a @ w2.T - t) / nbatch
    dw2 = dy.T @ a
    dh = (dy @ w2) * (h > 0)
    return dh.T @ x, dw2


def reference():
    x, t, w1, w2 = problem()
    for _ in range(STEPS):
        g1, g2 = grads(x, t, w1, w2, BATCH)
        w1, w2 = w1 - LR * g1, w2 - LR * g2
    return w1, w2


def rank_main(a):
    world = loom.init("tcp://127.0.0.1:%d" % a.port, a.world_size, a.rank)
    assert world.size == 4, "this example runs on 4 ranks"
    r = world.rank
    dp_idx, mp_idx = r // 2, r % 2
    mp = world.split(dp_idx, key=mp_idx)   # the model-parallel pair
    dp = world.split(mp_idx, key=dp_idx)   # the data-parallel pair
    assert mp.rank == mp_idx and dp.rank == dp_idx
    x, t, w1, w2 = problem()
    half = BATCH // 2
    x, t = x[dp_idx * half:(dp_idx + 1) * half], t[dp_idx * half:(dp_idx + 1) * half]
    hs = H // 2
    w1 = w1[mp_idx * hs:(mp_idx + 1) * hs].copy()   # this rank's rows of W1
    for _ in range(STEPS):
        # forward: local half of the hidden layer, then allgather the halves
        h_mine = x @ w1.T                                   # [half, H/2]
        parts = mp.allgather(np.ascontiguousarray(h_mine))  # [2, half, H/2]
        h = np.concatenate(list(parts), axis=1)             # [half, H]
        a_ = np.maximum(h, 0)
        dy = (a_ @ w2.T - t) / half                         # mean over my batch
        g2 = dy.T @ a_
        dh = (dy @ w2) * (h > 0)                            # [half, H], replicated
        # backward through the allgather: reduce-scatter (avg) of the
        # replicated gradient gives each rank its features' half
        blocks = np.ascontiguousarray(np.stack([dh[:, :hs], dh[:, hs:]]))  # [2, half, H/2]
        dh_mine = mp.reduce_scatter(blocks, op=loom.AVG).reshape(half, hs)
        g1 = dh_mine.T @ x                                  # [H/2, D]
        # data parallel: average over the two halves of the batch
        with loom.group():  # both gradients in one op
            dp.allreduce(g1, op=loom.AVG)
            dp.allreduce(g2, op=loom.AVG)
        w1 -= LR * g1
        w2 -= LR * g2
    rw1, rw2 = reference()
    full_w1 = np.concatenate(list(mp.allgather(w1)))
    same = world.allgather(np.concatenate([full_w1.ravel(), w2.ravel()]))
    assert all(np.array_equal(same[0], s) for s in same), "replicas differ"
    e1, e2 = np.abs(full_w1 - rw1).max(), np.abs(w2 - rw2).max()
    assert e1 < 1e-12 and e2 < 1e-12, "differs from the unsharded model: %g %g" % (e1, e2)
    print("rank %d (dp %d, mp %d): sharded model = unsharded model after %d steps "
          "(max |diff| W1 %.1e, W2 %.1e); replicas identical" % (r, dp_idx, mp_idx, STEPS,
                                                                 e1, e2))
    for c in (mp, dp, world):
        c.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, help="start this many ranks (4)")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    if a.nprocs:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "python", "tests"))
        import launch as L
        ok, results = L.run(os.path.abspath(__file__), [], a.nprocs, timeout=a.timeout)
        if ok:
            for _, _, out in results:
                sys.stdout.write(out)
        return 0 if ok else 1
    return rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
