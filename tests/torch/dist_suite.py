"""dist_suite.py - torch's own distributed test suite on a chosen backend.

    python3 dist_suite.py run --backend loom --world-size 2 [-k PAT ...]
                          [--test-timeout S] [--deadline S] [--json OUT]
    python3 dist_suite.py compare GLOO.json LOOM.json

`run` executes DistributedTest._DistTestBase from the torch that this Python
imports (torch/testing/_internal/distributed/distributed_test.py), each test
in world-size rank processes started with "spawn", as upstream's
test_distributed_spawn.py does (that driver is not shipped in torch's wheels
or Debian's package). For backend "loom" the suite's gates for gloo apply to
loom: the test file is copied into a temporary folder with every
`BACKEND == "gloo"`-style condition widened to loom, and the harness's
feature tables get loom wherever they name gloo. Every rank checks that its
default group really is backend "loom" (dist.get_backend()).

`compare` prints pass/fail/skip counts of both runs and the tests that pass on
gloo but not on loom, except those in OUTSIDE_LOOM (each with its reason), and
exits 1 when there is any.

Time is bounded three ways: each test by --test-timeout (the harness ends its
ranks with SIGTERM; a rank still alive 10 s later is killed by its PID), the
run by --deadline (tests not started by then are reported "notrun"), and the
caller by timeout(1).
"""
import argparse
import importlib
import importlib.util
import json
import os
import re
import signal
import sys
import tempfile
import time
import traceback
import unittest

# Tests that pass on gloo and that Loom cannot pass for a reason outside
# Loom: name -> reason.
_MONITORED = ("dist.monitored_barrier() raises for every backend but gloo "
              "(torch/distributed/distributed_c10d.py, torch 1.13 and 2.6)")
OUTSIDE_LOOM = {
    "test_monitored_barrier_gloo": _MONITORED,
    "test_monitored_barrier_gloo_subgroup": _MONITORED,
    "test_monitored_barrier_failure_order": _MONITORED,
    "test_monitored_barrier_wait_all_ranks": _MONITORED,
    # torch 2.x wraps a registered backend in its own ProcessGroup, whose
    # getBackendName() says "custom" for every third-party backend
    # (ProcessGroup.hpp: backendTypeToString(BackendType::CUSTOM)); DDP's
    # logging data records that, the test expects dist.get_backend()'s name
    "test_ddp_logging_data_cpu": ("torch 2.x's ProcessGroup names every registered "
                                  "backend 'custom' in DDP's logging data"),
}

# Loom's own open bugs, each with its cause: reported on every run, not
# counted as a difference, and to be emptied by fixing Loom.
KNOWN_LOOM = {}

SUITE = "torch.testing._internal.distributed.distributed_test"
PATCHED = "loom_distributed_test"
START = os.environ.get("DIST_SUITE_START", "fork")

# (pattern, replacement, must match): the suite's gates for gloo, widened to loom
GATES = [
    (r'BACKEND == "gloo"', 'BACKEND in ("gloo", "loom")', True),
    (r'BACKEND != "gloo"', 'BACKEND not in ("gloo", "loom")', True),
    (r'(require_backends?(?:_is)?(?:_available)?)\(\{([^}]*)"gloo"([^}]*)\}\)',
     r'\1({\2"gloo", "loom"\3})', True),
    # the availability check of require_backend(s)_is_available: loom is
    # there (the driver imported loom.torch)
    (r'\n( +)def check\(backend\):\n',
     r'\n\1def check(backend):\n\1    if backend == "loom":\n\1        return True\n', False),
]


def _replicated_tensor_importable():
    try:
        importlib.import_module("torch.nn.parallel._replicated_tensor_ddp_utils")
        return True
    except Exception:  # noqa: BLE001 - torch 1.13 on Python 3.11 fails here
        return False


def _patch_source(text, backend):
    """torch's test file, for backend loom with gloo's gates applied to loom
    (each pattern that must match at least once does, so a reworded file is
    noticed, not silently run ungated); for other backends as shipped."""
    for pat, rep, must in GATES if backend == "loom" else ():
        text, n = re.subn(pat, rep, text)
        if n == 0 and must:
            raise RuntimeError("dist_suite: %s no longer appears in %s.py: update GATES"
                               % (pat, SUITE))
    if "_replicated_tensor_ddp_utils" in text and not _replicated_tensor_importable():
        # torch 1.13's harness turns on DDP with ReplicatedTensor in every rank;
        # that module does not import on Python 3.11, for any backend
        text, n = re.subn(r"\n( +)from torch\.nn\.parallel\._replicated_tensor_ddp_utils "
                          r"import _set_ddp_with_replicated_tensor\n\1"
                          r"_set_ddp_with_replicated_tensor\(True\)\n", "\n", text)
        if n != 1:
            raise RuntimeError("dist_suite: ReplicatedTensor cannot be imported and the "
                               "harness's use of it was not found")
    return text


