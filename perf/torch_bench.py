#!/usr/bin/env python3
"""torch_bench.py - torch.distributed backend "loom" against "gloo", in one
interleaved run (both backends in the same processes: loom is the default
group, gloo a group of the same ranks beside it).

    python3 perf/torch_bench.py --nprocs 2          # starts 2 ranks itself
    python3 perf/torch_bench.py --nprocs 4 --what allreduce --max 16M

(a) allreduce: dist.all_reduce of float32 tensors from --min to --max bytes
    (x4 steps, plus 4 KiB, 64 KiB and --max), time per call;
(b) ddp: DistributedDataParallel training step time (forward, backward,
    SGD step) of a ~25M-parameter MLP, batch 8 per rank (its 100 MB of
    gradients weigh against the compute), and of a ~6K-parameter one
    (latency-bound), and the CPU time
    that Loom's threads (loom-progress, loom-torch-done) and the whole process
    take per step.
For every cell each repetition runs loom then gloo or gloo then loom
(alternating), and the slowest rank's time counts; the tables give the
median repetition (and for allreduce the best one too) and the ratio
gloo / loom (> 1: loom faster). Other load on the machine moves single
numbers a lot: read the ratios of several runs.

The compute side is set up as a CPU training host would be, and the header
says how it ran, because it decides how much the backends can differ:
- the ranks keep freed memory (MALLOC_MMAP_MAX_=0 and a high
  MALLOC_TRIM_THRESHOLD_, glibc's own knobs; CPU training setups preload
  jemalloc or tcmalloc for the same reason). Autograd allocates ~100 MB of
  new gradient buffers per step of the large model; glibc maps blocks over
  32 MiB fresh each time and unmaps them at free, so every step pays a page
  fault per 4 KiB page. On the project's VMs a fault is expensive: backward
  took 190-450 ms of the step instead of 22 ms. --system-malloc turns this
  off.
- BLAS: the library torch's matmuls reach (Debian's default libblas3 is the
  reference implementation; scripts/deps.sh installs OpenBLAS, which makes
  the large model's forward and backward ~5x faster here), used with
  OPENBLAS_NUM_THREADS=--threads so that ranks do not oversubscribe the
  cores.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def fmt_size(b):
    for unit, m in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= m and b % m == 0:
            return "%d%s" % (b // m, unit)
    return "%d" % b


def thread_cpu():
    """CPU seconds per thread name of this process (utime + stime)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                name = f.read().strip()
            with open("/proc/self/task/%s/stat" % tid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return out


def slowest(v):
    """The largest of every rank's value (through the loom group)."""
    t = torch.tensor([v], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def bench_allreduce(a, groups, rank):
    sizes, b = [], a.min
    while b <= a.max:
        sizes.append(b)
        b *= 4
    extra = [s for s in (4 << 10, 64 << 10, a.max) if a.min <= s <= a.max]
    sizes = sorted(set(sizes + extra))
    if rank == 0:
        print("\n(a) dist.all_reduce float32, %d ranks, us per call (slowest rank; median "
              "and best of %d interleaved repetitions)" % (dist.get_world_size(), a.reps))
        print("%10s %10s %10s %8s %10s %10s %8s" % ("bytes", "loom med", "gloo med", "ratio",
                                                  "loom best", "gloo best", "ratio"))
    for size in sizes:
        t = torch.ones(max(size // 4, 1))
        # calls per repetition: ~a.budget seconds at gloo's speed, 1..2000
        for _, g in groups:
            dist.all_reduce(t, group=g)
        t0 = time.perf_counter()
        dist.all_reduce(t, group=groups[1][1])
        one = slowest(time.perf_counter() - t0)
        iters = int(min(max(a.budget / max(one, 1e-6), 1), 2000))
        res = {name: [] for name, _ in groups}
        for rep in range(a.reps):
            order = groups if rep % 2 == 0 else groups[::-1]
            for name, g in order:
                dist.barrier(group=g)
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(t, group=g)
                res[name].append(slowest((time.perf_counter() - t0) / iters))
        lo, gl = statistics.median(res["loom"]), statistics.median(res["gloo"])
        lb, gb = min(res["loom"]), min(res["gloo"])
        if rank == 0:
            print("%10s %10.1f %10.1f %8.2f %10.1f %10.1f %8.2f"
                  % (fmt_size(size), lo * 1e6, gl * 1e6, gl / lo, lb * 1e6, gb * 1e6, gb / lb))
            sys.stdout.flush()


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


MODELS = {
    # name: (layer sizes, batch per rank, steps per repetition)
    "large": ([1024, 4096, 4096, 1024], 8, 4),
    "small": ([32, 64, 64, 1], 16, 100),
}


def bench_ddp(a, groups, rank):
    from torch.nn.parallel import DistributedDataParallel as DDP
    if rank == 0:
        print("\n(b) DDP training step, %d ranks: ms per step (median of %d interleaved "
              "repetitions, slowest rank); CPU ms per step of Loom's threads and of the "
              "whole process (rank 0)" % (dist.get_world_size(), a.reps))
        print("%-22s %9s %9s %8s %12s %12s %12s" % ("model", "loom", "gloo", "gloo/loom",
                                                    "loom thr cpu", "proc cpu loom",
                                                    "proc cpu gloo"))
    for name, (sizes, batch, steps) in MODELS.items():
        if name == "large":
            batch = a.large_batch
        torch.manual_seed(0)
        nparams = sum(p.numel() for p in mlp(sizes).parameters())
        runs = {}
        for bname, g in groups:
            torch.manual_seed(0)
            m = mlp(sizes)
            ddp = DDP(m, process_group=g)
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            x, y = torch.randn(batch, sizes[0]), torch.randn(batch, sizes[-1])
            runs[bname] = (ddp, opt, x, y)

        def step(bname):
            ddp, opt, x, y = runs[bname]
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()

        for bname, _ in groups:  # warm up (DDP rebuilds its buckets after step 1)
            for _ in range(3):
                step(bname)
        res = {b: [] for b, _ in groups}
        cpu = {b: [] for b, _ in groups}
        loom_thr = []
        for rep in range(a.reps):
            order = groups if rep % 2 == 0 else groups[::-1]
            for bname, g in order:
                dist.barrier(group=g)
                c0, p0 = thread_cpu(), time.process_time()
                t0 = time.perf_counter()
                for _ in range(steps):
                    step(bname)
                dt = time.perf_counter() - t0
                c1, p1 = thread_cpu(), time.process_time()
                res[bname].append(slowest(dt / steps))
                cpu[bname].append((p1 - p0) / steps)
                if bname == "loom":
                    loom_thr.append(sum(c1.get(k, 0) - c0.get(k, 0)
                                        for k in ("loom-progress", "loom-torch-done"))
                                    / steps)
        lo, gl = statistics.median(res["loom"]), statistics.median(res["gloo"])
        if rank == 0:
            print("%-22s %9.2f %9.2f %8.2f %12.2f %12.2f %12.2f"
                  % ("%s (%s, b%d)" % (name,  "%.1fM" % (nparams / 1e6) if nparams > 1e6
                                          else "%.1fK" % (nparams / 1e3), batch),
                     lo * 1e3, gl * 1e3,
                     gl / lo, statistics.median(loom_thr) * 1e3,
                     statistics.median(cpu["loom"]) * 1e3,
                     statistics.median(cpu["gloo"]) * 1e3))
            sys.stdout.flush()


def blas_library():
    """The BLAS shared library this process mapped (torch's matmuls)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {l.split()[-1] for l in f if "blas" in l.split()[-1].lower()}
    except OSError:
        return "unknown"
    for lib in sorted(libs):
        real = os.path.realpath(lib)
        if "openblas" in real:
            return "OpenBLAS (%s)" % real
    return ("reference BLAS (%s): install OpenBLAS (libopenblas0-pthread) for a "
            "realistic compute share" % ", ".join(os.path.realpath(l) for l in sorted(libs))
            if libs else "none found")


def rank_main(a):
    torch.set_num_threads(a.threads)
    import loom.torch  # noqa: F401
    # torch 2.x's tcp:// store wants libuv unless told; Debian builds it without
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group("loom", init_method="tcp://127.0.0.1:%d" % a.port,
                            world_size=a.world_size, rank=a.rank)
    rank = dist.get_rank()
    groups = [("loom", None), ("gloo", dist.new_group(backend="gloo"))]
    if rank == 0:
        print("torch %s, %d ranks, %d intra-op threads per rank, host %s, %d CPUs"
              % (torch.__version__, dist.get_world_size(), a.threads, os.uname().nodename,
                 os.cpu_count()))
        print("BLAS: %s; allocator: %s" % (
            blas_library(), "glibc, freed memory kept (MALLOC_MMAP_MAX_=0)"
            if os.environ.get("MALLOC_MMAP_MAX_") == "0" else "glibc defaults"))
    if "allreduce" in a.what:
        bench_allreduce(a, groups, rank)
    if "ddp" in a.what:
        bench_ddp(a, groups, rank)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, help="start this many ranks")
    p.add_argument("--what", default="allreduce,ddp")
    p.add_argument("--min", type=parse_size, default=8)
    p.add_argument("--max", type=parse_size, default=64 << 20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.1,
                   help="seconds per cell and repetition (allreduce)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--large-batch", type=int, default=8,
                   help="batch per rank of the 25M-parameter model (its compute share)")
    p.add_argument("--system-malloc", action="store_true",
                   help="leave glibc's allocator as it is (unmaps large blocks at free)")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--port", type=int)
    a = p.parse_args()
    if a.nprocs:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "python", "tests"))
        import launch as L
        args = [x for x in sys.argv[1:]]
        i = args.index("--nprocs")
        del args[i:i + 2]
        env = {"OPENBLAS_NUM_THREADS": str(a.threads)}
        if not a.system_malloc:
            env.update(MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_=str(16 << 30))
        ok, results = L.run(os.path.abspath(__file__), args, a.nprocs, timeout=a.timeout,
                            env=env)
        if ok:
            sys.stdout.write(results[0][2])
        return 0 if ok else 1
    return rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
