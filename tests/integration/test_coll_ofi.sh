#!/bin/sh
# test_coll_ofi.sh - the collective matrix (every collective x dtype x op x
# count x placement, each rank checking its own result) over the libfabric
# transport: forked ranks on 127.0.0.1, shared memory off (LOOM_SHM=0) so
# that every byte crosses libfabric, 16 KiB chunks. On tcp;ofi_rxm and shm
# with 2..5 ranks, a smaller one on udp;ofi_rxd (2 and 3 ranks), and the
# registration path (bounce slots and the registration cache,
# LOOM_TEST_OFI_REG=1) with messages split into 64 KiB posts
# (LOOM_TEST_OFI_CHUNK) on tcp;ofi_rxm; then the shipped 2-server loopback
# table (4 ranks, shared memory on: same-server peers through Loom's
# shared-memory engine, the others through ofi). A provider that is not there is
# skipped with the reason; the whole test skips (77) where the ofi transport
# is not built. The large count is 100003 elements so that the whole stays
# near a minute on a loaded 2-core machine (the full size:
# LOOM_TEST_BIG=1000003 OFI_COLL_RANKS="1 2 3 4 5 8").
: "${LOOM_BUILDDIR:=.}"
prog=$LOOM_BUILDDIR/tests/integration/test_coll
info=$LOOM_BUILDDIR/tools/loom-info
if [ ! -x "$prog" ] || [ ! -x "$info" ]; then
    echo "SKIP: $prog or $info is not built"
    exit 77
fi
if ! "$info" 2>/dev/null | grep -q '^transport *: ofi *built'; then
    echo "SKIP: the ofi transport is not built (no libfabric at configure time)"
    exit 77
fi
export LOOM_TRANSPORT=ofi LOOM_SHM=0 LOOM_CHUNK_SIZE=16K
export LOOM_TEST_BIG="${LOOM_TEST_BIG:-100003}"
ran=0
# run PROVIDER RANKS...: the matrix on that provider, skipped when absent
run() {
    p=$1
    shift
    why=$(LOOM_OFI_PROVIDER=$p "$info" 2>/dev/null | grep '^transport *: ofi ')
    case $why in
    *"cannot run"*)
        echo "SKIP [ofi $p]: $why"
        return 0
        ;;
    esac
    echo "== ofi $p: ranks $*"
    # shellcheck disable=SC2086 # the rank counts are a list
    LOOM_OFI_PROVIDER=$p "$prog" "$@" || exit 1
    ran=$((ran + 1))
}
# shellcheck disable=SC2086
run "tcp;ofi_rxm" ${OFI_COLL_RANKS:-2 3 4 5}
# shellcheck disable=SC2086
run shm ${OFI_COLL_RANKS:-2 3 4 5}
# shellcheck disable=SC2086
run "udp;ofi_rxd" ${OFI_COLL_RANKS_UDP:-2 3}
LOOM_TEST_OFI_REG=1 LOOM_TEST_OFI_CHUNK=65536 LOOM_CHUNK_SIZE=1M run "tcp;ofi_rxm" 2 3
# shm's large messages: through its shared buffers unless the user set
# FI_SHM_DISABLE_CMA (ofi.c, shm_env_once), and right both ways
perf=$LOOM_BUILDDIR/perf/all_reduce_perf
if [ -x "$perf" ] && LOOM_OFI_PROVIDER=shm "$info" 2>/dev/null | grep -q '^transport *: ofi *built, available'; then
    for cma in unset 0; do
        echo "== ofi shm: 2 ranks, 8 MiB chunks, FI_SHM_DISABLE_CMA $cma"
        out=$( (if [ $cma = unset ]; then unset FI_SHM_DISABLE_CMA; else export FI_SHM_DISABLE_CMA=$cma; fi
                LOOM_DEBUG=INFO LOOM_OFI_PROVIDER=shm LOOM_CHUNK_SIZE=8M \
                    "$LOOM_BUILDDIR/tools/loom-run" -n 2 --timeout 120 -- \
                    "$perf" -b 8 -e 32M -f 8 -n 3 -w 1 -c 1) 2>&1) ||
            { echo "$out" | tail -20; exit 1; }
        said=$(echo "$out" | grep -c 'FI_SHM_DISABLE_CMA=1;' || true)
        wrong=$(echo "$out" | sed -n 's/.*Out of bounds values : \([0-9]*\).*/\1/p' | head -1)
        want=2
        [ $cma = unset ] || want=0
        if [ "$said" != "$want" ] || [ "$wrong" != 0 ]; then
            echo "FAIL: FI_SHM_DISABLE_CMA $cma: $said ranks said they set it (want $want), wrong values: ${wrong:-no summary}"
            echo "$out" | tail -20
            exit 1
        fi
        echo "PASS ($said ranks set FI_SHM_DISABLE_CMA=1, 0 wrong values)"
    done
fi
if [ "$ran" -gt 0 ] && [ -n "${LOOM_SRCDIR:-}" ]; then
    echo "== ofi tcp;ofi_rxm: the 2-server loopback table, shared memory on"
    env -u LOOM_SHM LOOM_CHUNK_SIZE=64K LOOM_OFI_PROVIDER="tcp;ofi_rxm" \
        LOOM_TEST_RANKTABLE=$LOOM_SRCDIR/etc/ranktables/two-server.json "$prog" 4 || exit 1
fi
[ "$ran" -gt 0 ] || { echo "SKIP: no libfabric provider of the three is available"; exit 77; }
exit 0
