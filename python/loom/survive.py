"""loom.survive - train through the loss of a rank (docs/shrink.md).

In each rank:

    member = loom.survive.Member(comm)     # a Loom communicator to agree with
    history = loom.survive.History()
    for step ...:
        loom.survive.stop_point(member.first, step)   # where a test kills a rank
        try:
            train_step()
            history.commit(step + 1, state())          # a copy, after the update
        except RuntimeError:                           # LoomError is one
            member.shrink()            # revoke, shrink, close the old: one answer
            step = member.agree(history.last)          # every survivor has it
            restore(history.at(step)); rebuild the groups on member.rank/size

A failed step may have completed on some ranks and not on others; the
survivors go back to the latest step every one of them completed (the
minimum), so that nothing is skipped or done twice and the result is what
training without the failure gives.

In the launcher (a test, an example's parent):

    ok, results = loom.survive.run(script, args, n, port, kill=1, at_step=3)

starts n ranks of `script ARGS --rank r --world-size n --port port`, waits
for rank `kill` to reach `stop_point(kill, at_step)`, kills it with SIGKILL
by its PID, and checks that it died of that and that every other rank
exited 0, all within `timeout` seconds (what is left then is killed by PID).
With store=True it also hosts a torch TCPStore (the store that survives:
any rank may die) that `store()` reaches from a rank.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

from . import MIN, LoomError

__all__ = ["Member", "History", "stop_point", "store", "run"]

_KILL = "SURVIVE_KILL"    # "rank:step": where run() kills a rank
_DIR = "SURVIVE_DIR"      # where that rank says it is there
_STORE = "SURVIVE_STORE"  # "host:port" of run()'s TCPStore


class Member:
    """A Loom communicator kept to agree on who is alive. ``first`` is this
    rank in the first communicator; ``gen`` counts the shrinks."""

    def __init__(self, comm):
        self.comm = comm
        self.first = comm.rank
        self.gen = 0

    @property
    def rank(self):
        return self.comm.rank

    @property
    def size(self):
        return self.comm.size

    def shrink(self, also=(), timeout=0.0):
        """Revoke the communicator (the others stop at once too), shrink it
        to the live ranks and close it; returns the new one (also
        ``self.comm``). Every survivor gets the same members or an error.
        ``also``: communicators split from it, revoked (a revoke does not
        reach them: a rank blocked in one with a live peer would wait for
        it) and closed."""
        for c in (self.comm,) + tuple(c for c in also if c is not None):
            try:
                c.revoke()
            except LoomError:
                pass  # revoked already, by a peer: shrink says what is wrong
        for c in also:
            if c is not None:
                c.close()
        new = self.comm.shrink(timeout=timeout)
        self.comm.close()
        self.comm = new
        self.gen += 1
        return new

    def agree(self, step):
        """The least of every member's ``step`` (collective over them)."""
        import numpy as np  # here: the rest of the module runs without it
        v = np.array([step], dtype=np.int64)
        self.comm.allreduce(v, op=MIN)
        return int(v[0])

    def close(self):
        self.comm.close()


class History:
    """The state after each of the last ``keep`` completed steps. Ranks
    joined by a collective each step are at most a step apart, so two
    suffice for one group; programs with chains of groups keep more."""

    def __init__(self, keep=3):
        self.keep = keep
        self._states = {}

    def commit(self, step, state):
        """``state`` after ``step`` steps; the caller passes copies."""
        self._states[step] = state
        for s in sorted(self._states)[:-self.keep]:
            del self._states[s]

    @property
    def last(self):
        return max(self._states) if self._states else 0

    def at(self, step):
        if step not in self._states:
            raise RuntimeError("loom.survive: the state after step %d is gone (this rank "
                               "keeps steps %s); keep more (History(keep=...))"
                               % (step, sorted(self._states)))
        return self._states[step]


def stop_point(rank, step):
    """Where run(..., kill=rank, at_step=step) kills this rank: it tells the
    launcher and waits for the signal, so that the others are mid-training
    (blocked in a collective with it) whatever the machine's speed."""
    spec = os.environ.get(_KILL)
    if not spec or spec != "%d:%d" % (rank, step):
        return
    path = os.path.join(os.environ[_DIR], "stop.%d" % rank)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    time.sleep(600)
    sys.stderr.write("loom.survive: rank %d was not killed at step %d\n" % (rank, step))
    os._exit(3)


def store(world_size, timeout=60):
    """A client of the TCPStore that run(..., store=True) hosts."""
    import datetime
    import torch.distributed as dist
    host, port = os.environ[_STORE].rsplit(":", 1)
    return dist.TCPStore(host, int(port), world_size, False,
                         timeout=datetime.timedelta(seconds=timeout))


def run(script, args, n, port, kill, at_step, timeout=120, store=False, env=None):
    """Start n ranks, kill rank ``kill`` at ``at_step`` (see stop_point);
    returns (ok, [(rank, returncode, output)]), the output of every rank
    printed when not ok."""
    tmp = tempfile.mkdtemp(prefix="loom-survive.")
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    e.setdefault("USE_LIBUV", "0")  # Debian's torch 2.x is built without libuv
    e.update(env or {})
    e[_KILL] = "%d:%d" % (kill, at_step)
    e[_DIR] = tmp
    host = None
    if store:
        import datetime
        import torch.distributed as dist
        host = dist.TCPStore("127.0.0.1", port + 1, n, True,
                             timeout=datetime.timedelta(seconds=timeout),
                             wait_for_workers=False)
        e[_STORE] = "127.0.0.1:%d" % (port + 1)
    procs, logs = [], []
    for r in range(n):
        log = tempfile.TemporaryFile()
        cmd = [sys.executable, script] + list(args) + [
            "--rank", str(r), "--world-size", str(n), "--port", str(port)]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=e))
        logs.append(log)
    deadline = time.monotonic() + timeout
    note = ""
    stop = os.path.join(tmp, "stop.%d" % kill)
    while not os.path.exists(stop) and time.monotonic() < deadline \
            and procs[kill].poll() is None:
        time.sleep(0.02)
    if os.path.exists(stop):
        with open(stop) as f:
            pid = int(f.read())
        if pid == procs[kill].pid:
            os.kill(pid, signal.SIGKILL)
            note = "launcher: killed rank %d (pid %d) at step %d\n" % (kill, pid, at_step)
            sys.stdout.write(note)
            sys.stdout.flush()
    results = []
    for r, p in enumerate(procs):
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            tail = b""
        except subprocess.TimeoutExpired:
            p.kill()  # by PID
            p.wait()
            tail = b"\n[killed after %d s]" % timeout
        logs[r].seek(0)
        out = logs[r].read() + tail
        logs[r].close()
        results.append((r, p.returncode, out.decode(errors="replace")))
    del host  # the store served until every rank was done
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    ok = bool(note) and all(rc == (-signal.SIGKILL if r == kill else 0)
                            for r, rc, _ in results)
    if not ok:
        if not note:
            print("launcher: rank %d never reached step %d" % (kill, at_step))
        for r, rc, out in results:
            print("---- rank %d exited %s ----\n%s" % (r, rc, out[-6000:]))
    return ok, results
