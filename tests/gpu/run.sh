#!/bin/bash
# tests/gpu/run.sh [BUILDDIR] - the CUDA adapter on a GPU machine, in under
# five minutes: build (or reuse BUILDDIR), then
#   test_cuda_device        2 ranks on one GPU, as an application links it
#   gpu_coll  2 and 4 ranks every collective on device buffers (float32,
#                           float16, bfloat16, int32), the ordering test
#                           (kernel -> allreduce -> kernel, one
#                           cudaStreamSynchronize, exact), the call
#                           returning long before the op, enqueue time
#   gpu_coll --events       the same through the event-polling fallback
#   gpu_perf  4 and 2 ranks allreduce busbw, device beside host buffers, at
#                           1 MiB and 64 MiB
#   all_reduce_perf         the host-buffer reference from perf/
# Every rank runs on device 0 (LOOM_CUDA_DEVICE=0). Prints PASS/FAIL per
# step and exits non-zero when one failed. Needs nvcc and a driver.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bdir=${1:-$top/build-gpu}
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start )) s] $*"; }
fail=0
pass() { echo "PASS: $1"; }
bad() { echo "FAIL: $1"; fail=1; }

stamp "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>&1 || echo "(nvidia-smi: not available)"
nproc

stamp "build in $bdir"
if [ -f "$bdir/Makefile" ]; then
    make -C "$bdir" -j"$(nproc)" >"$bdir/make-gpu.out" 2>&1 || { tail -30 "$bdir/make-gpu.out"; exit 1; }
else
    "$top/scripts/build.sh" "$bdir" --with-cuda || exit 1
fi
make -C "$bdir" -j"$(nproc)" gpu-programs adapters/cuda/tests/test_cuda_device \
    >"$bdir/make-gpu.out" 2>&1 || { tail -30 "$bdir/make-gpu.out"; exit 1; }

export LOOM_CUDA_DEVICE=0
run="$bdir/tools/loom-run"
step() {
    local name=$1
    shift
    stamp "$name"
    timeout 150 "$@"
    local rc=$?
    if [ "$rc" -eq 0 ]; then pass "$name"; else bad "$name (exit $rc)"; fi
}
step "test_cuda_device" "$bdir/adapters/cuda/tests/test_cuda_device"
step "gpu_coll, 2 ranks on one GPU" "$run" -n 2 --timeout 140 -- "$bdir/tests/gpu/gpu_coll"
step "gpu_coll, 4 ranks on one GPU" "$run" -n 4 --timeout 140 -- "$bdir/tests/gpu/gpu_coll"
step "gpu_coll --events, 2 ranks" "$run" -n 2 --timeout 140 -- "$bdir/tests/gpu/gpu_coll" --events
step "gpu_perf, 4 ranks" "$run" -n 4 --timeout 140 -- "$bdir/tests/gpu/gpu_perf"
step "gpu_perf, 2 ranks" "$run" -n 2 --timeout 140 -- "$bdir/tests/gpu/gpu_perf"
step "all_reduce_perf (host buffers), 4 ranks" "$run" -n 4 --timeout 140 -- \
    "$bdir/perf/all_reduce_perf" -b 1M -e 64M -f 64 -n 20 -w 5
stamp "done"
[ "$fail" -eq 0 ] && echo "tests/gpu/run.sh: all passed" || echo "tests/gpu/run.sh: FAILED"
exit "$fail"
