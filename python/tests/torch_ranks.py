"""torch_ranks.py - what each rank of the backend's tests does: torch.distributed
with backend "loom" (import loom.torch), every result checked against a
reference the rank computes itself.

usage: torch_ranks.py SCENARIO [--tmp DIR] --rank R --world-size N --port P
"""
import argparse
import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import loom.torch  # noqa: F401 (registers "loom")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.uint8, torch.int32, torch.int64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def inp(seed, rank, shape, dtype, op="sum"):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if op == "product":
        v = torch.tensor([1.0, -1.0, 2.0, 1.0])[torch.randint(0, 4, shape, generator=g)]
        if not dtype.is_floating_point and (dtype == torch.uint8):
            v = v.abs()
    elif dtype == torch.uint8:
        v = torch.randint(0, 9, shape, generator=g).double()
    else:
        v = torch.randint(-8, 9, shape, generator=g).double()
    return v.to(dtype)


def ref(seed, n, shape, dtype, op):
    xs = torch.stack([inp(seed, r, shape, dtype, op).double() for r in range(n)])
    if op == "sum":
        return xs.sum(0)
    if op == "avg":
        return xs.sum(0) / n
    if op == "product":
        return xs.prod(0)
    return xs.min(0).values if op == "min" else xs.max(0).values


def check(got, want, what):
    tol = 1e-2 if got.dtype in (torch.float16, torch.bfloat16) else 1e-6
    ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    assert ok, "%s: got %s want %s" % (what, got.flatten()[:6].tolist(),
                                       want.flatten()[:6].tolist())


def thread_name():
    try:
        with open("/proc/self/task/%d/comm" % threading.get_native_id()) as f:
            return f.read().strip()
    except OSError:
        return "?"


def init(a, method=None):
    dist.init_process_group("loom", init_method=method or "tcp://127.0.0.1:%d" % a.port,
                            world_size=a.world_size, rank=a.rank)


def s_collectives(a):
    if not dist.is_initialized():
        init(a)
    r, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "loom", dist.get_backend()
    seed = 0
    for dt in DTYPES:
        ops = ["sum", "product", "min", "max"] + (["avg"] if dt.is_floating_point else [])
        for op in ops:
            for shape in [(1,), (5, 7), (20003,)]:
                seed += 1
                t = inp(seed, r, shape, dt, op)
                dist.all_reduce(t, op=OPS[op])
                check(t, ref(seed, n, shape, dt, op), "all_reduce %s %s %s" % (dt, op, shape))
        if dt.is_floating_point:
            seed += 1
            t = inp(seed, r, (100,), dt)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
            check(t, ref(seed, n, (100,), dt, "sum") * 0.5, "premul_sum %s" % dt)
        for root in range(n):
            seed += 1
            t = inp(seed, r, (3, 3), dt)
            dist.broadcast(t, src=root)
            assert torch.equal(t, inp(seed, root, (3, 3), dt)), "broadcast"
        seed += 1
        outs = [torch.empty(4, dtype=dt) for _ in range(n)]
        dist.all_gather(outs, inp(seed, r, (4,), dt))
        assert all(torch.equal(outs[q], inp(seed, q, (4,), dt)) for q in range(n)), "ag"
        flat = torch.empty(n * 4, dtype=dt)
        dist._all_gather_base(flat, inp(seed, r, (4,), dt))
        assert torch.equal(flat.view(n, 4)[n - 1], inp(seed, n - 1, (4,), dt)), "ag base"
        seed += 1
        ins = [inp(seed + q, r, (6,), dt) for q in range(n)]
        out = torch.empty(6, dtype=dt)
        dist.reduce_scatter(out, ins)
        check(out, ref(seed + r, n, (6,), dt, "sum"), "reduce_scatter %s" % dt)
        seed += n
        big = inp(seed, r, (n * 5,), dt)
        out = torch.empty(5, dtype=dt)
        dist._reduce_scatter_base(out, big)
        check(out, ref(seed, n, (n * 5,), dt, "sum")[r * 5:(r + 1) * 5], "rs base")
        seed += 1
        t = inp(seed, r, (8,), dt)
        keep = t.clone()
        dist.reduce(t, dst=n - 1, op=dist.ReduceOp.MAX)
        if r == n - 1:
            check(t, ref(seed, n, (8,), dt, "max"), "reduce")
        else:
            assert torch.equal(t, keep), "reduce changed a non-root tensor"
    # alltoall: equal and unequal splits, and the list form
    seed += 1
    x = torch.arange(n * 3, dtype=torch.float32) + 100 * r
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    want = torch.cat([torch.arange(3 * r, 3 * r + 3, dtype=torch.float32) + 100 * q
                      for q in range(n)])
    assert torch.equal(y, want), ("all_to_all_single", y, want)
    ins = [r + 1 + q for q in range(n)]          # rank r sends r+1+q rows to q
    outs = [q + 1 + r for q in range(n)]
    x = torch.full((sum(ins), 2), float(r))
    y = torch.empty(sum(outs), 2)
    dist.all_to_all_single(y, x, output_split_sizes=outs, input_split_sizes=ins)
    assert torch.equal(y, torch.cat([torch.full((outs[q], 2), float(q)) for q in range(n)]))
    outl = [torch.empty(2, dtype=torch.int64) for _ in range(n)]
    dist.all_to_all(outl, [torch.full((2,), 10 * r + q) for q in range(n)])
    assert all(torch.equal(outl[q], torch.full((2,), 10 * q + r)) for q in range(n)), "a2a"
    # gather and scatter
    gl = [torch.empty(3) for _ in range(n)] if r == 0 else None
    dist.gather(torch.full((3,), float(r)), gather_list=gl, dst=0)
    if r == 0:
        assert all(torch.equal(gl[q], torch.full((3,), float(q))) for q in range(n))
    sc = torch.empty(3)
    dist.scatter(sc, [torch.full((3,), float(q) * 2) for q in range(n)] if r == 0 else None,
                 src=0)
    assert torch.equal(sc, torch.full((3,), 2.0 * r)), "scatter"
    # point-to-point
    if r == 0:
        dist.send(torch.arange(10.0), dst=1)
        w = dist.isend(torch.ones(3), dst=1)
        w.wait()
    elif r == 1:
        t = torch.empty(10)
        dist.recv(t, src=0)
        assert torch.equal(t, torch.arange(10.0))
        t = torch.zeros(3)
        dist.irecv(t, src=0).wait()
        assert torch.equal(t, torch.ones(3))
    got = torch.empty(100000)
    ops = [dist.P2POp(dist.isend, torch.full((100000,), float(r)), (r + 1) % n),
           dist.P2POp(dist.irecv, got, (r - 1) % n)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, torch.full((100000,), float((r - 1) % n))), "batch_isend_irecv"
    ts = [torch.full((k + 1,), float(r + k)) for k in range(20)]
    dist.all_reduce_coalesced(ts)
    assert all(torch.equal(ts[k], torch.full((k + 1,), float(n * (n - 1) / 2 + n * k)))
               for k in range(20)), "all_reduce_coalesced"
    dist.barrier()


