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
    python3 hybrid.py --nprocs 4 --survive

With --survive the launcher kills rank 1 with SIGKILL mid-training. The
survivors revoke their communicators, shrink the world (loom.survive), go
back to the latest step all of them completed, put the whole model together
from the rows of W1 each holds, and train on in the layout their number
allows (3 ranks: 3 data-parallel replicas of the whole model, the batch in
uneven parts); the same checks then hold.
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


def layout(world):
    """Model-parallel pairs when the ranks pair up (else each rank holds the
    whole model), data parallel across them: (mp, dp, mp_idx, dp_idx, m, d)."""
    n, r = world.size, world.rank
    m = 2 if n % 2 == 0 else 1
    dp_idx, mp_idx = r // m, r % m
    mp = world.split(dp_idx, key=mp_idx)   # the model-parallel group
    dp = world.split(mp_idx, key=dp_idx)   # the data-parallel group
    assert mp.rank == mp_idx and dp.rank == dp_idx
    return mp, dp, mp_idx, dp_idx, m, n // m


def sgd_step(x, t, w1, w2, mp, dp, m):
    """One step on this rank's rows x of the batch and rows of W1."""
    hs = H // m
    # forward: local part of the hidden layer, then allgather the parts
    h_mine = x @ w1.T                                   # [rows, H/m]
    h = np.concatenate(list(mp.allgather(np.ascontiguousarray(h_mine))), axis=1)
    a_ = np.maximum(h, 0)
    dy = (a_ @ w2.T - t) / BATCH                        # the whole batch's mean
    g2 = dy.T @ a_
    dh = (dy @ w2) * (h > 0)                            # [rows, H], replicated
    # backward through the allgather: reduce-scatter (avg) of the
    # replicated gradient gives each rank its features' part
    blocks = np.ascontiguousarray(np.stack([dh[:, k * hs:(k + 1) * hs] for k in range(m)]))
    dh_mine = mp.reduce_scatter(blocks, op=loom.AVG).reshape(len(x), hs)
    g1 = dh_mine.T @ x                                  # [H/m, D]
    # data parallel: the sum over the parts of the batch
    with loom.group():  # both gradients in one op
        dp.allreduce(g1)
        dp.allreduce(g2)
    return w1 - LR * g1, w2 - LR * g2


def whole(world, lo, w1, w2):
    """The whole model, from the rows of W1 each rank holds (from lo on);
    replicas (rows or W2 on several ranks) must be identical."""
    have, rows = np.zeros(H), np.zeros((H, D))
    have[lo:lo + len(w1)], rows[lo:lo + len(w1)] = 1, w1
    parts = world.allgather(np.concatenate([have, rows.ravel(), w2.ravel()]))
    full, got = np.zeros((H, D)), np.zeros(H, dtype=bool)
    for p in parts:
        mine = p[:H] == 1
        theirs = p[H:H + H * D].reshape(H, D)
        assert np.array_equal(full[mine & got], theirs[mine & got]), "replicas of W1 differ"
        assert np.array_equal(p[H + H * D:], parts[0][H + H * D:]), "replicas of W2 differ"
        full[mine] = theirs[mine]
        got |= mine
    if not got.all():
        raise RuntimeError("rows %s of W1 were held only by ranks that died"
                           % np.flatnonzero(~got).tolist())
    return full, parts[0][H + H * D:].reshape(O, H)


def rank_main(a):
    import loom.survive as S
    member = S.Member(loom.init("tcp://127.0.0.1:%d" % a.port, a.world_size, a.rank))
    assert member.size == 4, "this example runs on 4 ranks"
    mp, dp, mp_idx, dp_idx, m, d = layout(member.comm)
    x, t, w1, w2 = problem()
    w1 = w1[mp_idx * H // m:(mp_idx + 1) * H // m].copy()   # this rank's rows of W1
    history = S.History(keep=3)  # ranks are up to two steps apart (dp after mp)
    step = 0
    while step < STEPS:
        S.stop_point(member.first, step)
        rows = np.array_split(np.arange(BATCH), d)[dp_idx]
        try:
            w1, w2 = sgd_step(x[rows], t[rows], w1, w2, mp, dp, m)
            step += 1
            history.commit(step, (mp_idx * H // m, w1, w2))
        except loom.LoomError as e:
            if not a.survive:
                raise
            print("rank %d (first %d): step %d failed: %s"
                  % (member.rank, member.first, step, str(e).splitlines()[0]), flush=True)
            member.shrink(also=(mp, dp))
            step = member.agree(history.last)
            full1, w2 = whole(member.comm, *history.at(step))
            mp, dp, mp_idx, dp_idx, m, d = layout(member.comm)
            w1 = full1[mp_idx * H // m:(mp_idx + 1) * H // m].copy()
            print("rank %d (first %d): going on from step %d on %d ranks: %d data-parallel x "
                  "%d model-parallel" % (member.rank, member.first, step, member.size, d, m),
                  flush=True)
    rw1, rw2 = reference()
    full_w1, w2 = whole(member.comm, mp_idx * H // m, w1, w2)
    e1, e2 = np.abs(full_w1 - rw1).max(), np.abs(w2 - rw2).max()
    assert e1 < 1e-12 and e2 < 1e-12, "differs from the unsharded model: %g %g" % (e1, e2)
    print("rank %d (first %d, dp %d, mp %d): sharded model = unsharded model after %d steps "
          "(max |diff| W1 %.1e, W2 %.1e); replicas identical"
          % (member.rank, member.first, dp_idx, mp_idx, STEPS, e1, e2))
    for c in (mp, dp, member):
        c.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, help="start this many ranks (4)")
    p.add_argument("--survive", action="store_true",
                   help="train through a kill -9 of rank 1")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    if a.nprocs:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "python", "tests"))
        import launch as L
        if a.survive:
            import loom.survive as S
            ok, results = S.run(os.path.abspath(__file__), ["--survive"], a.nprocs,
                                L.free_port(), kill=1, at_step=STEPS // 2,
                                timeout=a.timeout)
            results = [res for res in results if res[0] != 1]
        else:
            ok, results = L.run(os.path.abspath(__file__), [], a.nprocs, timeout=a.timeout)
        if ok:
            for _, _, out in results:
                sys.stdout.write(out)
        return 0 if ok else 1
    return rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
