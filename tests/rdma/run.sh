#!/bin/bash
# run.sh - Loom on hosts with RDMA NICs: what the hosts have, then every RDMA
# path Loom can take there, tested. The one script an operator runs.
#
#   tests/rdma/run.sh RANKTABLE [HOST...]   inventory, then the tests
#   tests/rdma/run.sh -i [HOST...]          inventory only
#   tests/rdma/run.sh -h                    this text
#
# RANKTABLE is the job's rank table (HCCL JSON), its device_ip values the
# RDMA NICs' addresses; HOST... are ssh targets (BatchMode: keys, no
# password) running the ranks of the table's servers, in the table's order,
# one per server; with none, every rank runs on this host. The build tree
# (LOOM_BUILDDIR, default .) and RANKTABLE must be at the same paths on
# every host (a shared file system, or copies).
#
# 1. Inventory of every host: RDMA devices and ports (sysfs), ibv_devinfo -l,
#    libfabric's providers (fi_info -l) and its verbs and efa domains
#    (fi_info -p), ib_write_bw and fi_pingpong, ulimit -l, and which of
#    Loom's transports the build has and can run (loom-info).
# 2. For each RDMA path (RDMA_PATHS, default "verbs ofi-verbs ofi-efa") that
#    every host has, the cases of tests/rdma/cases.sh (tests/run-matrix's
#    rdma level, with the transport's config from tests/matrix/):
#    the collective matrix, results bit for bit against tcp, all_reduce_perf
#    beside ib_write_bw (perftest) and fi_pingpong where installed, and
#    kill -9 of a rank:
#      verbs      Loom's verbs transport (LOOM_TRANSPORT=verbs), on
#                 InfiniBand or RoCE devices
#      ofi-verbs  LOOM_TRANSPORT=ofi LOOM_OFI_PROVIDER='verbs;ofi_rxm'
#      ofi-efa    LOOM_TRANSPORT=ofi LOOM_OFI_PROVIDER=efa, on EFA devices
#    A path a host lacks is skipped with the reason.
#
# Needs: bash, python3 and ssh to every HOST; an RDMA device on every host
# (/sys/class/infiniband); a Loom build with verbs (libibverbs-dev) or ofi
# (libfabric-dev); for the bandwidth beside Loom's, perftest and
# libfabric-bin (fi_info, fi_pingpong); ulimit -l large enough to pin the
# registered memory (unlimited is usual).
#
# Exit status: 0 every path run passed; 1 a case failed; 2 usage, or no
# Loom build at LOOM_BUILDDIR; 77 nothing to test: no RDMA hardware, or no
# path that both the hosts and the build have (as a skipped test).
# env: LOOM_BUILDDIR, RDMA_PATHS, and what cases.sh reads
#      (RDMA_CASES, RDMA_SIZE, RDMA_KILL_BOUND, RDMA_KEEP, IB_WRITE_BW,
#      FI_PINGPONG, RDMA_IB_DEV, RDMA_IB_GID).
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${LOOM_BUILDDIR:=.}"
: "${RDMA_PATHS:=verbs ofi-verbs ofi-efa}"

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

inventory_only=0
while getopts hi opt; do
    case $opt in
        h) usage; exit 0 ;;
        i) inventory_only=1 ;;
        *) echo "usage: $0 [-i] RANKTABLE [HOST...]   ($0 -h says more)"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

