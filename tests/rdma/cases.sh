#!/bin/bash
# cases.sh - one transport on real RDMA hardware, the rdma level of
# tests/run-matrix, which passes the transport's config (tests/matrix/):
#
#   tests/run-matrix -t verbs -l rdma RANKTABLE [HOST...]
#   tests/run-matrix -t 'ofi:verbs;ofi_rxm' -l rdma RANKTABLE [HOST...]
#   tests/run-matrix -t ofi:efa -l rdma RANKTABLE [HOST...]
#   tests/run-matrix -t tcp -l rdma RANKTABLE    checks this script itself
#                                                on a host without RDMA
#
# RANKTABLE is the job's rank table (HCCL JSON), its device_ip values the
# NICs' addresses. HOST... are ssh targets running the ranks of the table's
# servers, in the table's order (one per server); with none, every rank
# runs on this host. The build tree (LOOM_BUILDDIR, default .) and
# RANKTABLE must be at the same paths on every host.
#
# It prints SKIP and exits 77 when there is nothing to test: the Loom build
# has not the transport or it cannot run (loom-info says why), fi_info does
# not list the ofi provider on a host, or the transport needs an RDMA
# device (RDMA_DEVICE=1) and a host has none.
#
# Cases, each printing PASS/FAIL and what it measured:
#   1. matrix   every rank runs tests/netns/netns_job over the transport:
#               every collective exact on every rank
#   2. digest   tests/rdma/digest over tcp and over the transport
#               (LOOM_ALGO=ring, same chunk size): every result identical
#               bit for bit
#   3. perf     the bandwidth tools of RDMA_PERF between the first two
#               servers at RDMA_SIZE: ib_write_bw_chosen (perftest on the
#               device, port and GID Loom chose), ib_write_bw (perftest's
#               own choice, or RDMA_IB_DEV and RDMA_IB_GID), fi_pingpong
#               (libfabric's, with the same provider); then all_reduce_perf
#               over the transport, one rank on each of those two servers:
#               busbw at RDMA_SIZE beside each. A number in RDMA_PERF is a
#               target (percent of each tool's bandwidth; a miss is a FAIL);
#               without one the numbers are printed; a run that gave none is
#               a FAIL
#   4. kill     netns_job -f over the transport on every rank (LOOM_SHM=0);
#               the last rank is killed (SIGKILL) after 3 s: every other rank
#               exits non-zero within RDMA_KILL_BOUND s, its error naming the
#               killed rank
# From run-matrix: MATRIX_NAME, MATRIX_TRANSPORT, MATRIX_ENV (shell-quoted
# assignments every rank gets), RDMA_DEVICE, RDMA_SAID (a grep -o pattern
# for what Loom says of its device at INFO), RDMA_PERF.
# env: LOOM_BUILDDIR, RDMA_SIZE (64M), RDMA_KILL_BOUND (10), RDMA_CASES
#      ("matrix digest perf kill"), FI_PINGPONG (fi_pingpong), IB_WRITE_BW
#      (ib_write_bw), RDMA_IB_DEV and RDMA_IB_GID (ib_write_bw's -d and -x),
#      RDMA_KEEP=1 keeps the work directory (every rank's output).
set -u
: "${LOOM_BUILDDIR:=.}"
LOOM_BUILDDIR=$(cd "$LOOM_BUILDDIR" && pwd)
: "${RDMA_SIZE:=64M}"
: "${RDMA_KILL_BOUND:=10}"
: "${RDMA_CASES:=matrix digest perf kill}"
: "${FI_PINGPONG:=fi_pingpong}"
: "${IB_WRITE_BW:=ib_write_bw}"
: "${RDMA_DEVICE:=0}"
: "${RDMA_SAID:=}"
: "${RDMA_PERF:=}"
T=${MATRIX_TRANSPORT:-}
case $T in
    tcp | ofi | verbs) ;;
    *) echo "usage: tests/run-matrix -t TRANSPORT -l rdma RANKTABLE [HOST...] (see the header of this script)"; exit 2 ;;
esac
# what every rank of a case gets: the transport under test and its config's
# variables (the ofi provider), already quoted for the shell
T_ENV="LOOM_TRANSPORT=$T ${MATRIX_ENV:-}"
PROV=$(eval "${MATRIX_ENV:-}"; echo "${LOOM_OFI_PROVIDER:-}")
WHAT=$MATRIX_NAME
[ "$T" != tcp ] || WHAT="tcp (self-check of cases.sh, no RDMA)"

table=${1:-}
if [ -z "$table" ] || [ ! -r "$table" ]; then
    echo "usage: tests/run-matrix -t TRANSPORT -l rdma RANKTABLE [HOST...] (see the header of this script)"
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

