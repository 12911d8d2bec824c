#!/bin/sh
# Install what Loom's build and tests need (Debian/Ubuntu). Skips apt when
# everything is already there. libopenblas0-pthread: torch's and numpy's BLAS (Debian
# otherwise gives them the reference libblas3, which makes the DDP benchmark's
# matmuls ~5x slower than a training host's; perf/torch_bench.py).
set -e
PKGS="build-essential autoconf automake libtool pkg-config libcjson-dev libssl-dev check \
libibverbs-dev libfabric-dev clang libclang-rt-14-dev iproute2 gnuplot-nox \
openmpi-bin libopenmpi-dev g++ python3 python3-numpy python3-pytest python3-torch libtorch-dev python3-pip \
libopenblas0-pthread clang-format"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps.sh: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
