#!/bin/bash
# run.sh - multi-host faults over network namespaces: 3 hosts x 2 ranks
# joined through a rank table, each rank checking every result.
#
#   1. healthy                   -> every rank exact
#   2. tbf: host C shaped to 100mbit both ways -> every rank exact
#   3. netem delay/loss/reorder on host C (where the kernel has netem)
#                                -> every rank exact
#   4. host C's eth0 taken down mid-collective -> every rank exits non-zero
#      within LOOM_TIMEOUT + margin, its error names a rank; none hangs
#
# Needs root and network namespaces; otherwise prints SKIP and exits 77.
# Prints a table of each fault case: rank, exit, time, reported error.
# env: LOOM_BUILDDIR (default .), NETNS_KEEP=1 keeps the work directory.
set -u
: "${LOOM_BUILDDIR:=.}"
LOOM_BUILDDIR=$(cd "$LOOM_BUILDDIR" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

NRANKS=6
FAULT_TIMEOUT=${NETNS_FAULT_TIMEOUT:-10}   # LOOM_TIMEOUT in the fault case
MARGIN=5                                     # seconds on top of it

work=$(mktemp -d "${TMPDIR:-/tmp}/loom-netns.XXXXXX")
finish() {
    netns_cleanup
    [ "${NETNS_KEEP:-0}" = 1 ] && echo "work directory kept: $work" || rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM

[ -x "$LOOM_BUILDDIR/tests/netns/netns_job" ] || {
    echo "FAIL: $LOOM_BUILDDIR/tests/netns/netns_job not built"; exit 1; }

netns_setup
table=$work/table.json
netns_write_table "$table" || { echo "FAIL: the generated rank table is invalid"; exit 1; }

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The variables every rank gets. LOOM_CONF_FILE=/dev/null: no host config.
base_env=(LOOM_RANK_TABLE="$table" LOOM_CONF_FILE=/dev/null LOOM_BOOTSTRAP_TIMEOUT=30
          LOOM_PORT_BASE=29600 LOOM_CHUNK_SIZE=64K)

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

# run_exact CASE ARGS...: start the job, wait (90 s at most), check.
run_exact() {
    local name=$1 dir=$work/$1
    shift
    netns_start "$dir" "$NRANKS" "${base_env[@]}" LOOM_TIMEOUT=60 -- "$@"
    netns_wait "$dir" "$NRANKS" 90 || fail "$name: ranks still running after 90 s were killed"
    check_exact "$name" "$dir"
}

# --- 1. healthy -------------------------------------------------------------
run_exact healthy -i 2 -c 0,1,7,4099,262147

# --- 2. tbf: host C at 100mbit, both directions -----------------------------
nsC=loomC$NETNS_ID
if ! command -v tc >/dev/null 2>&1; then
    echo "tbf, netem: no tc command (iproute2's tc); shaped-link cases not run"
elif ip -n "$nsC" link show eth0 >/dev/null &&
   err=$(ip netns exec "$nsC" tc qdisc add dev eth0 root tbf rate 100mbit burst 64kb latency 50ms 2>&1) &&
   err=$(ip netns exec "$NETNS_SW" tc qdisc add dev vC root tbf rate 100mbit burst 64kb latency 50ms 2>&1); then
    run_exact tbf-100mbit -i 1 -c 1,4099,262147
    ip netns exec "$nsC" tc qdisc del dev eth0 root
    ip netns exec "$NETNS_SW" tc qdisc del dev vC root
else
    fail "tbf: tc qdisc add ... tbf failed: $err"
fi

# --- 3. netem, where the kernel has it --------------------------------------
if ! command -v tc >/dev/null 2>&1; then
    :
elif err=$(ip netns exec "$nsC" tc qdisc add dev eth0 root netem delay 5ms 2ms loss 1% reorder 25% 50% 2>&1); then
    run_exact netem-delay-loss-reorder -i 1 -c 1,4099,65537
    ip netns exec "$nsC" tc qdisc del dev eth0 root
else
    echo "netem: not available on this kernel (tc said: $err); delay/loss/reorder case not run"
fi

# --- 4. host C's link down mid-collective -----------------------------------
dir=$work/linkdown
netns_start "$dir" "$NRANKS" "${base_env[@]}" LOOM_TIMEOUT="$FAULT_TIMEOUT" -- -f -c 1,4099,65537
# wait until every rank has finished two rounds, so the job is mid-stream
for _ in $(seq 300); do
    ready=0
    for r in $(seq 0 $((NRANKS - 1))); do
        grep -q '^PROGRESS .* iter=1$' "$dir/out.$r" 2>/dev/null && ready=$((ready + 1))
    done
    [ "$ready" = "$NRANKS" ] && break
    sleep 0.1
done
[ "$ready" = "$NRANKS" ] || fail "link-down: only $ready of $NRANKS ranks got going in 30 s"
t_down=$(netns_time)
ip -n "$nsC" link set eth0 down
limit=$((FAULT_TIMEOUT + MARGIN))
netns_wait "$dir" "$NRANKS" $((limit + 20)) || fail "link-down: a rank hung (killed at $((limit + 20)) s)"

echo
echo "fault: host C (ranks 4, 5) eth0 down; LOOM_TIMEOUT=$FAULT_TIMEOUT s; bound $limit s"
printf '%-5s %-5s %-8s %s\n' rank exit "time(s)" "reported error"
for r in $(seq 0 $((NRANKS - 1))); do
    read -r rc t_end <"$dir/end.$r"
    secs=$(awk -v a="$t_end" -v b="$t_down" 'BEGIN { if (a == "") print "-"; else printf "%.2f", a - b }')
    [ "$rc" = killed ] && secs=hung
    msg=$(sed -n 's/^MESSAGE //p' "$dir/err.$r" | head -n 1)
    what=$(sed -n 's/^ERROR rank=[0-9]* op=\([a-z_]*\) .* result=\(.*\)$/\1: \2/p' "$dir/err.$r" | head -n 1)
    printf '%-5s %-5s %-8s %s\n' "$r" "$rc" "$secs" "${what:-no error line}: ${msg:-(none)}"
    if [ "$rc" = 0 ] || [ "$rc" = killed ]; then
        fail "link-down: rank $r exit $rc (wanted an error)"
    elif ! printf '%s' "$msg" | grep -q 'rank [0-9]'; then
        fail "link-down: rank $r's error does not name a rank: '$msg' $(head -c 400 "$dir/err.$r")"
    elif ! awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s + 0 <= l) }'; then
        fail "link-down: rank $r reported after $secs s (bound $limit s)"
    fi
done
echo

if [ "$failures" -gt 0 ]; then
    echo "netns: $failures failure(s)"
    NETNS_KEEP=1
    exit 1
fi
echo "netns: all cases passed"
exit 0
