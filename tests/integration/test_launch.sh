#!/bin/sh
# test_launch.sh - starting ranks without a hand-written rank table
# (docs/launch.md):
#   1. loom-run with env:// programs (MASTER_ADDR/MASTER_PORT it sets) and
#      loom_comm_init_env's fallback to env:// without a table
#   2. torchrun-style variables set by hand (RANK, WORLD_SIZE, MASTER_*):
#      a perf tool and an env:// program
#   3. srun-style variables set by hand (srun is not installed here): a perf
#      tool on one host meets at the port derived from the job id
#   4. mpirun (Open MPI, when installed): perf tools with nothing given, with
#      the 2-server loopback table, with --url; -t 1 -g 1 accepted, -t 2 and
#      a bad option refused in one line printed once; a 2-host job with no
#      address refused once; an env:// program under mpirun
#   5. a perf tool with no launcher at all: one rank
#   6. a failure shows once on stderr: ranks in different collectives each
#      print the mismatch once, and Loom logs it at INFO under COLL
#   7. refused at once: a launcher size that is not the table's, an unknown
#      LOOM_TRANSPORT, perf's -T that is not a timeout
#   8. one-host rank tables: HCCL's no-address example runs 8 ranks here; two
#      ranks on one address and port are refused naming both JSON paths
# Every process is bounded by timeout(1), which ends it by PID.
set -u

builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN="$builddir/tools/loom-run"
JOIN="$builddir/tests/integration/launch_join"
PERF="$builddir/perf"
for b in "$RUN" "$JOIN" "$PERF/loom-all_reduce_perf"; do
    [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/test_launch.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# No launcher variables from the caller's environment.
unset LOOM_RANK_TABLE RANK_TABLE_FILE LOOM_RANK LOOM_NRANKS RANK_ID RANK_SIZE \
    RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT \
    OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE SLURM_PROCID \
    SLURM_NTASKS SLURM_JOB_ID SLURM_STEP_ID SLURM_NNODES SLURM_STEP_NUM_NODES \
    TORCHELASTIC_RUN_ID 2>/dev/null
LOOM_BOOTSTRAP_TIMEOUT=20
export LOOM_BOOTSTRAP_TIMEOUT

# A free port (range) below the ephemeral range, so no connection's local
# port takes it first; random to keep concurrent runs apart.
free_port() {
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${lo:-0}" -gt 12000 ] 2>/dev/null || lo=32768
    echo $((10000 + ($(od -An -N2 -tu2 /dev/urandom) % (lo - 10016))))
}

# by_hand NAME N VARS CMD...: start N processes of CMD, rank r with the
# environment VARS (a string in which $r is the rank), each bounded to 40 s;
# rank r's stdout in NAME.out.r, stderr in NAME.err.r; exit codes in rc.r.
by_hand() {
    name=$1 n=$2 vars=$3
    shift 3
    pids=
    r=0
    while [ "$r" -lt "$n" ]; do
        # shellcheck disable=SC2086
        eval "env $vars timeout -s KILL 40 \"\$@\"" >"$work/$name.out.$r" \
            2>"$work/$name.err.$r" &
        pids="$pids $!"
        r=$((r + 1))
    done
    r=0
    for p in $pids; do
        wait "$p"
        echo $? >"$work/$name.rc.$r"
        r=$((r + 1))
    done
}

# all_rc NAME N WANT: every rank exited WANT.
all_rc() {
    r=0
    while [ "$r" -lt "$2" ]; do
        [ "$(cat "$work/$1.rc.$r")" = "$3" ] || return 1
        r=$((r + 1))
    done
}

# perf_ok FILE N: a perf table for N ranks whose check passed.
perf_ok() {
    grep -q "^# Loom [0-9.]*  nranks $2  " "$1" && grep -qx '# Out of bounds values : 0 OK' "$1"
}

# --- 1. loom-run and env:// ------------------------------------------------
f0=$failures
timeout -s KILL 40 "$RUN" -n 3 --timeout 30 -- sh -c 'unset LOOM_RANK_TABLE; exec "$0" env' \
    "$JOIN" >"$work/lr.out" 2>"$work/lr.err"
rc=$?
[ "$rc" -eq 0 ] || fail "loom-run env://: exit $rc: $(cat "$work/lr.err")"
for r in 0 1 2; do
    grep -qx "\[$r\] launch_join: rank $r of 3 ok" "$work/lr.out" || fail "loom-run env://: rank $r"
done
timeout -s KILL 40 "$RUN" -n 2 --timeout 30 -- sh -c 'unset LOOM_RANK_TABLE; exec "$0" initenv' \
    "$JOIN" >"$work/lr2.out" 2>"$work/lr2.err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c ' ok$' "$work/lr2.out")" -eq 2 ] ||
    fail "loom_comm_init_env without a table under loom-run: exit $rc: $(cat "$work/lr2.err")"
