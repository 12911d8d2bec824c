#!/bin/bash
# trixie.sh - build and test this tree on Debian 13 (torch 2.6, Python 3.13,
# GCC 14, libfabric 2.1) in a chroot, from any Debian host, as root.
#
# usage: scripts/trixie.sh [root|build|check|suite|shell]
#   root   make the root if needed and install its packages, nothing more
#          (CI runs it in the background while the Debian 12 tests run)
#   build  make the root if needed, copy the tree in, configure and build
#   check  build, then the C unit suites and the Python and torch tests
#          (python/tests, the pip install test, torch's suite's bounded part)
#   suite  build, then torch's whole distributed suite on gloo and loom
#          (tests/torch/run_suite.sh), its reports copied to build-trixie/
#   shell  build, then a shell in the root, in the build directory
#
# LOOM_TRIXIE_ROOT   the root (default /var/cache/loom/trixie-root: outside
#                    the clone, reused by later runs and other clones)
# LOOM_TRIXIE_MIRROR the Debian mirror (default: this host's apt sources')
# LOOM_TRIXIE_CONFIGURE  extra configure arguments (e.g. --with-torch=no)
#
# The root is made once with debootstrap (installed here when missing); the
# packages below are installed in it when missing. /proc, /dev and /dev/shm
# are bind-mounted while this runs and unmounted on exit (only those this
# run mounted). The tree is copied (tracked and untracked, not ignored files)
# into the root rather than bind-mounted, so that the root's autotools never
# rewrite the host's generated files; it builds in its own directory there.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
level=${1:-check}
root=${LOOM_TRIXIE_ROOT:-/var/cache/loom/trixie-root}
# libopenblas0-pthread: torch's BLAS, as scripts/deps.sh installs it on the host (perf/torch_bench.py)
PKGS="python3-torch libtorch-dev pybind11-dev g++ make autoconf automake libtool pkg-config \
libcjson-dev libssl-dev check libfabric-dev libibverbs-dev python3-numpy python3-pytest \
python3-setuptools python3-dev python3-pip git ca-certificates iproute2 procps gnuplot-nox file \
libopenblas0-pthread"
start=$(date +%s)
say() { echo "== trixie.sh [$(( $(date +%s) - start )) s] $*"; }
die() { echo "trixie.sh: $*" >&2; exit 1; }

