#!/bin/sh
# run-fuzz.sh SECONDS [BUILDDIR] - fuzz the rank-table parser for SECONDS,
# starting from a copy of tests/data/ranktables and etc/ranktables (libFuzzer
# adds to its corpus directory; the sources stay untouched). BUILDDIR is a
# tree configured with --enable-fuzzing CC=clang (default: the current one).
# Exit status is libFuzzer's: 0 when nothing was found.
set -eu
seconds=${1:?usage: run-fuzz.sh SECONDS [BUILDDIR]}
build=${2:-.}
src=$(cd "$(dirname "$0")/../.." && pwd)
fuzzer=$build/tests/fuzz/fuzz_ranktable
if [ ! -x "$fuzzer" ]; then
    make -C "$build" tests/fuzz/fuzz_ranktable
fi
work=$(mktemp -d /tmp/loom-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
cp "$src"/tests/data/ranktables/*.json "$src"/etc/ranktables/*.json "$work/corpus/"
status=0
"$fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
if [ "$status" -ne 0 ]; then
    mkdir -p "$build/fuzz-artifacts"
    cp "$work"/artifacts/* "$build/fuzz-artifacts/" 2>/dev/null || true
    echo "run-fuzz.sh: fuzz_ranktable failed; inputs kept in $build/fuzz-artifacts"
fi
exit "$status"
