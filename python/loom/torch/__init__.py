"""loom.torch - importing it registers Loom as torch.distributed's backend "loom".

    import torch.distributed as dist, loom.torch
    dist.init_process_group("loom", init_method="tcp://127.0.0.1:29688",
                            world_size=n, rank=r)       # or env://, file://

Each process group rendezvouses through the store torch gives it (rank 0 puts
a Loom unique id there), so every init method and new_group work. With
LOOM_RANK_TABLE or RANK_TABLE_FILE set, the default group is built from that
rank table instead (as torch_npu's HCCL backend does). Tensors are CPU tensors
(CUDA tensors where the build found a CUDA torch and Loom's CUDA adapter:
``loom.torch.with_cuda``).
"""
import os

# Training keeps the host's cores busy with compute: a Loom thread that
# spins while it waits takes a core from it (and, on a host with as many
# ranks as cores, from the peer it waits for). Unless the user chose, waits
# sleep at once (perf/torch_bench.py on 2 ranks / 2 cores: all_reduce 2-8x
# faster below 1 MiB than with the 50 us default spin). Read by Loom at its
# first communicator, so set before any.
os.environ.setdefault("LOOM_SPIN_US", "0")

import torch  # noqa: F401,E402 (torch's libraries first)
import torch.distributed as dist  # noqa: E402

import loom  # loads libloom, whose symbols the extension uses

try:
    from loom import _paths
except ImportError:  # LOOM_LIBRARY names the library; no CUDA path then
    _paths = None
if _paths is not None and getattr(_paths, "WITH_CUDA", False):
    # built for CUDA tensors: loom_stream_create_cuda comes from libloom_cuda
    import ctypes
    ctypes.CDLL(os.path.join(_paths.LIBDIR, "libloom_cuda.so"), mode=ctypes.RTLD_GLOBAL)

from . import _c10d  # noqa: E402

with_cuda = _c10d.with_cuda


def _create(store, rank, size, timeout):
    table = ""
    if not dist.is_initialized():  # the default group is being made
        table = os.environ.get("LOOM_RANK_TABLE") or os.environ.get("RANK_TABLE_FILE") or ""
    return _c10d.create_process_group(store, rank, size, timeout, table)


if "LOOM" not in dist.Backend._plugins:
    dist.Backend.register_backend("loom", _create)
