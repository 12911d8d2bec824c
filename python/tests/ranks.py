"""ranks.py - what each rank of the package's tests does (one scenario per
run; launch.py starts the ranks). Every rank checks its results against a
reference it computes itself from seeded generators.

usage: ranks.py SCENARIO [--tmp DIR] --rank R --world-size N --port P
"""
import argparse
import json
import os
import sys
import threading

import numpy as np

import loom

NP_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64,
             np.uint32, np.uint64]


def inputs(seed, rank, shape, dtype, op="sum"):
    """Rank rank's input: small integers (products: +-1 and +-2) so that
    every reduction order is exact in every dtype."""
    rng = np.random.default_rng(seed * 1000 + rank)
    if op == "prod":
        v = rng.choice([1, 1, -1, 2] if np.dtype(dtype).kind != "u" else [1, 2], size=shape)
    elif np.dtype(dtype).kind == "u":
        v = rng.integers(0, 9, size=shape)
    else:
        v = rng.integers(-8, 9, size=shape)
    return v.astype(dtype)


def reference(seed, n, shape, dtype, op):
    xs = [inputs(seed, r, shape, dtype, op).astype(np.float64) for r in range(n)]
    if op in ("sum", "avg"):
        v = sum(xs)
        if op == "avg":
            v = v / n if np.dtype(dtype).kind == "f" else np.trunc(v / n)
    elif op == "prod":
        v = np.prod(xs, axis=0)
    elif op == "min":
        v = np.min(xs, axis=0)
    else:
        v = np.max(xs, axis=0)
    return v


def close(got, want, dtype, what):
    got = np.asarray(got, dtype=np.float64)
    tol = 1e-2 if np.dtype(dtype) == np.float16 else 1e-6
    if np.dtype(dtype).kind in "iu":
        want = want.astype(np.int64).astype(dtype).astype(np.float64)  # wrapped
        ok = np.array_equal(got, want)
    else:
        ok = np.allclose(got, want, rtol=tol, atol=tol)
    assert ok, "%s: got %s, want %s" % (what, got.ravel()[:8], np.asarray(want).ravel()[:8])


def comm_for(a):
    return loom.init("tcp://127.0.0.1:%d" % a.port, a.world_size, a.rank)


# ---- scenarios on numpy arrays -----------------------------------------------

