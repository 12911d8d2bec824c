#!/bin/bash
# addr.sh - rank tables on ordinary hosts, over network namespaces: 3 hosts
# x 2 ranks (lib.sh), each rank checking every result.
#
#   1. host-NIC table (a host_ip per server, no device_ip): the two ranks of
#      a host share its address          -> every rank exact
#   2. Ascend-style table whose device_ip no host owns, LOOM_ADDRESS=auto:
#      each rank falls back to its host_ip -> every rank exact
#   3. the same table, LOOM_ADDRESS=device -> every rank fails at once, its
#      error naming the device_ip, the errno text and the fix
#   4. check --local on host B names ranks 2 and 3, and host_ip as used
#   5. the seeds' one-device table (rank_table_1p_0.json) in a namespace
#      with no network at all, and on host A, which owns none of its
#      addresses                          -> the one rank exact, both times
#   6. generated version 2.0 table: each host a net_layer 0 instance, its
#      two ranks sharing its IPv4 address -> every rank exact
#   7. hand-written 2.0 table: an address per device, host_port per rank, a
#      net_layer 1 level and an EID beside each IPv4 address (ignored)
#                                         -> every rank exact, listening on
#                                            its own address and host_port
#   8. check --local on host B with table 7 names ranks 2 and 3 as here
#   9. a 2.0 table whose ranks have only EID addresses: every rank fails at
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
work=$(mktemp -d "${TMPDIR:-/tmp}/loom-netns-addr.XXXXXX")
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
          LOOM_PORT_BASE=29700 LOOM_CHUNK_SIZE=64K LOOM_DEBUG=INFO
          LOOM_DEBUG_SUBSYS=RT)

# check_exact CASE DIR: every rank ended 0 with "RESULT ... ok=1".
check_exact() {
    local name=$1 dir=$2 r rc
    for r in $(seq 0 $((NRANKS - 1))); do
        rc=$(cut -d' ' -f1 "$dir/end.$r")
        if [ "$rc" != 0 ] || ! grep -q "^RESULT rank=$r ok=1 " "$dir/out.$r"; then
            fail "$name: rank $r exit $rc: $(head -c 600 "$dir/err.$r") $(tail -n 2 "$dir/out.$r")"
        fi
    done
    echo "$name: $(grep -h '^RESULT' "$dir"/out.* | wc -l)/$NRANKS ranks exact" \
         "($(grep -h '^RESULT' "$dir/out.0"))"
}

# run_job CASE TABLE ENV...: start the job, wait (60 s at most).
run_job() {
    local name=$1 table=$2 dir=$work/$1
    shift 2
    netns_start "$dir" "$NRANKS" "${base_env[@]}" LOOM_RANK_TABLE="$table" "$@" \
        -- -i 1 -c 0,1,7,4099,65537
    netns_wait "$dir" "$NRANKS" 60 || fail "$name: ranks still running after 60 s were killed"
}

# --- 1. host-NIC table ----------------------------------------------------
hostnic=$work/host-nic.json
"$RT" generate --servers 10.77.0.11,10.77.0.12,10.77.0.13 --devices 2 -o "$hostnic" ||
    fail "generate host-NIC table"
grep -q device_ip "$hostnic" && fail "the host-NIC table has a device_ip"
run_job host-nic "$hostnic"
check_exact host-nic "$work/host-nic"
# both ranks of host A listened on its one address
for r in 0 1; do
    grep -q "rank $r: listening on 10.77.0.11 (host_ip)" "$work/host-nic/err.$r" ||
        fail "host-nic: rank $r did not log listening on host_ip 10.77.0.11"
done

