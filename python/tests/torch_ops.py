"""torch_ops.py - what each rank does in the backend's tests of the calls gloo
offers beyond the plain collectives (coalesced and tensor forms, objects,
complex and bool, uneven all_to_all, PREMUL_SUM, sparse allreduce, monitored
barrier, profiler events, errors), of timeouts and of abort. Every result is
checked against a reference the rank computes itself; the same on torch 1.13
and 2.x.

usage: torch_ops.py SCENARIO --rank R --world-size N --port P
"""
import datetime
import time

import torch
import torch.distributed as dist

import loom.torch
import torch_ranks

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def init(a, timeout=None, world=None, store=None):
    kw = {"timeout": datetime.timedelta(seconds=timeout)} if timeout else {}
    if store is not None:
        dist.init_process_group("loom", store=store, world_size=world or a.world_size,
                                rank=a.rank, **kw)
    else:
        dist.init_process_group("loom", init_method="tcp://127.0.0.1:%d" % a.port,
                                world_size=world or a.world_size, rank=a.rank, **kw)


def raises(fn, *words):
    """fn() raises an exception whose text holds every word; returns it."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - torch wraps errors in several types
        for w in words:
            assert w in str(e), "%r not in %r" % (w, str(e))
        return e
    raise AssertionError("no error (expected one naming %s)" % (words,))


def s_ops(a):
    init(a)
    r, n = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    # allgather_coalesced: each rank's list, several shapes, into every rank
    ins = [torch.full((3,), float(r)), torch.arange(4.0).reshape(2, 2) + 10 * r]
    outs = [[torch.empty(3), torch.empty(2, 2)] for _ in range(n)]
    dist.all_gather_coalesced(outs, ins)
    for q in range(n):
        assert (outs[q][0] == q).all() and (outs[q][1] == torch.arange(4.0).reshape(2, 2)
                                            + 10 * q).all(), outs[q]
    # complex: sum and broadcast; bool: or (SUM, MAX) and and (MIN)
    c = torch.tensor([complex(r, 1), complex(1, -r)], dtype=torch.complex64)
    dist.all_reduce(c)
    want = torch.tensor([complex(n * (n - 1) / 2, n), complex(n, -n * (n - 1) / 2)])
    assert torch.allclose(c, want.to(c.dtype)), c
    c = torch.full((5,), complex(r, r), dtype=torch.complex128)
    dist.broadcast(c, src=n - 1)
    assert (c == complex(n - 1, n - 1)).all(), c
    b = torch.tensor([r == 0, False, True])
    dist.all_reduce(b, op=dist.ReduceOp.MAX)
    assert b.tolist() == [True, False, True], b
    b = torch.tensor([r == 0, True])
    dist.all_reduce(b, op=dist.ReduceOp.MIN)
    assert b.tolist() == [n == 1, True], b
    bl = [torch.empty(2, dtype=torch.bool) for _ in range(n)]
    dist.all_gather(bl, torch.tensor([r % 2 == 0, True]))
    assert all(bl[q].tolist() == [q % 2 == 0, True] for q in range(n)), bl
    # all_to_all with uneven splits: rank r sends q+1 rows to rank q
    ins = torch.cat([torch.full((q + 1, 2), float(100 * r + q)) for q in range(n)])
    out = torch.empty((r + 1) * n, 2)
    dist.all_to_all_single(out, ins, output_split_sizes=[r + 1] * n,
                           input_split_sizes=[q + 1 for q in range(n)])
    assert all((out[q * (r + 1):(q + 1) * (r + 1)] == 100 * q + r).all()
               for q in range(n)), out
    # AVG and PREMUL_SUM
    t = torch.full((7,), float(r + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.allclose(t, torch.full((7,), (n + 1) / 2)), t
    t = torch.full((7,), float(r + 1), dtype=torch.float64)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
    assert torch.allclose(t, torch.full((7,), float(n * (n + 1)), dtype=t.dtype)), t
    # objects ride on the collectives
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r, "s": "x" * r})
    assert objs == [{"rank": q, "s": "x" * q} for q in range(n)], objs
    lst = [("root", 7)] if r == 0 else [None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [("root", 7)], lst
    got = [None] * n if r == 0 else None
    dist.gather_object(r * r, got, dst=0)
    assert r != 0 or got == [q * q for q in range(n)], got
    sc = [None]
    dist.scatter_object_list(sc, [q + 5 for q in range(n)] if r == 0 else None, src=0)
    assert sc == [r + 5], sc
    # sparse allreduce (SUM), with overlapping and distinct indices
    idx = torch.tensor([[0, r + 1], [1, 2]])
    sp = torch.sparse_coo_tensor(idx, torch.tensor([1.0, float(r + 1)]), (n + 1, 3))
    dist.all_reduce(sp)
    want = torch.zeros(n + 1, 3)
    want[0, 1] = n
    for q in range(n):
        want[q + 1, 2] += q + 1
    assert torch.equal(sp.to_dense(), want), sp.to_dense()
    # the tensor forms, coalesced (torch 2.x's coalescing manager)
    if TORCH2:
        ins = [torch.full((2,), float(r)), torch.full((3,), float(r + 1))]
        outs = [torch.empty(2 * n), torch.empty(3 * n)]
        with dist._coalescing_manager(async_ops=False):
            for i, o in zip(ins, outs):
                dist.all_gather_into_tensor(o, i)
        want = [torch.arange(n).repeat_interleave(2).float(),
                (torch.arange(n) + 1).repeat_interleave(3).float()]
        assert all(torch.equal(o, w) for o, w in zip(outs, want)), outs
        ins = [torch.arange(2.0 * n) + r, torch.ones(n)]
        outs = [torch.empty(2), torch.empty(1)]
        with dist._coalescing_manager(async_ops=False):
            for i, o in zip(ins, outs):
                dist.reduce_scatter_tensor(o, i)
        base = torch.arange(2.0 * n)[2 * r:2 * r + 2]
        assert torch.equal(outs[0], base * n + n * (n - 1) / 2), outs[0]
        assert torch.equal(outs[1], torch.full((1,), float(n))), outs[1]
    # profiler: "loom:<op>" records, as gloo's "gloo:<op>"
    with torch.autograd.profiler.profile() as prof:
        dist.all_reduce(torch.ones(4))
        dist.broadcast(torch.ones(4), src=0)
        dist.all_gather([torch.empty(4) for _ in range(n)], torch.ones(4))
        dist.barrier()
    names = {e.name for e in prof.function_events}
    for want in ("loom:all_reduce", "loom:broadcast", "loom:all_gather", "loom:barrier"):
        assert want in names, (want, sorted(x for x in names if ":" in x))
    # monitored barrier: every rank passes
    pg.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)
    # what Loom cannot do: an error naming the call and the reason
    # tags: two tensors to the next rank, received in the other order
    dst, src = (r + 1) % n, (r - 1) % n
    sends = [dist.isend(torch.full((3,), 100.0 * r + t), dst=dst, tag=t) for t in (5, 7)]
    got = {t: torch.empty(3) for t in (7, 5)}
    for t, x in got.items():
        assert dist.recv(x, src=src, tag=t) == src
        assert torch.equal(x, torch.full((3,), 100.0 * src + t)), (t, x)
    for w in sends:
        w.wait()
    # a receive from any source learns who sent
    if r == 0:
        seen = set()
        for _ in range(n - 1):
            x = torch.empty(1)
            who = dist.recv(x, tag=9)
            assert x.item() == who, (who, x)
            seen.add(who)
        assert seen == set(range(1, n)), seen
    else:
        dist.send(torch.full((1,), float(r)), dst=0, tag=9)
    raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), "dtype")
    # monitored barrier: rank n-1 does not come; rank 0 names it
    if r == 0:
        t0 = time.monotonic()
        raises(lambda: pg.monitored_barrier(datetime.timedelta(seconds=2),
                                            wait_all_ranks=True),
               "Rank %d failed to pass monitoredBarrier" % (n - 1))
        assert time.monotonic() - t0 < 20, time.monotonic() - t0
    elif r != n - 1:
        raises(lambda: pg.monitored_barrier(datetime.timedelta(seconds=2)), "rank 0")
    # abort: every later call fails at once
    loom.torch.abort()
    t0 = time.monotonic()
    raises(lambda: dist.all_reduce(torch.ones(1)), "abort")
    assert time.monotonic() - t0 < 10


def s_late(a):
    """One rank 3x the group's timeout late to a barrier: the others raise
    within about the timeout, naming it."""
    init(a, timeout=5)
    dist.barrier()
    if a.rank == a.world_size - 1:
        time.sleep(16)
        return
    t0 = time.monotonic()
    raises(dist.barrier, "rank %d" % (a.world_size - 1))
    dt = time.monotonic() - t0
    assert 3 < dt < 12, dt


def s_missing(a):
    """A world of world_size + 1 ranks, one never started: init fails
    within about the timeout, not Loom's own 120 s."""
    kw = {"use_libuv": False} if TORCH2 else {}  # Debian's torch 2.x has no libuv
    store = dist.TCPStore("127.0.0.1", a.port, a.world_size + 1, a.rank == 0,
                          timeout=datetime.timedelta(seconds=60), wait_for_workers=False, **kw)
    t0 = time.monotonic()
    # every rank meets at 127.0.0.1: the job runs on loopback, and the others
    # name rank 0 at that address
    raises(lambda: init(a, timeout=5, world=a.world_size + 1, store=store),
           *(["rank %d" % a.world_size] if a.rank == 0 else ["rank 0 at 127.0.0.1:"]))
    dt = time.monotonic() - t0
    assert dt < 15, dt


def s_wait_timeout(a):
    """Work.wait(timeout) expires while a rank is late: it raises, and the
    group, destroyed, aborts the call instead of waiting for it."""
    init(a)
    dist.barrier()
    if a.rank == a.world_size - 1:
        time.sleep(15)  # never joins the allreduce
        return
    w = dist.all_reduce(torch.ones(3), async_op=True)
    t0 = time.monotonic()
    raises(lambda: w.wait(timeout=datetime.timedelta(seconds=1)), "timed out")
    dist.destroy_process_group()
    dt = time.monotonic() - t0
    assert dt < 8, dt


SCENARIOS = {k[2:]: v for k, v in globals().items() if k.startswith("s_")}

if __name__ == "__main__":
    torch_ranks.main(SCENARIOS, hard_exit=False)  # the process must end on its own