table=""
if [ $inventory_only = 0 ] && [ $# -gt 0 ]; then
    table=$1
    shift
    if [ ! -r "$table" ]; then
        echo "usage: $0 [-i] RANKTABLE [HOST...]: cannot read the rank table '$table'"
        exit 2
    fi
fi
hosts=("$@")
B=$(cd "$LOOM_BUILDDIR" 2>/dev/null && pwd) || B=$LOOM_BUILDDIR

# shellcheck source=tests/rdma/hosts.sh
. "$here/hosts.sh"

# inventory BUILDDIR: what this host has, one "what: value" line each;
# lines starting with @ are flags for the choice of paths, not printed
inventory() {
    local B=$1 d p n=0 drv t doms
    echo "host: $(hostname) (kernel $(uname -r))"
    for d in /sys/class/infiniband/*; do
        [ -d "$d/ports" ] || continue
        drv=$(readlink -f "$d/device/driver" 2>/dev/null)
        drv=${drv##*/}
        for p in "$d"/ports/*; do
            n=$((n + 1))
            echo "device: ${d##*/} port ${p##*/}: $(cat "$p/state" 2>/dev/null)," \
                "$(cat "$p/link_layer" 2>/dev/null), $(cat "$p/rate" 2>/dev/null), driver ${drv:-?}"
        done
        case $drv in efa) echo "@efa" ;; *) echo "@ibdev" ;; esac
    done
    [ $n -gt 0 ] || echo "device: none (/sys/class/infiniband is empty or absent: no RDMA device or driver)"
    if command -v ibv_devinfo >/dev/null; then
        ibv_devinfo -l 2>&1 | sed 's/^ */ibv_devinfo -l: /'
    else
        echo "ibv_devinfo: not installed (ibverbs-utils)"
    fi
    if command -v fi_info >/dev/null; then
        echo "@fi_info"
        echo "fi_info -l: $(fi_info -l 2>&1 | sed -n 's/^\([^ ]*\):$/\1/p' | paste -sd ' ')"
        for t in verbs efa; do
            doms=$(fi_info -p "$t" 2>/dev/null | awk '$1 == "domain:" {print $2}' | sort -u | paste -sd ' ')
            echo "fi_info -p $t: ${doms:-none}"
            [ -z "$doms" ] || echo "@fi_$t"
        done
    else
        echo "fi_info: not installed (libfabric-bin): libfabric's providers unknown"
    fi
    for t in ib_write_bw fi_pingpong; do
        if command -v $t >/dev/null; then echo "tool: $t $(command -v $t)"; else echo "tool: $t not installed"; fi
    done
    echo "locked memory (ulimit -l): $(ulimit -l)"
    if [ -x "$B/tools/loom-info" ]; then
        "$B/tools/loom-info" 2>&1 | sed -n 's/^transport *: /loom transport: /p'
    else
        echo "@noloom"
        echo "loom: no $B/tools/loom-info (set LOOM_BUILDDIR to the build tree)"
    fi
}

# inventory of every host (only this one when all ranks run here)
nh=${#hosts[@]}
[ "$nh" -gt 0 ] || nh=1
declare -a inv
for h in $(seq 0 $((nh - 1))); do
    inv[h]=$( { declare -f inventory; echo "inventory '$B'"; } | run_on "$h" "bash -s" 2>&1)
    echo "== ${hosts[$h]:-this host}"
    grep -v '^@' <<<"${inv[h]}" | sed 's/^/  /'
done

# has FLAG: every host has it; lacking FLAG: the hosts that do not
has() {
    local h
    for h in $(seq 0 $((nh - 1))); do grep -qx "@$1" <<<"${inv[h]}" || return 1; done
}
lacking() {
    local h out=""
    for h in $(seq 0 $((nh - 1))); do
        grep -qx "@$1" <<<"${inv[h]}" || out="$out ${hosts[$h]:-this host}"
    done
    echo "${out# }"
}
# loom_can T: every host's build has transport T and can run it; else the
# first host's reason, in LOOM_WHY
loom_can() {
    local h line
    for h in $(seq 0 $((nh - 1))); do
        line=$(grep "^loom transport: $1 " <<<"${inv[h]}")
        case $line in
            *"built, available"*) ;;
            *) LOOM_WHY="${hosts[$h]:-this host}: ${line:-no Loom build}"
               LOOM_WHY=${LOOM_WHY/loom transport: /}; return 1 ;;
        esac
    done
}

# anything to test?
none="" nnone=0
for h in $(seq 0 $((nh - 1))); do
    grep -qx '@ibdev\|@efa' <<<"${inv[h]}" || { none="$none ${hosts[$h]:-this host}"; nnone=$((nnone + 1)); }