# where rank r runs: host index by server, and its device_ip, from the table
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

# shellcheck source=tests/rdma/hosts.sh
. "$(dirname "$0")/hosts.sh"

B=$LOOM_BUILDDIR
nservers=$(printf '%s\n' "${rank_server[@]}" | awk '{print $1}' | sort -u | wc -l)
# each_host: the host indexes to check (only this one when all ranks run here)
each_host() {
    if [ "${#hosts[@]}" -eq 0 ]; then echo 0; else seq 0 $((nservers - 1)); fi
}

# Is there anything to test? The device, Loom's transport, the provider.
for h in $(each_host); do
    where=${hosts[$h]:-this host}
    if [ "$RDMA_DEVICE" = 1 ] && ! run_on "$h" 'ls /sys/class/infiniband/*/ports >/dev/null 2>&1'; then
        echo "SKIP: no RDMA device on $where for $WHAT (/sys/class/infiniband is empty)"
        exit 77
    fi
    line=$(run_on "$h" "$T_ENV '$B/tools/loom-info' 2>&1 | grep '^transport *: $T '")
    case $line in
        *"built, available"*) ;;
        *"not built"*)
            echo "SKIP: the Loom build at $B on $where has no $T transport: $line"
            exit 77 ;;
        *"cannot run here"*)
            echo "SKIP: $T cannot run on $where: ${line#*cannot run here: }"
            exit 77 ;;
        *)
            echo "FAIL: no '$B/tools/loom-info' on $where, or it does not mention $T (set LOOM_BUILDDIR)"
            exit 1 ;;
    esac
    if [ -n "$PROV" ] && run_on "$h" 'command -v fi_info >/dev/null'; then
        if ! run_on "$h" "fi_info -p '$PROV' -t FI_EP_RDM >/dev/null 2>&1"; then
            echo "SKIP: libfabric on $where has no provider '$PROV' with RDM endpoints (fi_info -l lists what it has)"
            exit 77
        fi
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/loom-rdma.XXXXXX")
finish() {
    if [ "${RDMA_KEEP:-0}" = 1 ]; then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

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
    job matrix 600 "$T_ENV" -- tests/netns/netns_job -i 2
    local r bad=0
    for r in $(seq 0 $((NRANKS - 1))); do
        if [ "$(rc_of matrix "$r")" != 0 ] || ! grep -q 'RESULT.*ok=1' "$work/matrix.$r.out"; then
            bad=1
            echo "  rank $r: exit $(rc_of matrix "$r"): $(grep -h 'MESSAGE\|ERROR' "$work/matrix.$r.err" | head -2)"
        fi
    done
    # what Loom said of its device or provider (LOOM_DEBUG=INFO)
    [ -z "$RDMA_SAID" ] || grep -ho "$RDMA_SAID" "$work"/matrix.*.err | sort -u | head -4 | sed 's/^/  /'
    if [ $bad = 0 ]; then
        pass "matrix: every collective exact on $NRANKS ranks over $WHAT"
    else
        fail "matrix: a rank failed over $WHAT"
    fi
}

case_digest() {
    local t
    job digest-tcp 600 LOOM_TRANSPORT=tcp LOOM_ALGO=ring LOOM_CHUNK_SIZE=1M LOOM_SHM=0 -- tests/rdma/digest
    job digest-t 600 "$T_ENV" LOOM_ALGO=ring LOOM_CHUNK_SIZE=1M LOOM_SHM=0 -- tests/rdma/digest
    local r ok=1
    for r in $(seq 0 $((NRANKS - 1))); do
        for t in tcp t; do
            [ "$(rc_of "digest-$t" "$r")" = 0 ] || { ok=0; echo "  rank $r over $t: exit $(rc_of "digest-$t" "$r")"; }
        done
        if ! cmp -s <(grep DIGEST "$work/digest-tcp.$r.out") <(grep DIGEST "$work/digest-t.$r.out"); then
            ok=0
            echo "  rank $r: results differ; first difference:"
            diff <(grep DIGEST "$work/digest-tcp.$r.out") <(grep DIGEST "$work/digest-t.$r.out") | head -4 | sed 's/^/    /'
        fi
    done
    local n
    n=$(grep -c DIGEST "$work/digest-t.0.out" 2>/dev/null || echo 0)
    if [ $ok = 1 ] && [ "$n" -gt 0 ]; then
        pass "digest: $n results per rank identical bit for bit over tcp and $WHAT"
    else
        fail "digest: $WHAT and tcp results differ (or a run failed)"
    fi
}

