#!/bin/sh
# The README's main job: install dependencies, build, check the shipped
# 4-rank rank table, then run a 4-rank allreduce sweep over it.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build"
b=$top/build
table=$top/etc/ranktables/single-4.json
"$b/tools/loom-ranktable" check "$table"
echo
if [ -x "$b/perf/all_reduce_perf" ]; then
    exec "$b/tools/loom-run" -n 4 --rank-table "$table" --timeout 600 -- \
        "$b/perf/all_reduce_perf" -b 8 -e 64M -f 2
fi
