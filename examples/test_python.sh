#!/bin/sh
# test_python.sh - the Python examples: reshard and hybrid (numpy), also
# through a kill -9 of a rank (--survive), then ddp_train (torch DDP) at
# N = 2, 3, 4 (one job of 4 ranks, with groups of its first 2 and 3), and
# through a kill -9 of 1 of 4 ranks. SKIPs (77) what this build or
# interpreter cannot run.
py=${PYTHON3:-/usr/bin/python3}
b=${LOOM_BUILDDIR:-.}
s=${LOOM_SRCDIR:-.}
if [ ! -f "$b/python/loom/_paths.py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: no loom Python package in this build, or no numpy for $py"; exit 77
fi
export PYTHONPATH="$b/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
"$py" "$s/examples/reshard.py" --nprocs 4 || exit 1
"$py" "$s/examples/hybrid.py" --nprocs 4 || exit 1
"$py" "$s/examples/reshard.py" --nprocs 4 --survive || exit 1
"$py" "$s/examples/hybrid.py" --nprocs 4 --survive || exit 1
if ! "$py" -c 'import loom.torch' 2>/dev/null; then
    echo "SKIP: loom.torch not built or torch missing: ddp_train.py not run"; exit 77
fi
# (torch's glog chatter about find_unused_parameters left out)
out=$("$py" "$s/examples/ddp_train.py" --nprocs 4 --sizes 2,3,4 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^W[0-9]\|^WARNING: Logging'
[ $rc = 0 ] || exit $rc
# DDP through a kill -9 of 1 of 4 ranks: survivors shrink and go on
out=$("$py" "$s/examples/ddp_train.py" --nprocs 4 --survive --timeout 120 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^W[0-9]\|^WARNING: Logging'
exit $rc
