"""loom.torch - importing it registers Loom as torch.distributed's backend "loom".

    import torch.distributed as dist, loom.torch
    dist.init_process_group("loom", init_method="tcp://127.0.0.1:29688",
                            world_size=n, rank=r)       # or env://, file://

Each process group rendezvouses through the store torch gives it (rank 0 puts
a Loom unique id there), so every init method and new_group work. With
LOOM_RANK_TABLE or RANK_TABLE_FILE set, the default group is built from that
rank table instead (as torch_npu's HCCL backend does). Tensors are CPU tensors
(CUDA tensors where the build found a CUDA torch and Loom's CUDA adapter:
``loom.torch.with_cuda``). On torch >= 2.0 Loom is a c10d Backend registered
for those devices; on torch 1.13 a ProcessGroup.

Timeouts: ``init_process_group(timeout=...)`` (and ``new_group``'s) bounds the
group's rendezvous and each of its calls' wait for its peers, as gloo's does;
LOOM_BOOTSTRAP_TIMEOUT and LOOM_TIMEOUT, where the user sets them, win. A
``Work.wait(timeout)`` that expires raises; the call stays in flight (the
group's timeout still bounds it) and the group, when destroyed, aborts it
instead of waiting, so the process can exit. ``abort(group)`` fails every
pending and later call of a group at once; ``shutdown(group)`` waits for its
pending calls, then aborts it.
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


def _store_host(store):
    """The host of the TCPStore under store's prefixes, or "" (file:// etc.)."""
    while hasattr(store, "underlying_store"):
        store = store.underlying_store
    return getattr(store, "host", "") if isinstance(store, dist.TCPStore) else ""


def _create(store, rank, size, timeout):
    table = ""
    if not dist.is_initialized():  # the default group is being made
        table = os.environ.get("LOOM_RANK_TABLE") or os.environ.get("RANK_TABLE_FILE") or ""
    return _c10d.create_process_group(store, rank, size, timeout, table, _store_host(store))


def _backend(group):
    """The Loom object behind group (None: the default group)."""
    group = group if group is not None else dist.distributed_c10d._get_default_group()
    if _c10d.backend_api:
        return group._get_backend(torch.device("cpu"))
    return group


def abort(group=None):
    """Every pending and later call of group (default: the default group)
    fails at once; destroy it afterwards."""
    _c10d.abort(_backend(group))


def shutdown(group=None):
    """Wait for group's pending calls (bounded by its timeout), then abort it."""
    _c10d.shutdown(_backend(group))


if "LOOM" not in dist.Backend._plugins:
    if _c10d.backend_api:
        dist.Backend.register_backend(
            "loom", _create, devices=["cpu", "cuda"] if with_cuda else ["cpu"])
    else:
        dist.Backend.register_backend("loom", _create)
