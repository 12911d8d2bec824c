#!/bin/sh
# test_cli.sh - every installed program answers --help (usage on stdout,
# exit 0) and --version ("NAME (Loom) VERSION", exit 0), whatever else it
# needs to run (no rank table, no launcher, no network).
set -u

builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$builddir/build_config.h")
[ -n "$version" ] || { echo "FAIL: no PACKAGE_VERSION in $builddir/build_config.h"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/test_cli.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for prog in tools/loom-info tools/loom-run tools/loom-ranktable \
            perf/loom-all_reduce_perf perf/loom-all_gather_perf \
            perf/loom-broadcast_perf perf/loom-reduce_scatter_perf \
            perf/loom-reduce_perf perf/loom-perf-plot; do
    name=${prog##*/}
    path=$builddir/$prog
    [ -x "$path" ] || { fail "$path not built"; continue; }
    timeout -s KILL 10 "$path" --help >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" -eq 0 ] && grep -qi usage "$work/out" && [ ! -s "$work/err" ] ||
        fail "$name --help: exit $rc: $(head -c 300 "$work/out" "$work/err")"
    timeout -s KILL 10 "$path" --version >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" -eq 0 ] && [ "$(cat "$work/out")" = "$name (Loom) $version" ] ||
        fail "$name --version: exit $rc: '$(cat "$work/out" "$work/err")'"
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all programs answer --help and --version"
