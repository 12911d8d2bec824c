#!/bin/bash
# ranktable_v2.sh - jobs from version 2.0 (rank_list) rank tables across
# network namespaces: 3 hosts x 2 ranks (lib.sh), each rank checking every
# result against its own reference.
#
#   1. generated 2.0 table: each host a net_layer 0 instance, its two ranks
#      sharing its IPv4 address, ports LOOM_PORT_BASE + device_id
#                                          -> every rank exact
#   2. hand-written 2.0 table: a rank address per device (10.77.0.1h and
#      10.77.0.11h), host_port per rank, a net_layer 1 level and an EID
#      beside each IPv4 address (ignored) -> every rank exact, each rank
#      listening on its own net_layer 0 address and host_port
#   3. check --local on host B with table 2 names ranks 2 and 3 as here
#   4. a 2.0 table whose ranks have only EID addresses: every rank fails at
#      once, naming the JSON path and why
#
# Needs root and network namespaces; otherwise prints SKIP and exits 77.
# env: LOOM_BUILDDIR (default .), LOOM_SRCDIR, NETNS_KEEP=1 keeps the work
# directory.
set -u
: "${LOOM_BUILDDIR:=.}"
LOOM_BUILDDIR=$(cd "$LOOM_BUILDDIR" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
: "${LOOM_SRCDIR:=$(cd "$here/../.." && pwd)}"
. "$here/lib.sh"

NRANKS=6
RT=$LOOM_BUILDDIR/tools/loom-ranktable
work=$(mktemp -d "${TMPDIR:-/tmp}/loom-netns-v2.XXXXXX")
finish() {
    netns_cleanup
    [ "${NETNS_KEEP:-0}" = 1 ] && echo "work directory kept: $work" || rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM

for b in "$LOOM_BUILDDIR/tests/netns/netns_job" "$RT"; do
    [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

netns_setup
base_env=(LOOM_CONF_FILE=/dev/null LOOM_BOOTSTRAP_TIMEOUT=20 LOOM_TIMEOUT=30
          LOOM_PORT_BASE=29800 LOOM_CHUNK_SIZE=64K LOOM_DEBUG=INFO
          LOOM_DEBUG_SUBSYS=RT)


# --- 1. generated table ---------------------------------------------------
gen=$work/gen-2.0.json
"$RT" generate --version 2.0 --servers host-a,host-b,host-c \
    --host-ips 10.77.0.11,10.77.0.12,10.77.0.13 --devices 2 -o "$gen" ||
    fail "generate --version 2.0"
"$RT" check "$gen" >"$gen.check" 2>&1 || fail "generated table invalid: $(cat "$gen.check")"
grep -q '"rank_list"' "$gen" || fail "generated table has no rank_list"
netns_run_job generated "$work/generated" "$NRANKS" "${base_env[@]}" LOOM_RANK_TABLE="$gen"
netns_check_exact generated "$work/generated" "$NRANKS"
for r in 2 3; do
    grep -q "rank $r: listening on 10.77.0.12 (rank_addr_list) port $((29800 + r - 2))" \
        "$work/generated/err.$r" ||
        fail "generated: rank $r did not log listening on 10.77.0.12: $(grep listening "$work/generated/err.$r")"
done

# --- 2. hand-written table: an address per device, host_port ---------------
hand=$work/hand-2.0.json
{
    echo '{"version": "2.0", "status": "completed", "rank_count": 6, "rank_list": ['
    for r in 0 1 2 3 4 5; do
        h=$(( r / 2 + 1 )) d=$(( r % 2 ))
        addr=$([ "$d" = 0 ] && echo "10.77.0.1$h" || echo "10.77.0.11$h")
        cat <<JSON
  {"rank_id": $r, "device_id": $d, "local_id": $d, "host_port": $((29900 + r)),
   "level_list": [
     {"net_layer": 0, "net_instance_id": "rack0-host$h", "net_type": "TOPO_FILE_DESC",
      "net_attr": "", "rank_addr_list": [
        {"addr_type": "EID", "addr": "0000000000000000001000000000002$r", "ports": ["0/4"]},
        {"addr_type": "IPV4", "addr": "$addr", "ports": ["1/0"], "plane_id": "plane0"}]},
     {"net_layer": 1, "net_instance_id": "az0", "net_type": "CLOS", "net_attr": "",
      "rank_addr_list": [{"addr_type": "IPV4", "addr": "172.31.0.$r", "ports": ["0/5"]}]}]}$([ "$r" = 5 ] || echo ,)
JSON
    done
    echo ']}'
} >"$hand"
"$RT" check "$hand" >"$hand.check" 2>&1 || fail "hand-written table invalid: $(cat "$hand.check")"
grep -q '^warning: rank_list\[0\].level_list\[0\].rank_addr_list\[0\].addr_type: is "EID", which TCP hosts cannot use: ignored (the rank uses 10.77.0.11)$' \
    "$hand.check" || fail "check does not warn about the EID: $(cat "$hand.check")"
netns_run_job hand "$work/hand" "$NRANKS" "${base_env[@]}" LOOM_RANK_TABLE="$hand"
netns_check_exact hand "$work/hand" "$NRANKS"
for r in 0 1 2 3 4 5; do
    h=$(( r / 2 + 1 )) d=$(( r % 2 ))
    addr=$([ "$d" = 0 ] && echo "10.77.0.1$h" || echo "10.77.0.11$h")
    grep -q "rank $r: listening on $addr (rank_addr_list) port $((29900 + r))" "$work/hand/err.$r" ||
        fail "hand: rank $r did not log listening on $addr port $((29900 + r)): $(grep listening "$work/hand/err.$r")"
done

# --- 3. check --local on host B ---------------------------------------------
ip netns exec "loomB$NETNS_ID" env LOOM_CONF_FILE=/dev/null \
    "$RT" check "$hand" --local >"$work/local.out" 2>&1
rc=$?
grep -q "^2 ranks on this host, 0 with a problem$" "$work/local.out" && [ "$rc" = 0 ] ||
    fail "check --local on host B (exit $rc): $(cat "$work/local.out")"
for r in 2 3; do
    addr=$([ "$r" = 2 ] && echo 10.77.0.12 || echo 10.77.0.112)
    grep -q "^rank $r: server rack0-host2 device $((r - 2)): rank_addr_list $addr here$" \
        "$work/local.out" || fail "check --local: rank $r line: $(cat "$work/local.out")"
done
grep -q "^rank [0145]: server [^ ]* device [0-9]*: " "$work/local.out" &&
    fail "check --local on host B lists another host's rank"
echo "check --local on host B: ranks 2 and 3"

# --- 4. EID-only table: every rank fails at once, naming the path ----------
eid=$work/eid-2.0.json
sed -e '/"addr_type": "IPV4", "addr": "10\.77/d' -e 's/"ports": \["0\/4"\]}, *$/"ports": ["0\/4"]}]},/' \
    "$hand" >"$eid"
"$RT" check "$eid" >"$eid.check" 2>&1 && fail "EID-only table passes check"
t0=$(netns_time)
netns_run_job eid "$work/eid" "$NRANKS" "${base_env[@]}" LOOM_RANK_TABLE="$eid"
for r in $(seq 0 $((NRANKS - 1))); do
    read -r rc t_end <"$work/eid/end.$r"
    secs=$(awk -v a="$t_end" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    want="rank_list[0].level_list[0].rank_addr_list[0].addr_type: is \"EID\": a UB endpoint id, which TCP hosts cannot use"
    if [ "$rc" = 0 ] || [ "$rc" = killed ]; then
        fail "eid: rank $r exit $rc (wanted an error)"
    elif ! grep -qF "$want" "$work/eid/err.$r"; then
        fail "eid: rank $r's error lacks '$want': $(head -c 600 "$work/eid/err.$r")"
    elif ! awk -v s="$secs" 'BEGIN { exit !(s < 10) }'; then
        fail "eid: rank $r took $secs s to fail"
    fi
done
echo "eid: every rank failed at once: $(grep -m1 -F 'addr_type' "$work/eid/err.0" | head -c 200)"

if [ "$failures" -gt 0 ]; then
    echo "netns ranktable_v2: $failures failure(s)"
    NETNS_KEEP=1
    exit 1
fi
echo "netns ranktable_v2: all cases passed"
exit 0
