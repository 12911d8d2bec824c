#!/bin/sh
# The communicator suite and the collective matrix again with shared memory
# off (LOOM_SHM=0), so that ranks on one host take the TCP path: the same
# results, the same failure reports. With more than one lane each way
# (LOOM_NSOCKS, default 1), so that large messages are striped and failures
# are read across several sockets; the default single lane is what the
# two-server, perf and soak tests run.
set -e
: "${LOOM_BUILDDIR:=.}"
LOOM_SHM=0 LOOM_NSOCKS=3 "$LOOM_BUILDDIR/tests/integration/test_comm"
LOOM_SHM=0 LOOM_NSOCKS=2 LOOM_TEST_BIG=${LOOM_TEST_BIG:-300007} "$LOOM_BUILDDIR/tests/integration/test_coll" 2 3 4 5 8
