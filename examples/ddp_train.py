#!/usr/bin/env python3
"""ddp_train.py - DistributedDataParallel on Loom: N ranks train a small MLP on
a synthetic problem with backend "loom", and every rank checks its result.

    python3 ddp_train.py --nprocs 4          # starts 4 ranks itself
    python3 ddp_train.py --nprocs 4 --sizes 2,3,4   # also on groups of 2 and 3
    python3 ddp_train.py --rank R --world-size N --port P   # one rank
    python3 ddp_train.py --nprocs 4 --survive  # through a kill -9 of rank 1

Torch scripts use Loom unchanged but for the backend's name:

    import loom.torch
    dist.init_process_group(backend='loom', init_method='tcp://127.0.0.1:29688',
                            world_size=N, rank=R)
    model = DDP(model)

Each rank trains the same model from the same seed on its share of a fixed
global batch, in several ways, and checks after K steps that:
  - its parameters equal every other rank's (bit for bit),
  - they match a single-process full-batch run (computed by the rank itself)
    within float tolerance,
  - they match the same training with backend gloo (a gloo group beside the
    loom one, in the same processes) within float tolerance.
Ways: plain DDP; find_unused_parameters=True with a branch used every other
step; fp16 and bf16 compression comm hooks; no_sync() accumulation over two
micro-batches. Exit status 0 when every check passed.

With --survive (plain DDP only), the launcher kills rank 1 with SIGKILL
mid-training; the survivors catch the error, shrink (loom.survive: a Loom
communicator beside torch's group agrees on who is alive), go back to the
latest step they all completed, make a new group through a store that
survives (the launcher's) and a new DDP on it, and train on. At the end each
survivor checks that its parameters equal every other survivor's and the
single-process run without any failure (docs/shrink.md).
"""
import argparse
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 6
BATCH = 24          # divisible by 2, 3 and 4
DIM_IN, HIDDEN, DIM_OUT = 16, 32, 4
LR = 0.05


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM_IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, DIM_OUT)
        self.extra = nn.Linear(HIDDEN, DIM_OUT)  # left out at times (see uses_extra)

    def forward(self, x, use_extra=False):
        h = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        y = self.head(h)
        return y + self.extra(h) if use_extra else y


def uses_extra(way, step):
    """The extra branch is always used, but every other step for "unused"."""
    return way != "unused" or step % 2 == 0


def data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(BATCH, DIM_IN, generator=g)
    w = torch.randn(DIM_IN, DIM_OUT, generator=g)
    return x, torch.sin(x @ w)


def bfloat16_hook(group, bucket):
    """torch's bf16_compress_hook, which torch 1.13 refuses by that name
    without NCCL (DistributedDataParallel._check_comm_hook): the bucket is averaged in bfloat16 and copied back. Its callback runs on
    the thread that completes the future (loom.torch's, never Loom's)."""
    group = group if group is not None else dist.group.WORLD
    compressed = bucket.buffer().to(torch.bfloat16).div_(group.size())
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(fut):
        buf = bucket.buffer()
        buf.copy_(fut.value()[0])
        return buf

    return fut.then(decompress)


def new_model():
    torch.manual_seed(0)
    return MLP()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def reference(way):
    """The single-process, full-batch run that DDP must reproduce."""
    model = new_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = data()
    for step in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(x, uses_extra(way, step)), y).backward()
        opt.step()
    return flat(model)


