"""launch.py - start N rank processes of a script, bounded in time.

Debian's torchrun fails under Python 3.11, so tests start ranks themselves:
each rank is `python3 SCRIPT ARGS... --rank r --world-size n --port p`, run
in its own process; a rank still alive at the deadline is killed by its PID.
"""
import os
import random
import socket
import subprocess
import sys
import time


def free_port():
    """A port rank 0 can listen on, below the kernel's ephemeral range (a
    port picked there could be taken by any connection meanwhile)."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except OSError:
        pass
    for _ in range(256):
        p = random.randrange(10000, max(lo - 10, 10001))
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port on 127.0.0.1")


def run(script, args, n, timeout=120, env=None, port=None):
    """Run n ranks; returns (ok, [(rank, returncode, output)]). Output of
    failed ranks is printed."""
    port = port or free_port()
    e = dict(os.environ)
    e.setdefault("LOOM_SOCKET_IFNAME", "lo")  # unique ids: loopback only
    e.setdefault("OMP_NUM_THREADS", "1")
    e.setdefault("USE_LIBUV", "0")  # Debian's torch 2.x is built without libuv
    if env:
        e.update(env)
    procs = []
    for r in range(n):
        cmd = [sys.executable, script] + list(args) + [
            "--rank", str(r), "--world-size", str(n), "--port", str(port)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, env=e))
    deadline = time.monotonic() + timeout
    results = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()  # by PID
            out, _ = p.communicate()
            out += b"\n[killed after %d s]" % timeout
        results.append((r, p.returncode, out.decode(errors="replace")))
    ok = all(rc == 0 for _, rc, _ in results)
    if not ok:
        for r, rc, out in results:
            print("---- rank %d exited %s ----\n%s" % (r, rc, out[-6000:]))
    return ok, results