timeout -s KILL 40 "$RUN" -n 2 --timeout 30 -- sh -c 'echo "$MASTER_ADDR $MASTER_PORT $LOOM_PORT_BASE $LOCAL_WORLD_SIZE"' \
    >"$work/lr3.out" 2>&1
read -r _ addr mport base lws <"$work/lr3.out"
[ "$addr" = 127.0.0.1 ] && [ "$lws" = 2 ] && [ "$mport" = $((base + 2)) ] ||
    fail "loom-run variables: $(cat "$work/lr3.out")"
[ "$failures" -eq "$f0" ] && pass "loom-run: env:// programs and init_env's fallback"

# --- 2. torchrun-style variables ---------------------------------------------
f0=$failures
port=$(free_port)
by_hand torch 3 "RANK=\$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" \
    "$PERF/all_reduce_perf" -b 8 -e 64K -f 32 -n 2 -w 1
all_rc torch 3 0 || fail "torch-style perf: exits $(cat "$work"/torch.rc.*): $(cat "$work"/torch.err.*)"
perf_ok "$work/torch.out.0" 3 || fail "torch-style perf: table: $(cat "$work/torch.out.0")"
grep -q "^# rendezvous: env:// (MASTER_ADDR=127.0.0.1, MASTER_PORT=$port)$" "$work/torch.out.0" ||
    fail "torch-style perf: rendezvous line: $(grep rendezvous "$work/torch.out.0")"
[ -s "$work/torch.out.1" ] && fail "torch-style perf: rank 1 printed a table"
port=$(free_port)
by_hand torchj 2 "RANK=\$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" "$JOIN" env
all_rc torchj 2 0 || fail "torch-style env:// program: $(cat "$work"/torchj.err.*)"
[ "$failures" -eq "$f0" ] && pass "torchrun-style variables"

# --- 3. srun-style variables on one host -------------------------------------
f0=$failures
job=$$$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
by_hand slurm 2 "SLURM_PROCID=\$r SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_JOB_ID=$job SLURM_STEP_ID=0" \
    "$PERF/all_gather_perf" -b 1K -e 1K -n 2 -w 1
all_rc slurm 2 0 || fail "srun-style perf: $(cat "$work"/slurm.err.*)"
perf_ok "$work/slurm.out.0" 2 || fail "srun-style perf: table: $(cat "$work/slurm.out.0")"
grep -q "^# rendezvous: tcp://127.0.0.1:[0-9]* (srun, one host; port from SLURM_JOB_ID=$job.0)$" \
    "$work/slurm.out.0" || fail "srun-style perf: $(grep rendezvous "$work/slurm.out.0")"
# two nodes and no address: refused, by rank 0 only, in one line
by_hand slurm2 2 "SLURM_PROCID=\$r SLURM_NTASKS=2 SLURM_NNODES=2 SLURM_JOB_ID=$job" \
    "$PERF/all_gather_perf" -b 1K -e 1K
