#!/usr/bin/env python3
"""torch_survive.py - DDP that trains through a kill -9 (docs/shrink.md).

    python3 torch_survive.py --nprocs 4 --kill 2 [--backend loom|gloo]

The parent hosts a TCPStore (the store that survives: any rank may die) and
starts N ranks; once they are training it kills rank --kill with SIGKILL.
Each rank also holds a Loom communicator (the `loom` package) used only to
agree on who is alive: when a training step raises, the rank revokes it,
shrinks it to the live ranks and learns its new rank and size; then, with
public torch APIs only, it destroys the process group, makes a new one
through the surviving store under a fresh prefix, rebuilds DDP (which
broadcasts rank 0's parameters: a failed step may have updated some ranks
and not others) and redoes the step. At the end every survivor writes its
parameters; the parent checks that they are identical and that the
survivors are the ranks it did not kill. Bounded: the parent kills what is
left by PID at --timeout seconds.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 40


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True) * 0.5


def worker(a):
    import loom
    if a.backend == "loom":
        import loom.torch  # noqa: F401 (registers the backend)
    store = dist.TCPStore("127.0.0.1", a.store_port, a.world_size, False,
                          timeout=__import__("datetime").timedelta(seconds=60))
    first = a.rank
    member = loom.init("tcp://127.0.0.1:%d" % a.loom_port, a.world_size, a.rank)
    gen = 0

    def make_group():
        dist.init_process_group(a.backend, store=dist.PrefixStore("gen%d" % gen, store),
                                rank=member.rank, world_size=member.size)

    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    make_group()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    step = 0
    while step < STEPS:
        try:
            x, y = batch(step, first)
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
            step += 1
            store.set("step/%d" % first, str(step))
        except RuntimeError as e:
            print("rank %d (first %d): step %d failed: %s" % (member.rank, first, step,
                                                                str(e).splitlines()[0]),
                  flush=True)
            try:
                member.revoke()
            except loom.LoomError:
                pass
            survivors = member.shrink()
            member.close()
            member = survivors
            gen += 1
            dist.destroy_process_group()
            make_group()
            ddp = DDP(model)  # rank 0's parameters: the same on every survivor
            opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
            # redo the latest step any survivor reached
            t = torch.tensor([step])
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            step = int(t)
            print("rank %d (first %d): going on with %d ranks from step %d"
                  % (member.rank, first, member.size, step), flush=True)
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.save(params, os.path.join(a.out, "params.%d" % first))
    dist.destroy_process_group()
    member.close()
    return 0


def parent(a):
    store = dist.TCPStore("127.0.0.1", a.store_port, a.nprocs, True,
                          timeout=__import__("datetime").timedelta(seconds=60),
                          wait_for_workers=False)
    os.makedirs(a.out, exist_ok=True)
    procs = []
    for r in range(a.nprocs):
        cmd = [sys.executable, __file__, "--rank", str(r), "--world-size", str(a.nprocs),
               "--store-port", str(a.store_port), "--loom-port", str(a.loom_port),
               "--backend", a.backend, "--out", a.out]
        procs.append(subprocess.Popen(cmd))
    until = time.time() + a.timeout
    # kill once the victim is a few steps in
    while time.time() < until:
        try:
            if int(store.get("step/%d" % a.kill)) >= 5:
                break
        except Exception:
            pass
        time.sleep(0.05)
    procs[a.kill].send_signal(signal.SIGKILL)
    print("parent: killed rank %d (pid %d)" % (a.kill, procs[a.kill].pid), flush=True)
    ok = True
    for r, p in enumerate(procs):
        try:
            rc = p.wait(timeout=max(1, until - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            print("parent: rank %d did not finish in time" % r)
        if r != a.kill and rc != 0:
            ok = False
            print("parent: rank %d exited %d" % (r, rc))
    survivors = [r for r in range(a.nprocs) if r != a.kill]
    got = sorted(int(f.split(".")[1]) for f in os.listdir(a.out) if f.startswith("params."))
    if got != survivors:
        print("parent: parameters from ranks %s, want %s" % (got, survivors))
        return 1
    ref = torch.load(os.path.join(a.out, "params.%d" % survivors[0]))
    for r in survivors[1:]:
        if not torch.equal(ref, torch.load(os.path.join(a.out, "params.%d" % r))):
            print("parent: rank %d's parameters differ from rank %d's" % (r, survivors[0]))
            ok = False
    print("parent: %s: %d survivors trained %d steps, parameters identical"
          % ("PASS" if ok else "FAIL", len(survivors), STEPS))
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nprocs", type=int, default=4)
    p.add_argument("--kill", type=int, default=2)
    p.add_argument("--backend", default="loom")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--world-size", type=int, default=0)
    p.add_argument("--store-port", type=int, default=0)
    p.add_argument("--loom-port", type=int, default=0)
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.rank >= 0:
        return worker(a)
    import random
    import tempfile
    a.store_port = a.store_port or random.randint(12000, 20000)
    a.loom_port = a.loom_port or a.store_port + 1
    a.out = a.out or tempfile.mkdtemp(prefix="loom-survive.")
    return parent(a)


if __name__ == "__main__":
    sys.exit(main())
