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
has '"readable":	false'
has '"valid":	false'
has 'cannot open'

# --rank.
expect 0 "$tool" check "$src/etc/ranktables/two-server.json" --rank 2
has "rank 2: server 127.0.0.3 device 0 -> 127.0.3.1:29600"
# a rank out of range is a question about a valid table, not a fault in it
expect 2 "$tool" check "$src/etc/ranktables/two-server.json" --rank 4
has "check --rank 4: out of range: $src/etc/ranktables/two-server.json is a valid rank table of 4 ranks (0..3)" "$tmp/err"
grep -q INVALID "$tmp/out" "$tmp/err" && fail "--rank 4 said INVALID"
expect 0 "$tool" check "$src/etc/ranktables/single-1.json" --rank 0 --json
has '"address":	"127.0.0.1"'
has '"port":	29600'

# Files that are not tables.
# unreadable, not INVALID: there is no table to judge
expect 1 "$tool" check /nonexistent/rt.json
has 'cannot read the rank table: cannot open "/nonexistent/rt.json": No such file or directory' "$tmp/err"
grep -q INVALID "$tmp/out" "$tmp/err" && fail "a missing file said INVALID"
expect 1 "$tool" check "$tmp"
has "is a directory" "$tmp/err"

# Hints: a trailing comma, a misspelt field.
expect 1 "$tool" check "$data/file-trailing-comma.json"
has "error: not valid JSON: syntax error at line 9, column 13 (a comma before ']': JSON allows none after the last item)"
expect 1 "$tool" check "$data/near-miss-field.json"
has 'warning: server_list[0].device[0].devcie_ip: unknown field (ignored): did you mean "device_ip"?'

# Two ranks on one address and port: check names both JSON paths (a
# warning: a host that owns the device_ip has no clash); --local, on a host
# that does not own them, refuses it.
expect 0 "$tool" check "$data/warn-shared-device-port.json"
has 'warning: server_list[0].device[1].device_port: port 16666 is also server_list[0].device[0].device_port'
expect 1 "$tool" check "$data/warn-shared-device-port.json" --local
has 'ranks 0 and 1 would both listen on 127.0.0.1:16666 (host_ip 127.0.0.1, ports from server_list[0].device[0].device_port and server_list[0].device[1].device_port)'
grep -q 'port 16666 is free' "$tmp/out" && fail "--local: a shared port called free"

# One server, no address anywhere (HCCL's TensorFlow example): valid, with
# a warning; its ranks run on this host.
expect 0 "$tool" check "$data/valid-one-server-no-address.json"
has 'the table'"'"'s ranks all run on this host'
has "rank 7: server 0 device 7 -> 127.0.0.1:"

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
has 'server "bad" is a host name and no device has a device_ip' "$tmp/err"
expect 2 "$tool" generate --servers 10.0.0.1,-bad --devices 1
has '"-bad" is not an IPv4 or IPv6 address or a host name' "$tmp/err"
expect 2 "$tool" generate --servers 10.0.0.1,10.0.0.1 --devices 1
expect 2 "$tool" generate --servers a,b --devices 1 --host-ips 10.0.0.1
expect 2 "$tool" generate --servers 10.0.0.1 --devices 1 --host-ips bad
expect 2 "$tool" generate --servers 10.0.0.1 --devices 2 --device-ips 10.1.0.1
expect 2 "$tool" generate --servers 10.0.0.1 --devices 1 --version 1.1
# A bad command line of one command prints that command's usage, not the
# whole help.
has "usage: loom-ranktable generate --servers" "$tmp/err"
grep -q "^Commands:" "$tmp/err" && fail "generate printed the whole help"
expect 2 "$tool" check --bogus x.json
has "usage: loom-ranktable check FILE" "$tmp/err"
grep -q "^Commands:" "$tmp/err" && fail "check printed the whole help"
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
has '"rank_id": "3"' "$tmp/v12.json"
# stdout by default, indented as hccl_tools.py (json.dump, indent=4) writes.
expect 0 "$tool" generate --servers 127.0.0.1 --devices 2 --version 1.2
has '"version": "1.2"'
has '"status": "completed"'
[ "$(sed -n 2p "$tmp/out")" = '    "version": "1.2",' ] || fail "not indented by 4"
grep -q '^                    "device_id": "1",$' "$tmp/out" ||
    fail "device fields not at depth 5"
