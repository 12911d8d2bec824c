# port_base.sh - sourced by tests that run jobs on a rank table's own ports.
# next_port_base sets and exports LOOM_PORT_BASE: random, to keep concurrent
# runs apart, and below the kernel's ephemeral range, so that no
# connection's local port takes one of the table's ports first.
next_port_base() {
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${lo:-0}" -gt 12000 ] 2>/dev/null || lo=32768
    LOOM_PORT_BASE=$((10000 + ($(od -An -N2 -tu2 /dev/urandom) % (lo - 10016))))
    export LOOM_PORT_BASE
}