# pair_bench NAME SERVER_CMD CLIENT_CMD: a server on host 1, its client on
# host 0 (bounded: 120 s each); outputs in $work/NAME.{server,client}
pair_bench() {
    local name=$1 scmd=$2 ccmd=$3
    run_on 1 "exec timeout 120 $scmd" >"$work/$name.server" 2>&1 &
    local sp=$!
    sleep 2
    run_on 0 "exec timeout 120 $ccmd" >"$work/$name.client" 2>&1
    wait $sp
}

# ib_write_bw_gbps NAME DEV0 DEV1 IP1: perftest between hosts 0 and 1 at
# RDMA_SIZE (DEVn: its -d/-x options on host n); Gb/s, or nothing
ib_write_bw_gbps() {
    local o="-s $SIZE -n 200 -F --report_gbits"
    pair_bench "$1" "$IB_WRITE_BW $3 $o" "$IB_WRITE_BW $2 $o $4"
    awk -v s="$SIZE" '$1 == s && NF >= 4 {print $4}' "$work/$1.client" | tail -1
}

# add_base TOOL GB/S OUTPUT: the tool's number beside Loom's in base, or
# why it gave none (the end of its OUTPUT) in miss
add_base() {
    if [ -n "$2" ]; then
        base+=("$1 $2")
    else
        miss+=("$1 gave no number: $(tail -2 "$3" | paste -sd ' ')")
    fi
}

# gbytes GBITS: Gb/s as GB/s, or nothing
gbytes() { [ -z "$1" ] || awk -v g="$1" 'BEGIN {printf "%.2f", g / 8}'; }

# bench_TOOL IP1 R1: one bandwidth tool between hosts 0 and 1 (add_base)
bench_ib_write_bw_chosen() {
    # the device, port and GID index Loom chose on rank 0 and on rank R1
    # (from the matrix case's INFO lines, or a fresh run)
    [ -f "$work/matrix.0.err" ] || case_matrix >/dev/null
    local c0 c1 gbits
    c0=$(grep -ho 'verbs [a-z0-9_]*:[0-9]* gid [0-9]*' "$work/matrix.0.err" | head -1)
    c1=$(grep -ho 'verbs [a-z0-9_]*:[0-9]* gid [0-9]*' "$work/matrix.$2.err" | head -1)
    if [ -z "$c0" ] || [ -z "$c1" ]; then
        miss+=("Loom did not say which device it used (LOOM_DEBUG=INFO lines missing)")
        return
    fi
    read -r _ d0 _ g0 <<<"${c0/:/ }"
    read -r _ d1 _ g1 <<<"${c1/:/ }"
    gbits=$(ib_write_bw_gbps ibwc "-d ${d0%:*} -x $g0" "-d ${d1%:*} -x $g1" "$1")
    add_base ib_write_bw "$(gbytes "$gbits")" "$work/ibwc.client"
}

# perftest's own device unless RDMA_IB_DEV (-d) and RDMA_IB_GID (-x) name
# it (RoCE: the GID index of the address in the rank table)
bench_ib_write_bw() {
    local dev="" gbits
    [ -n "${RDMA_IB_DEV:-}" ] && dev="-d $RDMA_IB_DEV"
    [ -n "${RDMA_IB_GID:-}" ] && dev="$dev -x $RDMA_IB_GID"
    gbits=$(ib_write_bw_gbps ibw "$dev" "$dev" "$1")
    add_base ib_write_bw "$(gbytes "$gbits")" "$work/ibw.client"
}

# fi_pingpong: one message at a time each way; MB/sec (decimal) is the
# column after the time ("0.12s"), in the row of the last (only) size
bench_fi_pingpong() {
    local fo="-p '$PROV' -e rdm -S $SIZE -I 100" mbs
    pair_bench fipp "$FI_PINGPONG $fo" "$FI_PINGPONG $fo $1"
    mbs=$(awk '$1 ~ /^[0-9]+[kmg]?$/ && $2 ~ /^[0-9]+$/ {
                   for (i = 3; i < NF; i++) if ($i ~ /^[0-9.]+s$/) { v = $(i + 1); break } }
               END { print v }' "$work/fipp.client")
    add_base fi_pingpong "$([ -z "$mbs" ] || awk -v m="$mbs" 'BEGIN {printf "%.2f", m / 1000}')" \
        "$work/fipp.client"
}

