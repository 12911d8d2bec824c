#!/bin/bash
# verbs.sh - the verbs transport on real RDMA hardware (RoCE or InfiniBand).
# Nothing here runs without an RDMA device: it prints SKIP and exits 77.
#
#   tests/rdma/verbs.sh RANKTABLE [HOST...]
#
# RANKTABLE is the job's rank table (HCCL JSON), its device_ip values the
# RDMA NICs' addresses. HOST... are ssh targets running the ranks of the
# table's servers, in the table's order (one per server); with none, every
# rank runs on this host (a table whose device_ips are all here). The build
# tree (LOOM_BUILDDIR, default .) and RANKTABLE must be at the same paths
# on every host (a shared file system, or copies).
#
# Cases, each printing PASS/FAIL and what it measured:
#   1. matrix   every rank runs tests/netns/netns_job over verbs: every
#               collective exact on every rank
#   2. digest   tests/rdma/digest over tcp and over verbs (LOOM_ALGO=ring,
#               same chunk size): every result identical bit for bit
#   3. perf     ib_write_bw (perftest) between the first two servers, on the
#               device, port and GID index Loom chose, at RDMA_SIZE; then
#               all_reduce_perf over verbs with one rank on each of those
#               two servers: busbw at RDMA_SIZE against ib_write_bw's
#               average (target: at least 90%; printed, a miss is a FAIL)
#   4. kill     netns_job -f over verbs on every rank; the last rank is
#               killed (SIGKILL) after 3 s: every other rank exits non-zero
#               within RDMA_KILL_BOUND s and its error names the killed rank
# env: LOOM_BUILDDIR, RDMA_SIZE (64M), RDMA_KILL_BOUND (10), RDMA_CASES
#      ("matrix digest perf kill"), IB_WRITE_BW (ib_write_bw), RDMA_KEEP=1
#      keeps the work directory (every rank's output).
set -u
: "${LOOM_BUILDDIR:=.}"
LOOM_BUILDDIR=$(cd "$LOOM_BUILDDIR" && pwd)
: "${RDMA_SIZE:=64M}"
: "${RDMA_KILL_BOUND:=10}"
: "${RDMA_CASES:=matrix digest perf kill}"
: "${IB_WRITE_BW:=ib_write_bw}"

table=${1:-}
if [ -z "$table" ] || [ ! -r "$table" ]; then
    echo "usage: $0 RANKTABLE [HOST...]   (see the header of this script)"
    exit 2
fi
table=$(cd "$(dirname "$table")" && pwd)/$(basename "$table")
shift
hosts=("$@")

# size in bytes of RDMA_SIZE (K/M/G)
size_bytes() {
    local s=$1 n=${1%[KkMmGg]}
    case $s in
        *[Kk]) echo $((n << 10)) ;; *[Mm]) echo $((n << 20)) ;;
        *[Gg]) echo $((n << 30)) ;; *) echo "$s" ;;
    esac
}
SIZE=$(size_bytes "$RDMA_SIZE")

