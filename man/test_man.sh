#!/bin/sh
# test_man.sh - the manual pages: each renders with groff (and the section-3
# pages with man -l) without a warning, and every public call in
# include/loom.h is named in the NAME line of a section-3 page.
set -u
builddir=${LOOM_BUILDDIR:-.}
srcdir=${LOOM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v groff >/dev/null 2>&1 || { echo "skip: groff is not installed"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The installed layout (man1/, man3/), which the perf pages' .so links name.
tree=$(mktemp -d "${TMPDIR:-/tmp}/test_man.XXXXXX") || exit 1
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/man1" "$tree/man3"
cp "$srcdir"/man/*.3 "$tree/man3/"
cp "$srcdir"/man/*.1 "$builddir"/man/*.1 "$tree/man1/" 2>/dev/null
ls "$tree/man3" | grep -q . || { echo "FAIL: no section-3 pages in $srcdir/man"; exit 1; }
for p in "$tree"/man3/*.3 "$tree"/man1/*.1; do
    [ -f "$p" ] || continue
    rel=${p#"$tree"/}
    w=$(cd "$tree" && groff -man -ww -z -Tutf8 -s "$rel" 2>&1)
    [ -z "$w" ] || fail "$rel: $w"
done
if command -v man >/dev/null 2>&1; then
    for p in "$tree"/man3/*.3; do
        w=$(MANWIDTH=80 man -l "$p" 2>&1 >/dev/null)
        [ -z "$w" ] || fail "man -l ${p#"$tree"/}: $w"
    done
fi

names=$(sed -n '/^\.SH NAME/{n;p;}' "$srcdir"/man/*.3 | sed 's/ \\-.*//' | tr -d ',')
for f in $(grep -o 'LOOM_API [^(]*(' "$srcdir/include/loom.h" | grep -o 'loom_[a-z0-9_]*($' | tr -d '('); do
    echo " $names " | tr ' ' '\n' | grep -qx "$f" || fail "$f: no section-3 page names it"
done
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all manual pages render; every public call has a page"
