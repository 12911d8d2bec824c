#!/bin/bash
# test_hccl.sh - the program written against HCCL's documentation
# (hccl_api_test) on Loom:
#
#   1. hccl/hccl.h and hccl/hccl_types.h compile alone in strict C99 and in
#      C++ (when a C++ compiler is there); pkg-config loom-hccl names the
#      folder they install to
#   2. 2, 3 and 4 ranks on a single-server table (loom-run's), joined by
#      HcclCommInitClusterInfoConfig from RANK_TABLE_FILE and RANK_ID
#   3. 4 ranks on the 2-server loopback table (etc/ranktables/two-server.json)
#   4. 3 ranks joined by HcclGetRootInfo + HcclCommInitRootInfo
#   5. 6 ranks on 3 network namespaces (a host-NIC table), where permitted
#
# Every rank checks every result itself (hccl_api_test). Each job is bounded
# by loom-run's --timeout and timeout(1) around it, which end ranks by PID.
set -u
builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../../.." && pwd)}
builddir=$(cd "$builddir" && pwd)
RUN=$builddir/tools/loom-run
RT=$builddir/tools/loom-ranktable
PROG=$builddir/compat/hccl/tests/hccl_api_test
for b in "$RUN" "$RT" "$PROG"; do
    [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/test_hccl.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

. "$srcdir/compat/hccl/tests/hccl_test_lib.sh"
export LOOM_BOOTSTRAP_TIMEOUT=20 LOOM_CONF_FILE=/dev/null
unset RANK_TABLE_FILE RANK_ID RANK_SIZE DEVICE_ID HCCL_CONNECT_TIMEOUT \
    LOOM_RANK_TABLE LOOM_RANK 2>/dev/null

# What an HCCL launcher sets, from what loom-run gives each rank. $1: the
# devices per server (DEVICE_ID = rank mod it).
cat >"$work/rank.sh" <<EOF
#!/bin/sh
export RANK_ID=\$LOOM_RANK RANK_SIZE=\$LOOM_NRANKS
[ -n "\${LOOM_RANK_TABLE:-}" ] && export RANK_TABLE_FILE=\$LOOM_RANK_TABLE
export DEVICE_ID=\$((LOOM_RANK % \${HCCL_TEST_DEVICES:-\$LOOM_NRANKS}))
exec "$PROG" "\$@"
EOF
chmod +x "$work/rank.sh"

# --- 1. the headers alone ---------------------------------------------------
printf '#include <hccl/hccl.h>\n#include <hccl/hccl_types.h>\nint main(void) { HcclCommConfig c; HcclCommConfigInit(&c); return (int)sizeof(HcclRootInfo) - HCCL_ROOT_INFO_BYTES; }\n' >"$work/h.c"
if command -v cc >/dev/null 2>&1; then
    if cc -std=c99 -pedantic -Wall -Wextra -Werror -I"$srcdir/compat/hccl/include" -I"$srcdir/compat/acl/include" \
        -o "$work/h" "$work/h.c" 2>"$work/h.err" && "$work/h"; then
        pass "headers: C99 -pedantic, sizeof(HcclRootInfo) == HCCL_ROOT_INFO_BYTES"
    else
        fail "headers do not compile as C99: $(cat "$work/h.err")"
    fi
fi
if command -v c++ >/dev/null 2>&1; then
    cp "$work/h.c" "$work/h.cc"
    if c++ -std=c++11 -Wall -Wextra -Werror -I"$srcdir/compat/hccl/include" -I"$srcdir/compat/acl/include" \
        -fsyntax-only "$work/h.cc" 2>"$work/hxx.err"; then
        pass "headers: C++11"
    else
        fail "headers do not compile as C++: $(cat "$work/hxx.err")"
    fi
fi
if command -v pkg-config >/dev/null 2>&1 && [ -f "$builddir/loom-hccl.pc" ]; then
    flags=$(PKG_CONFIG_PATH=$builddir pkg-config --cflags --libs loom-hccl 2>&1)
    case $flags in
    *"/include/loom-hccl"*"-lloom_hccl"*"-lloom"*) pass "pkg-config loom-hccl: $flags" ;;
    *) fail "pkg-config loom-hccl: $flags" ;;
    esac
fi

# job NAME N [LOOM-RUN OPTIONS...] -- [PROGRAM ARGS...]: run N ranks; every
# rank must print its ok line.
job() {
    local name=$1 n=$2 opts=() r rc
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    next_port_base
    timeout -s KILL 90 "$RUN" -n "$n" --timeout 75 "${opts[@]}" -- \
        "$work/rank.sh" "$@" >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    local ok=0
    for r in $(seq 0 $((n - 1))); do
        grep -q "^\[$r\] hccl_api_test rank $r of $n: ok" "$work/$name.out" && ok=$((ok + 1))
    done
    if [ "$rc" = 0 ] && [ "$ok" = "$n" ]; then
        pass "$name: $n ranks ok ($(sed -n 's/^\[0\] hccl_api_test rank 0 of [0-9]*: ok (\(.*\))$/\1/p' "$work/$name.out"))"
    else
        fail "$name: exit $rc, $ok of $n ranks ok: $(head -c 1500 "$work/$name.err")"
    fi
}

# --- 2. single server, 2, 3, 4 ranks ------------------------------------------
for n in 2 3 4; do
    job "single-$n" "$n"
done

# --- 3. the 2-server loopback table -------------------------------------------
HCCL_TEST_DEVICES=2 job two-server 4 --rank-table "$srcdir/etc/ranktables/two-server.json"

# --- 4. root info -------------------------------------------------------------
job root-info 3 -- -r "$work/root.info"

# --- 5. network namespaces ----------------------------------------------------
netns() {
    . "$srcdir/tests/netns/lib.sh"
    hccl_netns_setup || return 1
    local dir=$work/netns
    NETNS_PROG=$work/rank.sh netns_start "$dir" 6 LOOM_RANK_TABLE="$work/hosts.json" \
        LOOM_NRANKS=6 HCCL_TEST_DEVICES=2 LOOM_PORT_BASE=29800 --
    netns_wait "$dir" 6 90 || echo "FAIL: netns: ranks killed after 90 s"
    [ "$(hccl_netns_count "$dir" '^hccl_api_test rank @R@ of 6: ok')" = 6 ] || return 1
    echo "ok: netns: 6 ranks on 3 hosts (host-NIC table) ok ($(sed -n 's/^hccl_api_test rank 0 of 6: ok (\(.*\))$/\1/p' "$dir/out.0"))"
}
hccl_netns_part netns

if [ "$failures" -gt 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all HCCL API checks passed"
exit 0
