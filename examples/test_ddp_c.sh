#!/bin/sh
# test_ddp_c.sh - the C API's data-parallel example at 2, 3 and 4 ranks,
# then at 4 through a kill -9 of rank 1 (-k: the 3 survivors shrink and go on).
b=${LOOM_BUILDDIR:-.}
for n in 2 3 4; do
    "$b/examples/ddp_train" -n $n -s 20 -t 60 || exit 1
done
"$b/examples/ddp_train" -n 4 -s 20 -t 120 -k 1