def s_async(a):
    if not dist.is_initialized():
        init(a)
    r, n = dist.get_rank(), dist.get_world_size()
    if r == 1:
        time.sleep(0.3)  # rank 0's future is asked for long before completion
    t = torch.ones(1 << 20)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future()
    seen = {}

    def cb(f):
        seen["thread"] = thread_name()
        seen["value"] = f.value()[0][0].item()
        return f.value()

    chained = fut.then(cb)
    chained.wait()
    assert seen["value"] == n, seen
    if r == 0:
        # completed by the backend's own thread, not Loom's progress thread
        assert seen["thread"] == "loom-torch-done", seen
    assert w.wait() and w.is_completed()  # the future completes first, as gloo's
    # many in flight, waited out of order; is_completed polls
    ws = [(k, torch.full((1000,), float(k)), None) for k in range(30)]
    ws = [(k, x, dist.all_reduce(x, async_op=True)) for k, x, _ in ws]
    for k, x, w in reversed(ws):
        w.wait()
        assert x[0].item() == k * n and w.is_completed() and w.is_success()
    w = dist.broadcast(torch.zeros(10), src=0, async_op=True)
    while not w.is_completed():
        time.sleep(0.001)
    assert w.result()[0].shape == (10,)


def s_errors(a):
    if not dist.is_initialized():
        init(a)
    r = dist.get_rank()
    for bad, why in [(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool),
                                              op=dist.ReduceOp.AVG), "bool"),
                     (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)),
                      "not supported"),
                     (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32),
                                              op=dist.ReduceOp.BAND), "ReduceOp"),
                     (lambda: dist.all_reduce(torch.ones(4, 4)[:, 1]), "contiguous")]:
        try:
            bad()
            raise AssertionError("accepted: " + why)
        except RuntimeError as e:
            assert why in str(e) and "loom" in str(e), e
    dist.barrier()  # those were argument errors: nothing is broken
    # A rank still leaving the barrier can be failed by a peer that already
    # went on and found the mismatch below (Loom's shared-memory engine
    # fails waiters as soon as a peer fails): give every rank time to leave.
    time.sleep(0.3)
    try:
        dist.all_reduce(torch.ones(8 if r == 0 else 16))
        raise AssertionError("mismatch unnoticed")
    except RuntimeError as e:
        # who notices first names both calls; a rank told by a peer that
        # failed first hears whom to blame (the odd one out, rank 0)
        m = str(e)
        assert ("calls differ" in m and "allreduce(float32, 8, sum)" in m and
                "allreduce(float32, 16, sum)" in m) or "blaming rank 0" in m, m


