# hccl_test_lib.sh - what the HCCL test scripts share (sourced by
# test_hccl.sh and test_hccl_samples.sh, which set srcdir, RT and work,
# and count failures in $failures).

# A port base below the ephemeral range, random to keep concurrent jobs
# apart (only rank 0's port, base + its device id, is listened on).
next_port_base() {
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${lo:-0}" -gt 12000 ] 2>/dev/null || lo=32768
    LOOM_PORT_BASE=$((10000 + ($(od -An -N2 -tu2 /dev/urandom) % (lo - 10016))))
    export LOOM_PORT_BASE
}

# In a subshell that sourced tests/netns/lib.sh: make the 3 namespaces (2
# devices each) and their host-NIC table at $work/hosts.json.
hccl_netns_setup() {
    trap 'netns_cleanup' EXIT
    netns_setup
    "$RT" generate --servers 10.77.0.11,10.77.0.12,10.77.0.13 --devices 2 \
        -o "$work/hosts.json" >/dev/null || { echo "FAIL: generate"; return 1; }
}

# hccl_netns_count DIR PATTERN: how many of the 6 ranks of the job in DIR
# exited 0 with a line matching PATTERN (@R@: the rank) in their output;
# each other rank is printed as a FAIL line.
hccl_netns_count() {
    local dir=$1 r rc good=0
    for r in 0 1 2 3 4 5; do
        rc=$(cut -d' ' -f1 "$dir/end.$r")
        if [ "$rc" = 0 ] && grep -q "${2//@R@/$r}" "$dir/out.$r"; then
            good=$((good + 1))
        else
            echo "FAIL: netns: $(basename "$dir") rank $r exit $rc: $(tail -c 600 "$dir/out.$r") $(head -c 600 "$dir/err.$r")" >&2
        fi
    done
    echo "$good"
}

# hccl_netns_part FUNCTION: run the namespace part (a subshell) and count
# it: 0 passed, 77 skipped (namespaces not permitted), else a failure.
hccl_netns_part() {
    ("$1") >"$work/netns.log" 2>&1
    local rc=$?
    cat "$work/netns.log"
    case $rc in
    0) ;;
    77) echo "netns part skipped (see above)" ;;
    *) failures=$((failures + 1)) ;;
    esac
}