all_rc slurm2 2 2 || fail "srun-style on 2 nodes: exits $(cat "$work"/slurm2.rc.*), want 2"
[ "$(wc -l <"$work/slurm2.err.0")" -eq 1 ] &&
    grep -q "2 ranks from srun on more than one host .*give --url tcp://HOST:PORT" "$work/slurm2.err.0" ||
    fail "srun-style on 2 nodes: rank 0 said: $(cat "$work/slurm2.err.0")"
[ -s "$work/slurm2.err.1" ] && fail "srun-style on 2 nodes: rank 1 said: $(cat "$work/slurm2.err.1")"
[ "$failures" -eq "$f0" ] && pass "srun-style variables"

# --- 4. mpirun ----------------------------------------------------------------
if command -v mpirun >/dev/null 2>&1; then
    # as root, and more ranks than this machine's cores
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe
    mpi() { # NAME ARGS...: stdout NAME.out, stderr NAME.err, rc
        name=$1
        shift
        timeout -s KILL 60 mpirun "$@" >"$work/$name.out" 2>"$work/$name.err"
        rc=$?
    }
    f0=$failures
    mpi m4 -np 4 "$PERF/loom-all_reduce_perf" -b 8 -e 64K -f 32 -n 2 -w 1
    [ "$rc" -eq 0 ] && perf_ok "$work/m4.out" 4 || fail "mpirun -np 4, nothing given: exit $rc: $(cat "$work/m4.err" "$work/m4.out")"
    grep -q '^# rendezvous: tcp://127.0.0.1:[0-9]* (mpirun (Open MPI), one host; port from OMPI_MCA_ess_base_jobid=[0-9]*)$' \
        "$work/m4.out" || fail "mpirun -np 4: rendezvous: $(grep rendezvous "$work/m4.out")"
    [ "$(grep -c '^# Out of bounds' "$work/m4.out")" -eq 1 ] || fail "mpirun -np 4: more than one table"
    LOOM_PORT_BASE=$(free_port) mpi mt -np 4 -x LOOM_PORT_BASE \
        -x LOOM_RANK_TABLE="$srcdir/etc/ranktables/two-server.json" \
        "$PERF/loom-all_gather_perf" -b 1K -e 64K -f 64 -n 2 -w 1
    [ "$rc" -eq 0 ] && perf_ok "$work/mt.out" 4 && grep -q '  servers 2  ' "$work/mt.out" ||
        fail "mpirun with the 2-server table: exit $rc: $(cat "$work/mt.err" "$work/mt.out")"
    port=$(free_port)
    mpi mu -np 3 "$PERF/loom-broadcast_perf" --url "tcp://127.0.0.1:$port" -b 4K -e 4K -n 2 -w 1 -t 1 -g 1
    [ "$rc" -eq 0 ] && perf_ok "$work/mu.out" 3 &&
        grep -q "^# rendezvous: tcp://127.0.0.1:$port (--url)$" "$work/mu.out" ||
        fail "mpirun --url, -t 1 -g 1: exit $rc: $(cat "$work/mu.err" "$work/mu.out")"
    mpi mj -np 3 "$JOIN" url "tcp://127.0.0.1:$(free_port)"
    [ "$rc" -eq 0 ] && [ "$(grep -c ' ok$' "$work/mj.out")" -eq 3 ] ||
        fail "mpirun, loom_comm_init_url(URL, -1, -1): exit $rc: $(cat "$work/mj.err")"
    # refusals: one line, once (mpirun adds its own lines: count ours)
    for args in "-t 2" "-g 4" "-x 1" "--nosuch"; do
        # shellcheck disable=SC2086
        mpi bad -np 3 "$PERF/loom-all_reduce_perf" $args
        ours=$(grep -c '^loom-all_reduce_perf: ' "$work/bad.err")
        [ "$rc" -ne 0 ] && [ "$ours" -eq 1 ] && ! grep -q usage "$work/bad.err" ||
            fail "mpirun perf $args: exit $rc, $ours lines: $(cat "$work/bad.err")"
    done
    grep -q "^loom-all_reduce_perf: unknown option --nosuch (see --help)$" "$work/bad.err" ||
        fail "unknown long option: $(cat "$work/bad.err")"
    # two hosts as the launcher would say it, no address: refused once
    mpi two -np 2 sh -c 'OMPI_COMM_WORLD_LOCAL_SIZE=1 OMPI_MCA_orte_num_nodes=2 exec "$0"' \
        "$PERF/loom-all_reduce_perf"
    ours=$(grep -c '^loom-all_reduce_perf: ' "$work/two.err")
    [ "$rc" -ne 0 ] && [ "$ours" -eq 1 ] &&
        grep -q 'more than one host .*--url tcp://HOST:PORT .*MASTER_ADDR and MASTER_PORT' "$work/two.err" ||
        fail "mpirun on 2 hosts without an address: exit $rc: $(cat "$work/two.err")"
    [ "$failures" -eq "$f0" ] && pass "mpirun"
