#!/bin/sh
# test_ranktable_v2.sh - version 2.0 (rank_list) tables through the tools
# and a job on loopback:
#   1. generate --version 2.0 writes a table that check accepts, with each
#      rank's endpoint; its refusals (host name without an address, too
#      many devices) are usage errors
#   2. check names the JSON path of an EID-only rank, in text and --json
#   3. loom-run -n 4 --rank-table <2.0 table> -- all_reduce_perf: exit 0
#      and every value in bounds (each rank checks its results)
#   4. probe on the same table: every pair reachable
# Every job is bounded by loom-run's --timeout and an outer timeout.
set -u
: "${LOOM_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
builddir=${LOOM_BUILDDIR:-.}
RT=$builddir/tools/loom-ranktable
RUN=$builddir/tools/loom-run
PERF=$builddir/perf/all_reduce_perf
DATA=$LOOM_SRCDIR/tests/data/ranktables/v2
for b in "$RT" "$RUN" "$PERF"; do
    [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/test_ranktable_v2.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

. "$LOOM_SRCDIR/tests/support/port_base.sh"
LOOM_CONF_FILE=/dev/null
LOOM_BOOTSTRAP_TIMEOUT=15
export LOOM_CONF_FILE LOOM_BOOTSTRAP_TIMEOUT
unset LOOM_RANK RANK_ID RANK OMPI_COMM_WORLD_RANK PMI_RANK SLURM_PROCID \
    RANK_TABLE_FILE LOOM_RANK_TABLE 2>/dev/null

# 1. generate and check: two loopback "servers", two ranks each sharing
#    the server's address.
f0=$failures
table=$work/two-server-2.0.json
"$RT" generate --version 2.0 --servers server-a,server-b \
    --host-ips 127.0.0.2,127.0.0.3 --devices 2 -o "$table" ||
    fail "generate --version 2.0: exit $?"
grep -q '"rank_count": 4,' "$table" || fail "rank_count is not the integer 4: $(head -5 "$table")"
grep -q '"rank_id": 3,' "$table" || fail "rank_id is not an integer"
LOOM_PORT_BASE=21000 "$RT" check "$table" >"$work/check.out" 2>&1 ||
    fail "check of the generated table: $(cat "$work/check.out")"
for want in "version: 2.0" "servers: 2" "ranks: 4" \
    "rank 0: server server-a device 0 -> 127.0.0.2:21000" \
    "rank 3: server server-b device 1 -> 127.0.0.3:21001" "0 errors, 0 warnings"; do
    grep -qxF "$want" "$work/check.out" || fail "check lacks \"$want\": $(cat "$work/check.out")"
done
"$RT" generate --version 2.0 --servers host-a --devices 2 >/dev/null 2>"$work/gen.err"
[ $? -eq 2 ] && grep -q 'server "host-a" is a host name' "$work/gen.err" ||
    fail "generate 2.0 with a host name and no address: $(cat "$work/gen.err")"
"$RT" generate --version 2.0 --servers 127.0.0.2 --devices 66 >/dev/null 2>"$work/gen.err"
[ $? -eq 2 ] && grep -q 'at most 65 in a version 2.0 table' "$work/gen.err" ||
    fail "generate 2.0 with 66 devices: $(cat "$work/gen.err")"
"$RT" generate --version 3.0 --servers 127.0.0.2 --devices 1 >/dev/null 2>"$work/gen.err"
[ $? -eq 2 ] && grep -q -- '--version is 1.0, 1.2 or 2.0, not "3.0"' "$work/gen.err" ||
    fail "generate --version 3.0: $(cat "$work/gen.err")"
[ "$failures" -eq "$f0" ] && pass "generate --version 2.0 and check"

# 2. check names an EID-only rank's path, in text and JSON.
f0=$failures
"$RT" check "$DATA/eid-only.json" >"$work/eid.out" 2>&1
[ $? -eq 1 ] || fail "check of an EID-only table: exit not 1"
grep -qF 'error: rank_list[1].level_list[0].rank_addr_list[0].addr_type: is "EID": a UB endpoint id, which TCP hosts cannot use' \
    "$work/eid.out" || fail "check text: $(cat "$work/eid.out")"
"$RT" check --json "$DATA/eid-only.json" >"$work/eid.json" 2>&1
grep -q "\"path\":[[:space:]]*\"rank_list\[0\]\.level_list\[0\]\.rank_addr_list\[0\]\.addr_type\"" "$work/eid.json" ||
    fail "check --json: $(cat "$work/eid.json")"
[ "$failures" -eq "$f0" ] && pass "check names EID paths"

# 3. A job from the 2.0 table: all_reduce_perf checks every value.
f0=$failures
next_port_base
timeout -s KILL 90 "$RUN" -n 4 --timeout 75 --rank-table "$table" -- \
    "$PERF" -b 64K -e 1M -f 4 -n 2 -w 1 >"$work/perf.raw" 2>"$work/perf.err"
rc=$?
[ "$rc" -eq 0 ] || fail "all_reduce_perf on the 2.0 table: exit $rc: $(tail -5 "$work/perf.err")"
grep -qx '\[0\] # Out of bounds values : 0 OK' "$work/perf.raw" ||
    fail "all_reduce_perf: not OK: $(tail -5 "$work/perf.raw")"
[ "$failures" -eq "$f0" ] && pass "all_reduce_perf, 4 ranks from a 2.0 table"

# 4. probe on the same table.
f0=$failures
next_port_base
timeout -s KILL 60 "$RUN" -n 4 --timeout 45 --rank-table "$table" -- \
    "$RT" probe --size 256K --iters 4 >"$work/probe.raw" 2>"$work/probe.err"
rc=$?
[ "$rc" -eq 0 ] || fail "probe on the 2.0 table: exit $rc: $(tail -5 "$work/probe.err")"
grep -q '^\[0\] result: all .* pairs reachable' "$work/probe.raw" ||
    fail "probe: $(cat "$work/probe.raw")"
[ "$failures" -eq "$f0" ] && pass "probe on a 2.0 table"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
exit 0
