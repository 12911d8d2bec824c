"""test_loom.py - the loom package on numpy arrays (and torch tensors where
torch is there), each case on real rank processes (launch.py)."""
import os

import pytest

import launch

HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(HERE, "ranks.py")


def run(scenario, n, tmp_path, timeout=120):
    ok, _ = launch.run(RANKS, [scenario, "--tmp", str(tmp_path)], n, timeout=timeout)
    assert ok, "%s with %d ranks failed (outputs above)" % (scenario, n)


def test_collectives(tmp_path):
    run("collectives", 3, tmp_path)


def test_async_and_groups(tmp_path):
    run("async", 3, tmp_path)


def test_errors_carry_looms_message(tmp_path):
    run("errors", 2, tmp_path)


def test_split(tmp_path):
    run("split", 3, tmp_path)


def test_init_methods(tmp_path):
    run("init", 2, tmp_path)


def test_reduction_attributes(tmp_path):
    run("redop", 3, tmp_path)


def test_single_process():
    import numpy as np
    import loom
    c = loom.init("tcp://127.0.0.1:%d" % launch.free_port(), 1, 0)
    x = np.arange(5, dtype=np.float32)
    assert c.allreduce(x, op="max") is x and list(x) == [0, 1, 2, 3, 4]
    assert c.allgather(x).shape == (1, 5)
    assert "tcp" in loom.features() and loom.version().count(".") == 2
    with pytest.raises(ValueError):
        c.allreduce(x, op="xor")
    c.close()
    with pytest.raises(ValueError):
        c.barrier()
