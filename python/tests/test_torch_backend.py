"""test_torch_backend.py - torch.distributed with backend "loom", each case on
real rank processes (launch.py; Debian's torchrun fails under Python 3.11)."""
import os

import pytest

import launch

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(HERE, "torch_ranks.py")


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
