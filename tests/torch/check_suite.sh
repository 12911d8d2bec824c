#!/bin/sh
# check_suite.sh - make check's part of torch's distributed suite
# (dist_suite.py): one test per kind of call a DDP job and torch.distributed's
# users make on CPU tensors (each collective, async and coalesced forms,
# the full group as a new group, point-to-point, *_object, barrier, a DDP
# step) at world size 2, on gloo and on loom with gloo's gates; fails when
# one passes on gloo and not on loom. The results are checked; the profiler
# events that the suite also checks in these tests are the whole suite's
# business (its *_profiler tests, run_suite.sh: ~280 tests at sizes 2 and
# 3). 22 tests of 3-7 s each per backend here. SKIPs (77) when the torch
# backend was not built.
py=${PYTHON3:-/usr/bin/python3}
b=${LOOM_BUILDDIR:-.}
s=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -n "$(ls "$b"/python/loom/torch/_c10d*.so 2>/dev/null)" ] ||
    { echo "SKIP: the torch backend was not built (see configure's summary)"; exit 77; }
export PYTHONPATH="$b/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d /tmp/loom-check-suite.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
TESTS="test_all_reduce_sum test_all_reduce_sum_async test_all_reduce_full_group_max
test_all_reduce_sum_complex test_all_reduce_coalesced_sum test_broadcast test_broadcast_full_group
test_reduce_sum test_all_gather test_all_gather_full_group test_gather test_scatter
test_send_recv test_isend test_irecv test_batch_isend_irecv_gloo test_barrier test_barrier_full_group
test_all_gather_object_default_pg test_broadcast_object_list test_scatter_object_list
test_DistributedDataParallel_requires_grad"
set --
for t in $TESTS; do set -- "$@" -k "^$t\$"; done
rc=0
for be in gloo loom; do
    timeout -k 30 900 "$py" "$s/tests/torch/dist_suite.py" run --backend $be --world-size 2 \
        --test-timeout 120 --deadline 600 --no-profiler-checks -v --json "$tmp/$be.json" \
        "$@" >"$tmp/$be.log" 2>&1 ||
        { tail -30 "$tmp/$be.log"; echo "FAIL: dist_suite.py run --backend $be"; exit 1; }
    grep -v '^INFO:' "$tmp/$be.log" | grep -E ' (pass|fail|skip|notrun) |^dist_suite:'
done
"$py" "$s/tests/torch/dist_suite.py" compare "$tmp/gloo.json" "$tmp/loom.json" || rc=1
# a list that ran nothing must not pass: every name exists in this torch,
# and most pass on gloo (a few may be skipped where a torch gates them)
"$py" - "$tmp/gloo.json" $TESTS <<'PY' || rc=1
import json, sys
r = json.load(open(sys.argv[1]))["results"]
names = sys.argv[2:]
gone = [n for n in names if n not in r]
ok = [n for n in names if r.get(n, {}).get("status") == "pass"]
if gone:
    print("FAIL: not in this torch's suite: %s" % gone)
if len(ok) < 3 * len(names) // 4:
    print("FAIL: only %d of %d pass on gloo" % (len(ok), len(names)))
sys.exit(1 if gone or len(ok) < 3 * len(names) // 4 else 0)
PY
exit $rc