case $level in root|build|check|suite|shell) ;;
*) die "unknown level '$level' (root|build|check|suite|shell)";; esac
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
case $root in /*) ;; *) die "LOOM_TRIXIE_ROOT must be an absolute path, not '$root'";; esac
case "$root/" in "$top"/*) die "the root $root must be outside the clone $top";; esac

# The mirror this host's apt already uses (deb822 or one-line sources).
mirror() {
    local m
    m=$(awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$m" ] || m=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++)
        if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list 2>/dev/null || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# ---- mounts: only what this run mounted is unmounted, in reverse order ----
mounted=()
cleanup() {
    local i
    for (( i = ${#mounted[@]} - 1; i >= 0; i-- )); do
        umount "${mounted[$i]}" || echo "trixie.sh: could not unmount ${mounted[$i]}" >&2
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bind() {  # bind HOSTDIR: the same path inside the root, unless already there
    local to=$root$1
    mkdir -p "$to"
    mountpoint -q "$to" && return 0
    mount --bind "$1" "$to"
    mounted+=("$to")
}

# ---- the root ----
if [ ! -f "$root/.loom-root-complete" ]; then
    command -v debootstrap >/dev/null || {
        say "installing debootstrap"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    partial=$root.partial
    if [ -e "$partial" ]; then
        # an interrupted debootstrap: remove it, unless something is mounted in it
        ! findmnt -rn -o TARGET | grep -q "^$partial/" ||
            die "$partial has mounts inside (findmnt); unmount them, then rerun"
        rm -rf --one-file-system "$partial"
    fi
    [ ! -e "$root" ] || [ -z "$(ls -A "$root")" ] ||
        [ -f "$root/etc/debian_version" ] || die "$root exists and is not a Debian root"
    if [ -f "$root/etc/debian_version" ]; then
        say "reusing the Debian root at $root"
    else
        m=$(mirror)
        say "debootstrap trixie into $root from $m"
        mkdir -p "$(dirname "$root")"
        debootstrap --variant=minbase trixie "$partial" "$m" >"$(dirname "$root")/debootstrap.log" 2>&1 ||
            { tail -20 "$(dirname "$root")/debootstrap.log"; die "debootstrap failed"; }
        rmdir "$root" 2>/dev/null || true
        mv "$partial" "$root"
    fi
    touch "$root/.loom-root-complete"
fi
bind /proc
bind /dev
bind /dev/shm

in_root() { chroot "$root" env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

have=" $(in_root dpkg-query -W -f='${Package} ${Status}\n' $PKGS 2>/dev/null |
          awk '/ install ok installed$/ { printf "%s ", $1 }' || true) "
missing=
for p in $PKGS; do
    case $have in *" $p "*) ;; *) missing="$missing $p";; esac
done
if [ -n "$missing" ]; then
    say "installing in the root: $missing"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    in_root apt-get update -qq
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $missing >"$root/var/log/loom-apt.log" 2>&1 ||
        { tail -30 "$root/var/log/loom-apt.log"; die "apt-get install in the root failed"; }
fi
say "root: Debian $(cat "$root/etc/debian_version"), $(in_root python3 --version), torch \
$(in_root dpkg-query -W -f='${Version}' python3-torch)"

[ "$level" = root ] && { say "done"; exit 0; }

# ---- the tree, copied in; built out of tree ----
id=$(basename "$top")-$(echo "$top" | md5sum | cut -c1-8)
src=/var/tmp/loom/$id/src
obj=/var/tmp/loom/$id/build
mkdir -p "$root$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$top" ls-files -z -co --exclude-standard
else
    (cd "$top" && find . -path ./build\* -prune -o -type f -print0)
fi | tar -C "$top" --null -T - -cf - | tar -C "$root$src" -xf -
# configure again when its arguments changed since the last run
args_file=$root$obj/.loom-configure-args
if [ "$(cat "$args_file" 2>/dev/null)" != "${LOOM_TRIXIE_CONFIGURE:-}" ]; then
    rm -f "$root$obj/Makefile"
fi
mkdir -p "$root$obj" && printf '%s' "${LOOM_TRIXIE_CONFIGURE:-}" >"$args_file"
say "building in $obj (configure ${LOOM_TRIXIE_CONFIGURE:-with no extra arguments})"
in_root bash -c "cd $src && ./scripts/build.sh $obj ${LOOM_TRIXIE_CONFIGURE:-}"

case $level in
build) ;;
check)
    # the C unit suites and the Python and torch tests (the multi-process C
    # tests are the Debian 12 host's: they do not depend on the distribution)
    say "make check: C unit suites, Python and torch tests"
    in_root bash -c "cd $obj && make -j\$(nproc) check TESTS= >check-build.out 2>&1 ||
        { tail -40 check-build.out; exit 1; }
        tests=\$(ls tests/unit/check_* | grep -v '\\.') &&
        make -j\$(nproc) check TESTS=\"\$tests python/tests/run.sh python/tests/install.sh \
        tests/torch/check_suite.sh\" >check.out 2>&1; rc=\$?;
        grep -E '^(PASS|FAIL|SKIP|XPASS|ERROR):' check.out;
        for f in \$(grep -lE '^(FAIL|ERROR)' \$(find . -name '*.log') 2>/dev/null); do
            echo \"==== \$f\"; tail -40 \"\$f\"; done; exit \$rc" ;;
suite)
    say "torch's distributed suite, gloo and loom, world sizes 2 and 3"
    rc=0
    in_root bash -c "cd $obj && LOOM_SRCDIR=$src LOOM_BUILDDIR=$obj \
        $src/tests/torch/run_suite.sh $obj/torch-suite" || rc=$?
    mkdir -p "$top/build-trixie"
    cp "$root$obj"/torch-suite/*.json "$root$obj"/torch-suite/*.txt "$top/build-trixie/" 2>/dev/null || true
    say "reports in $top/build-trixie"
    exit $rc ;;
shell)
    in_root bash -c "cd $obj && exec bash -i" ;;
esac
say "done"
