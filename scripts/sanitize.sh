#!/bin/bash
# sanitize.sh MODE [BUILDDIR] - build Loom with a sanitizer in its own build
# directory and run the multi-process tests under it.
#
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (leaks detected)
#   tsan  ThreadSanitizer (data races between the caller, the progress
#         thread and stream waiters)
#
# BUILDDIR defaults to build-MODE in the source tree. The tests run are the
# multi-process ones (SANITIZE_TESTS overrides the list); sizes are smaller
# than in a plain `make check` because sanitizers are 3-15x slower. Exit
# status is make check's; a report is printed for every failed test.
set -euo pipefail
mode=${1:-}
case $mode in
asan)
    flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ;;
tsan)
    flags="-O1 -g -fno-omit-frame-pointer -fsanitize=thread"
    # exitcode: a race fails the test even when the test itself passed
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:second_deadlock_stack=1:exitcode=66:history_size=4}
    ;;
*)
    echo "usage: sanitize.sh asan|tsan [BUILDDIR]" >&2
    exit 2
    ;;
esac
ldflags=${flags#-O1 -g }
# -O1 with sanitizers changes what GCC's flow analysis sees: keep
# maybe-uninitialized a warning (shown in make.out), not an error, so that
# the sanitizer run is not lost to one (the plain -Werror build still has it).
flags="$flags -Wno-error=maybe-uninitialized"
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${2:-$top/build-$mode}
"$top/scripts/build.sh" "$bdir" --disable-shared CFLAGS="$flags" LDFLAGS="$ldflags"

# The unit suites (every check_* program the build has) and the multi-process
# C tests; not the Python, torch, example, man-page or benchmark scripts (no
# sanitized interpreter) nor the namespace and probe runs of the same code.
# TSan, 5-15x slower, takes the collective matrix over tcp and the verbs
# model, not over every ofi provider.
integration="tests/integration/test_coll tests/integration/test_comm
    tests/integration/test_group tests/integration/test_stage tests/integration/test_soak
    tests/integration/test_coll_two_server.sh"
[ "$mode" = asan ] && integration="$integration tests/integration/test_algos
    tests/integration/test_shm tests/integration/test_kill_two_server.sh
    tests/matrix/ofi-tcp+ofi_rxm.matrix tests/matrix/ofi-shm.matrix
    tests/matrix/ofi-udp+ofi_rxd.matrix tests/integration/test_shrink.sh
    compat/hccl/tests/test_hccl.sh tests/matrix/tcp.matrix"
[ "$mode" = tsan ] && integration="$integration tests/matrix/verbs-model.matrix"
# build the test programs, then keep only the tests this build has (some
# need Check)
make -C "$bdir" -j"$(nproc)" check TESTS= >>"$bdir/make.out" 2>&1 || {
    tail -50 "$bdir/make.out"; exit 1; }
units=$(cd "$bdir" && find . \( -path ./python -o -name .libs \) -prune -o -type f -perm -u+x -name 'check_*' \
        ! -name '*.*' -print | sed 's|^\./||' | sort)
tests=${SANITIZE_TESTS:-$units $integration}
list=""
for t in $tests; do
    if [ -e "$bdir/$t" ] || [ -e "$top/$t" ]; then list="$list $t"; fi
done
export LOOM_TEST_BIG=${LOOM_TEST_BIG:-20011}
export LOOM_TEST_SOAK_OPS=${LOOM_TEST_SOAK_OPS:-$([ "$mode" = tsan ] && echo 2000 || echo 5000)}
export LOOM_TIMEOUT=${LOOM_TIMEOUT:-120}
# TSan maps its shadow at fixed addresses; with high-entropy ASLR
# (vm.mmap_rnd_bits > 28, as on recent kernels) it aborts at start unless
# address randomisation is off for the process.
run=()
if [ "$mode" = tsan ] && command -v setarch >/dev/null 2>&1; then
    run=(setarch "$(uname -m)" -R)
fi
rc=0
"${run[@]}" make -C "$bdir" -j"$(nproc)" check TESTS="$list" >"$bdir/check.out" 2>&1 || rc=$?
grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' "$bdir/check.out" || true
for f in $(grep -lE 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:|^(FAIL|ERROR)' \
           $(for t in $list; do echo "$bdir/$t.log"; done) 2>/dev/null); do
    echo "==== $f"
    grep -E 'SUMMARY: (ThreadSanitizer|AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error:' "$f" |
        sort | uniq -c | sort -rn | head -20 || true
    tail -40 "$f"
done
[ "$rc" -eq 0 ] && echo "sanitize $mode: passed" || echo "sanitize $mode: FAILED"
exit "$rc"