# --- 2, 3. Ascend-style table: device_ip that no host owns ----------------
ascend=$work/ascend.json
{
    echo '{"version": "1.0", "server_count": "3", "status": "completed", "server_list": ['
    for h in 1 2 3; do
        r0=$(( 2 * (h - 1) ))
        echo "  {\"server_id\": \"10.77.0.1$h\", \"host_ip\": \"10.77.0.1$h\", \"device\": ["
        echo "    {\"device_id\": \"0\", \"device_ip\": \"192.168.77.$((10 * h))\", \"rank_id\": \"$r0\"},"
        echo "    {\"device_id\": \"1\", \"device_ip\": \"192.168.77.$((10 * h + 1))\", \"rank_id\": \"$((r0 + 1))\"}"
        [ "$h" = 3 ] && echo '  ]}' || echo '  ]},'
    done
    echo ']}'
} >"$ascend"
"$RT" check "$ascend" >"$work/ascend.check" 2>&1 || { cat "$work/ascend.check"; fail "ascend table invalid"; }

run_job ascend-auto "$ascend" LOOM_ADDRESS=auto
check_exact ascend-auto "$work/ascend-auto"
grep -q "rank 3: LOOM_ADDRESS=auto: using host_ip 10.77.0.12, as this host cannot use device_ip 192.168.77.21: Cannot assign requested address" \
    "$work/ascend-auto/err.3" || fail "ascend-auto: rank 3 did not log its choice: $(head -c 600 "$work/ascend-auto/err.3")"