def s_collectives(a):
    c = comm_for(a)
    r, n = c.rank, c.size
    assert (r, n) == (a.rank, a.world_size)
    assert c.local_size == n and c.local_rank == r
    seed = 1
    for dt in NP_DTYPES:
        ops = ["sum", "prod", "min", "max"] + (["avg"] if np.dtype(dt).kind == "f" else [])
        for op in ops:
            for shape in [(1,), (7, 3), (3001,)]:
                seed += 1
                x = inputs(seed, r, shape, dt, op)
                want = reference(seed, n, shape, dt, op)
                y = c.allreduce(x.copy(), op=op)           # in place
                close(y, want, dt, "allreduce %s %s %s" % (np.dtype(dt), op, shape))
                out = np.empty_like(x)
                c.allreduce(x, op=op, out=out)             # out of place
                close(out, want, dt, "allreduce out %s %s" % (np.dtype(dt), op))
                assert np.array_equal(x, inputs(seed, r, shape, dt, op)), "input written"
        # broadcast, allgather, reduce_scatter, reduce, alltoall, gather, scatter
        for root in range(n):
            seed += 1
            x = inputs(seed, r, (5, 2), dt)
            c.broadcast(x, root=root)
            assert np.array_equal(x, inputs(seed, root, (5, 2), dt)), "broadcast"
        seed += 1
        g = c.allgather(inputs(seed, r, (3, 4), dt))
        assert g.shape == (n, 3, 4)
        for q in range(n):
            assert np.array_equal(g[q], inputs(seed, q, (3, 4), dt)), "allgather"
        seed += 1
        x = inputs(seed, r, (2 * n, 3), dt)
        rs = c.reduce_scatter(x)
        want = reference(seed, n, (2 * n, 3), dt, "sum")[2 * r:2 * r + 2]
        close(rs, want, dt, "reduce_scatter")
        for root in range(n):
            seed += 1
            x = inputs(seed, r, (9,), dt)
            out = np.zeros_like(x)
            c.reduce(x, root=root, op="max", out=out)
            if r == root:
                close(out, reference(seed, n, (9,), dt, "max"), dt, "reduce")
            else:
                assert not out.any(), "reduce wrote a non-root's out"
        seed += 1
        blocks = np.stack([inputs(seed + q, r, (4,), dt) for q in range(n)])  # to rank q
        got = c.alltoall(blocks)
        for q in range(n):
            assert np.array_equal(got[q], inputs(seed + r, q, (4,), dt)), "alltoall"
        seed += n
        root = n - 1
        gat = c.gather(inputs(seed, r, (6,), dt), root=root)
        if r == root:
            for q in range(n):
                assert np.array_equal(gat[q], inputs(seed, q, (6,), dt)), "gather"
        seed += 1
        src = np.stack([inputs(seed, q, (6,), dt) for q in range(n)]) if r == root else None
        mine = np.empty((6,), dtype=dt)
        c.scatter(src, mine, root=root)
        assert np.array_equal(mine, inputs(seed, r, (6,), dt)), "scatter"
    # point-to-point: a ring in a group, then lone calls between 0 and 1
    x = inputs(99, r, (1000,), np.float32)
    got = np.empty_like(x)
    with loom.group():
        c.send(x, peer=(r + 1) % n)
        c.recv(got, peer=(r - 1) % n)
    assert np.array_equal(got, inputs(99, (r - 1) % n, (1000,), np.float32)), "ring"
    if r == 0:
        c.send(x, peer=1)
    elif r == 1:
        c.recv(got, peer=0)
        assert np.array_equal(got, inputs(99, 0, (1000,), np.float32)), "lone recv"
    c.barrier()
    c.close()  # torch tensors: torch_ranks.s_package (torch is imported there)


