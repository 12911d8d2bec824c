"""signal_rank.py - one Python rank of tests/integration/test_signals.sh:

    signal_rank.py loom  URL SIZE RANK    import loom, numpy arrays
    signal_rank.py torch URL SIZE RANK    torch.distributed, backend "loom"

Joins, allreduces 1000 int64 (rank + 1) * (i + 1) and checks each element
against n(n+1)/2 * (i + 1), prints "ready", then waits to be signalled: rank
0 inside a second allreduce that the others never join, the others in
time.sleep. With "loom", rank 0 prints "finally" from its finally block and
"KeyboardInterrupt" when the interrupt reaches it, and exits 3.
"""
import signal
import sys
import time

# A shell's background job starts with SIGINT ignored, and Python then
# leaves it so: give it Python's own handler, as an interactive run has it,
# before Loom is imported (what Loom loads must not replace it).
signal.signal(signal.SIGINT, signal.default_int_handler)

mode, url, n, rank = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
COUNT = 1000

if mode == "loom":
    import numpy as np
    import loom
    comm = loom.init(url, size=n, rank=rank)
    x = np.arange(1, COUNT + 1, dtype=np.int64) * (rank + 1)
    comm.allreduce(x)

    def again():
        comm.allreduce(x)
else:
    import torch
    import torch.distributed as dist
    import loom.torch  # noqa: F401 (registers "loom")
    dist.init_process_group("loom", init_method=url, world_size=n, rank=rank)
    x = torch.arange(1, COUNT + 1, dtype=torch.int64) * (rank + 1)
    dist.all_reduce(x)
    x = x.numpy()

    def again():
        dist.all_reduce(torch.zeros(COUNT, dtype=torch.int64))

want = [n * (n + 1) // 2 * (i + 1) for i in range(COUNT)]
if list(x) != want:
    print("signal_rank.py %d: wrong allreduce result" % rank, file=sys.stderr)
    sys.exit(1)
print("ready", flush=True)
if rank != 0:
    while True:
        time.sleep(3600)
try:
    try:
        again()
        print("the allreduce no peer joined returned", flush=True)
        sys.exit(2)
    finally:
        print("finally", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
