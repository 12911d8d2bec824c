#!/bin/sh
# test_ddp_c.sh - the C API's data-parallel example at 2, 3 and 4 ranks.
b=${LOOM_BUILDDIR:-.}
for n in 2 3 4; do
    "$b/examples/ddp_train" -n $n -s 20 -t 60 || exit 1
done