done
if [ -n "$none" ]; then
    if [ "$nnone" -eq "$nh" ]; then
        echo "SKIP: no RDMA hardware (no device in /sys/class/infiniband on${none}): nothing to test. run.sh needs an InfiniBand, RoCE or EFA device on every host."
    else
        echo "SKIP: no RDMA device on${none}: every host of the job needs one."
    fi
    exit 77
fi
[ $inventory_only = 0 ] || exit 0
if [ -z "$table" ]; then
    echo "usage: $0 [-i] RANKTABLE [HOST...]: RDMA hardware found; give the job's rank table to test it"
    exit 2
fi
if printf '%s\n' "${inv[@]}" | grep -qx '@noloom'; then
    echo "FAIL: no Loom build at $B on every host (set LOOM_BUILDDIR)"
    exit 2
fi

# which paths: each needs the device kind, libfabric's provider (when
# fi_info can tell), and the transport in Loom's build on every host
declare -a run_paths
skip() { echo "SKIP: $1: $2"; }
for path in $RDMA_PATHS; do
    case $path in
        verbs)
            if ! has ibdev; then skip verbs "no InfiniBand/RoCE device on $(lacking ibdev)"
            elif ! loom_can verbs; then skip verbs "Loom's verbs transport: $LOOM_WHY"
            else run_paths+=(verbs); fi ;;
        ofi-verbs | ofi-efa)
            kind=${path#ofi-}
            dev=$([ "$kind" = efa ] && echo efa || echo ibdev)
            if ! has "$dev"; then
                skip "$path" "no $([ "$kind" = efa ] && echo EFA || echo InfiniBand/RoCE) device on $(lacking "$dev")"
            elif has fi_info && ! has "fi_$kind"; then
                skip "$path" "libfabric has no $kind provider on $(lacking "fi_$kind") (fi_info -p $kind)"
            elif ! loom_can ofi; then skip "$path" "Loom's ofi transport: $LOOM_WHY"
            else run_paths+=("$path"); fi ;;
        *) echo "usage: RDMA_PATHS: '$path' is not verbs, ofi-verbs or ofi-efa"; exit 2 ;;
    esac
done
if [ ${#run_paths[@]} -eq 0 ]; then
    echo "SKIP: RDMA hardware found, but no path that both the hosts and this Loom build have (see above)"
    exit 77
fi

# the bandwidth tools run between the first two servers (hosts 0 and 1)
two=0
[ "$nh" -lt 2 ] || two=1
tool_on_both() {
    local h
    for h in 0 $two; do grep -q "^tool: $1 /" <<<"${inv[h]}" || return 1; done
}

failed=0 passed=0
for path in "${run_paths[@]}"; do
    echo
    case $path in
        verbs)
            echo "== verbs transport: tests/run-matrix -t verbs -l rdma"
            cases=${RDMA_CASES:-}
            if [ -z "$cases" ]; then
                cases="matrix digest perf kill"
                if ! tool_on_both ib_write_bw; then
                    cases="matrix digest kill"
                    echo "SKIP: perf over verbs: ib_write_bw (perftest) is not installed on the first two hosts"
                fi
            fi
            RDMA_CASES=$cases LOOM_BUILDDIR=$B bash "$here/../run-matrix" -t verbs -l rdma "$table" "${hosts[@]}" ;;
        ofi-*)
            prov=$([ "$path" = ofi-efa ] && echo efa || echo 'verbs;ofi_rxm')
            echo "== ofi transport, provider $prov: tests/run-matrix -t 'ofi:$prov' -l rdma"
            LOOM_BUILDDIR=$B bash "$here/../run-matrix" -t "ofi:$prov" -l rdma "$table" "${hosts[@]}" ;;
    esac
    rc=$?
    case $rc in
        0) passed=$((passed + 1)); echo "== $path: passed" ;;
        77) echo "== $path: skipped (above)" ;;
        *) failed=$((failed + 1)); echo "== $path: FAILED (exit $rc)" ;;
    esac
done
echo
if [ $failed -gt 0 ]; then
    echo "run.sh: $failed path(s) failed, $passed passed"
    exit 1
fi
if [ $passed -eq 0 ]; then
    echo "run.sh: every path skipped"
    exit 77
fi
echo "run.sh: $passed path(s) passed"
