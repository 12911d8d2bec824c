#!/bin/bash
# probe.sh - `loom-ranktable probe` across network namespaces: 3 hosts x 2
# ranks (lib.sh's topology and table), each rank on the host its table
# entry names, listening on its table port. A port is "blocked" the way a
# firewall DROP rule blocks it: a tc filter on a link sends the packets for
# that port into a queue of length 0 (htb + pfifo limit 0; this kernel has
# neither iptables nor tc's drop action).
#
#   1. host B cannot reach rank 0's port: ranks 2 and 3 never join. Rank 0
#      names server B as not joined (the others reach it: it listens),
#      prints the partial matrix (B's rows unknown) and the heat map; ranks
#      2 and 3 each say they are cut off from rank 0 and what they reach.
#   2. host C's ports are blocked for the others: everyone joins; rank 0
#      names server C as cut off (no other server reaches its ports), lists
#      the blocked links in one line per server, measures the rest.
#
# Needs root and network namespaces; otherwise prints SKIP and exits 77.
# env: LOOM_BUILDDIR (default .), NETNS_KEEP=1 keeps the work directory.
set -u
: "${LOOM_BUILDDIR:=.}"
LOOM_BUILDDIR=$(cd "$LOOM_BUILDDIR" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

NRANKS=6
PORT=29600          # rank r listens on PORT + its device id (r % 2)
JOIN=4              # LOOM_BOOTSTRAP_TIMEOUT: how long rank 0 waits for joins
RT=$LOOM_BUILDDIR/tools/loom-ranktable
[ -x "$RT" ] || { echo "FAIL: $RT not built"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/loom-netns-probe.XXXXXX")
finish() {
    netns_cleanup
    [ "${NETNS_KEEP:-0}" = 1 ] && echo "work directory kept: $work" || rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM

netns_setup
table=$work/table.json
netns_write_table "$table" || { echo "FAIL: the generated rank table is invalid"; exit 1; }

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# block NS DEV DST_IP PORT...: drop what DEV sends to DST_IP on each PORT.
block() {
    local ns=$1 dev=$2 dst=$3 p err
    shift 3
    err=$(ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 10 2>&1 &&
          ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:10 htb rate 10gbit 2>&1 &&
          ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:20 htb rate 10gbit 2>&1 &&
          ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:20 handle 20: pfifo limit 0 2>&1) ||
        netns_skip "tc htb/pfifo on $dev: $err"
    for p in "$@"; do
        err=$(ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
              match ip dst "$dst" match ip dport "$p" 0xffff flowid 1:20 2>&1) ||
            netns_skip "tc u32 filter: $err"
    done
}
unblock() { ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null; }

# run CASE ARGS...: every rank in its host's namespace; rank r's stdout in
# DIR/out.r, stderr in DIR/err.r, exit status in DIR/rc.r; bounded to 60 s.
run() {
    local dir=$work/$1 r ns pids=
    shift
    mkdir -p "$dir"
    for r in $(seq 0 $((NRANKS - 1))); do
        ns=$(netns_of_rank "$r")
        ip netns exec "$ns" env LOOM_CONF_FILE=/dev/null LOOM_PORT_BASE=$PORT \
            LOOM_BOOTSTRAP_TIMEOUT=$JOIN timeout -s KILL 60 "$RT" probe "$table" \
            --rank "$r" --timeout 1 --size 64K --iters 2 "$@" \
            >"$dir/out.$r" 2>"$dir/err.$r" &
        pids="$pids $!"
        NETNS_PIDS="$NETNS_PIDS $!"
    done
    r=0
    for p in $pids; do
        wait "$p"
        echo $? >"$dir/rc.$r"
        r=$((r + 1))
    done
    NETNS_PIDS=""
}

# --- 1. host B cannot reach rank 0's port ------------------------------------
nsB=loomB$NETNS_ID
block "$nsB" eth0 10.77.0.11 $PORT
t0=$(date +%s)
run cutoff --plot "$work/cutoff.png"
secs=$(( $(date +%s) - t0 ))
unblock "$nsB" eth0
d=$work/cutoff
for r in 0 1 2 3 4 5; do
    [ "$(cat "$d/rc.$r")" = 1 ] || fail "cut-off: rank $r exit $(cat "$d/rc.$r"), want 1: $(cat "$d/err.$r")"
done
grep -q "^did not join: server 10.77.0.12, ranks 2-3: not in touch with rank 0 (10.77.0.11:$PORT) within $JOIN s; the other ranks' connects to them: 8 connected (listening, so cut off from rank 0" \
    "$d/out.0" || fail "cut-off: rank 0 does not name server B: $(grep -v '^ ' "$d/out.0")"
grep -Eq '^ +2( +\?){2} +- +\?( +\?){2}$' "$d/out.0" || fail "cut-off: row 2 is not unknown"
grep -Eq '^ +0 +- +[0-9.]+ +\+ +\+ +[0-9.]+ +[0-9.]+$' "$d/out.0" ||
    fail "cut-off: row 0 should be measured except the columns of B (+)"
grep -q '^result: 2 of 6 ranks did not join; 9 of 15 pairs unreachable or not tested$' "$d/out.0" ||
    fail "cut-off: result: $(grep result "$d/out.0")"
for r in 2 3; do
    grep -q "^probe of $table: rank $r (server 10.77.0.12, [0-9.]*:[0-9]*) is cut off: it could not reach rank 0 (10.77.0.11:$PORT) within $JOIN s: no answer within 1 s (connect timed out)$" \
        "$d/out.$r" || fail "cut-off: rank $r does not say it is cut off: $(cat "$d/out.$r" "$d/err.$r")"
    grep -q "^rank $r reaches 4 of 5 other ranks: " "$d/out.$r" ||
        fail "cut-off: rank $r does not say what it reaches: $(cat "$d/out.$r")"
    grep -q "^unreachable: rank $r ([0-9.:]*) -> rank 0 (server 10.77.0.11, 10.77.0.11:$PORT): connect: no answer within 1 s (connect timed out)$" \
        "$d/out.$r" || fail "cut-off: rank $r does not name rank 0 as unreachable"
done
[ "$(head -c 4 "$work/cutoff.png" 2>/dev/null | tail -c 3)" = PNG ] ||
    fail "cut-off: no heat map: $(cat "$d/err.0")"
echo "cut-off: rank 0 named server B, ranks 2 and 3 reported themselves, $secs s"

# --- 2. host C's ports blocked for the others -----------------------------------
block "$NETNS_SW" vC 10.77.0.13 $PORT
ip netns exec "$NETNS_SW" tc filter add dev vC parent 1: protocol ip prio 1 u32 \
    match ip dst 10.77.0.113 match ip dport $((PORT + 1)) 0xffff flowid 1:20
t0=$(date +%s)
run blocked --plot "$work/blocked.png"
secs=$(( $(date +%s) - t0 ))
unblock "$NETNS_SW" vC
d=$work/blocked
for r in 0 1 2 3 4 5; do
    [ "$(cat "$d/rc.$r")" = 1 ] || fail "blocked: rank $r exit $(cat "$d/rc.$r"), want 1: $(cat "$d/err.$r")"
done
grep -q '^cut off: server 10.77.0.13 (ranks 4-5): no rank of another server reaches its ports (8 timed out)$' \
    "$d/out.0" || fail "blocked: server C not named: $(grep -v '^ ' "$d/out.0")"
for s in 11 12; do
    grep -q "^unreachable: server 10.77.0.$s (ranks [0-3]-[0-3]) -> server 10.77.0.13 (ranks 4-5): connect: no answer within 1 s (connect timed out) (all 4 links)$" \
        "$d/out.0" || fail "blocked: no grouped line from server 10.77.0.$s"
done
grep -Eq '^ +4( +\+){4} +- +[0-9.]+$' "$d/out.0" || fail "blocked: row 4 should be + + + + - number"
grep -Eq '^ +1 +[0-9.]+ +- +[0-9.]+ +[0-9.]+ +X +X$' "$d/out.0" || fail "blocked: row 1"
grep -q '^result: 8 of 15 pairs unreachable$' "$d/out.0" || fail "blocked: $(grep result "$d/out.0")"
[ "$(head -c 4 "$work/blocked.png" 2>/dev/null | tail -c 3)" = PNG ] || fail "blocked: no heat map"
echo "blocked: rank 0 named server C, $secs s"

if [ "$failures" -gt 0 ]; then
    echo "netns probe: $failures failure(s)"
    for c in cutoff blocked; do echo "== $c rank 0"; cat "$work/$c/out.0" "$work/$c/err.0"; done
    NETNS_KEEP=1
    exit 1
fi
echo "netns probe: all cases passed"
exit 0