def s_async(a):
    c = comm_for(a)
    r, n = c.rank, c.size
    xs = [np.full(50000, float(r + i), dtype=np.float32) for i in range(12)]
    hs = [c.allreduce(x, async_op=True) for x in xs]
    for i, h in enumerate(hs):
        if i % 2:
            while not h.is_completed():
                pass
        out = h.wait()
        assert out is xs[i] and out[0] == n * (n - 1) / 2 + n * i, "async %d" % i
    # a group, asynchronous: the send/recv ring and two packed allreduces
    y = np.empty(100, dtype=np.int32)
    s1, s2 = np.full(10, r, dtype=np.int64), np.full(20, 1, dtype=np.int64)
    with loom.group(async_op=True) as g:
        c.send(np.full(100, r, dtype=np.int32), peer=(r + 1) % n)
        c.recv(y, peer=(r - 1) % n)
        c.allreduce(s1)
        c.allreduce(s2)
    g.wait()
    assert (y == (r - 1) % n).all() and (s1 == n * (n - 1) // 2).all() and (s2 == n).all()
    c.close()


def s_errors(a):
    c = comm_for(a)
    r = c.rank
    try:
        c.allreduce(np.zeros(3, dtype=np.bool_))
        raise AssertionError("bool accepted")
    except TypeError as e:
        assert "bool" in str(e) and "not supported" in str(e), e
    try:
        c.allreduce(np.zeros((4, 4), dtype=np.float32)[:, 1])
        raise AssertionError("strided array accepted")
    except ValueError as e:
        assert "contiguous" in str(e), e
    try:
        c.broadcast(np.zeros(2, dtype=np.float32), root=c.size)
        raise AssertionError("bad root accepted")
    except loom.InvalidArgument as e:
        assert "root" in str(e) and e.result == "invalid argument", e
    c.barrier()  # argument errors are not sticky
    x = np.zeros(16, dtype=np.float32)
    try:
        if r == 0:
            c.allreduce(x)
        else:
            c.allgather(x[:4])
        raise AssertionError("mismatch went unnoticed")
    except loom.LoomError as e:
        msg = str(e)
        if r <= 1:
            assert isinstance(e, loom.MismatchError), (type(e), msg)
            assert "allreduce(float32, 16, sum)" in msg and "allgather(float32, 4)" in msg, msg
    try:
        c.barrier()
        raise AssertionError("error not sticky")
    except loom.LoomError:
        pass
    c.close()


def s_split(a):
    c = comm_for(a)
    r, n = c.rank, c.size
    sub = c.split(r % 2)
    assert sub.size == (n + 1 - r % 2) // 2 and sub.rank == r // 2
    x = np.array([r], dtype=np.int64)
    sub.allreduce(x)
    assert x[0] == sum(q for q in range(n) if q % 2 == r % 2)
    none = c.split(-1 if r == 0 else 0)
    assert (none is None) == (r == 0)
    if none:
        none.close()
    sub.close()
    c.close()


def s_init(a):
    """unique id (through a file), env://, and a rank table."""
    r, n = a.rank, a.world_size
    uidf = os.path.join(a.tmp, "uid")
    if r == 0:
        uid = loom.get_unique_id()
        with open(uidf + ".tmp", "wb") as f:
            f.write(uid)
        os.rename(uidf + ".tmp", uidf)
    else:
        import time
        t0 = time.monotonic()
        while not os.path.exists(uidf):
            assert time.monotonic() - t0 < 30, "no unique id"
            time.sleep(0.01)
        with open(uidf, "rb") as f:
            uid = f.read()
    for way in ("uid", "env", "table"):
        if way == "uid":
            c = loom.init(unique_id=uid, size=n, rank=r)
        elif way == "env":
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port + 1),
                              WORLD_SIZE=str(n), RANK=str(r))
            c = loom.init("env://")
        else:
            table = {"version": "1.0", "server_count": "1", "status": "completed",
                     "server_list": [{"server_id": "127.0.0.1", "device": [
                         {"device_id": str(d), "device_ip": "127.0.0.%d" % (d + 1),
                          "device_port": str(a.port + 2 + d), "rank_id": str(d)}
                         for d in range(n)]}]}
            path = os.path.join(a.tmp, "table.json")
            if r == 0:
                with open(path + ".tmp", "w") as f:
                    json.dump(table, f)
                os.rename(path + ".tmp", path)
            import time
            while not os.path.exists(path):
                time.sleep(0.01)
            c = loom.init(ranktable=path, rank=r)
        x = np.array([1.5], dtype=np.float64)
        c.allreduce(x)
        assert x[0] == 1.5 * n and c.size == n and c.rank == r, way
        c.close()


def s_redop(a):
    c = comm_for(a)
    r, n = c.rank, c.size
    op = loom.redop("sum", prescale=0.5, postscale=2.0)
    x = inputs(5, r, (1000,), np.float32)
    c.allreduce(x, op=op)
    close(x, reference(5, n, (1000,), np.float32, "sum"), np.float32, "scaled")
    # float16 summed in float32: the exact sum 1 + (n-1) * 2^-11 rounded
    # once, whatever the order (a float16 step 1 + 2^-11 would round to 1)
    acc = loom.redop("sum", accumulate="float32")
    t = np.full(64, 1.0 if r == 0 else 2.0 ** -11, dtype=np.float16)
    c.allreduce(t, op=acc)
    exact = np.float16(np.float32(1.0 + (n - 1) * 2.0 ** -11))
    assert (t == exact).all(), (t[0], exact)
    c.close()


SCENARIOS = {k[2:]: v for k, v in globals().items() if k.startswith("s_")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--tmp", default="/tmp")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    threading.current_thread().name = "rank%d" % a.rank
    SCENARIOS[a.scenario](a)
    print("rank %d: %s ok" % (a.rank, a.scenario))


if __name__ == "__main__":
    sys.exit(main())
