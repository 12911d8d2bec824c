#!/bin/sh
# A program links libloom statically through pkg-config --static and runs.
# Builds and installs Loom without shared libraries into a scratch prefix,
# compiles tests/static/hello_static.c with `pkg-config --static --cflags
# --libs loom`, and runs a 1-rank allreduce. Run by .ci/run.
#   usage: static_link.sh SCRATCH_DIR
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
scratch=${1:?usage: static_link.sh SCRATCH_DIR}
rm -rf "$scratch"
mkdir -p "$scratch/build"
cd "$scratch/build"
"$top/configure" --disable-shared --prefix="$scratch/prefix" >configure.out 2>&1 ||
    { cat configure.out; exit 1; }
make -j"$(nproc)" >make.out 2>&1 || { tail -40 make.out; exit 1; }
make install >install.out 2>&1 || { tail -40 install.out; exit 1; }
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig"
flags=$(pkg-config --static --cflags --libs loom)
echo "static_link: cc hello_static.c $flags"
cc -o "$scratch/hello_static" "$top/tests/static/hello_static.c" $flags
# nothing of Loom is loaded at run time
if ldd "$scratch/hello_static" | grep -q libloom; then
    echo "static_link: the program still loads libloom dynamically" >&2
    exit 1
fi
"$scratch/hello_static"
