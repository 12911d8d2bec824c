#!/bin/sh
# test_perf.sh - the perf programs: table shape, bandwidth arithmetic, the
# check, CSV/JSON output, the corruption hook, and perf/plot.
#
# Every run goes through loom-run --timeout (which ends its ranks by PID) and,
# where coreutils' timeout exists, an outer bound on loom-run itself.
set -u

builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-.}
RUN="$builddir/tools/loom-run"
[ -x "$RUN" ] || { echo "FAIL: $RUN not built"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/test_perf.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

BOUND=
command -v timeout >/dev/null 2>&1 && BOUND="timeout -k 5 90"

# perf N OUT PROG ARGS...: run PROG on N ranks; rank 0's stdout (prefix
# removed) goes to OUT, stderr to OUT.err; sets rc.
perf() {
    n=$1 out=$2 prog=$3
    shift 3
    $BOUND "$RUN" -n "$n" --timeout 60 -- "$builddir/perf/$prog" "$@" \
        >"$out.raw" 2>"$out.err"
    rc=$?
    sed -n 's/^\[0\] //p' "$out.raw" >"$out"
}

# kind PROG: which bus bandwidth factor nccl-tests uses for PROG.
kind() {
    case $1 in
    all_reduce_perf) echo allreduce ;;
    all_gather_perf|reduce_scatter_perf) echo gather ;;
    *) echo one ;;
    esac
}

# 1. Every program on 2 and 3 ranks, two sizes (1K and 64K), float sum.
for prog in all_reduce_perf all_gather_perf broadcast_perf \
            reduce_scatter_perf reduce_perf; do
    for n in 2 3; do
        f0=$failures
        out="$work/$prog.$n"
        perf "$n" "$out" "$prog" -b 1K -e 64K -f 64 -n 5 -w 1
        what="$prog on $n ranks"
        [ "$rc" -eq 0 ] || { fail "$what: exit $rc"; cat "$out.err"; continue; }
        grep -q "^# Loom [0-9.]*  nranks $n  servers 1  transport tcp  chunk [0-9]" "$out" \
            || fail "$what: no '# Loom ... nranks $n' header"
        grep -q "^# algorithm per size (float): 1024-" "$out" \
            || fail "$what: no algorithm-per-size line"
        # each range names its path; shared memory all through is said so
        algos=$(grep "^# algorithm per size" "$out")
        echo "$algos" | sed 's/^[^:]*: //; s/, /\n/g' | grep -vqE '^[0-9]+-[0-9]+ [a-z_]+ over (shared memory|tcp|shared memory \+ tcp)$' \
            && fail "$what: a size range without its path: $algos"
        if echo "$algos" | grep -q ' over tcp'; then
            grep -q '^# path: shared memory for every size' "$out" && fail "$what: tcp ran, header says shared memory only"
        else
            grep -q '^# path: shared memory for every size' "$out" || fail "$what: every size over shared memory, header does not say so: $algos"
        fi
        [ "$(grep -c '^#  Rank ' "$out")" -eq "$n" ] \
            || fail "$what: want $n '#  Rank' lines"
        grep -q '^#  *size  *count  *type  *redop  *root  *time  *algbw  *busbw  *#wrong  *time  *algbw  *busbw  *#wrong$' "$out" \
            || fail "$what: column header differs from nccl-tests'"
        grep -qx '# Out of bounds values : 0 OK' "$out" || fail "$what: closing line not OK"
        grep -q '^# Avg bus bandwidth    : [0-9.e+-]* *$' "$out" \
            || fail "$what: no average bus bandwidth line"
        fac=$(kind "$prog")
        case $prog in
        all_gather_perf|reduce_scatter_perf) mult=$n ;;
        *) mult=1 ;;
        esac
        case $prog in
        broadcast_perf|reduce_perf) redop=none; [ $prog = reduce_perf ] && redop=sum; root=0 ;;
        *) redop=none; [ $prog = all_gather_perf ] || redop=sum; root=-1 ;;
        esac
        # The data rows, checked field by field with awk.
        grep -v '^#' "$out" | awk -v fac="$fac" -v n="$n" -v mult="$mult" \
            -v redop="$redop" -v root="$root" -v what="$what" '
            function bad(msg) { print "FAIL: " what ": row " NR ": " msg; errs++ }
            function near(a, b, tol) { d = a - b; if (d < 0) d = -d; return d <= tol }
            {
                rows++
                if (NF != 13) { bad(NF " fields, want 13"); next }
                want = (rows == 1) ? 1024 : 65536
                # size = count * 4 (float); the count a multiple of mult, the
                # size the request rounded down to that.
                if ($1 != $2 * 4) bad("size " $1 " != count " $2 " * 4")
                if ($2 % mult) bad("count " $2 " not a multiple of " mult)
                if ($1 > want || $1 <= want - 4 * mult) bad("size " $1 " for a request of " want)
                if ($3 != "float") bad("type " $3)
                if ($4 != redop) bad("redop " $4 ", want " redop)
                if ($5 != root) bad("root " $5 ", want " root)
                if ($9 != "0" || $13 != "0") bad("#wrong " $9 "/" $13)
                f = fac == "allreduce" ? 2 * (n - 1) / n : fac == "gather" ? (n - 1) / n : 1
                for (c = 6; c <= 10; c += 4) {
                    if ($c <= 0) bad("time " $c)
                    alg = $1 / ($c * 1e3)
                    if (!near($(c + 1), alg, 0.006 + alg * 0.002))
                        bad("algbw " $(c + 1) " != size/time " alg)
                    if (!near($(c + 2), $(c + 1) * f, 0.012))
                        bad("busbw " $(c + 2) " != algbw * " f)
                }
            }
            END {
                if (rows != 2) { print "FAIL: " what ": " rows " data rows, want 2"; errs++ }
                exit errs > 0
            }' || failures=$((failures + 1))
        [ "$failures" -eq "$f0" ] && pass "$what"
    done
