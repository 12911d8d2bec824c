#!/bin/bash
# test_hccl_samples.sh - HCCL's 11 example programs (written for these
# tests from their documentation: compat/hccl/tests/samples) on Loom:
#
#   1. each builds as the examples' Makefiles build them (g++ -std=c++14
#      -Werror, -I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64
#      -lhccl -lascendcl) against the CANN-shaped folder of the build tree
#      (compat/ascend), with nothing else on the command line
#   2. one process, one thread per device, 2, 4 and 8 devices
#      (LOOM_ACL_DEVICES): HcclGetRootInfo, then every thread
#      HcclCommInitRootInfo and its call on its own stream
#   3. one process per rank from the 2-server loopback table
#      (etc/ranktables/two-server.json), HcclCommInitClusterInfo
#   4. one process per rank on 3 network namespaces (6 ranks), where
#      permitted
#
# Every rank checks its own result against a reference it computes. Each
# run is bounded by timeout(1) (or loom-run's --timeout, netns_wait), which
# end processes by PID.
set -u
builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../../.." && pwd)}
builddir=$(cd "$builddir" && pwd)
ASCEND_HOME_PATH=$builddir/compat/ascend
RUN=$builddir/tools/loom-run
RT=$builddir/tools/loom-ranktable
SAMPLES="send_recv batch_send_recv_ring allreduce broadcast allgather reduce_scatter
reduce alltoall alltoallv alltoallvc scatter"
for f in "$ASCEND_HOME_PATH/include/hccl/hccl.h" "$ASCEND_HOME_PATH/include/acl/acl.h" \
    "$ASCEND_HOME_PATH/lib64/libhccl.so" "$ASCEND_HOME_PATH/lib64/libascendcl.so" "$RUN"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing (make all first)"; exit 1; }
done
if ! command -v g++ >/dev/null 2>&1; then
    echo "SKIP: no g++ to build the samples with"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/test_hccl_samples.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
. "$srcdir/compat/hccl/tests/hccl_test_lib.sh"
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# The libraries the CANN-shaped folder points at, as set_env.sh would.
export LD_LIBRARY_PATH=$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LOOM_BOOTSTRAP_TIMEOUT=30 LOOM_CONF_FILE=/dev/null
unset RANK_TABLE_FILE RANK_ID RANK_SIZE DEVICE_ID LOOM_RANK_TABLE LOOM_RANK \
    LOOM_ACL_DEVICES HCCL_CONNECT_TIMEOUT 2>/dev/null

# --- 1. build ---------------------------------------------------------------
built=""
for s in $SAMPLES; do
    if g++ -std=c++14 -Wall -Wextra -Werror -fstack-protector-strong -fPIE -pie -O2 \
        "$srcdir/compat/hccl/tests/samples/$s.cc" -I"$ASCEND_HOME_PATH/include" \
        -L"$ASCEND_HOME_PATH/lib64" -lhccl -lascendcl -o "$work/$s" 2>"$work/$s.err"; then
        built="$built $s"
    else
        fail "$s does not build: $(head -c 1500 "$work/$s.err")"
    fi
done
[ -n "$built" ] && pass "built as C++14 -Werror against $ASCEND_HOME_PATH:$built"
# where the installed folder is announced
if command -v pkg-config >/dev/null 2>&1 && [ -f "$builddir/loom-hccl.pc" ]; then
    home=$(PKG_CONFIG_PATH=$builddir pkg-config --variable=ascend_home loom-hccl 2>&1)
    case $home in
    */loom/ascend) pass "pkg-config --variable=ascend_home loom-hccl: $home" ;;
    *) fail "pkg-config --variable=ascend_home loom-hccl: $home" ;;
    esac
fi

# --- 2. threads in one process ------------------------------------------------
for n in 2 4 8; do
    ok=""
    for s in $built; do
        LOOM_ACL_DEVICES=$n timeout -s KILL 120 "$work/$s" >"$work/$s.$n.out" 2>&1
        rc=$?
        if [ "$rc" = 0 ] && grep -q "^$s: $n ranks ok$" "$work/$s.$n.out" &&
            ! grep -q FAIL "$work/$s.$n.out"; then
            ok="$ok $s"
        else
            fail "$s on $n devices: exit $rc: $(tail -c 1500 "$work/$s.$n.out")"
        fi
    done
    [ -n "$ok" ] && pass "$n devices (threads, root info):$ok"
done

# --- 3. a process per rank, 2-server loopback table ----------------------------
# What an HCCL launcher sets, from what loom-run or the netns harness
# gives each rank; $1 is the sample.
cat >"$work/rank.sh" <<EOF
#!/bin/sh
export RANK_ID=\$LOOM_RANK RANK_SIZE=\$LOOM_NRANKS RANK_TABLE_FILE=\$LOOM_RANK_TABLE
export DEVICE_ID=\$((LOOM_RANK % 2))
exec "\$@"
EOF
chmod +x "$work/rank.sh"
ok=""
for s in $built; do
    next_port_base
    timeout -s KILL 120 "$RUN" -n 4 --timeout 100 \
        --rank-table "$srcdir/etc/ranktables/two-server.json" -- \
        "$work/rank.sh" "$work/$s" >"$work/$s.ts.out" 2>"$work/$s.ts.err"
    rc=$?
    good=0
    for r in 0 1 2 3; do
        grep -q "^\[$r\] $s: rank $r of 4 ok$" "$work/$s.ts.out" && good=$((good + 1))
    done
    if [ "$rc" = 0 ] && [ "$good" = 4 ]; then
        ok="$ok $s"
    else
        fail "$s on two-server.json: exit $rc, $good of 4 ranks ok: $(tail -c 1000 "$work/$s.ts.out") $(head -c 1000 "$work/$s.ts.err")"
    fi
done
[ -n "$ok" ] && pass "4 processes on two-server.json (HcclCommInitClusterInfo):$ok"

# --- 4. network namespaces ------------------------------------------------------
netns() {
    . "$srcdir/tests/netns/lib.sh"
    hccl_netns_setup || return 1
    local s ok=""
    for s in $built; do
        NETNS_PROG=$work/rank.sh netns_start "$work/netns.$s" 6 \
            LOOM_RANK_TABLE="$work/hosts.json" LOOM_NRANKS=6 LOOM_PORT_BASE=29800 \
            LD_LIBRARY_PATH="$LD_LIBRARY_PATH" -- "$work/$s"
        netns_wait "$work/netns.$s" 6 120 || echo "FAIL: netns: $s: ranks killed after 120 s"
        [ "$(hccl_netns_count "$work/netns.$s" "^$s: rank @R@ of 6 ok$")" = 6 ] && ok="$ok $s"
    done
    echo "ok: 6 processes on 3 network namespaces (host-NIC table):$ok"
    [ "$ok" = "$built" ] || return 1
}
hccl_netns_part netns

if [ "$failures" -gt 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all HCCL sample checks passed"
exit 0