# where rank r runs: host index by server, from the table (python3 reads it)
mapfile -t rank_server < <(/usr/bin/python3 - "$table" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
servers = t.get("server_list") or []
rows = []
for s_i, s in enumerate(servers):
    for d in s.get("device", []):
        rows.append((int(d["rank_id"]), s_i, d.get("device_ip", "")))
for r, s_i, ip in sorted(rows):
    print(s_i, ip)
EOF
)
NRANKS=${#rank_server[@]}
[ "$NRANKS" -ge 2 ] || { echo "FAIL: $table has fewer than 2 ranks"; exit 1; }

# run_on HOSTINDEX CMD... : here, or through ssh on that server's host
run_on() {
    local h=$1
    shift
    if [ "${#hosts[@]}" -eq 0 ]; then
        bash -c "$*"
    else
        ssh -o BatchMode=yes "${hosts[$h]}" "$*"
    fi
}

# every host must have an RDMA device; else there is nothing to test
nservers=$(printf '%s\n' "${rank_server[@]}" | awk '{print $1}' | sort -u | wc -l)
for h in $(seq 0 $((nservers - 1))); do
    [ "${#hosts[@]}" -gt 0 ] || [ "$h" -eq 0 ] || break
    if ! run_on "$h" 'ls /sys/class/infiniband/*/ports >/dev/null 2>&1'; then
        echo "SKIP: no RDMA device on ${hosts[$h]:-this host} (/sys/class/infiniband is empty)"
        exit 77
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/loom-rdma-verbs.XXXXXX")
finish() {
    if [ "${RDMA_KEEP:-0}" = 1 ]; then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

B=$LOOM_BUILDDIR
for prog in tests/netns/netns_job tests/rdma/digest perf/all_reduce_perf; do
    [ -x "$B/$prog" ] || make -C "$B" "$prog" >/dev/null || { echo "FAIL: cannot build $prog"; exit 1; }
done

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "PASS: $*"; }

# job NAME TIMEOUT ENV... -- CMD...: every rank of the table, in the
# background; waits for all (bounded), leaves NAME.R.{out,err,rc} in $work
job() {
    local name=$1 limit=$2 env=() r
    shift 2
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    for r in $(seq 0 $((NRANKS - 1))); do
        local h=${rank_server[$r]%% *}
        run_on "$h" "cd '$B' && exec env LOOM_RANK_TABLE='$table' LOOM_RANK=$r LOOM_CONF_FILE=/dev/null LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET ${env[*]} $*" \
            >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
        echo $! >"$work/$name.$r.lpid"
    done
    local deadline=$((SECONDS + limit))
    for r in $(seq 0 $((NRANKS - 1))); do
        local p
        p=$(cat "$work/$name.$r.lpid")
        while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        if kill -0 "$p" 2>/dev/null; then
            kill -KILL "$p" 2>/dev/null
            wait "$p" 2>/dev/null
            echo 124 >"$work/$name.$r.rc"
        else
            wait "$p" 2>/dev/null
            echo $? >"$work/$name.$r.rc"
        fi
    done
}

rc_of() { cat "$work/$1.$2.rc"; }

case_matrix() {
    job matrix 600 LOOM_TRANSPORT=verbs -- tests/netns/netns_job -i 2
    local r bad=0
    for r in $(seq 0 $((NRANKS - 1))); do
        if [ "$(rc_of matrix "$r")" != 0 ] || ! grep -q 'RESULT.*ok=1' "$work/matrix.$r.out"; then
            bad=1
            echo "  rank $r: exit $(rc_of matrix "$r"): $(grep -h 'MESSAGE\|ERROR' "$work/matrix.$r.err" | head -2)"
        fi
    done
    grep -ho 'verbs: rank [0-9]*: verbs [^ ]* [^ ]* [0-9]*[^;]*' "$work"/matrix.*.err | sort -u | sed 's/^/  /'
    if [ $bad = 0 ]; then
        pass "matrix: every collective exact on $NRANKS ranks over verbs"
    else
        fail "matrix: a rank failed over verbs"
    fi
}

case_digest() {
    local t
    for t in tcp verbs; do
        job "digest-$t" 600 LOOM_TRANSPORT=$t LOOM_ALGO=ring LOOM_CHUNK_SIZE=1M LOOM_SHM=0 -- tests/rdma/digest
    done
    local r ok=1
    for r in $(seq 0 $((NRANKS - 1))); do
        for t in tcp verbs; do
            [ "$(rc_of "digest-$t" "$r")" = 0 ] || { ok=0; echo "  rank $r over $t: exit $(rc_of "digest-$t" "$r")"; }
        done
        if ! cmp -s <(grep DIGEST "$work/digest-tcp.$r.out") <(grep DIGEST "$work/digest-verbs.$r.out"); then
            ok=0
            echo "  rank $r: results differ; first difference:"
            diff <(grep DIGEST "$work/digest-tcp.$r.out") <(grep DIGEST "$work/digest-verbs.$r.out") | head -4 | sed 's/^/    /'
        fi
    done
    local n
    n=$(grep -c DIGEST "$work/digest-verbs.0.out" 2>/dev/null || echo 0)
    if [ $ok = 1 ] && [ "$n" -gt 0 ]; then
        pass "digest: $n results per rank identical bit for bit over tcp and verbs"
    else
        fail "digest: verbs and tcp results differ (or a run failed)"
    fi
}

case_perf() {
    # the device, port and GID index Loom chose on ranks 0 and the first
    # rank of server 1 (from the matrix run's INFO lines, or a fresh one)
    local r1=-1 r
    for r in $(seq 0 $((NRANKS - 1))); do
        [ "${rank_server[$r]%% *}" = 1 ] && { r1=$r; break; }
    done
    [ "$r1" -ge 0 ] || { echo "SKIP: perf: the table has one server; ib_write_bw needs two"; return; }
    [ -f "$work/matrix.0.err" ] || case_matrix >/dev/null
    local c0 c1 ip1
    c0=$(grep -ho 'verbs [a-z0-9_]*:[0-9]* gid [0-9]*' "$work/matrix.0.err" | head -1)
    c1=$(grep -ho 'verbs [a-z0-9_]*:[0-9]* gid [0-9]*' "$work/matrix.$r1.err" | head -1)
    ip1=${rank_server[$r1]#* }
    if [ -z "$c0" ] || [ -z "$c1" ]; then
        fail "perf: Loom did not say which device it used (LOOM_DEBUG=INFO lines missing)"
        return
    fi
    read -r _ d0 _ g0 <<<"${c0/:/ }"
    read -r _ d1 _ g1 <<<"${c1/:/ }"
    run_on 1 "exec $IB_WRITE_BW -d ${d1%:*} -x $g1 -s $SIZE -n 200 -F --report_gbits" \
        >"$work/ibw.server" 2>&1 &
    local sp=$!
    sleep 2
    run_on 0 "$IB_WRITE_BW -d ${d0%:*} -x $g0 -s $SIZE -n 200 -F --report_gbits $ip1" \
        >"$work/ibw.client" 2>&1
    wait $sp
    local gbits
    gbits=$(awk -v s="$SIZE" '$1 == s && NF >= 4 {print $4}' "$work/ibw.client" | tail -1)
    # a 2-rank table: rank 0's and rank r1's devices
    /usr/bin/python3 - "$table" "$work/table2.json" "$r1" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1])); r1 = sys.argv[3]
