#!/bin/sh
# test_coll_verbs.sh - the collective matrix (every collective x dtype x op x
# count x placement, each rank checking its own result) over the verbs
# transport on its software model: forked ranks on 127.0.0.1, shared memory
# off so that every byte crosses verbs. Twice: 16 KiB chunks on 2..5 ranks
# (messages copied through bounce and staging slots), then 1 MiB chunks on
# 2 and 3 ranks (messages of 64 KiB and more zero-copy through the
# registration cache). The large count is 100003 elements so that the whole
# stays under a minute on a loaded 2-core machine (the full-size run:
# LOOM_TEST_BIG=1000003 VERBS_COLL_RANKS="2 3 4 5 8").
: "${LOOM_BUILDDIR:=.}"
prog=$LOOM_BUILDDIR/tests/integration/test_coll_verbs
if [ ! -x "$prog" ]; then
    echo "SKIP: $prog is not built (no <infiniband/verbs.h> at configure time)"
    exit 77
fi
export LOOM_TRANSPORT=verbs LOOM_TEST_VERBS_MODEL=1 LOOM_SHM=0
export LOOM_TEST_BIG="${LOOM_TEST_BIG:-100003}"
# shellcheck disable=SC2086 # the rank counts are a list
LOOM_CHUNK_SIZE=16K "$prog" ${VERBS_COLL_RANKS:-2 3 4 5} || exit 1
# shellcheck disable=SC2086
LOOM_CHUNK_SIZE=1M "$prog" ${VERBS_COLL_RANKS_ZCOPY:-2 3}
