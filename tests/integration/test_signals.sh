#!/bin/sh
# test_signals.sh - how a Loom job ends when it is signalled: as the
# program's own signal handling says, never as a library Loom loaded says.
# Each job is 2 ranks on 127.0.0.1 (signal_rank, or signal_rank.py under
# /usr/bin/python3), rank 0 blocked in a collective rank 1 never joins,
# rank 1 asleep; each rank runs in a folder of its own job.
#   1. tcp: no provider library (libfabric, libpsm*, libinfinipath, libefa,
#      librdmacm, libibverbs) is mapped in either rank, and SIGTERM kills
#      each (status 143).
#   2. ofi (tcp;ofi_rxm): libfabric is mapped; Loom said at INFO that it set
#      IPATH_NO_BACKTRACE=1; SIGTERM kills rank 0 (143), SIGSEGV rank 1
#      (139), and no .btr (a provider's backtrace file) appears.
#   3. a host without libfabric (a mount namespace in which libfabric.so.1
#      is an empty file): a tcp job runs, and choosing ofi is an error
#      that names libfabric.so.1.
#   4. Python, import loom: SIGINT raises KeyboardInterrupt in rank 0
#      blocked in allreduce (its finally runs); SIGTERM kills rank 1.
#   5. PyTorch, backend "loom": libfabric and its providers are not mapped
#      (torch maps libibverbs itself), and SIGTERM kills each rank.
# A part whose prerequisites are missing says SKIP; the whole test skips
# (77) when none ran. Every wait is bounded; processes are ended by PID.
: "${LOOM_BUILDDIR:=.}"
: "${LOOM_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
prog=$LOOM_BUILDDIR/tests/integration/signal_rank
pyrank=$LOOM_SRCDIR/tests/integration/signal_rank.py
info=$LOOM_BUILDDIR/tools/loom-info
run=$LOOM_BUILDDIR/tools/loom-run
join=$LOOM_BUILDDIR/tests/integration/launch_join
py=/usr/bin/python3
if [ ! -x "$prog" ] || [ ! -x "$info" ]; then
    echo "SKIP: $prog or $info is not built"
    exit 77
