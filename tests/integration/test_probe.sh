#!/bin/sh
# test_probe.sh - `loom-ranktable probe`: every pair measured on 4, 3 (odd)
# and 1 rank and on the 2-server loopback table, on the table's own ports;
# --json with each rank's server and the per-server summary; --plot; a saved
# report read back (--from-json), a made-up 64-rank one with a blocked
# server and a rank that did not join; unreachable links named with both
# endpoints (LOOM_TEST_PROBE_REFUSE); a rank with a different table named by
# rank 0; bad command lines and tables. Cut-off hosts across network
# namespaces: tests/netns/probe.sh. Every run is bounded by loom-run's
# --timeout and by coreutils timeout(1) around it (which ends its child by
# PID).
set -u

builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN="$builddir/tools/loom-run"
RT="$builddir/tools/loom-ranktable"
for b in "$RUN" "$RT"; do
    [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/test_probe.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# Every rank listens on its table port (base + its device id).
. "$srcdir/tests/support/port_base.sh"
LOOM_BOOTSTRAP_TIMEOUT=15
export LOOM_BOOTSTRAP_TIMEOUT
unset LOOM_TEST_PROBE_REFUSE LOOM_RANK RANK_ID RANK OMPI_COMM_WORLD_RANK \
    PMI_RANK SLURM_PROCID RANK_TABLE_FILE LOOM_RANK_TABLE 2>/dev/null

# probe NAME N TABLE [ARGS...]: run the probe on N ranks under loom-run;
# rank 0's lines (without "[0] ") in $work/NAME.out, stderr in NAME.err,
# loom-run's exit status in rc.
probe() {
    name=$1 n=$2 table=$3
    shift 3
    next_port_base
    timeout -s KILL 40 "$RUN" -n "$n" --timeout 30 --rank-table "$table" -- \
        "$RT" probe --size 256K --iters 4 "$@" >"$work/$name.raw" \
        2>"$work/$name.err"
    rc=$?
    sed -n 's/^\[0\] //p' "$work/$name.raw" >"$work/$name.out"
}

# expect_all_ok NAME N PAIRS: exit 0, both matrices with N rows, "-" on the
# diagonal, a number everywhere else, no unreachable pair.
expect_all_ok() {
    name=$1 n=$2 pairs=$3
    [ "$rc" -eq 0 ] || { fail "$name: exit $rc"; cat "$work/$name.raw" \
        "$work/$name.err"; return; }
    grep -q "^ranks: $n, " "$work/$name.out" || fail "$name: no summary"
    grep -q '^latency (us' "$work/$name.out" || fail "$name: no latency matrix"
    grep -q '^bandwidth (GB/s' "$work/$name.out" || fail "$name: no bandwidth matrix"
    grep -q "^result: all $pairs pairs reachable" "$work/$name.out" ||
        fail "$name: no \"all $pairs pairs reachable\""
    grep -q '^unreachable' "$work/$name.out" && fail "$name: unreachable pair"
    # 2 matrices x N rows; row r has "-" in column r and N-1 numbers.
    rows=$(awk -v n="$n" '
        /^ *[0-9]+( +([0-9]+\.[0-9]+|-))+$/ {
            r = $1; ok = (NF == n + 1)
            for (j = 0; j < n; j++)
                if ((j == r) != ($(j + 2) == "-")) ok = 0
            if (ok) good++
        }
        END { print good + 0 }' "$work/$name.out")
    [ "$rows" -eq $((2 * n)) ] || fail "$name: $rows good matrix rows, want $((2 * n))"
    pass "$name"
}

# 1. Four ranks on one server.
probe four 4 "$srcdir/etc/ranktables/single-4.json"
expect_all_ok four 4 6

# 2. The same with --json: one object, every field, N x N matrices; the
#    endpoints are the table's (base + device id).
probe json 4 "$srcdir/etc/ranktables/single-4.json" --json
if [ "$rc" -ne 0 ]; then
    fail "json: exit $rc"
else
    for f in '"ranks":	4' '"latency_us":' '"bandwidth_gbps":' \
             '"unreachable":	\[\]' '"slow":' '"ok":	true'; do
        grep -q "$f" "$work/json.out" || fail "json: no $f"
    done
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$work/json.out" "$LOOM_PORT_BASE" <<'EOF' || fail "json: matrices wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 4 and d["ok"] is True and d["unreachable"] == []
for key in ("latency_us", "bandwidth_gbps"):
    m = d[key]
    assert len(m) == 4 and all(len(row) == 4 for row in m), key
    for r in range(4):
        for c in range(4):
            v = m[r][c]
            assert (v is None) if r == c else (v > 0), (key, r, c, v)
base = int(sys.argv[2])
assert d["endpoints"] == ["127.0.0.1:%d" % (base + r) for r in range(4)], d["endpoints"]
assert d["server_of"] == [0, 0, 0, 0] and d["joined"] == [True] * 4
assert d["server_list"][0]["server_id"] == "127.0.0.1"
assert d["server_list"][0]["intra"]["pairs"] == 6, d["server_list"]
assert d["within_servers"]["measured"] == 6 and d["between_servers"]["pairs"] == 0
assert all(d["reach"][r][c] == ("ok" if r != c else None) for r in range(4) for c in range(4))
EOF
    fi
    pass "json"
fi

# 2b. Under loom-run --no-prefix the job's stdout is the report itself:
#     one JSON document, read as it is.
next_port_base
timeout -s KILL 40 "$RUN" --no-prefix -n 4 --timeout 30 \
    --rank-table "$srcdir/etc/ranktables/single-4.json" -- \
    "$RT" probe --size 64K --iters 2 --json >"$work/np.raw" 2>"$work/np.err"
rc=$?
if [ "$rc" -ne 0 ]; then
    fail "loom-run --no-prefix probe --json: exit $rc: $(cat "$work/np.err")"
elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert "ranks" in d' \
        "$work/np.raw" && pass "loom-run --no-prefix: probe --json is JSON" ||
        fail "loom-run --no-prefix probe --json: not JSON: $(head -c 300 "$work/np.raw")"
fi

# 3. Three ranks: odd, one rank sits out each round.
"$RT" generate --servers 127.0.0.1 --devices 3 -o "$work/three.json" ||
    fail "generate a 3-rank table"
probe three 3 "$work/three.json"
expect_all_ok three 3 3

# 4. One rank: nothing to connect, still a report.
probe one 1 "$srcdir/etc/ranktables/single-1.json"
expect_all_ok one 1 0

# 5. The 2-server loopback table (127.0.2.x and 127.0.3.x), with the heat
#    map; the summary per server and between the two.
probe two_server 4 "$srcdir/etc/ranktables/two-server.json" --plot "$work/two.png"
expect_all_ok two_server 4 6
grep -q '^ranks: 4, servers: 2' "$work/two_server.out" ||
    fail "two_server: summary does not say 2 servers"
grep -Eq '^  within servers:  2 pairs, 2 measured, 0 failed; latency [0-9.]+, bandwidth [0-9.]+$' \
    "$work/two_server.out" || fail "two_server: no within-servers summary"
grep -Eq '^  between servers: 4 pairs, 4 measured, 0 failed; ' "$work/two_server.out" ||
    fail "two_server: no between-servers summary"
grep -Eq '^  127\.0\.0\.2 <-> 127\.0\.0\.3 +4 +0 +[0-9.]+ +[0-9.]+  [0-3]<->[0-3] [0-9.]+$' \
    "$work/two_server.out" || fail "two_server: no server-pair line with its slowest pair"
[ "$(head -c 4 "$work/two.png" 2>/dev/null | tail -c 3)" = PNG ] ||
    fail "two_server: --plot wrote no PNG: $(cat "$work/two_server.err")"

# 6. Rank 3 stops listening: the three connects to it refused, named with
#    both endpoints; its own connects work (+ in its row); the other three
#    pairs measured; exit 1.
LOOM_TEST_PROBE_REFUSE=3 probe refuse 4 "$srcdir/etc/ranktables/single-4.json" \
    --timeout 2
[ "$rc" -eq 1 ] || fail "refuse: exit $rc, want 1"
for a in 0 1 2; do
    grep -Eq "^unreachable: rank $a \(127\.0\.0\.1:[0-9]+\) -> rank 3 \(127\.0\.0\.1:[0-9]+\): connect: connection refused$" \
        "$work/refuse.out" || fail "refuse: pair $a-3 not reported"
done
[ "$(grep -c '^unreachable:' "$work/refuse.out")" -eq 3 ] ||
    fail "refuse: want exactly 3 unreachable pairs"
grep -q '^result: 3 of 6 pairs unreachable' "$work/refuse.out" ||
    fail "refuse: no result line"
# Row 3 of the latency matrix: + + + -; column 3 of the others: X.
grep -Eq '^ +3 +\+ +\+ +\+ +-$' "$work/refuse.out" || fail "refuse: matrix row 3"
grep -Eq '^ +0 +- +[0-9.]+ +[0-9.]+ +X$' "$work/refuse.out" || fail "refuse: matrix row 0"
pass "refuse"

# 7. Rank 1 of 3 stops listening, in JSON: the connects to it (0 -> 1,
#    2 -> 1) fail; its own (1 -> 0, 1 -> 2) work; pair 0-2 is measured.
LOOM_TEST_PROBE_REFUSE=1 probe refuse1 3 "$work/three.json" --json --timeout 2
[ "$rc" -eq 1 ] || fail "refuse1: exit $rc, want 1"
grep -q '"ok":	false' "$work/refuse1.out" || fail "refuse1: ok is not false"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$work/refuse1.out" <<'EOF' || fail "refuse1: JSON wrong"
import json, sys
d = json.load(open(sys.argv[1]))
u = d["unreachable"]
assert [(x["from"], x["to"]) for x in u] == [(0, 1), (2, 1)], u
assert all(x["error"] == "connect: connection refused" for x in u), u
assert u[0]["from_endpoint"] == d["endpoints"][0], u
assert u[0]["to_endpoint"] == d["endpoints"][1], u
lat = d["latency_us"]
assert lat[0][1] is None and lat[1][0] is None and lat[1][2] is None, lat
assert lat[0][2] > 0 and lat[2][0] > 0, lat
r = d["reach"]
assert r[0][1] == "refused" and r[1][0] == "ok" and r[1][2] == "ok", r
EOF
else
    grep -q '"error":	"connect: connection refused"' "$work/refuse1.out" ||
        fail "refuse1: no error"
fi
pass "refuse1"

# 8. A rank started with a different table, by hand (--rank, no launcher):
#    rank 0 names it and fails; so do the others (those that had not joined
#    yet only when their bootstrap timeout ends: kept short here).
next_port_base
sed 's/"127.0.3.2"/"127.0.3.9"/' "$srcdir/etc/ranktables/two-server.json" \
    >"$work/other.json"
pids=
for r in 0 1 2 3; do
    t="$srcdir/etc/ranktables/two-server.json"
    [ "$r" -eq 2 ] && t="$work/other.json"
    LOOM_BOOTSTRAP_TIMEOUT=4 timeout -s KILL 30 "$RT" probe "$t" --rank "$r" \
        >"$work/hand$r.out" \
        2>"$work/hand$r.err" &
    pids="$pids $!"
done
r=0
for pid in $pids; do
    wait "$pid"
    eval "hand_rc$r=\$?"
    r=$((r + 1))
done
[ "$hand_rc0" -ne 0 ] || fail "mismatch: rank 0 exit 0"
[ "$hand_rc2" -ne 0 ] || fail "mismatch: rank 2 exit 0"
grep -q '^loom-ranktable probe: rank 0: rank 2 (server 127.0.0.3, 127.0.3.1:[0-9]*) loaded a different rank table' \
    "$work/hand0.err" || { fail "mismatch: rank 0 does not name rank 2"; cat "$work/hand0.err"; }
grep -q 'loaded a different rank table' "$work/hand2.err" ||
    fail "mismatch: rank 2 is not told"
[ -s "$work/hand0.out" ] && fail "mismatch: rank 0 printed a report"
pass "mismatch"

# 9. A saved report read back: the same verdict; a made-up 64-rank one
#    (8 servers; the second's ports blocked for the others; rank 63 did
#    not join; slow links) names the blocked server and the missing rank,
#    in one line each, and plots.
"$RT" probe --from-json "$work/json.out" >"$work/again.out" 2>&1
[ $? -eq 0 ] && grep -q '^result: all 6 pairs reachable' "$work/again.out" ||
    fail "from-json: $(tail -n 3 "$work/again.out")"
sh "$srcdir/tests/integration/probe_synth.sh" 64 8 >"$work/synth.json"
"$RT" probe --from-json "$work/synth.json" --plot "$work/synth.png" >"$work/synth.out" \
    2>"$work/synth.err"
[ $? -eq 1 ] || fail "from-json synthetic: exit status not 1"
grep -q '^cut off: server 10.0.1.0 (ranks 8-15): no rank of another server reaches its ports (440 timed out)$' \
    "$work/synth.out" || fail "synthetic: blocked server not named"
grep -q '^did not join: server 10.0.7.0, rank 63: not in touch with rank 0 (10.0.0.1:29600) within 120 s; the other ranks. connects to it: 63 connected' \
    "$work/synth.out" || fail "synthetic: missing rank not named"
[ "$(grep -c '^unreachable: server .* -> server 10.0.1.0 (ranks 8-15): connect: no answer within 5 s (connect timed out) (all [0-9]* links)$' "$work/synth.out")" -eq 7 ] ||
    fail "synthetic: want 7 grouped unreachable lines"
grep -q '^unreachable: rank' "$work/synth.out" && fail "synthetic: ungrouped unreachable lines"
[ "$(grep -c '^slow link: ' "$work/synth.out")" -eq 2 ] || fail "synthetic: want 2 slow links"
grep -Eq '^ +63( +\?){63} +-$' "$work/synth.out" || fail "synthetic: row 63 is not all ?"
[ "$(head -c 4 "$work/synth.png" 2>/dev/null | tail -c 3)" = PNG ] ||
    fail "synthetic: no PNG: $(cat "$work/synth.err")"
pass "from-json"

# 10. Command line and table errors.
"$RT" probe "$srcdir/etc/ranktables/single-4.json" >/dev/null 2>"$work/e1"
[ $? -eq 2 ] && grep -q 'no rank' "$work/e1" || fail "no rank: want exit 2"
"$RT" probe --rank 0 >/dev/null 2>"$work/e2"
[ $? -eq 2 ] && grep -q 'no rank table' "$work/e2" || fail "no table: want exit 2"
"$RT" probe "$srcdir/etc/ranktables/single-4.json" --rank 0 --size 0 \
    >/dev/null 2>&1
[ $? -eq 2 ] || fail "--size 0: want exit 2"
"$RT" probe "$srcdir/etc/ranktables/single-4.json" --rank 4 >/dev/null 2>"$work/e3"
[ $? -eq 2 ] && grep -q 'rank 4 does not exist' "$work/e3" || fail "--rank 4: want exit 2"
printf '{"version":"1.0","server_count":"1","server_list":[],"status":"completed"}' \
    >"$work/bad.json"
LOOM_RANK_TABLE="$work/bad.json" RANK_ID=0 "$RT" probe >/dev/null 2>"$work/e4"
[ $? -eq 1 ] && grep -q '^error: ' "$work/e4" || fail "invalid table: want exit 1 and errors"
pass "command line"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all probe tests passed"
