#!/bin/sh
# run-fuzz-sockets.sh SECONDS [BUILDDIR] - fuzz what a Loom port parses from
# a stranger: the handshake every socket opens with (fuzz_net_handshake) and
# the out-of-band service's codec (fuzz_oob), for SECONDS each from an empty
# corpus in a temporary directory. BUILDDIR is a
# tree configured with --enable-fuzzing CC=clang (default: the current one).
# Exit status: 0 when nothing was found; otherwise the first failing
# target's, with its inputs kept in BUILDDIR/fuzz-artifacts.
set -eu
seconds=${1:?usage: run-fuzz-sockets.sh SECONDS [BUILDDIR]}
build=${2:-.}
work=$(mktemp -d /tmp/loom-fuzz-sockets.XXXXXX)
trap 'rm -rf "$work"' EXIT
result=0
for target in fuzz_net_handshake fuzz_oob; do
    fuzzer=$build/tests/fuzz/$target
    if [ ! -x "$fuzzer" ]; then
        make -C "$build" "tests/fuzz/$target"
    fi
    mkdir "$work/$target" "$work/$target.artifacts"
    status=0
    "$fuzzer" -max_total_time="$seconds" -max_len=1024 -timeout=10 \
        -artifact_prefix="$work/$target.artifacts/" "$work/$target" || status=$?
    if [ "$status" -ne 0 ]; then
        mkdir -p "$build/fuzz-artifacts"
        cp "$work/$target.artifacts"/* "$build/fuzz-artifacts/" 2>/dev/null || true
        echo "run-fuzz-sockets.sh: $target failed; inputs kept in $build/fuzz-artifacts"
        [ "$result" -ne 0 ] || result=$status
    fi
done
exit "$result"
