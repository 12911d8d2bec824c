#!/bin/sh
# The collective matrix on 4 ranks joined through the shipped 2-server
# loopback rank table (servers 127.0.0.2 and 127.0.0.3).
set -e
: "${LOOM_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${LOOM_BUILDDIR:=.}"
LOOM_TEST_RANKTABLE=$LOOM_SRCDIR/etc/ranktables/two-server.json \
LOOM_TEST_BIG=${LOOM_TEST_BIG:-100003} \
    exec "$LOOM_BUILDDIR/tests/integration/test_coll" 4