t0=$(netns_time)
run_job ascend-device "$ascend" LOOM_ADDRESS=device
for r in $(seq 0 $((NRANKS - 1))); do
    read -r rc t_end <"$work/ascend-device/end.$r"
    msg=$(sed -n 's/^MESSAGE //p' "$work/ascend-device/err.$r" | head -n 1)
    secs=$(awk -v a="$t_end" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    h=$(( r / 2 + 1 )) d=$(( r % 2 ))
    want="rank $r: LOOM_ADDRESS=device, but this host cannot use device_ip 192.168.77.$((10 * h + d)): Cannot assign requested address"
    if [ "$rc" = 0 ] || [ "$rc" = killed ]; then
        fail "ascend-device: rank $r exit $rc (wanted an error)"
    elif ! printf '%s' "$msg" | grep -qF "$want"; then
        fail "ascend-device: rank $r: '$msg' lacks '$want'"
    elif ! printf '%s' "$msg" | grep -qF "set LOOM_ADDRESS=auto or host to use the host's address 10.77.0.1$h"; then
        fail "ascend-device: rank $r's error gives no fix: '$msg'"
    elif ! awk -v s="$secs" 'BEGIN { exit !(s < 10) }'; then
        fail "ascend-device: rank $r took $secs s to fail"
    fi
done
echo "ascend-device: every rank failed at once: $(sed -n 's/^MESSAGE //p' "$work/ascend-device/err.0" | head -c 200)..."

# --- 4. check --local on host B -------------------------------------------
nsB=loomB$NETNS_ID
ip netns exec "$nsB" env LOOM_CONF_FILE=/dev/null LOOM_PORT_BASE=29700 \
    "$RT" check "$ascend" --local >"$work/local.out" 2>&1
rc=$?
grep -q "^2 ranks on this host, 0 with a problem$" "$work/local.out" && [ "$rc" = 0 ] ||
    fail "check --local on host B (exit $rc): $(cat "$work/local.out")"
grep -q "^rank 2: .*device_ip 192.168.77.20 not here (Cannot assign requested address); host_ip 10.77.0.12 here$" \
    "$work/local.out" || fail "check --local: rank 2 line: $(cat "$work/local.out")"
grep -q "^rank [0145]: server [^ ]* device [0-9]*: " "$work/local.out" && fail "check --local on host B lists another host's rank"
echo "check --local on host B: ranks 2 and 3, host_ip 10.77.0.12"

# --- 5. the seeds' one-device table: no network, and a host with one ------
# Its device_ip and server_id are an NPU's and a server's this host does not
# own; a one-rank job needs neither.
nsN=loomN$NETNS_ID
netns_add "$nsN"       # lo stays down: no address, no route
for ns in "$nsN" "loomA$NETNS_ID"; do
    what=$([ "$ns" = "$nsN" ] && echo "no network" || echo "on host A (10.77.0.11)")
    ip netns exec "$ns" env LOOM_CONF_FILE=/dev/null \
        LOOM_RANK_TABLE="$LOOM_SRCDIR/tests/data/ranktables/valid-seed-1p.json" LOOM_RANK=0 \
        timeout -s KILL 30 "$LOOM_BUILDDIR/tests/netns/netns_job" -i 1 -c 0,1,7,4099 \
        >"$work/seed.out" 2>"$work/seed.err"
    rc=$?
    if [ "$rc" != 0 ] || ! grep -q '^RESULT rank=0 ok=1 ' "$work/seed.out"; then
        fail "seed 1p table, $what: exit $rc: $(head -c 600 "$work/seed.err")"
    else
        echo "seed rank_table_1p_0.json, $what: $(cat "$work/seed.out")"
    fi
done

# --- 6. version 2.0, generated: ranks of a host share its address --------
gen=$work/gen-2.0.json
"$RT" generate --version 2.0 --servers host-a,host-b,host-c \
    --host-ips 10.77.0.11,10.77.0.12,10.77.0.13 --devices 2 -o "$gen" ||
    fail "generate --version 2.0"
"$RT" check "$gen" >"$gen.check" 2>&1 || fail "generated table invalid: $(cat "$gen.check")"
grep -q '"rank_list"' "$gen" || fail "generated table has no rank_list"
run_job generated "$gen"
check_exact generated "$work/generated"
for r in 2 3; do
    grep -q "rank $r: listening on 10.77.0.12 (rank_addr_list) port $((29700 + r - 2))" \
        "$work/generated/err.$r" ||
        fail "generated: rank $r did not log listening on 10.77.0.12: $(grep listening "$work/generated/err.$r")"
done

# --- 7. version 2.0, hand-written: an address per device, host_port ------
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
run_job hand "$hand"
check_exact hand "$work/hand"
for r in 0 1 2 3 4 5; do
    h=$(( r / 2 + 1 )) d=$(( r % 2 ))
    addr=$([ "$d" = 0 ] && echo "10.77.0.1$h" || echo "10.77.0.11$h")
    grep -q "rank $r: listening on $addr (rank_addr_list) port $((29900 + r))" "$work/hand/err.$r" ||
        fail "hand: rank $r did not log listening on $addr port $((29900 + r)): $(grep listening "$work/hand/err.$r")"
done

# --- 8. check --local on host B, version 2.0 -----------------------------
ip netns exec "loomB$NETNS_ID" env LOOM_CONF_FILE=/dev/null \
    "$RT" check "$hand" --local >"$work/local2.out" 2>&1
rc=$?
grep -q "^2 ranks on this host, 0 with a problem$" "$work/local2.out" && [ "$rc" = 0 ] ||
    fail "check --local on host B (exit $rc): $(cat "$work/local2.out")"
for r in 2 3; do
    addr=$([ "$r" = 2 ] && echo 10.77.0.12 || echo 10.77.0.112)
    grep -q "^rank $r: server rack0-host2 device $((r - 2)): rank_addr_list $addr here$" \
        "$work/local2.out" || fail "check --local: rank $r line: $(cat "$work/local2.out")"
done
grep -q "^rank [0145]: server [^ ]* device [0-9]*: " "$work/local2.out" &&
    fail "check --local on host B lists another host's rank"
echo "check --local on host B: ranks 2 and 3"

# --- 9. version 2.0, EID addresses only: refused at once -----------------
eid=$work/eid-2.0.json
sed -e '/"addr_type": "IPV4", "addr": "10\.77/d' -e 's/"ports": \["0\/4"\]}, *$/"ports": ["0\/4"]}]},/' \
    "$hand" >"$eid"
"$RT" check "$eid" >"$eid.check" 2>&1 && fail "EID-only table passes check"
t0=$(netns_time)
run_job eid "$eid"
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
    echo "netns addr: $failures failure(s)"
    NETNS_KEEP=1
    exit 1
fi
echo "netns addr: all cases passed"
exit 0
