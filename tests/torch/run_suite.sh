#!/bin/sh
# run_suite.sh [OUTDIR] - torch's whole distributed suite (dist_suite.py) on
# gloo and on loom, world sizes 2 and 3, then their comparison. Writes
# OUTDIR/<backend>-w<N>.json (each test's outcome and error), .log and
# compare-w<N>.txt; exits 1 when a test passes on gloo and not on loom (and
# is not listed in dist_suite.py's OUTSIDE_LOOM).
# TORCH_SUITE_DEADLINE: seconds per backend and world size (default 2700);
# TORCH_SUITE_SIZES (default "2 3"); TORCH_SUITE_ARGS: more dist_suite.py
# arguments (e.g. "-k allgather").
py=${PYTHON3:-/usr/bin/python3}
b=${LOOM_BUILDDIR:-.}
s=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
out=${1:-torch-suite}
deadline=${TORCH_SUITE_DEADLINE:-2700}
[ -n "$(ls "$b"/python/loom/torch/_c10d*.so 2>/dev/null)" ] ||
    { echo "run_suite.sh: no torch backend in $b (see configure's summary)"; exit 77; }
mkdir -p "$out" || exit 1
export PYTHONPATH="$b/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
rc=0
for w in ${TORCH_SUITE_SIZES:-2 3}; do
    for be in gloo loom; do
        # the run ends its own tests at the deadline; timeout(1) bounds the rest
        timeout -k 30 $((deadline + 900)) "$py" "$s/tests/torch/dist_suite.py" run \
            --backend $be --world-size "$w" --deadline "$deadline" -v \
            --json "$out/$be-w$w.json" $TORCH_SUITE_ARGS >"$out/$be-w$w.log" 2>&1
        r=$?
        grep '^dist_suite:' "$out/$be-w$w.log" || { tail -20 "$out/$be-w$w.log"; rc=1; }
        [ $r -eq 0 ] || { echo "run_suite.sh: $be world size $w: exit $r"; rc=1; }
    done
    "$py" "$s/tests/torch/dist_suite.py" compare "$out/gloo-w$w.json" "$out/loom-w$w.json" \
        >"$out/compare-w$w.txt" 2>&1 || rc=1
    cat "$out/compare-w$w.txt"
done
exit $rc