def train(way, group, rank, n):
    """DDP training of one way on group; returns the flat parameters."""
    model = new_model()
    ddp = DDP(model, process_group=group, find_unused_parameters=(way == "unused"))
    if way == "fp16":
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif way == "bf16":
        ddp.register_comm_hook(group, bfloat16_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    x, y = data()
    share = BATCH // n
    x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
    for step in range(STEPS):
        opt.zero_grad()
        use_extra = uses_extra(way, step)
        if way == "no_sync":
            # two micro-batches: the first accumulates locally, the second
            # averages the sum across ranks
            half = share // 2
            with ddp.no_sync():
                nn.functional.mse_loss(ddp(x[:half], True), y[:half]).mul(0.5).backward()
            nn.functional.mse_loss(ddp(x[half:], True), y[half:]).mul(0.5).backward()
        else:
            nn.functional.mse_loss(ddp(x, use_extra), y).backward()
        opt.step()
    return flat(model)


def rank_main(a):
    torch.set_num_threads(1)
    # torch 2.x's tcp:// store wants libuv unless told; Debian builds it without
    os.environ.setdefault("USE_LIBUV", "0")
    import loom.torch  # noqa: F401 (registers backend "loom")
    dist.init_process_group(backend="loom", init_method="tcp://127.0.0.1:%d" % a.port,
                            world_size=a.world_size, rank=a.rank)
    rank, world = dist.get_rank(), dist.get_world_size()
    sizes = [int(v) for v in a.sizes.split(",")] if a.sizes else [world]
    failures = []
    for n in sizes:
        # N ranks: the world, or its first N ranks as a group (every rank
        # makes every group, as torch requires)
        group = None if n == world else dist.new_group(list(range(n)))
        gloo = dist.new_group(list(range(n)), backend="gloo")
        if rank >= n:
            continue
        for way in ["plain", "unused", "fp16", "bf16", "no_sync"]:
            t0 = time.monotonic()
            mine = train(way, group, rank, n)
            t_loom = time.monotonic() - t0
            # gloo cannot reduce bfloat16 ("Invalid scalar type"): that way is
            # checked against the single-process run only
            theirs = train(way, gloo, rank, n) if way != "bf16" else None
            want = reference(way)
            every = [torch.empty_like(mine) for _ in range(n)]
            dist.all_gather(every, mine, group=group)  # through Loom
            same = all(torch.equal(every[0], e) for e in every)
            tol = 2e-3 if way in ("fp16", "bf16") else 1e-5
            d_ref = (mine - want).abs().max().item()
            d_gloo = (mine - theirs).abs().max().item() if theirs is not None else 0.0
            ok = same and d_ref <= tol and d_gloo <= tol
            if rank == 0:
                print("%-8s N=%d identical across ranks: %s, max |loom - single process| "
                      "%.2e, max |loom - gloo| %s (tolerance %.0e), %.2f s: %s"
                      % (way, n, same, d_ref, "%.2e" % d_gloo if theirs is not None else "-",
                         tol, t_loom, "ok" if ok else "FAILED"))
            if not ok:
                failures.append((n, way))
    dist.barrier()
    dist.destroy_process_group()
    return 1 if failures else 0


def survive_main(a):
    """--survive: plain DDP trained through the loss of a rank."""
    torch.set_num_threads(1)
    import loom
    import loom.survive as S
    import loom.torch  # noqa: F401 (registers backend "loom")
    store = S.store(a.world_size)
    member = S.Member(loom.init("tcp://127.0.0.1:%d" % a.port, a.world_size, a.rank))
    model = new_model()
    history = S.History(keep=2)  # one group: ranks are at most a step apart
    history.commit(0, flat(model))

    def new_ddp():
        dist.init_process_group("loom", store=dist.PrefixStore("gen%d" % member.gen, store),
                                rank=member.rank, world_size=member.size)
        # its constructor broadcasts rank 0's parameters: the same everywhere
        return DDP(model), torch.optim.SGD(model.parameters(), lr=LR)

    ddp, opt = new_ddp()
    x, y = data()
    step = 0
    while step < STEPS:
        S.stop_point(member.first, step)
        share = BATCH // member.size
        lo = member.rank * share
        try:
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x[lo:lo + share], True), y[lo:lo + share]).backward()
            opt.step()
            step += 1
            history.commit(step, flat(model))
        except RuntimeError as e:
            print("rank %d (first %d): step %d failed: %s" % (
                member.rank, member.first, step, str(e).splitlines()[0]), flush=True)
            member.shrink()
            step = member.agree(history.last)
            torch.nn.utils.vector_to_parameters(history.at(step), model.parameters())
            dist.destroy_process_group()
            ddp, opt = new_ddp()
            print("rank %d (first %d): going on with %d ranks from step %d"
                  % (member.rank, member.first, member.size, step), flush=True)
    mine = flat(model)
    every = [torch.empty_like(mine) for _ in range(member.size)]
    dist.all_gather(every, mine)  # through Loom
    same = all(torch.equal(every[0], e) for e in every)
    d_ref = (mine - reference("plain")).abs().max().item()
    ok = same and d_ref <= 1e-5
    print("rank %d (first %d): %d survivors after %d steps, identical: %s, max |loom - "
          "single process| %.2e: %s" % (member.rank, member.first, member.size, STEPS, same,
                                        d_ref, "ok" if ok else "FAILED"), flush=True)
    dist.destroy_process_group()
    member.close()
    return 0 if ok else 1


def launch(n, sizes, timeout, survive=False):
    """Start n ranks of this script; kill them by PID if they outlive timeout."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "python", "tests"))
    import launch as L
    if survive:
        import loom.survive as S
        ok, results = S.run(os.path.abspath(__file__), ["--survive"], n, L.free_port(),
                            kill=1, at_step=STEPS // 2, timeout=timeout, store=True)
        for r, rc, out in results:
            if ok and r != 1:
                sys.stdout.write(out)
        return 0 if ok else 1
    extra = ["--sizes", sizes] if sizes else []
    ok, results = L.run(os.path.abspath(__file__), extra, n, timeout=timeout)
    for r, rc, out in results:
        if r == 0 and ok:
            sys.stdout.write(out)
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, help="start this many ranks")
    p.add_argument("--sizes", help="train on the first N ranks for each N of this list "
                   "(default: all of them), e.g. 2,3,4")
    p.add_argument("--survive", action="store_true",
                   help="train through a kill -9 of rank 1 (plain DDP)")
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    if a.nprocs:
        return launch(a.nprocs, a.sizes, a.timeout, a.survive)
    return survive_main(a) if a.survive else rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
