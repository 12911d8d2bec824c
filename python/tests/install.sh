#!/bin/sh
# install.sh - the package as a pip user installs it: libloom staged by
# `make install DESTDIR=...`, then `pip install --no-build-isolation --target`
# from a copy of python/ (found with pkg-config), then, from a directory
# outside both trees, `import loom` and (when configure built the backend)
# `import loom.torch` with a one-rank allreduce through backend "loom".
# SKIPs (77) without a built package, pip or setuptools. Bounded by timeout(1).
py=${PYTHON3:-/usr/bin/python3}
b=${LOOM_BUILDDIR:-.}
s=${LOOM_SRCDIR:-.}
[ -f "$b/python/loom/_paths.py" ] ||
    { echo "SKIP: the loom Python package was not built (see configure's summary)"; exit 77; }
{ "$py" -c 'import setuptools' && "$py" -m pip --version; } >/dev/null 2>&1 ||
    { echo "SKIP: $py lacks pip or setuptools (apt-get install python3-pip python3-setuptools)"; exit 77; }
with_torch=no
[ -n "$(ls "$b"/python/loom/torch/_c10d*.so 2>/dev/null)" ] && with_torch=yes

tmp=$(mktemp -d /tmp/loom-install.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
make -C "$b" install DESTDIR="$tmp/stage" >"$tmp/make.out" 2>&1 ||
    { tail -30 "$tmp/make.out"; echo "FAIL: make install DESTDIR=$tmp/stage"; exit 1; }
pc=$(dirname "$(find "$tmp/stage" -name loom.pc | head -1)")
# (writable: pip builds in the copy, and distcheck's sources are read-only)
cp -R "$s/python" "$tmp/src" && chmod -R u+w "$tmp/src" &&
    rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
PKG_CONFIG_SYSROOT_DIR="$tmp/stage" PKG_CONFIG_PATH="$pc" LOOM_WITH_TORCH=$with_torch \
    timeout 3000 "$py" -m pip install --no-build-isolation --no-deps --no-index \
    --target "$tmp/site" "$tmp/src" >"$tmp/pip.out" 2>&1 ||
    { tail -40 "$tmp/pip.out"; echo "FAIL: pip install (torch extension: $with_torch)"; exit 1; }

mkdir "$tmp/elsewhere" && cd "$tmp/elsewhere" || exit 1
# only the installed copy on the path: not the build tree, not the sources
env -u LOOM_LIBRARY PYTHONPATH="$tmp/site" PYTHONDONTWRITEBYTECODE=1 WITH_TORCH=$with_torch \
    T="$tmp" timeout 300 "$py" - <<'EOF'
import os, sys
import loom
t = os.environ["T"]
site = os.path.join(t, "site")
assert loom.__file__.startswith(site + os.sep), "loom came from %s, not %s" % (loom.__file__, site)
from loom import _paths
assert _paths.LIBDIR.startswith(os.path.join(t, "stage")), "_paths.LIBDIR is %s" % _paths.LIBDIR
print("loom %s from %s (libloom in %s)" % (loom.version(), loom.__file__, _paths.LIBDIR))
if os.environ["WITH_TORCH"] == "yes":
    import torch
    import torch.distributed as dist
    import loom.torch
    ext = loom.torch._c10d.__file__
    assert ext.startswith(site + os.sep), "the extension came from %s" % ext
    dist.init_process_group("loom", init_method="file://" + os.path.join(t, "init"),
                            world_size=1, rank=0)
    assert dist.get_backend() == "loom", dist.get_backend()
    x = torch.arange(8, dtype=torch.float32)
    dist.all_reduce(x)
    assert torch.equal(x, torch.arange(8, dtype=torch.float32)), x
    dist.destroy_process_group()
    print("loom.torch from %s: all_reduce on backend loom ok" % ext)
EOF
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: the installed package (exit $rc)"; exit 1; }
echo "PASS: pip-installed loom (torch extension: $with_torch)"
