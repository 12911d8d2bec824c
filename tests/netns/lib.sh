# lib.sh - network-namespace topology for the multi-host tests (sourced by
# run.sh). Three "hosts" (namespaces loomA<pid>, loomB<pid>, loomC<pid>),
# each with lo and eth0, whose veth peers join a bridge in a fourth "switch"
# namespace loomS<pid>. Nothing is created in the root namespace, and the
# 10.77.0.0/24 addresses exist only inside the host namespaces.
#
# Host h (A=1, B=2, C=3) is server 10.77.0.1h with two devices whose
# device_ip are 10.77.0.1h and 10.77.0.11h (both on its eth0); rank
# 2*(h-1) + device_id.

NETNS_ID=$$
NETNS_SW=loomS$NETNS_ID
NETNS_HOSTS="loomA$NETNS_ID loomB$NETNS_ID loomC$NETNS_ID"
NETNS_CREATED=""
NETNS_PIDS=""

netns_log() { printf '%s\n' "$*" >&2; }

netns_of_rank() { # rank -> namespace
    case $(( $1 / 2 )) in 0) echo "loomA$NETNS_ID" ;; 1) echo "loomB$NETNS_ID" ;;
    *) echo "loomC$NETNS_ID" ;; esac
}

# End every process this harness started (by PID), then delete what it
# created, by name. Deleting a namespace removes its veth ends and bridge.
netns_cleanup() {
    local p ns
    for p in $NETNS_PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $NETNS_PIDS; do wait "$p" 2>/dev/null || true; done
    NETNS_PIDS=""
    for ns in $NETNS_CREATED; do ip netns del "$ns" 2>/dev/null || true; done
    NETNS_CREATED=""
}

# Exit 77 with a message when namespaces (or veth, bridges) are unavailable.
netns_skip() {
    echo "SKIP: network namespaces not permitted here ($*)"
    netns_cleanup
    exit 77
}

netns_add() {
    local err
    err=$(ip netns add "$1" 2>&1) || netns_skip "ip netns add $1: $err"
    NETNS_CREATED="$NETNS_CREATED $1"
}

netns_setup() {
    command -v ip >/dev/null 2>&1 || netns_skip "no ip command (iproute2)"
    [ "$(id -u)" = 0 ] || netns_skip "not root"
    local err h i ns
    netns_add "$NETNS_SW"
    err=$(ip -n "$NETNS_SW" link add br0 type bridge 2>&1) || netns_skip "bridge: $err"
    ip -n "$NETNS_SW" link set br0 up
    ip -n "$NETNS_SW" link set lo up
    i=1
    for ns in $NETNS_HOSTS; do
        h=${ns:4:1}
        netns_add "$ns"
        err=$(ip netns exec "$ns" true 2>&1) || netns_skip "ip netns exec: $err"
        err=$(ip -n "$NETNS_SW" link add "v$h" type veth peer name eth0 netns "$ns" 2>&1) ||
            netns_skip "veth: $err"
        ip -n "$NETNS_SW" link set "v$h" master br0
        ip -n "$NETNS_SW" link set "v$h" up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "10.77.0.1$i/24" dev eth0
        ip -n "$ns" addr add "10.77.0.11$i/24" dev eth0
        ip -n "$ns" link set eth0 up
        i=$((i + 1))
    done
    # addresses are usable once duplicate address detection is off the table
    # (IPv4 has none) and the bridge forwards: wait for eth0 to be up
    for ns in $NETNS_HOSTS; do
        for _ in $(seq 50); do
            ip -n "$ns" link show eth0 | grep -q 'state UP' && break
            sleep 0.1
        done
    done
}

