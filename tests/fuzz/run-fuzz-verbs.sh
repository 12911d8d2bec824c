#!/bin/sh
# run-fuzz-verbs.sh SECONDS [BUILDDIR] - fuzz the verbs transport's decoders
# (connection blob, CTS and reply entries, immediate data) for SECONDS
# from an empty corpus. BUILDDIR is a tree configured with
# --enable-fuzzing CC=clang (default: the current one).
# Skips (exit 0, saying so) when that tree has no verbs transport (no
# <infiniband/verbs.h>). Exit status otherwise libFuzzer's: 0 when nothing
# was found; inputs that failed are kept in BUILDDIR/fuzz-artifacts.
set -eu
seconds=${1:?usage: run-fuzz-verbs.sh SECONDS [BUILDDIR]}
build=${2:-.}
fuzzer=$build/tests/fuzz/fuzz_verbs
if [ ! -x "$fuzzer" ]; then
    if ! grep -q '^#define LOOM_HAVE_VERBS 1' "$build/build_config.h" 2>/dev/null; then
        echo "run-fuzz-verbs.sh: $build has no verbs transport; skipped"
        exit 0
    fi
    make -C "$build" tests/fuzz/fuzz_verbs
fi
work=$(mktemp -d /tmp/loom-fuzz-verbs.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
status=0
"$fuzzer" -max_total_time="$seconds" -max_len=1024 -timeout=10 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
if [ "$status" -ne 0 ]; then
    mkdir -p "$build/fuzz-artifacts"
    cp "$work"/artifacts/* "$build/fuzz-artifacts/" 2>/dev/null || true
    echo "run-fuzz-verbs.sh: fuzz_verbs failed; inputs kept in $build/fuzz-artifacts"
fi
exit "$status"