done

# 2. The test-only corruption hook: rank 0 spoils one element of its result.
for prog in all_reduce_perf all_gather_perf broadcast_perf \
            reduce_scatter_perf reduce_perf; do
    out="$work/corrupt.$prog"
    LOOM_PERF_CORRUPT=1 perf 2 "$out" "$prog" -b 4K -e 4K -n 2 -w 0 -d int32
    f0=$failures
    [ "$rc" -ne 0 ] || fail "$prog corrupted: exit 0"
    grep -qx '# Out of bounds values : 2 FAILED' "$out" \
        || fail "$prog corrupted: want '2 FAILED' (one per column): $(grep Out "$out")"
    grep -v '^#' "$out" | awk '$9 != 1 || $13 != 1 { exit 1 }' \
        || fail "$prog corrupted: #wrong columns are not 1"
    [ "$failures" -eq "$f0" ] && pass "$prog: corrupted result fails"
done

# 3. Every type and operation, blocking calls, max time over ranks, CSV and
# JSON lines.
out="$work/all"
perf 3 "$out" all_reduce_perf -b 64 -e 256 -f 4 -n 2 -w 1 -d all -o all -z 1 -a 3 \
    -F "$work/all.csv" -J "$work/all.json"
f0=$failures
[ "$rc" -eq 0 ] || fail "all types/ops: exit $rc"
rows=$(grep -vc '^#' "$out")
[ "$rows" -eq 120 ] || fail "all types/ops: $rows rows, want 12 types x 5 ops x 2 sizes"
grep -q 'blocking: 1  time: max' "$out" || fail "-z 1 -a 3 not in the header"
[ "$(grep -vc '^#' "$out")" -eq "$(grep -c ' 0  *[0-9.]*  *[0-9.]*  *[0-9.]*  *0$' "$out")" ] \
    || fail "all types/ops: some #wrong is not 0"
head -n 1 "$work/all.csv" | grep -qx 'size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,collective,nranks' \
    || fail "CSV header"
[ "$(wc -l <"$work/all.csv")" -eq 121 ] || fail "CSV: want 121 lines"
sed -n 2p "$work/all.csv" | grep -qx '64,64,int8,sum,-1,[0-9.]*,[0-9.]*,[0-9.]*,0,[0-9.]*,[0-9.]*,[0-9.]*,0,all_reduce,3' \
    || fail "CSV first row: $(sed -n 2p "$work/all.csv")"
[ "$(wc -l <"$work/all.json")" -eq 120 ] || fail "JSON: want 120 lines"
head -n 1 "$work/all.json" | grep -q '^{"collective":"all_reduce","nranks":3,"algorithm":"[a-z]*","size":64,"count":64,"type":"int8","redop":"sum","root":-1,"oop_time_us":[0-9.]*,"oop_algbw":[0-9.]*,"oop_busbw":[0-9.]*,"oop_wrong":0,"ip_time_us":[0-9.]*,"ip_algbw":[0-9.]*,"ip_busbw":[0-9.]*,"ip_wrong":0,"library":"Loom [0-9.]*","transport":"tcp"}$' \
    || fail "JSON first row: $(head -n 1 "$work/all.json")"
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$work/all.json" \
        || fail "JSON lines do not parse"
