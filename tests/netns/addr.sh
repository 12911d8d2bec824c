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

check_exact() { netns_check_exact "$1" "$2" "$NRANKS"; }
# run_job CASE TABLE ENV...
run_job() {
    local name=$1 table=$2
    shift 2
    netns_run_job "$name" "$work/$name" "$NRANKS" "${base_env[@]}" \
        LOOM_RANK_TABLE="$table" "$@"
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

if [ "$failures" -gt 0 ]; then
    echo "netns addr: $failures failure(s)"
    NETNS_KEEP=1
    exit 1
fi
echo "netns addr: all cases passed"
exit 0