# expecttest is a test-only dependency of torch's harness (common_utils)
# that Debian does not package; the suite uses none of its assertions.
EXPECTTEST_SHIM = '''"""Stand-in for expecttest (written by tests/torch/dist_suite.py)."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, *args, **kwargs):
        raise unittest.SkipTest("expecttest is not installed")
'''


def _prepare(workdir):
    """Write the patched suite (and the expecttest stand-in when needed) into
    workdir, put it on the path of this process and of the ranks it spawns."""
    spec = importlib.util.find_spec(SUITE)
    if spec is None:
        raise RuntimeError("dist_suite: torch has no %s" % SUITE)
    with open(spec.origin, encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(workdir, PATCHED + ".py"), "w", encoding="utf-8") as f:
        f.write(_patch_source(text, os.environ["BACKEND"]))
    if importlib.util.find_spec("expecttest") is None:
        with open(os.path.join(workdir, "expecttest.py"), "w", encoding="utf-8") as f:
            f.write(EXPECTTEST_SHIM)


def _widen_tables(cd):
    """Loom joins every feature set and skip list of the harness that names
    gloo (before the suite is imported: its decorators read them)."""
    if os.environ["BACKEND"] != "loom":
        return
    for table in (cd.DistTestCases.skip_collective, cd.DistTestCases.backend_feature):
        for backends in table.values():
            if "gloo" in backends:
                backends.add("loom")


def _widen_lists(mod):
    """... and the suite's own lists (the profiler's: read as tests run),
    unless --no-profiler-checks."""
    if os.environ["BACKEND"] != "loom" or os.environ.get("DIST_SUITE_PROFILER") == "0":
        return
    for name in dir(mod):
        v = getattr(mod, name)
        if name.endswith("_BACKENDS") and isinstance(v, list) and "gloo" in v:
            v.append("loom")


def _load():
    """Import the patched suite (in the driver and in each rank: spawned
    ranks import this module as __mp_main__)."""
    if os.environ["BACKEND"] == "loom":
        import loom.torch  # noqa: F401 - registers the backend
    from torch.testing._internal import common_distributed as cd
    import torch.distributed as dist
    _widen_tables(cd)
    mod = importlib.import_module(PATCHED)
    _widen_lists(mod)
    return mod, dist


def _make_case(mod, dist):
    backend = os.environ["BACKEND"]

    class Case(mod.TestDistBackend, mod.DistributedTest._DistTestBase):
        stuck = []

        def setUp(self):
            super().setUp()
            import torch.multiprocessing as tmp
            self._start_processes(tmp.get_context(START).Process)

        def tearDown(self):
            # a rank that outlived the harness's SIGTERM is killed by its PID
            for p in self.processes:
                if p.is_alive():
                    p.join(10)
                if p.is_alive():
                    Case.stuck.append("%s rank pid %d" % (self.id().split(".")[-1], p.pid))
                    os.kill(p.pid, signal.SIGKILL)
                    p.join(10)
            super().tearDown()

        @classmethod
        def _run(cls, *args, **kwargs):
            init = dist.init_process_group

            def checked_init(*a, **k):
                init(*a, **k)
                if dist.get_backend() != backend:
                    raise RuntimeError("dist_suite: the default group is %r, not %r"
                                       % (dist.get_backend(), backend))
            dist.init_process_group = checked_init
            return super()._run(*args, **kwargs)

    # spawned ranks find the class by name in __main__ (as __mp_main__)
    Case.__name__ = Case.__qualname__ = "TestDist_" + backend
    Case.__module__ = __name__
    globals()[Case.__name__] = Case
    return Case


class Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.out = {}

    @staticmethod
    def _name(test):
        return test.id().split(".")[-1]

    @staticmethod
    def _why(err):
        text = "".join(traceback.format_exception(*err))
        # the rank's own exception, when the harness relayed one
        lines = [x.strip() for x in text.splitlines() if x.strip()]
        keep = [x for x in lines if re.match(r"^[A-Za-z_.]*(Error|Exception):", x)]
        return (keep[-1] if keep else lines[-1])[:400]

    def addSuccess(self, test):
        self.out[self._name(test)] = {"status": "pass"}

    def addFailure(self, test, err):
        self.out[self._name(test)] = {"status": "fail", "why": self._why(err)}

    def addError(self, test, err):
        self.out[self._name(test)] = {"status": "fail", "why": self._why(err)}

    def addSkip(self, test, reason):
        self.out[self._name(test)] = {"status": "skip", "why": str(reason)[:200]}

    def addExpectedFailure(self, test, err):
        self.out[self._name(test)] = {"status": "pass", "why": "expected failure"}

    def addUnexpectedSuccess(self, test):
        self.out[self._name(test)] = {"status": "fail", "why": "unexpected success"}


