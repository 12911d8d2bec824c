#!/bin/sh
# ofi.sh - the multi-host cases of run.sh (3 hosts in network namespaces x
# 2 ranks, joined through a rank table: healthy, a shaped link, host C's
# link down mid-collective) with every rank on the ofi transport over
# tcp;ofi_rxm (same-host ranks through shared memory, as by default).
# Skips (77) where the ofi transport is not built, the provider is absent
# or namespaces are not permitted.
: "${LOOM_BUILDDIR:=.}"
here=$(cd "$(dirname "$0")" && pwd)
info=$LOOM_BUILDDIR/tools/loom-info
if [ ! -x "$info" ] || ! "$info" 2>/dev/null | grep -q '^transport *: ofi *built'; then
    echo "SKIP: the ofi transport is not built (no libfabric at configure time)"
    exit 77
fi
LOOM_TRANSPORT=ofi
LOOM_OFI_PROVIDER=${NETNS_OFI_PROVIDER:-tcp;ofi_rxm}
export LOOM_TRANSPORT LOOM_OFI_PROVIDER
why=$("$info" 2>/dev/null | grep '^transport *: ofi ')
case $why in
*"cannot run"*)
    echo "SKIP [ofi $LOOM_OFI_PROVIDER]: $why"
    exit 77
    ;;
esac
exec bash "$here/run.sh"