fi
work=$(mktemp -d)
pids=
# the test is what a rank does on a signal: a sanitizer's own SIGSEGV
# handler (abort, 134) must stay out of the way
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
cleanup() {
    for p in $pids; do
        kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset LOOM_TRANSPORT LOOM_OFI_PROVIDER LOOM_RANK_TABLE RANK_TABLE_FILE \
    IPATH_NO_BACKTRACE HFI_NO_BACKTRACE
export LOOM_BOOTSTRAP_TIMEOUT=60 LOOM_TIMEOUT=600
ulimit -c 0
failures=0
ran=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

free_port() {
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${lo:-0}" -gt 12000 ] 2>/dev/null || lo=32768
    echo $((10000 + ($(od -An -N2 -tu2 /dev/urandom) % (lo - 10016))))
}

# start NAME CMD...: ranks 0 and 1 of CMD URL 2 RANK, each in $work/NAME,
# stdout in out.R and stderr in err.R; their PIDs in pid0, pid1
start() {
    name=$1
    shift
    dir=$work/$name
    mkdir -p "$dir"
    url=tcp://127.0.0.1:$(free_port)
    (cd "$dir" && exec "$@" "$url" 2 0) >"$dir/out.0" 2>"$dir/err.0" &
    pid0=$!
    (cd "$dir" && exec "$@" "$url" 2 1) >"$dir/out.1" 2>"$dir/err.1" &
    pid1=$!
    pids="$pids $pid0 $pid1"
}

# gone PID: the process has exited (a zombie counts)
gone() {
    [ ! -r "/proc/$1/stat" ] || [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# ready NAME: both ranks printed "ready" (within 120 s); else FAIL, 1
ready() {
    i=0
    while [ $i -lt 1200 ]; do
        if grep -qx ready "$work/$1/out.0" 2>/dev/null &&
            grep -qx ready "$work/$1/out.1" 2>/dev/null; then
            return 0
        fi
        if gone "$pid0" || gone "$pid1"; then
            fail "$1: a rank ended before it was ready: $(cat "$work/$1/err.0" "$work/$1/err.1")"
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
    fail "$1: not ready within 120 s: $(cat "$work/$1/err.0" "$work/$1/err.1")"
    return 1
}

# stop PID SIG: send SIG, wait (30 s at most, then SIGKILL) and set st to
# the shell's status for it (128 + the signal that killed it)
stop() {
    kill -"$2" "$1"
    i=0
    while ! gone "$1" && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    hung=0
    if ! gone "$1"; then
        hung=1
        kill -KILL "$1"
    fi
    wait "$1"
    st=$?
    [ $hung = 0 ] || st="hung (killed after 30 s)"
}

# expect WHAT WANT: st is WANT
expect() {
    if [ "$st" = "$2" ]; then
        echo "PASS: $1: status $st"
    else
        fail "$1: status $st, want $2"
    fi
}

PROVIDERS='libfabric|libpsm|libinfinipath|libefa|librdmacm|libibverbs'

# no_providers WHAT PID [LIBS]: none of LIBS (default PROVIDERS, an ERE)
# in PID's maps
no_providers() {
    m=$(grep -oE "[^/ ]*(${3:-$PROVIDERS})[^/ ]*" "/proc/$2/maps" | sort -u | tr '\n' ' ')
    if [ -n "$m" ]; then
        fail "$1: maps $m"
    else
        echo "PASS: $1: maps no provider library"
    fi
}

# --- 1. tcp ------------------------------------------------------------------
echo "== tcp"
start tcp "$prog"
if ready tcp; then
    ran=$((ran + 1))
    no_providers "tcp rank 0" "$pid0"
    no_providers "tcp rank 1" "$pid1"
    stop "$pid0" TERM
    expect "tcp rank 0 (in a collective), SIGTERM" 143
    stop "$pid1" TERM
    expect "tcp rank 1, SIGTERM" 143
fi

# --- 2. ofi ------------------------------------------------------------------
echo "== ofi tcp;ofi_rxm"
why=$(LOOM_OFI_PROVIDER="tcp;ofi_rxm" "$info" 2>/dev/null | grep '^transport *: ofi ')
case $why in
*"built, available"*)
    start ofi env LOOM_TRANSPORT=ofi LOOM_OFI_PROVIDER="tcp;ofi_rxm" LOOM_SHM=0 \
        LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET "$prog"
    if ready ofi; then
        ran=$((ran + 1))
        grep -q libfabric "/proc/$pid0/maps" || fail "ofi rank 0 has no libfabric mapped"
        grep -q 'IPATH_NO_BACKTRACE=1' "$work/ofi/err.0" ||
            fail "ofi: rank 0 did not say it set IPATH_NO_BACKTRACE=1"
        stop "$pid0" TERM
        expect "ofi rank 0 (in a collective), SIGTERM" 143
        stop "$pid1" SEGV
        expect "ofi rank 1, SIGSEGV" 139
        btr=$(cd "$work/ofi" && ls -- *.btr 2>/dev/null)
        if [ -n "$btr" ]; then
            fail "ofi: backtrace files $btr"
        else
            echo "PASS: ofi: no .btr file"
        fi
    fi
    ;;
*) echo "SKIP [ofi]: ${why:-the ofi transport is not built}" ;;
esac

# --- 3. a host without libfabric -------------------------------------------
echo "== no libfabric"
lib=$(ldconfig -p 2>/dev/null | sed -n 's/.*libfabric\.so\.1 .*=> \(.*\)/\1/p' | head -1)
if [ -z "$lib" ] || ! "$info" 2>/dev/null | grep -q '^transport *: ofi *built'; then
    echo "SKIP [no libfabric]: libfabric.so.1 is not installed or ofi is not built"
elif ! unshare -m true 2>/dev/null; then
    echo "SKIP [no libfabric]: no mount namespace (unshare -m) here"
elif [ ! -x "$run" ] || [ ! -x "$join" ]; then
    echo "SKIP [no libfabric]: $run or $join is not built"
else
    ran=$((ran + 1))
    # in a mount namespace of its own: libfabric.so.1 is an empty file
    timeout -s KILL 100 unshare -m sh -c '
        mount --bind /dev/null "$1" || exit 9
        shift
        "$1" -n 2 --timeout 60 -- sh -c "exec \"\$0\" env" "$2" >"$3/nolib.tcp" 2>&1
        echo "tcp $?" >"$3/nolib.rc"
        LOOM_TRANSPORT=ofi "$1" -n 2 --timeout 60 -- sh -c "exec \"\$0\" env" "$2" \
            >"$3/nolib.ofi" 2>&1
        echo "ofi $?" >>"$3/nolib.rc"' sh "$lib" "$run" "$join" "$work"
    if grep -qx 'tcp 0' "$work/nolib.rc" 2>/dev/null; then
        echo "PASS: no libfabric: a tcp job runs"
    else
        fail "no libfabric: the tcp job: $(cat "$work/nolib.rc" "$work/nolib.tcp" 2>&1)"
    fi
    if grep -q 'ofi [1-9]' "$work/nolib.rc" 2>/dev/null &&
        grep -q 'libfabric cannot be loaded: .*libfabric\.so\.1' "$work/nolib.ofi"; then
        echo "PASS: no libfabric: choosing ofi is an error naming libfabric.so.1"
    else
        fail "no libfabric: LOOM_TRANSPORT=ofi: $(cat "$work/nolib.rc" "$work/nolib.ofi" 2>&1)"
    fi
fi

# --- 4, 5. Python --------------------------------------------------------------
export PYTHONPATH=$LOOM_BUILDDIR/python
if [ ! -x $py ] || [ ! -f "$LOOM_BUILDDIR/python/.built" ] ||
    ! $py -c 'import numpy' 2>/dev/null; then
    echo "SKIP [python]: $py with numpy and the built loom package are needed"
else
    echo "== python (import loom)"
    start py $py "$pyrank" loom
    if ready py; then
        ran=$((ran + 1))
        stop "$pid0" INT
        expect "python rank 0 (in allreduce), SIGINT" 3
        if grep -qx finally "$work/py/out.0" && grep -qx KeyboardInterrupt "$work/py/out.0"; then
            echo "PASS: python: KeyboardInterrupt raised in allreduce, its finally ran"
        else
            fail "python: rank 0 printed: $(cat "$work/py/out.0" "$work/py/err.0")"
        fi
        stop "$pid1" TERM
        expect "python rank 1, SIGTERM" 143
    fi
    if ls "$LOOM_BUILDDIR"/python/loom/torch/_c10d*.so >/dev/null 2>&1 &&
        $py -c 'import torch' 2>/dev/null; then
        echo "== torch (backend loom)"
        start torch $py "$pyrank" torch
        if ready torch; then
            ran=$((ran + 1))
            # torch itself maps libibverbs (its gloo): only libfabric's
            no_providers "torch rank 0" "$pid0" 'libfabric|libpsm|libinfinipath|libefa'
            stop "$pid0" TERM
            expect "torch rank 0 (in all_reduce), SIGTERM" 143
            stop "$pid1" TERM
            expect "torch rank 1, SIGTERM" 143
        fi
    else
        echo "SKIP [torch]: the loom.torch extension or torch is missing"
    fi
fi

if [ "$failures" -gt 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
if [ "$ran" -eq 0 ]; then
    echo "SKIP: no part could run"
    exit 77
fi
echo "PASS: $ran parts"