else
    echo "skip: mpirun (Open MPI is not installed; scripts/deps.sh installs it)"
fi

# --- 5. no launcher: one rank --------------------------------------------------
f0=$failures
timeout -s KILL 30 "$PERF/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 >"$work/one.out" 2>"$work/one.err"
rc=$?
[ "$rc" -eq 0 ] && perf_ok "$work/one.out" 1 &&
    grep -q '^# rendezvous: none (no launcher: one rank)$' "$work/one.out" ||
    fail "no launcher: exit $rc: $(cat "$work/one.err" "$work/one.out")"
[ "$failures" -eq "$f0" ] && pass "no launcher: one rank"

# --- 6. a failure shows once ----------------------------------------------------
f0=$failures
port=$(free_port)
by_hand mis 2 "RANK=\$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" "$JOIN" env mismatch
all_rc mis 2 1 || fail "mismatch: exits $(cat "$work"/mis.rc.*), want 1 1"
for r in 0 1; do
    [ "$(grep -c 'collective calls differ' "$work/mis.err.$r")" -eq 1 ] ||
        fail "mismatch: rank $r's stderr has the error $(grep -c 'collective calls differ' "$work/mis.err.$r") times: $(cat "$work/mis.err.$r")"
    grep -q 'LOOM WARN' "$work/mis.err.$r" && fail "mismatch: rank $r logged a WARN: $(cat "$work/mis.err.$r")"
done
port=$(free_port)
by_hand misl 2 "RANK=\$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOOM_DEBUG=INFO" \
    "$JOIN" env mismatch
grep -q ' LOOM INFO COLL collective calls differ' "$work/misl.err.0" ||
    fail "mismatch with LOOM_DEBUG=INFO: no 'LOOM INFO COLL' line: $(grep differ "$work/misl.err.0")"
[ "$failures" -eq "$f0" ] && pass "a failure shows once, logged at INFO under COLL"

# --- 7. what is known wrong is refused before any wait ------------------------
# A launcher's size that is not the table's: every rank fails at once (long
# before the 60 s bootstrap timeout), naming both numbers and their sources.
f0=$failures
t4="$srcdir/etc/ranktables/single-4.json"
start=$(date +%s)
by_hand size 2 "OMPI_COMM_WORLD_RANK=\$r OMPI_COMM_WORLD_SIZE=2 LOOM_RANK_TABLE=$t4 LOOM_BOOTSTRAP_TIMEOUT=60" \
    "$PERF/all_reduce_perf" -b 8 -e 8 -n 1 -w 0
took=$(($(date +%s) - start))
all_rc size 2 2 || fail "mpirun-style -np 2 with a 4-rank table: exits $(cat "$work"/size.rc.*), want 2 2"
[ "$took" -lt 30 ] || fail "mpirun-style -np 2 with a 4-rank table: took $took s"
grep -q "rank table $t4 has 4 ranks but the job has 2 (OMPI_COMM_WORLD_SIZE=2, from mpirun (Open MPI))" \
    "$work/size.err.0" || fail "size mismatch: rank 0 said: $(cat "$work/size.err.0")"