out = dict(t)
out["server_list"] = []
for s in t["server_list"]:
    devs = [dict(d) for d in s.get("device", []) if d["rank_id"] in ("0", r1)]
    if devs:
        for d in devs:
            d["rank_id"] = "0" if d["rank_id"] == "0" else "1"
        s2 = dict(s); s2["device"] = devs; out["server_list"].append(s2)
out["server_count"] = str(len(out["server_list"]))
json.dump(out, open(sys.argv[2], "w"), indent=1)
EOF
    local h0=0 h1=1 name=perf
    run_on $h1 "cd '$B' && exec env LOOM_RANK_TABLE='$work/table2.json' LOOM_RANK=1 LOOM_CONF_FILE=/dev/null perf/all_reduce_perf --transport verbs -b $SIZE -e $SIZE -n 50 -w 10 -F -" \
        >"$work/$name.1.out" 2>"$work/$name.1.err" &
    local pp=$!
    run_on $h0 "cd '$B' && exec env LOOM_RANK_TABLE='$work/table2.json' LOOM_RANK=0 LOOM_CONF_FILE=/dev/null perf/all_reduce_perf --transport verbs -b $SIZE -e $SIZE -n 50 -w 10 -F -" \
        >"$work/$name.0.out" 2>"$work/$name.0.err"
    local prc=$?
    wait $pp
    local busbw
    busbw=$(awk -F, -v s="$SIZE" '$1 == s {b = $8 > $12 ? $8 : $12; print b}' "$work/$name.0.out" | tail -1)
    if [ -z "$gbits" ] || [ -z "$busbw" ] || [ $prc != 0 ]; then
        fail "perf: no numbers (ib_write_bw: '${gbits}' Gb/s, all_reduce_perf: exit $prc, '${busbw}' GB/s)"
        sed 's/^/  /' "$work/ibw.client" "$work/$name.0.err" | tail -8
        return
    fi
    local verdict
    verdict=$(awk -v b="$busbw" -v g="$gbits" 'BEGIN {
        w = g / 8; r = b / w
        printf "%s all_reduce busbw %.2f GB/s, ib_write_bw %.2f GB/s (%.1f Gb/s): %.0f%%",
               (r >= 0.9 ? "ok" : "low"), b, w, g, 100 * r }')
    case $verdict in
        ok*) pass "perf at $RDMA_SIZE, 2 ranks: ${verdict#ok }" ;;
        *) fail "perf at $RDMA_SIZE, 2 ranks: ${verdict#low } (target: 90%)" ;;
    esac
}