def run(args):
    import torch
    case = _make_case(*_load())
    names = sorted(n for n in unittest.TestLoader().getTestCaseNames(case))
    if args.k:
        names = [n for n in names if any(re.search(p, n) for p in args.k)]
    if not names:
        print("dist_suite: no test matches %s" % args.k, file=sys.stderr)
        return 2
    res = Result()
    t0 = time.monotonic()
    for n in names:
        if args.deadline and time.monotonic() - t0 > args.deadline:
            res.out[n] = {"status": "notrun", "why": "past the run's deadline"}
            continue
        t = time.monotonic()
        case(n).run(res)
        r = res.out.get(n, {"status": "fail", "why": "no result"})
        r["s"] = round(time.monotonic() - t, 1)
        if args.verbose:
            print("%-70s %-6s %5.1fs %s" % (n, r["status"], r["s"], r.get("why", "")),
                  flush=True)
    report = {"torch": torch.__version__, "python": sys.version.split()[0],
              "backend": os.environ["BACKEND"], "world_size": int(os.environ["WORLD_SIZE"]),
              "seconds": round(time.monotonic() - t0), "stuck_ranks_killed": case.stuck,
              "results": res.out}
    counts = _counts(report)
    print("dist_suite: torch %s, %s, world size %s: %s in %d s; %d stuck rank(s) killed"
          % (report["torch"], report["backend"], report["world_size"],
             ", ".join("%d %s" % (v, k) for k, v in counts.items()), report["seconds"],
             len(case.stuck)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    return 0


def _counts(report):
    c = {"pass": 0, "fail": 0, "skip": 0, "notrun": 0}
    for r in report["results"].values():
        c[r["status"]] += 1
    return c


def compare(args):
    with open(args.gloo, encoding="utf-8") as f:
        g = json.load(f)
    with open(args.loom, encoding="utf-8") as f:
        lm = json.load(f)
    for rep in (g, lm):
        print("%-5s world size %d, torch %s: %s" % (rep["backend"], rep["world_size"],
              rep["torch"], " ".join("%s %d" % kv for kv in _counts(rep).items())))
    bad, excused, notrun = [], [], []
    for n, r in sorted(g["results"].items()):
        if r["status"] != "pass":
            continue
        lr = lm["results"].get(n, {"status": "fail", "why": "not in the loom run"})
        if lr["status"] == "pass":
            continue
        if lr["status"] == "notrun":  # the loom run's deadline came first
            notrun.append(n)
            continue
        line = "%s: %s (%s)" % (n, lr["status"], lr.get("why", ""))
        (excused if n in OUTSIDE_LOOM or n in KNOWN_LOOM else bad).append(line)
    for line in excused:
        n = line.split(":")[0]
        if n in OUTSIDE_LOOM:
            print("  passes on gloo, not on loom, outside Loom (%s): %s" % (OUTSIDE_LOOM[n], line))
        else:
            print("  KNOWN LOOM BUG (%s): %s" % (KNOWN_LOOM[n], line))
    for line in bad:
        print("  PASSES ON GLOO, NOT ON LOOM: " + line)
    if notrun:
        print("  %d test(s) passing on gloo not compared: the loom run's deadline came "
              "first" % len(notrun))
    print("%d test(s) pass on gloo and not on loom" % len(bad))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--backend", required=True)
    r.add_argument("--world-size", type=int, default=2)
    r.add_argument("-k", action="append", help="regular expression on test names")
    r.add_argument("--test-timeout", type=int, default=120)
    r.add_argument("--deadline", type=int, default=0, help="seconds for the whole run")
    r.add_argument("--json")
    r.add_argument("--start", choices=("fork", "spawn"), default="fork",
                   help="how ranks start: fork (default: no torch import per rank, "
                   "seconds less per test on a loaded host) or spawn (as upstream)")
    r.add_argument("--no-profiler-checks", action="store_true",
                   help="loom: leave out the checks of profiler events that the "
                   "suite makes for gloo in its collective tests")
    r.add_argument("-v", "--verbose", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("gloo")
    c.add_argument("loom")
    args = ap.parse_args()
    if args.cmd == "compare":
        return compare(args)
    # read by the suite's modules when they are imported, here and in each rank
    os.environ["BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world_size)
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.test_timeout)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["DIST_SUITE_START"] = args.start
    os.environ["DIST_SUITE_PROFILER"] = "0" if args.no_profiler_checks else "1"
    global START
    START = args.start
    with tempfile.TemporaryDirectory(prefix="loom-dist-suite-") as work:
        os.environ["TEMP_DIR"] = work
        # upstream's file:// variant: the harness initialises through a file
        # either way, and its timeout tests run only with this set
        os.environ["INIT_METHOD"] = "file://" + os.path.join(work, "init")
        os.makedirs(os.path.join(work, "py"))
        _prepare(os.path.join(work, "py"))
        sys.path.insert(0, os.path.join(work, "py"))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(work, "py")] + ([os.environ["PYTHONPATH"]]
                                          if os.environ.get("PYTHONPATH") else []))
        # torch's harness parses sys.argv when imported
        sys.argv = sys.argv[:1]
        return run(args)


if __name__ == "__main__":
    sys.exit(main())
elif __name__ == "__mp_main__":
    # a spawned rank: the suite's module and the Case class, as in the driver
    _make_case(*_load())
