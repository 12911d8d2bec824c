#!/bin/sh
# test_ranktable_tool.sh - run the built loom-ranktable on the examples and the
# corpus: exit codes, --json fields, and generate -> check round trips.
set -u
src=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${LOOM_BUILDDIR:-.}
tool=$build/tools/loom-ranktable
data=$src/tests/data/ranktables
tmp=$(mktemp -d /tmp/loom-rt-tool.XXXXXX) || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS CMD...: run CMD, output in $tmp/out, require exit STATUS.
expect() {
    want=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    [ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; cat "$tmp/out" "$tmp/err"; }
}
# has PATTERN: $tmp/out (or FILE) contains the fixed string.
has() { grep -qF -- "$1" "${2:-$tmp/out}" || fail "output of last command lacks: $1"; }

[ -x "$tool" ] || { echo "no $tool"; exit 99; }

# Examples are valid.
for f in "$src"/etc/ranktables/*.json; do
    expect 0 "$tool" check "$f"
    has "valid rank table"
    has "0 errors, 0 warnings"
done
expect 0 "$tool" check "$src/etc/ranktables/single-4.json"
has "rank 3: server 127.0.0.1 device 3 -> 127.0.0.1:29603"
LOOM_PORT_BASE=40000 expect 0 "$tool" check "$src/etc/ranktables/two-server.json"
has "rank 3: server 127.0.0.3 device 1 -> 127.0.3.2:40001"

# Corpus: valid-* and warn-* pass, everything else fails with exit 1.
n=0
for f in "$data"/*.json; do
    n=$((n + 1))
    case $(basename "$f") in
    valid-* | warn-*) expect 0 "$tool" check "$f" ;;
    *) expect 1 "$tool" check "$f"; has "error: " ;;
    esac
done
[ "$n" -ge 40 ] || fail "corpus has only $n files"

# Human output names path and reason.
expect 1 "$tool" check "$data/rank-id-duplicate.json"
has 'error: server_list[1].device[1].rank_id: "1" is used twice (also server_list[0].device[1])'
expect 0 "$tool" check "$data/warn-unknown-fields.json"
has 'warning: server_list[0].rack: unknown field (ignored)'

# --json.
expect 1 "$tool" check "$data/many-errors.json" --json
has '"valid":	false'
has '"version":	"1.0"'
has '"servers":	2'
has '"ranks":	4'
has '"path":	"status"'
has '"message":	"must be \"completed\", found \"x\""'
has '"warnings":	[]'
expect 0 "$tool" check --json "$src/etc/ranktables/superpod-1.2.json"
has '"valid":	true'
has '"version":	"1.2"'
has '"errors":	[]'
expect 1 "$tool" check --json /nonexistent/rt.json
has '"valid":	false'
has 'cannot open'

# --rank.
expect 0 "$tool" check "$src/etc/ranktables/two-server.json" --rank 2
has "rank 2: server 127.0.0.3 device 0 -> 127.0.3.1:29600"
expect 1 "$tool" check "$src/etc/ranktables/two-server.json" --rank 4
has "error: rank 4 does not exist: the table has 4 ranks (0..3)"
expect 0 "$tool" check "$src/etc/ranktables/single-1.json" --rank 0 --json
has '"address":	"127.0.0.1"'
has '"port":	29600'

# Files that are not tables.
expect 1 "$tool" check /nonexistent/rt.json
has 'cannot open "/nonexistent/rt.json": No such file or directory'
expect 1 "$tool" check "$tmp"
has "is a directory"

# Bad command lines.
expect 2 "$tool"
expect 2 "$tool" frobnicate
grep -qF 'unknown command "frobnicate"' "$tmp/err" || fail "no unknown-command message"
expect 2 "$tool" check
expect 2 "$tool" check a.json b.json
expect 2 "$tool" check "$data/valid-1.0-two-server.json" --rank x
expect 2 "$tool" check "$data/valid-1.0-two-server.json" --bogus
expect 2 "$tool" generate --devices 2
expect 2 "$tool" generate --servers 10.0.0.1 --devices 0
expect 2 "$tool" generate --servers 10.0.0.1,bad --devices 1
expect 2 "$tool" generate --servers 10.0.0.1,10.0.0.1 --devices 1
expect 2 "$tool" generate --servers 10.0.0.1,10.0.0.2 --devices 2
expect 2 "$tool" generate --servers 10.0.0.1 --devices 2 --device-ips 10.1.0.1
expect 2 "$tool" generate --servers 10.0.0.1 --devices 1 --version 1.1
expect 0 "$tool" --help
has "usage: loom-ranktable"
expect 0 "$tool" help

# generate -> check, for both versions and the address choices.
gen_check() {
    name=$1; shift
    expect 0 "$tool" generate "$@" -o "$tmp/$name.json"
    expect 0 "$tool" check "$tmp/$name.json"
    has "valid rank table"
}
gen_check one-server --servers 127.0.0.1 --devices 8
has "rank 7: server 127.0.0.1 device 7 -> 127.0.0.1:29607"
gen_check one-device --servers 10.0.0.1,10.0.0.2 --devices 1 --version 1.0
has "rank 1: server 10.0.0.2 device 0 -> 10.0.0.2:29600"
gen_check device-ips --servers 10.0.0.1,10.0.0.2 --devices 2 \
    --device-ips 192.168.0.1,192.168.0.2,192.168.1.1,192.168.1.2
has "rank 2: server 10.0.0.2 device 0 -> 192.168.1.1:29600"
gen_check v12 --servers 10.0.0.1,10.0.0.2 --devices 2 --version 1.2 \
    --device-ips 192.168.0.1,192.168.0.2,192.168.1.1,192.168.1.2
has "version: 1.2"
has '"super_pod_list"' "$tmp/v12.json"
has '"rank_id":	"3"' "$tmp/v12.json"
# stdout by default.
expect 0 "$tool" generate --servers 127.0.0.1 --devices 2 --version 1.2
has '"version":	"1.2"'
has '"status":	"completed"'
cp "$tmp/out" "$tmp/stdout.json"
expect 0 "$tool" check "$tmp/stdout.json"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all loom-ranktable checks passed"
exit 0
