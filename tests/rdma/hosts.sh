# hosts.sh - sourced by run.sh and cases.sh: where a command of a job runs.
# hosts (an array) holds the ssh targets, one per server of the rank table;
# empty, every server is this host.

# run_on HOSTINDEX CMD... : here, or through ssh (keys, no password) on
# that server's host
run_on() {
    local h=$1
    shift
    if [ "${#hosts[@]}" -eq 0 ]; then
        bash -c "$*"
    else
        ssh -o BatchMode=yes "${hosts[$h]}" "$*"
    fi
}
