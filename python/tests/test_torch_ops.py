"""test_torch_ops.py - the backend's calls beyond the plain collectives,
its timeouts and abort (torch_ops.py), each case on real rank processes."""
import os

import pytest

import launch

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
OPS = os.path.join(HERE, "torch_ops.py")


def _backend_built():
    try:
        import loom.torch  # noqa: F401
        return True
    except ImportError:
        return False


pytestmark = pytest.mark.skipif(not _backend_built(),
                                reason="loom.torch was not built (configure: PyTorch backend)")


def run(scenario, n, timeout=120, env=None):
    ok, _ = launch.run(OPS, [scenario], n, timeout=timeout, env=env)
    assert ok, "%s with %d ranks failed (outputs above)" % (scenario, n)


@pytest.mark.parametrize("n", [2, 3])
def test_ops(n):
    run("ops", n)


def test_late_rank_times_out():
    # the group's timeout is 5 s, one rank is 16 s late
    run("late", 3)


def test_missing_rank_times_out():
    # 2 of 3 ranks start: init fails within about the group's timeout
    run("missing", 2)


def test_wait_timeout_then_exit():
    run("wait_timeout", 2)
