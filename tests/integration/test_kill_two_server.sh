#!/bin/bash
# A rank killed (SIGKILL) on a job of two servers with two ranks each (the
# shipped loopback table), shared memory inside each server and the network
# between them: every other rank fails within seconds with a message, none
# says that a peer "left" (destroyed its communicator) in order, the killed
# rank's server-mate names it, and a rank of the other server names the
# killed rank's server, 127.0.0.3. The ranks of the other server hear of it
# through the communicator between servers, or from the rank of their own
# server that did: the failure, and whom it blames, travel both ways (the
# notice on the network, the failed flag in shared memory). (Not asked of
# both: a rank whose peer failed while a long message to it was half sent
# reads an end of stream, since a notice cannot cut into a message, and
# names that peer.)
: "${LOOM_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${LOOM_BUILDDIR:=.}"
job=$LOOM_BUILDDIR/tests/netns/netns_job
[ -x "$job" ] || { echo "SKIP: $job is not built"; exit 77; }
table=$LOOM_SRCDIR/etc/ranktables/two-server.json
work=$(mktemp -d "${TMPDIR:-/tmp}/loom-kill2.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
fails=0
for round in 1 2; do
    pids=()
    base=$((20000 + (RANDOM % 400) * 100))
    for r in 0 1 2 3; do
        LOOM_PORT_BASE=$base LOOM_RANK_TABLE=$table LOOM_RANK=$r \
            "$job" -f >"$work/out.$r" 2>&1 &
        pids+=($!)
    done
    sleep 2
    kill -KILL "${pids[3]}"
    t0=$SECONDS
    other=0
    for r in 0 1 2; do
        while kill -0 "${pids[$r]}" 2>/dev/null && [ $((SECONDS - t0)) -lt 15 ]; do
            sleep 0.1
        done
        if kill -0 "${pids[$r]}" 2>/dev/null; then
            echo "round $round: rank $r still runs 15 s after rank 3 was killed"
            kill -KILL "${pids[$r]}"
            fails=$((fails + 1))
            continue
        fi
        wait "${pids[$r]}"
        rc=$?
        msg=$(grep '^MESSAGE' "$work/out.$r" | tail -1)
        echo "round $round: rank $r exited $rc: $msg"
        if [ "$rc" -eq 0 ] || [ -z "$msg" ]; then
            echo "  FAIL: rank $r did not fail with a message"; fails=$((fails + 1))
        elif printf '%s' "$msg" | grep -q 'destroyed its communicator'; then
            echo "  FAIL: rank $r took the failure for an orderly exit"; fails=$((fails + 1))
        elif [ "$r" = 2 ] && ! printf '%s' "$msg" | grep -q 'rank 3 (server 127\.0\.0\.3'; then
            echo "  FAIL: rank 2 does not name rank 3"; fails=$((fails + 1))
        elif [ "$r" != 2 ] && printf '%s' "$msg" | grep -q '127\.0\.0\.3'; then
            other=$((other + 1))
        fi
    done
    if [ "$other" = 0 ]; then
        echo "  FAIL: neither rank of server 127.0.0.2 names the killed rank's server"
        fails=$((fails + 1))
    fi
    wait "${pids[3]}" 2>/dev/null
done
exit $((fails > 0))