# Write the 3-server x 2-device table to $1 and validate it.
netns_write_table() {
    local f=$1 i
    {
        echo '{'
        echo '  "version": "1.0",'
        echo '  "server_count": "3",'
        echo '  "server_list": ['
        for i in 1 2 3; do
            echo '    {'
            echo "      \"server_id\": \"10.77.0.1$i\","
            echo '      "device": ['
            echo "        {\"device_id\": \"0\", \"device_ip\": \"10.77.0.1$i\", \"rank_id\": \"$(( 2 * (i - 1) ))\"},"
            echo "        {\"device_id\": \"1\", \"device_ip\": \"10.77.0.11$i\", \"rank_id\": \"$(( 2 * (i - 1) + 1 ))\"}"
            echo '      ]'
            if [ "$i" = 3 ]; then echo '    }'; else echo '    },'; fi
        done
        echo '  ],'
        echo '  "status": "completed"'
        echo '}'
    } >"$f"
    "$LOOM_BUILDDIR/tools/loom-ranktable" check "$f" >"$f.check" 2>&1 || {
        cat "$f.check" >&2
        return 1
    }
}

netns_time() { date +%s.%N; }

# netns_start DIR NRANKS ENV... -- ARGS...: start every rank of netns_job
# (or of $NETNS_PROG) in its host namespace. Per rank r: DIR/out.r,
# DIR/err.r, and once it ends DIR/end.r ("EXIT_CODE END_TIME"). DIR/pid.r
# holds the job's PID.
netns_start() {
    local dir=$1 n=$2 r ns envs=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    mkdir -p "$dir"
    rm -f "$dir"/out.* "$dir"/err.* "$dir"/end.* "$dir"/pid.*
    for r in $(seq 0 $((n - 1))); do
        ns=$(netns_of_rank "$r")
        (
            ip netns exec "$ns" env "${envs[@]}" LOOM_RANK="$r" \
                "${NETNS_PROG:-$LOOM_BUILDDIR/tests/netns/netns_job}" "$@" \
                >"$dir/out.$r" 2>"$dir/err.$r" &
            p=$!
            echo "$p" >"$dir/pid.$r"
            trap 'kill -KILL $p 2>/dev/null' TERM
            wait "$p"
            echo "$? $(netns_time)" >"$dir/end.$r"
        ) &
        NETNS_PIDS="$NETNS_PIDS $!"
    done
    # the job PIDs too, so that cleanup ends them directly
    for r in $(seq 0 $((n - 1))); do
        for _ in $(seq 100); do [ -s "$dir/pid.$r" ] && break; sleep 0.01; done
        NETNS_PIDS="$NETNS_PIDS $(cat "$dir/pid.$r")"
    done
}

# netns_wait DIR NRANKS DEADLINE_S: wait until every rank has ended or the
# deadline (seconds from now) passes; ranks still running then are killed by
# PID and get "killed" in DIR/end.r. Returns 1 when any was killed.
netns_wait() {
    local dir=$1 n=$2 limit=$3 r left hung=0
    local t_end
    t_end=$(awk -v a="$(netns_time)" -v b="$limit" 'BEGIN { printf "%.3f", a + b }')
    while :; do
        left=0
        for r in $(seq 0 $((n - 1))); do [ -s "$dir/end.$r" ] || left=$((left + 1)); done
        [ "$left" = 0 ] && break
        if awk -v a="$(netns_time)" -v b="$t_end" 'BEGIN { exit !(a > b) }'; then
            for r in $(seq 0 $((n - 1))); do
                if [ ! -s "$dir/end.$r" ]; then
                    kill -KILL "$(cat "$dir/pid.$r")" 2>/dev/null || true
                    echo "killed $(netns_time)" >"$dir/end.$r.hung"
                    hung=1
                fi
            done
            break
        fi
        sleep 0.1
    done
    # reap the wrapper subshells
    for r in $NETNS_PIDS; do wait "$r" 2>/dev/null || true; done
    NETNS_PIDS=""
    for r in $(seq 0 $((n - 1))); do
        [ -e "$dir/end.$r.hung" ] && mv -f "$dir/end.$r.hung" "$dir/end.$r"
    done
    return $hung
}