# LOOM_SHM=0: every peer over verbs, so that each rank hears of the killed
# one over the transport under test (with shared memory inside a server, a
# rank of another server may name the rank between that failed with it).
case_kill() {
    local victim=$((NRANKS - 1)) name=kill r
    for r in $(seq 0 $((NRANKS - 1))); do
        local h=${rank_server[$r]%% *}
        run_on "$h" "cd '$B' && exec env LOOM_RANK_TABLE='$table' LOOM_RANK=$r LOOM_CONF_FILE=/dev/null LOOM_TRANSPORT=verbs LOOM_SHM=0 LOOM_TIMEOUT=30 tests/netns/netns_job -f -c 1,4099,262147" \
            >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
        echo $! >"$work/$name.$r.lpid"
    done
    sleep 3
    local vh=${rank_server[$victim]%% *}
    # the victim's process: netns_job with LOOM_RANK=victim on its host
    run_on "$vh" "for p in \$(pgrep -x netns_job); do tr '\\0' '\\n' </proc/\$p/environ 2>/dev/null | grep -qx 'LOOM_RANK=$victim' && kill -KILL \$p; done" ||
        true
    local t0=$SECONDS ok=1
    for r in $(seq 0 $((NRANKS - 2))); do
        local p
        p=$(cat "$work/$name.$r.lpid")
        while kill -0 "$p" 2>/dev/null && [ $((SECONDS - t0)) -le "$RDMA_KILL_BOUND" ]; do sleep 0.1; done
        if kill -0 "$p" 2>/dev/null; then
            ok=0
            echo "  rank $r still running $RDMA_KILL_BOUND s after rank $victim was killed"
            kill -KILL "$p" 2>/dev/null
        else
            wait "$p"
            local rc=$?
            local msg
            msg=$(grep -h 'MESSAGE' "$work/$name.$r.err" | head -1)
            echo "  rank $r: exit $rc after $((SECONDS - t0)) s: ${msg:-<no message>}"
            [ "$rc" != 0 ] || ok=0
            grep -q "rank $victim\b" "$work/$name.$r.err" || ok=0
        fi
    done
    wait 2>/dev/null
    if [ $ok = 1 ]; then
        pass "kill: every rank failed within ${RDMA_KILL_BOUND} s naming rank $victim"
    else
        fail "kill: a rank hung, exited 0, or did not name rank $victim"
    fi
}

echo "verbs on $NRANKS ranks, $nservers server(s), table $table"
for c in $RDMA_CASES; do
    case $c in
        matrix) case_matrix ;; digest) case_digest ;; perf) case_perf ;; kill) case_kill ;;
        *) fail "unknown case $c" ;;
    esac
done
[ $failures = 0 ] && echo "verbs.sh: all cases passed" || echo "verbs.sh: $failures case(s) failed"
[ $failures = 0 ]