def s_init(a):
    r, n = a.rank, a.world_size
    # env://
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port), WORLD_SIZE=str(n),
                      RANK=str(r))
    dist.init_process_group("loom", init_method="env://")
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    assert t.item() == n
    # new_group: a subset, and one every rank is in
    g = dist.new_group([0, n - 1])
    if r in (0, n - 1):
        t = torch.tensor([float(r)])
        dist.all_reduce(t, group=g)
        assert t.item() == n - 1, t
    g2 = dist.new_group(list(range(n)))
    t = torch.tensor([2.0])
    dist.all_reduce(t, group=g2)
    assert t.item() == 2.0 * n
    dist.destroy_process_group()
    # file://
    dist.init_process_group("loom", init_method="file://" + os.path.join(a.tmp, "store"),
                            world_size=n, rank=r)
    t = torch.tensor([3.0])
    dist.all_reduce(t)
    assert t.item() == 3.0 * n
    dist.destroy_process_group()
    # a rank table: the default group is built from it
    path = os.path.join(a.tmp, "table.json")
    if r == 0:
        table = {"version": "1.0", "server_count": "1", "status": "completed",
                 "server_list": [{"server_id": "127.0.0.1", "device": [
                     {"device_id": str(d), "device_ip": "127.0.0.%d" % (d + 1),
                      "device_port": str(a.port + 1 + d), "rank_id": str(d)}
                     for d in range(n)]}]}
        with open(path + ".tmp", "w") as f:
            json.dump(table, f)
        os.rename(path + ".tmp", path)
    while not os.path.exists(path):
        time.sleep(0.01)
    os.environ["LOOM_RANK_TABLE"] = path
    dist.init_process_group("loom", init_method="tcp://127.0.0.1:%d" % (a.port + 50),
                            world_size=n, rank=r)
    t = torch.tensor([4.0])
    dist.all_reduce(t)
    assert t.item() == 4.0 * n
    dist.destroy_process_group()
    os.environ["LOOM_RANK_TABLE"] = os.path.join(a.tmp, "missing.json")
    try:
        dist.init_process_group("loom", init_method="tcp://127.0.0.1:%d" % (a.port + 60),
                                world_size=n, rank=r)
        raise AssertionError("a missing rank table went unnoticed")
    except RuntimeError as e:
        assert "missing.json" in str(e), e
    del os.environ["LOOM_RANK_TABLE"]


def s_package(a):
    """The loom package (not the backend) on torch tensors, bfloat16 too."""
    c = loom.init("tcp://127.0.0.1:%d" % (a.port + 1), a.world_size, a.rank)
    r, n = c.rank, c.size
    for dt in [torch.float32, torch.bfloat16, torch.int64, torch.float16, torch.uint8]:
        t = torch.full((33,), float(r + 1), dtype=dt)
        assert c.allreduce(t) is t and (t == n * (n + 1) // 2).all(), "allreduce %s" % dt
        g = c.allgather(torch.full((2,), float(r), dtype=dt))
        assert g.shape == (n, 2) and g.dtype == dt and all((g[q] == q).all()
                                                          for q in range(n))
        out = torch.empty(33, dtype=dt)
        h = c.allreduce(torch.ones(33, dtype=dt), op="max", out=out, async_op=True)
        assert h.wait() is out and (out == 1).all()
    try:
        c.allreduce(torch.ones(2, dtype=torch.bool))
        raise AssertionError("bool tensor accepted")
    except TypeError as e:
        assert "torch.bool" in str(e), e
    c.close()


def s_all(a):
    """One job for what does not need a fresh process: the package on
    tensors, collectives, then async work, then errors (a mismatch breaks
    the group: last)."""
    s_package(a)
    s_collectives(a)
    s_async(a)
    s_errors(a)


SCENARIOS = {k[2:]: v for k, v in globals().items() if k.startswith("s_")}


def main(scenarios=None, hard_exit=True):
    """Run the scenario argv names (of scenarios, default this file's);
    hard_exit: leave by os._exit (not torch's atexit hooks on a broken
    group), else a normal exit, whose hooks must end the process."""
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--tmp", default="/tmp")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    (scenarios or SCENARIOS)[a.scenario](a)
    print("rank %d: %s ok" % (a.rank, a.scenario))
    sys.stdout.flush()
    if hard_exit:
        os._exit(0)


if __name__ == "__main__":
    main()