by_hand sizet 2 "RANK=\$r WORLD_SIZE=2 RANK_TABLE_FILE=$t4 LOOM_BOOTSTRAP_TIMEOUT=60" "$JOIN" initenv
all_rc sizet 2 1 || fail "torchrun-style 2 ranks, 4-rank table: exits $(cat "$work"/sizet.rc.*)"
for r in 0 1; do
    grep -q "has 4 ranks but the job has 2 (WORLD_SIZE=2, from torchrun-style variables)" \
        "$work/sizet.err.$r" || fail "size mismatch, rank $r said: $(cat "$work/sizet.err.$r")"
done
# A transport that is not built is an error naming those that are.
port=$(free_port)
by_hand rdma 2 "RANK=\$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOOM_TRANSPORT=rdma" \
    "$JOIN" env
all_rc rdma 2 1 || fail "LOOM_TRANSPORT=rdma: exits $(cat "$work"/rdma.rc.*), want 1 1"
grep -q "LOOM_TRANSPORT=rdma: this Loom has no such transport (built: tcp" "$work/rdma.err.0" ||
    fail "LOOM_TRANSPORT=rdma: rank 0 said: $(cat "$work/rdma.err.0")"
# -T is nccl-tests' timeout in seconds; the transport is --transport.
timeout -s KILL 30 "$PERF/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 -T 5 --transport tcp \
    >"$work/tt.out" 2>"$work/tt.err"
rc=$?
[ "$rc" -eq 0 ] && [ ! -s "$work/tt.err" ] && perf_ok "$work/tt.out" 1 ||
    fail "perf -T 5 --transport tcp: exit $rc: $(cat "$work/tt.err")"
timeout -s KILL 30 "$PERF/all_reduce_perf" -b 8 -e 8 -T tcp >"$work/tb.out" 2>"$work/tb.err"
rc=$?
[ "$rc" -ne 0 ] && grep -q -- "-T wants a timeout in seconds" "$work/tb.err" ||
    fail "perf -T tcp: exit $rc: $(cat "$work/tb.err")"
[ "$failures" -eq "$f0" ] && pass "size mismatch, unknown transport and -T refused at once"

# --- 8. rank tables of one host -------------------------------------------------
# HCCL's TensorFlow example shape (one server "0", every device_ip ""): one
# rank per device runs on this host; a table whose two ranks would share
# one address and port is refused naming both JSON paths.
f0=$failures
data="$srcdir/tests/data/ranktables"
timeout -s KILL 90 "$RUN" -n 8 --timeout 80 --rank-table "$data/valid-one-server-no-address.json" \
    -- "$JOIN" initenv >"$work/tf.out" 2>"$work/tf.err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c ' ok$' "$work/tf.out")" -eq 8 ] ||
    fail "one-server table without addresses, 8 ranks: exit $rc: $(tail -5 "$work/tf.err")"
timeout -s KILL 60 "$RUN" -n 2 --timeout 50 --rank-table "$data/warn-shared-device-port.json" \
    -- "$JOIN" initenv >"$work/sp.out" 2>"$work/sp.err"
rc=$?
# whichever rank speaks first names both (loom-run may end the other)
[ "$rc" -ne 0 ] && grep 'would both listen on 127.0.0.1:16666 ' "$work/sp.err" |
    grep 'server_list\[0\].device\[0\].device_port' | grep -q 'server_list\[0\].device\[1\].device_port' ||
    fail "shared address and port: exit $rc: $(cat "$work/sp.err")"
grep -q 'another job' "$work/sp.err" && fail "shared address and port blamed another job: $(cat "$work/sp.err")"
[ "$failures" -eq "$f0" ] && pass "one-host tables: no address runs here, a shared port is refused"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all launch tests passed"