cp "$tmp/out" "$tmp/stdout.json"
expect 0 "$tool" check "$tmp/stdout.json"
# Host-NIC form: several servers, no device IPs: host_ip, no device_ip.
gen_check host-nic --servers 10.0.0.1,10.0.0.2,10.0.0.3 --devices 2
has "rank 5: server 10.0.0.3 device 1 -> 10.0.0.3:29601"
has '"host_ip": "10.0.0.2"' "$tmp/host-nic.json"
grep -q device_ip "$tmp/host-nic.json" && fail "host-NIC table has a device_ip"
# Host names as server ids, where the table gives addresses.
gen_check names --servers node-a,node-b --devices 2 --host-ips 10.0.1.1,10.0.1.2
has "rank 3: server node-b device 1 -> 10.0.1.2:29601"
gen_check names-devips --servers node-a,node-b --devices 1 \
    --device-ips 192.168.0.1,192.168.1.1
has "rank 1: server node-b device 0 -> 192.168.1.1:29600"

# check --local: which ranks are this host's. Every loopback address is.
# A random port base keeps clear of jobs that concurrent tests run.
base=$(( 10000 + $(od -An -N2 -tu2 /dev/urandom) % 9000 ))
LOOM_PORT_BASE=$base expect 0 "$tool" check "$src/etc/ranktables/two-server.json" --local
has "rank 3: server 127.0.0.3 device 1: device_ip 127.0.3.2 here; host_ip 127.0.0.3 here"
has "  uses device_ip 127.0.3.2:$((base + 1)); port $((base + 1)) is free"
has "4 ranks on this host, 0 with a problem"
LOOM_PORT_BASE=$base LOOM_ADDRESS=host expect 0 "$tool" check \
    "$src/etc/ranktables/two-server.json" --local --rank 2
has "  uses host_ip 127.0.0.3:$base; port $base is free"
LOOM_PORT_BASE=$base expect 0 "$tool" check "$src/etc/ranktables/single-4.json" --local --json
has '"address_mode":	"auto"'
has '"port_free":	true'
# Addresses of a documentation range this host does not have.
foreign=""
for net in 203.0.113 198.51.100 192.0.2; do
    ip -o addr 2>/dev/null | grep -q " $net\." && continue
    foreign=$net
    break
done
if [ -n "$foreign" ] && command -v ip >/dev/null 2>&1; then
    "$tool" generate --servers 127.0.0.1,127.0.0.2 --devices 1 -o "$tmp/asc.json" \
        --device-ips "$foreign.1,$foreign.2" >/dev/null 2>&1 || fail "generate asc"
    sed 's/"server_id": "\(127[^"]*\)",/"server_id": "\1", "host_ip": "\1",/' \
        "$tmp/asc.json" >"$tmp/asc-host.json"
    LOOM_PORT_BASE=$base expect 0 "$tool" check "$tmp/asc-host.json" --local
    has "device_ip $foreign.1 not here (Cannot assign requested address); host_ip 127.0.0.1 here"
    has "  uses host_ip 127.0.0.1:$base"
    LOOM_ADDRESS=device expect 1 "$tool" check "$tmp/asc-host.json" --local
    has "LOOM_ADDRESS=device, but this host cannot use device_ip $foreign.1: Cannot assign requested address"
    "$tool" generate --servers "$foreign.1,$foreign.2" --devices 2 -o "$tmp/far.json" >/dev/null 2>&1
    expect 1 "$tool" check "$tmp/far.json" --local
    has "no rank of this table has an address on this host"
else
    echo "skipped the not-here cases: no documentation range free of this host's addresses"
fi
# A port some listener holds.
if [ -x /usr/bin/python3 ]; then
    port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 9000 ))
    /usr/bin/python3 -c "
import socket, sys, time
s = socket.socket(); s.bind(('127.0.0.1', $port)); s.listen(1)
open('$tmp/listening', 'w').close(); time.sleep(20)" &
    lpid=$!
    for _ in $(seq 100); do [ -e "$tmp/listening" ] && break; sleep 0.05; done
    LOOM_PORT_BASE=$port expect 1 "$tool" check "$src/etc/ranktables/single-1.json" --local
    has "port $port is not free (Address already in use)"
    kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all loom-ranktable checks passed"
exit 0