case_perf() {
    local r1=-1 r
    for r in $(seq 0 $((NRANKS - 1))); do
        [ "${rank_server[$r]%% *}" = 1 ] && { r1=$r; break; }
    done
    [ "$r1" -ge 0 ] || { echo "SKIP: perf: the table has one server; the bandwidth tools need two"; return; }
    local ip1=${rank_server[$r1]#* } base=() miss=() target="" tool cmd
    for tool in $RDMA_PERF; do
        case $tool in
            [0-9]*) target=$tool; continue ;;
            ib_write_bw*) cmd=$IB_WRITE_BW ;;
            fi_pingpong) cmd=$FI_PINGPONG ;;
            *) fail "perf: RDMA_PERF names '$tool', not ib_write_bw_chosen, ib_write_bw or fi_pingpong"; return ;;
        esac
        if run_on 0 "command -v $cmd" >/dev/null && run_on 1 "command -v $cmd" >/dev/null; then
            "bench_$tool" "$ip1" "$r1"
        else
            miss+=("$cmd is not installed on both hosts (perftest, libfabric-bin): not run")
        fi
    done
    [ ${#miss[@]} -eq 0 ] || printf '  %s\n' "${miss[@]}"
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
    local name=perf
    run_on 1 "cd '$B' && exec env LOOM_RANK_TABLE='$work/table2.json' LOOM_RANK=1 LOOM_CONF_FILE=/dev/null $T_ENV timeout 300 perf/all_reduce_perf --transport $T -b $SIZE -e $SIZE -n 50 -w 10 -F -" \
        >"$work/$name.1.out" 2>"$work/$name.1.err" &
    local pp=$!
    run_on 0 "cd '$B' && exec env LOOM_RANK_TABLE='$work/table2.json' LOOM_RANK=0 LOOM_CONF_FILE=/dev/null $T_ENV timeout 300 perf/all_reduce_perf --transport $T -b $SIZE -e $SIZE -n 50 -w 10 -F -" \
        >"$work/$name.0.out" 2>"$work/$name.0.err"
    local prc=$?
    wait $pp
    local busbw
    busbw=$(awk -F, -v s="$SIZE" '$1 == s {b = $8 > $12 ? $8 : $12; print b}' "$work/$name.0.out" | tail -1)
    if [ -z "$busbw" ] || [ $prc != 0 ]; then
        fail "perf: all_reduce_perf over $WHAT gave no number (exit $prc)"
        tail -4 "$work/$name.0.err" | sed 's/^/  /'
        return
    fi
    local b pct line="all_reduce busbw $busbw GB/s" low=0
    for b in "${base[@]}"; do
        pct=$(awk -v x="$busbw" -v y="${b##* }" 'BEGIN {printf "%.0f", 100 * x / y}')
        line="$line; ${b% *} ${b##* } GB/s ($pct%)"
        [ -z "$target" ] || [ "$pct" -ge "$target" ] || low=1
    done
    [ ${#base[@]} -gt 0 ] || line="$line (no bandwidth tool ran beside it)"
    if [ -n "$target" ] && { [ $low = 1 ] || [ ${#miss[@]} -gt 0 ]; }; then
        fail "perf at $RDMA_SIZE, 2 ranks over $WHAT: $line (target: $target% of each tool)"
    else
        pass "perf at $RDMA_SIZE, 2 ranks over $WHAT: $line"
    fi
}

# LOOM_SHM=0: every peer over the transport under test, so that each rank
# hears of the victim through it. (With shared memory between a server's
# ranks, a rank of another server may name the victim's server-mate that
# failed with it rather than the victim: test_kill_two_server.sh.)
case_kill() {
    local victim=$((NRANKS - 1)) name=kill r
    for r in $(seq 0 $((NRANKS - 1))); do
        local h=${rank_server[$r]%% *}
        run_on "$h" "cd '$B' && exec env LOOM_RANK_TABLE='$table' LOOM_RANK=$r LOOM_CONF_FILE=/dev/null $T_ENV LOOM_SHM=0 LOOM_TIMEOUT=30 tests/netns/netns_job -f -c 1,4099,262147" \
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
        pass "kill: every rank failed within ${RDMA_KILL_BOUND} s naming rank $victim, over $WHAT"
    else
        fail "kill: a rank hung, exited 0, or did not name rank $victim, over $WHAT"
    fi
}

echo "$WHAT on $NRANKS ranks, $nservers server(s), table $table"
for c in $RDMA_CASES; do
    case $c in
        matrix) case_matrix ;; digest) case_digest ;; perf) case_perf ;; kill) case_kill ;;
        *) fail "unknown case $c" ;;
    esac
done
[ $failures = 0 ] && echo "cases.sh: all cases passed" || echo "cases.sh: $failures case(s) failed"
[ $failures = 0 ]
