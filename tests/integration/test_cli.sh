#!/bin/sh
# test_cli.sh - every installed program answers --help (usage on stdout,
# exit 0) and --version ("NAME (Loom) VERSION", then optionally "features:
# ...", exit 0), whatever else it needs to run (no rank table, no launcher,
# no network); and every program linking Loom statically knows the rows of
# the transports built (they live beside each transport: config.h); and the
# example etc/loom.conf names every variable and loads without a warning.
set -u

builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$builddir/build_config.h")
[ -n "$version" ] || { echo "FAIL: no PACKAGE_VERSION in $builddir/build_config.h"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/test_cli.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for prog in tools/loom-info tools/loom-run tools/loom-ranktable \
            perf/loom-all_reduce_perf perf/loom-all_gather_perf \
            perf/loom-broadcast_perf perf/loom-reduce_scatter_perf \
            perf/loom-reduce_perf perf/loom-perf-plot; do
    name=${prog##*/}
    path=$builddir/$prog
    [ -x "$path" ] || { fail "$path not built"; continue; }
    timeout -s KILL 10 "$path" --help >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" -eq 0 ] && grep -qi usage "$work/out" && [ ! -s "$work/err" ] ||
        fail "$name --help: exit $rc: $(head -c 300 "$work/out" "$work/err")"
    timeout -s KILL 10 "$path" --version >"$work/out" 2>"$work/err"
    rc=$?
    first=$(head -n 1 "$work/out")
    rest=$(tail -n +2 "$work/out")
    [ "$rc" -eq 0 ] && [ "$first" = "$name (Loom) $version" ] &&
        { [ -z "$rest" ] || [ "$(printf '%s\n' "$rest" | sed -n '/^features: ./p')" = "$rest" ]; } ||
        fail "$name --version: exit $rc: '$(cat "$work/out" "$work/err")'"
done

# One row of each transport built, set where each program reads its
# configuration: none may be an unknown name to it.
features=$("$builddir/tools/loom-info" | sed -n 's/^features *: //p')
rows="LOOM_NSOCKS=2"
case " $features " in *" ofi "*) rows="$rows LOOM_OFI_PROVIDER=shm" ;; esac
case " $features " in *" verbs "*) rows="$rows LOOM_IB_GID_INDEX=1" ;; esac
table=$srcdir/tests/data/ranktables/device-ip-duplicate.json
for cmd in "tools/loom-info -c" "tools/loom-ranktable check $table" \
           "tools/loom-run -n 1 -- true" \
           "perf/loom-all_reduce_perf -b 8 -e 8 -n 1 -w 0" \
           "perf/loom-all_gather_perf -b 8 -e 8 -n 1 -w 0" \
           "perf/loom-broadcast_perf -b 8 -e 8 -n 1 -w 0" \
           "perf/loom-reduce_scatter_perf -b 8 -e 8 -n 1 -w 0" \
           "perf/loom-reduce_perf -b 8 -e 8 -n 1 -w 0"; do
    # shellcheck disable=SC2086 # rows and cmd are word lists
    env LOOM_CONF_FILE=/dev/null $rows timeout -s KILL 30 "$builddir"/$cmd \
        >"$work/out" 2>"$work/err" </dev/null
    grep -q "unknown variable" "$work/err" &&
        fail "$cmd: $(grep "unknown variable" "$work/err" | head -n 3)"
done

# The shipped example etc/loom.conf names every variable loom-info -c lists;
# with its example lines uncommented, each is read from the file without a
# warning (a transport not built: its rows are unknown, and said so).
conf=$srcdir/etc/loom.conf
for name in $("$builddir/tools/loom-info" -c | sed -n 's/^\(LOOM_[A-Z0-9_]*\) .*/\1/p'); do
    grep -q "^#$name=\|^#   $name " "$conf" || fail "etc/loom.conf does not name $name"
done
sed -n 's/^#\(LOOM_[A-Z0-9_]*=\)/\1/p' "$conf" >"$work/conf"
LOOM_CONF_FILE=$work/conf "$builddir/tools/loom-info" -c >"$work/out" 2>"$work/err"
unbuilt=""
case " $features " in *" ofi "*) ;; *) unbuilt="$unbuilt LOOM_OFI_PROVIDER" ;; esac
case " $features " in *" verbs "*) ;; *) unbuilt="$unbuilt LOOM_IB_HCA LOOM_IB_GID_INDEX" ;; esac
for name in $(sed -n 's/^\(LOOM_[A-Z0-9_]*\)=.*/\1/p' "$work/conf"); do
    case " $unbuilt " in *" $name "*) continue ;; esac
    grep -q "^$name .* file:$work/conf:" "$work/out" ||
        fail "etc/loom.conf's $name is not read from the file: $(grep "^$name " "$work/out")"
done
grep -v "unknown variable" "$work/err" | grep -q . &&
    fail "etc/loom.conf, uncommented: $(head -n 3 "$work/err")"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all programs answer --help and --version"
