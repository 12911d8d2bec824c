#!/usr/bin/env python3
"""reshard.py - merging and re-slicing a model-parallel checkpoint with Loom
(the MindSpore case of ../shared/seeds' 002 document, in numpy).

Stage 1 trained on 4 ranks: each holds a [2, 8] slice of "weight" and of
its optimizer state "moments.weight" (rows 2r..2r+1 of the [8, 8] tensors;
the values are the document's). An allgather merges the [8, 8] tensors on
every rank (what the document's integrate_checkpoint.py does from files).
Stage 2 trains on 2 ranks: a group of ranks 0 and 1 (loom split) takes
[4, 8] slices, scattered from rank 0, which holds the merged checkpoint.
Every rank checks its tensors against numpy (np.concatenate, np.split).

    python3 reshard.py --nprocs 4
    python3 reshard.py --nprocs 4 --survive

With --survive the launcher kills rank 1 (one of stage 2's ranks) with
SIGKILL once the checkpoint is merged: the split fails, the survivors
shrink the world (loom.survive) and the first two of them take stage 2.
"""
import argparse
import os
import sys

import numpy as np

import loom

# The document's stage-1 slices: device r holds rows 2r, 2r+1 of each.
WEIGHT = np.array([
    [0.87537426, 1.0448935, 0.86736983, 0.8836905, 0.77354026, 0.69588304, 0.9183654, 0.7792076],
    [0.87224025, 0.8726848, 0.771446, 0.81967723, 0.88974726, 0.7988162, 0.72919345, 0.7677011],
    [0.9210751, 0.9050457, 0.9827775, 0.920396, 0.9240526, 0.9750359, 1.0275179, 1.0819869],
    [0.73605865, 0.84631145, 0.9746683, 0.9386582, 0.82902765, 0.83565056, 0.9702136, 1.0514659],
    [1.0108461, 0.8689414, 0.91719437, 0.8805056, 0.7994629, 0.8999671, 0.7585804, 1.0287056],
    [0.90653455, 0.60146594, 0.7206475, 0.8306303, 0.8364681, 0.89625114, 0.7354735, 0.8447268],
    [0.7147005, 0.9168278, 0.80178416, 0.6258351, 0.8413766, 0.5909515, 0.696347, 0.71359116],
    [0.20506378, 0.03691584, 0.2454556, 0.12978578, 0.19065076, 0.23904312, 0.27509746,
     0.34614682]], dtype=np.float32)
MOMENTS = np.array([
    [0.2567724, -0.07485991, 0.282002, 0.2456022, 0.454939, 0.619168, 0.18964815, 0.45714882],
    [0.25946522, 0.24344791, 0.45677605, 0.3611395, 0.23378398, 0.41439137, 0.5312468,
     0.4696194],
    [0.2417504, 0.28193963, 0.06713893, 0.21510397, 0.23380603, 0.11424308, 0.0218009,
     -0.11969765],
    [0.45955992, 0.22664294, 0.01990281, 0.0731914, 0.27125207, 0.27298513, -0.01716102,
     -0.15327111],
    [0.03440702, 0.41419312, 0.24817684, 0.30765256, 0.48516113, 0.24904746, 0.57791173,
     0.00955463],
    [0.13458519, 0.6690533, 0.49259356, 0.28319967, 0.25951773, 0.16777472, 0.45696738,
     0.24933104],
    [0.14152306, 0.5040985, 0.24455397, 0.10907605, 0.11319532, 0.19538902, 0.01208619,
     0.40430856],
    [-0.7773164, -0.47611716, -0.6041424, -0.6144473, -0.2651842, -0.31909415, -0.4510405,
     -0.12860501]], dtype=np.float32)
OLD_RANKS, NEW_RANKS = 4, 2


def rank_main(a):
    import loom.survive as S
    member = S.Member(loom.init("tcp://127.0.0.1:%d" % a.port, a.world_size, a.rank))
    comm = member.comm
    r = comm.rank
    assert comm.size == OLD_RANKS, "this example runs on %d ranks" % OLD_RANKS
    # stage 1: this rank's checkpoint slices, as training left them
    full = {"weight": WEIGHT, "moments.weight": MOMENTS}
    mine = {name: t[2 * r:2 * r + 2].copy() for name, t in full.items()}
    # merge: allgather of the [2, 8] slices gives [4, 2, 8] -> [8, 8]
    merged = {}
    for name, part in mine.items():
        merged[name] = comm.allgather(part).reshape(8, 8)
        slices = [full[name][2 * q:2 * q + 2] for q in range(OLD_RANKS)]
        assert np.array_equal(merged[name], np.concatenate(slices)), \
            "merged %s differs from numpy" % name
    # stage 2: ranks 0 and 1 form the new job; rank 0 holds the merged
    # checkpoint and scatters [4, 8] slices (np.split along axis 0)
    S.stop_point(r, 1)  # where --survive kills rank 1: stage 1 is merged
    while True:
        try:
            new = member.comm.split(0 if member.rank < NEW_RANKS else -1)  # -1: not in it
            break
        except loom.LoomError as e:
            if not a.survive:
                raise
            # every survivor holds the merged checkpoint: the first
            # NEW_RANKS of them take stage 2
            print("rank %d: the split failed: %s" % (r, str(e).splitlines()[0]), flush=True)
            member.shrink()
            print("rank %d: %d ranks left, this one is rank %d" % (r, member.size, member.rank),
                  flush=True)
    if new is not None:
        for name in mine:
            part = np.empty((8 // NEW_RANKS, 8), dtype=np.float32)
            new.scatter(merged[name] if new.rank == 0 else None, part, root=0)
            want = np.split(merged[name], NEW_RANKS, axis=0)[new.rank]
            assert np.array_equal(part, want), "stage-2 slice of %s differs" % name
            print("rank %d: %s [2, 8] -> merged [8, 8] -> stage-2 slice [4, 8] rows %d..%d: ok"
                  % (r, name, 4 * new.rank, 4 * new.rank + 3))
        new.close()
    member.comm.barrier()
    member.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, help="start this many ranks (4)")
    p.add_argument("--survive", action="store_true",
                   help="stage 2 through a kill -9 of rank 1 after the merge")
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
                                L.free_port(), kill=1, at_step=1, timeout=a.timeout)
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
