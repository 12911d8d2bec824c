#!/bin/sh
# The communicator suite and the collective matrix again with shared memory
# off (LOOM_SHM=0), so that ranks on one host take the TCP path: the same
# results, the same failure reports.
set -e
: "${LOOM_BUILDDIR:=.}"
LOOM_SHM=0 "$LOOM_BUILDDIR/tests/integration/test_comm"
LOOM_SHM=0 LOOM_TEST_BIG=${LOOM_TEST_BIG:-300007} "$LOOM_BUILDDIR/tests/integration/test_coll" 2 3 4 5 8
