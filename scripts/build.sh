#!/bin/sh
# Configure (out of tree) and build Loom. usage: build.sh [BUILDDIR] [configure args...]
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$top/build}
[ $# -gt 0 ] && shift
if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
    (cd "$top" && autoreconf -fi >/dev/null 2>&1) || (cd "$top" && autoreconf -fi)
fi
mkdir -p "$bdir"
cd "$bdir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" --enable-werror "$@" >configure.out 2>&1 || { cat configure.out; exit 1; }
    sed -n '/^Loom .* configuration/,$p' configure.out
fi
make -j"$(nproc)" >make.out 2>&1 || { tail -50 make.out; exit 1; }
