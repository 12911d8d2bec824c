#!/bin/sh
# The collective matrix on 4 ranks joined through the shipped version 2.0
# loopback rank table (net_layer 0 instances server-a on 127.0.0.2 and
# server-b on 127.0.0.3, two ranks each).
set -e
: "${LOOM_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${LOOM_BUILDDIR:=.}"
LOOM_TEST_RANKTABLE=$LOOM_SRCDIR/etc/ranktables/two-server-2.0.json \
LOOM_TEST_BIG=${LOOM_TEST_BIG:-100003} \
    exec "$LOOM_BUILDDIR/tests/integration/test_coll" 4