fi
[ "$failures" -eq "$f0" ] && pass "all types and ops, -z 1 -a 3, CSV and JSON"

# 4. -F - prints CSV instead of the table; -c 0 reports N/A.
perf 2 "$work/csv" broadcast_perf -b 1K -e 1K -n 1 -w 0 -c 0 -r 1 -F -
f0=$failures
[ "$rc" -eq 0 ] || fail "-F -: exit $rc"
grep -q '^1024,256,float,none,1,[0-9.]*,[0-9.]*,[0-9.]*,N/A,[0-9.]*,[0-9.]*,[0-9.]*,N/A,[a-z_]*,[0-9]*$' "$work/csv" \
    || fail "-F - -c 0 -r 1: $(cat "$work/csv")"
grep -q '^ *1024 ' "$work/csv" && fail "-F -: the table was printed too"
[ "$failures" -eq "$f0" ] && pass "CSV on stdout, -c 0, -r 1"

# 5. Errors: a rank without its size; a bad option; a root beyond the ranks.
#    (Joining without a rank table: test_launch.sh.)
f0=$failures
(unset LOOM_RANK_TABLE RANK_TABLE_FILE LOOM_RANK WORLD_SIZE; RANK=0 $BOUND \
    "$builddir/perf/all_reduce_perf" -b 8 -e 8 >"$work/nt.out" 2>"$work/nt.err")
rc=$?
[ "$rc" -eq 2 ] || fail "RANK without WORLD_SIZE: exit $rc, want 2"
grep -qx 'all_reduce_perf: RANK gives rank 0 but WORLD_SIZE is not set' "$work/nt.err" \
    || fail "RANK without WORLD_SIZE: message: $(cat "$work/nt.err")"
"$builddir/perf/all_reduce_perf" -d complex >/dev/null 2>"$work/bad.err"
rc=$?
[ "$rc" -eq 2 ] || fail "-d complex: exit $rc, want 2"
grep -q -- "-d wants .* (got 'complex')" "$work/bad.err" || fail "-d complex: $(cat "$work/bad.err")"
"$builddir/perf/all_reduce_perf" -b 2M -e 1M >/dev/null 2>"$work/be.err"
[ $? -eq 2 ] && grep -q -- '-b 2097152 is larger than -e 1048576' "$work/be.err" \
    || fail "-b > -e: $(cat "$work/be.err")"
perf 2 "$work/root" reduce_perf -b 8 -e 8 -r 2
[ "$rc" -ne 0 ] && grep -q -- '-r 2: there are only 2 ranks' "$work/root.err" \
    || fail "-r 2 on 2 ranks: exit $rc: $(cat "$work/root.err")"
[ "$failures" -eq "$f0" ] && pass "error messages"

# 6. --ranktable, RANK_TABLE_FILE with RANK_ID (HCCL's variables) and -A.
f0=$failures
$BOUND "$RUN" -n 2 --timeout 60 -- sh -c 't=$LOOM_RANK_TABLE; unset LOOM_RANK_TABLE; exec "$0" --ranktable "$t" -b 64K -e 64K -n 2 -w 0 -A allreduce=rd' \
    "$builddir/perf/all_reduce_perf" >"$work/rt.raw" 2>"$work/rt.err"
rc=$?
sed -n 's/^\[0\] //p' "$work/rt.raw" >"$work/rt"
[ "$rc" -eq 0 ] || fail "--ranktable: exit $rc: $(cat "$work/rt.err")"
grep -q '^# algorithm per size (float): 65536-65536 rd over tcp$' "$work/rt" \
    || fail "-A allreduce=rd: $(grep algorithm "$work/rt")"
grep -qx '# Out of bounds values : 0 OK' "$work/rt" || fail "--ranktable: not OK"
$BOUND "$RUN" -n 3 --timeout 60 -- sh -c 'export RANK_TABLE_FILE=$LOOM_RANK_TABLE RANK_ID=$LOOM_RANK; unset LOOM_RANK_TABLE LOOM_RANK; exec "$0" -b 4K -e 4K -n 2 -w 0' \
    "$builddir/perf/all_gather_perf" >"$work/hccl.raw" 2>"$work/hccl.err"
