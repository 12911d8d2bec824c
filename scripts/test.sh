#!/bin/sh
# The README's test command: install dependencies, build, run every test.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build"
cd "$top/build"
rc=0
make -j"$(nproc)" check >check.out 2>&1 || rc=$?
grep -E '^(PASS|FAIL|XFAIL|XPASS|ERROR|SKIP):' check.out || true
# each failed test's log, wherever its folder (its FAIL lines first: a
# script that checks many things prints one per failed check)
for t in $(sed -n 's/^\(FAIL\|ERROR\): //p' check.out); do
    f=$t.log
    [ -f "$f" ] || continue
    echo "==== $f"
    grep -E '^(FAIL|SKIP)' "$f" | head -c 8000
    echo "---- last lines"
    tail -40 "$f"
done
pass=$(grep -c '^PASS:' check.out || true)
fail=$(grep -cE '^(FAIL|ERROR|XPASS):' check.out || true)
skip=$(grep -c '^SKIP:' check.out || true)
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
