"""test_torch_backend.py - torch.distributed with backend "loom", each case on
real rank processes (launch.py; Debian's torchrun fails under Python 3.11)."""
import os

import pytest

import launch

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(HERE, "torch_ranks.py")
OPS = os.path.join(HERE, "torch_ops.py")


def _backend_built():
    try:
        import loom.torch  # noqa: F401
        return True
    except ImportError:
        return False


pytestmark = pytest.mark.skipif(not _backend_built(),
                                reason="loom.torch was not built (configure: PyTorch backend)")


def run(scenario, n, tmp_path, timeout=180):
    ok, _ = launch.run(RANKS, [scenario, "--tmp", str(tmp_path)], n, timeout=timeout)
    assert ok, "%s with %d ranks failed (outputs above)" % (scenario, n)


def test_collectives_async_work_and_errors(tmp_path):
    # one job: every collective and dtype, async work and futures, then
    # argument errors and a mismatch (torch_ranks.s_all)
    run("all", 3, tmp_path)


def test_init_methods_and_groups(tmp_path):
    run("init", 3, tmp_path)


def run_ops(scenario, n, timeout=120):
    # torch_ops.py: the calls beyond the plain collectives, timeouts, abort
    ok, _ = launch.run(OPS, [scenario], n, timeout=timeout)
    assert ok, "%s with %d ranks failed (outputs above)" % (scenario, n)


@pytest.mark.parametrize("n", [2, 3])
def test_ops(n):
    run_ops("ops", n)


def test_late_rank_times_out():
    # the group's timeout is 5 s, one rank is 16 s late
    run_ops("late", 3)


def test_missing_rank_times_out():
    # 2 of 3 ranks start: init fails within about the group's timeout
    run_ops("missing", 2)


def test_wait_timeout_then_exit():
    run_ops("wait_timeout", 2)