rc=$?
[ "$rc" -eq 0 ] || fail "RANK_TABLE_FILE/RANK_ID: exit $rc: $(cat "$work/hccl.err")"
grep -qx '\[0\] # Out of bounds values : 0 OK' "$work/hccl.raw" || fail "RANK_TABLE_FILE: not OK"
perf 2 "$work/badalgo" all_reduce_perf -A nosuch
[ "$rc" -ne 0 ] && grep -q -- '-A nosuch: ' "$work/badalgo.err" \
    || fail "-A nosuch: exit $rc: $(cat "$work/badalgo.err")"
[ "$failures" -eq "$f0" ] && pass "--ranktable, RANK_TABLE_FILE/RANK_ID, -A"

# 7. perf/plot renders CSV, JSON and a table side by side (needs gnuplot):
#    two panels (busbw, time), sizes labelled in B/KiB, times in us/ms/s (a
#    sanitizer build's calls may all take over 1 ms, so any of the three), the
#    key naming library, transport and rank count where the file says them.
PLOT="$srcdir/perf/plot"
if command -v gnuplot >/dev/null 2>&1; then
    f0=$failures
    sh "$PLOT" -o "$work/p.svg" -t "test plot" "$work/all.csv:csv run" \
        "$work/all.json:json run" "$work/rt" >"$work/plot.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || fail "plot: exit $rc: $(cat "$work/plot.out")"
    grep -q '<svg' "$work/p.svg" 2>/dev/null || fail "plot: no SVG written"
    for label in "csv run: 3 ranks" "json run: Loom [0-9.]* tcp, 3 ranks" "rt: Loom [0-9.]* tcp, 2 ranks" \
                 "64 B" "256 B" "test plot: bus bandwidth (oop)" "test plot: time per call (oop)" \
                 "[0-9.]* [um]*s"; do
        grep -q ">$label<" "$work/p.svg" 2>/dev/null || fail "plot: no '$label' in the SVG"
    done
    sh "$PLOT" -o "$work/big.svg" -v time "$work/rt" >/dev/null 2>&1
    grep -q '>64 KiB<' "$work/big.svg" && ! grep -q 'bus bandwidth' "$work/big.svg" ||
        fail "plot -v time: want one panel with '64 KiB'"
    sh "$PLOT" -o "$work/p.png" "$work/all.csv" >/dev/null 2>&1
    [ "$(head -c 4 "$work/p.png" 2>/dev/null | tail -c 3)" = PNG ] || fail "plot: no PNG written"
    # A slow machine's CSV: every busbw rounds to 0.0000. The plot computes
    # busbw from size, time and all_reduce's factor 2(n-1)/n: 1 MiB in
    # 1000 us on 4 ranks is 1.5729 GB/s, drawn on the busbw panel.
    {
        echo 'size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong,collective,nranks'
        echo '8,2,float,sum,-1,900.000,0.0000,0.0000,0,900.000,0.0000,0.0000,0,all_reduce,4'
        echo '1024,256,float,sum,-1,950.000,0.0000,0.0000,0,950.000,0.0000,0.0000,0,all_reduce,4'
        echo '1048576,262144,float,sum,-1,1000.000,0.0000,0.0000,0,1000.000,0.0000,0.0000,0,all_reduce,4'
    } >"$work/slow.csv"
    sh "$PLOT" -o "$work/slow.svg" -y lin "$work/slow.csv" >"$work/slow.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && grep -q 'bus bandwidth' "$work/slow.svg" ||
        fail "plot of an all-zero busbw CSV: exit $rc: $(cat "$work/slow.out")"
    # nccl-tests' CSVs name no collective: all 0 there draws the time panel
    sed 's/,collective,nranks$//; s/,all_reduce,4$//' "$work/slow.csv" >"$work/slow-old.csv"
    sh "$PLOT" -o "$work/slow-old.svg" "$work/slow-old.csv" >"$work/slow-old.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && grep -q 'time per call' "$work/slow-old.svg" &&
        grep -q 'no busbw to plot' "$work/slow-old.out" ||
        fail "plot of an all-zero CSV naming no collective: exit $rc: $(cat "$work/slow-old.out")"
    sh "$PLOT" -o "$work/x.svg" "$work/nosuch.csv" >/dev/null 2>"$work/plot.err"
    [ $? -ne 0 ] && grep -q 'nosuch.csv' "$work/plot.err" || fail "plot: missing file not reported"
    [ "$failures" -eq "$f0" ] && pass "plot"
else
    echo "skip: plot (no gnuplot)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
