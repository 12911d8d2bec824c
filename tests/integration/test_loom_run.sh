#!/bin/sh
# test_loom_run.sh - loom-run: output prefixes, failure propagation, timeout,
# the temporary rank table. Every run is bounded by loom-run's own --timeout
# and by an outer watchdog that ends loom-run by its PID.
set -u

builddir=${LOOM_BUILDDIR:-.}
RUN="$builddir/tools/loom-run"
[ -x "$RUN" ] || { echo "FAIL: $RUN not built"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/test_loom_run.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# wait_bounded SECS PID: wait for PID (a child of this shell) for at most
# SECS seconds, SIGKILL it if it is still running then; sets rc.
wait_bounded() {
    i=0
    while [ "$i" -lt $(($1 * 10)) ]; do
        st=$(sed 's/.*) //' "/proc/$2/stat" 2>/dev/null | cut -c1)
        if [ -z "$st" ] || [ "$st" = Z ]; then
            break
        fi
        sleep 0.1
        i=$((i + 1))
    done
    kill -KILL "$2" 2>/dev/null
    wait "$2"
    rc=$?
}

# run_bounded SECS OUT ERR ARGS...: run loom-run, at most SECS seconds; sets
# rc and secs.
run_bounded() {
    limit=$1 out=$2 err=$3
    shift 3
    start=$(date +%s)
    "$RUN" "$@" >"$out" 2>"$err" &
    wait_bounded "$limit" $!
    secs=$(( $(date +%s) - start ))
}

# 1. Three ranks, each line prefixed with its rank, stdout and stderr apart.
run_bounded 20 "$work/out1" "$work/err1" -n 3 --timeout 15 -- \
    sh -c 'echo hello $LOOM_RANK; echo oops $RANK >&2; printf "tail $WORLD_SIZE"'
[ "$rc" -eq 0 ] || fail "three ranks: exit $rc"
for r in 0 1 2; do
    grep -qx "\[$r\] hello $r" "$work/out1" || fail "no '[$r] hello $r' on stdout"
    grep -qx "\[$r\] tail 3" "$work/out1" || fail "partial line of rank $r not flushed"
    grep -qx "\[$r\] oops $r" "$work/err1" || fail "no '[$r] oops $r' on stderr"
done
[ "$(wc -l <"$work/out1")" -eq 6 ] || fail "stdout has $(wc -l <"$work/out1") lines, want 6"
grep -q oops "$work/out1" && fail "stderr lines reached stdout"
[ "$failures" -eq 0 ] && pass "prefixed output"

# 2. A failing rank ends the job with its status; sleeping ranks are killed.
f0=$failures
run_bounded 30 "$work/out2" "$work/err2" -n 3 --timeout 25 -- \
    sh -c 'if [ "$LOOM_RANK" = 1 ]; then exit 3; fi; sleep 60'
[ "$rc" -eq 3 ] || fail "failing rank: exit $rc, want 3"
grep -q "loom-run: rank 1 exited with status 3" "$work/err2" || fail "failed rank not named: $(cat "$work/err2")"
[ "$secs" -lt 20 ] || fail "failing rank: took $secs s, others not killed"
[ "$failures" -eq "$f0" ] && pass "failure propagates ($secs s)"

# 3. A rank killed by a signal: 128 + signal.
f0=$failures
run_bounded 20 "$work/out3" "$work/err3" -n 2 --timeout 15 -- sh -c 'kill -TERM $$'
[ "$rc" -eq 143 ] || fail "signalled rank: exit $rc, want 143"
grep -q "was killed by signal 15" "$work/err3" || fail "signal not named: $(cat "$work/err3")"
[ "$failures" -eq "$f0" ] && pass "signal status"

# 4. --timeout ends everything with 124 and names the ranks still running.
f0=$failures
run_bounded 20 "$work/out4" "$work/err4" -n 2 --timeout 1 -- sleep 60
[ "$rc" -eq 124 ] || fail "timeout: exit $rc, want 124"
grep -q "loom-run: timeout after 1 s; ranks still running: 0 1" "$work/err4" || fail "timeout message: $(cat "$work/err4")"
[ "$secs" -lt 15 ] || fail "timeout took $secs s"
[ "$failures" -eq "$f0" ] && pass "timeout"

# 5. The temporary rank table exists during the run and is gone after.
f0=$failures
run_bounded 20 "$work/out5" "$work/err5" -n 2 --timeout 15 -- \
    sh -c 'echo "TABLE=$LOOM_RANK_TABLE"; cat "$LOOM_RANK_TABLE"'
[ "$rc" -eq 0 ] || fail "table: exit $rc: $(cat "$work/err5")"
table=$(sed -n 's/^\[0\] TABLE=//p' "$work/out5")
[ -n "$table" ] || fail "LOOM_RANK_TABLE not set"
grep -q '^\[1\] .*"status": "completed"' "$work/out5" || fail "table not readable by rank 1"
grep -q '"device_id": "1", "rank_id": "1"' "$work/out5" || fail "table lacks device 1"
[ -n "$table" ] && [ -e "$table" ] && fail "temporary table $table left behind"
[ "$failures" -eq "$f0" ] && pass "temporary rank table"

# 6. Given table and port base are passed through.
f0=$failures
echo '{}' >"$work/given.json"
run_bounded 20 "$work/out6" "$work/err6" -n 1 --timeout 15 --rank-table "$work/given.json" \
    --port-base 31000 -- sh -c 'echo "$LOOM_RANK_TABLE $LOOM_PORT_BASE"'
[ "$rc" -eq 0 ] || fail "given table: exit $rc"
grep -qx "\[0\] $work/given.json 31000" "$work/out6" || fail "given table/port: $(cat "$work/out6")"
[ -e "$work/given.json" ] || fail "given table was removed"
[ "$failures" -eq "$f0" ] && pass "given table and port base"

# 7. Bad arguments exit 2.
f0=$failures
for args in "" "-n 0 -- true" "-n 2" "-n 1 --timeout -1 -- true" "-n 1 --port-base 70000 -- true" "-n 1 --bogus -- true"; do
    # shellcheck disable=SC2086
    "$RUN" $args >/dev/null 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "loom-run $args: exit $rc, want 2"
done
"$RUN" -h | grep -q "usage: loom-run" || fail "-h prints no usage"
[ "$failures" -eq "$f0" ] && pass "bad arguments"

# 8. SIGTERM to loom-run is forwarded: the ranks end and loom-run reports it.
# start_two OUT ERR CMD: loom-run -n 2 of sh -c CMD in the background (pid),
# back once both ranks printed "up" (bounded: OUT may not exist at first).
start_two() {
    "$RUN" -n 2 --timeout 20 -- sh -c "$3" >"$1" 2>"$2" &
    pid=$!
    local i=0 n
    while [ $i -lt 300 ]; do
        n=$(grep -c up "$1" 2>/dev/null)
        [ "${n:-0}" -ge 2 ] && return
        sleep 0.1
        i=$((i + 1))
    done
    fail "ranks did not start"
}

f0=$failures
start=$(date +%s)
start_two "$work/out8" "$work/err8" 'echo up; exec sleep 60'
kill -TERM "$pid"
wait_bounded 15 "$pid"
secs=$(( $(date +%s) - start ))
[ "$rc" -eq 143 ] || fail "forwarded SIGTERM: exit $rc, want 143: $(cat "$work/err8")"
grep -q "was killed by signal 15" "$work/err8" || fail "forwarded SIGTERM: $(cat "$work/err8")"
[ "$secs" -lt 18 ] || fail "forwarded SIGTERM took $secs s"
[ "$failures" -eq "$f0" ] && pass "SIGTERM forwarded"

# 9. Ranks that exit with a status of their own on SIGTERM (as a rank that
# sees its peer die before its own signal lands does): loom-run, terminated
# itself, still exits 143.
f0=$failures
start_two "$work/out9" "$work/err9" 'trap "exit 2" TERM; echo up; sleep 60 & wait'
kill -TERM "$pid"
wait_bounded 15 "$pid"
[ "$rc" -eq 143 ] || fail "SIGTERM, ranks exit 2: exit $rc, want 143: $(cat "$work/err9")"
grep -q "exited with status 2" "$work/err9" || fail "SIGTERM, ranks exit 2: $(cat "$work/err9")"
[ "$failures" -eq "$f0" ] && pass "SIGTERM to loom-run: 143 whatever the ranks say"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
exit 0
