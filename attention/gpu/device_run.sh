#!/bin/bash
# One call on the lent H200 (no Bazel there): builds the indexer kernels and
# their bench with that machine's nvcc for sm_90 (warp-level mma.sync, HMMA)
# and sm_90a (warpgroup wgmma, QGMMA), shows which matrix instructions the
# logits kernel uses (SASS), runs the gtest suite plainly and under
# compute-sanitizer memcheck (binaries built here with
# `bazel build --config=cuda --define=DSA_CUDA_ARCHS=<arch>
#  //attention/gpu:indexer_kernels_test`, passed as arguments), times our
# kernels at the presets' shapes (causal prefill at T = 1024 / 1900 / 8192 for
# 32 and 64 heads, and the paged decode of 32 requests x 8K), and in the same
# call the torch equivalents and the card's ceilings (torch_reference.py).
# The table comes last.
#
# Usage (from the repository root, or any copy of it):
#   attention/gpu/device_run.sh [test_binary_sm90a [test_binary_sm90]]
# Environment: OUT (default /tmp/dsa_out); DSA_NCU=1 adds an Nsight Compute
# pass over one launch of each kernel.
set -u -o pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/dsa_out}"
mkdir -p "$out"
build=/tmp/dsa_build
mkdir -p "$build"
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
  --format=csv
nvcc --version | tail -1

echo "== build (nvcc; sm_90a: wgmma path, sm_90: mma.sync path)"
g++ -std=c++17 -O2 -I. -c attention/gpu/indexer_bench.cc -o "$build/bench.o" || exit 1
for arch in 90a 90; do
  mkdir -p "$build/$arch"
  for src in indexer_logits indexer_topk device_runtime; do
    nvcc -std=c++17 -O3 -DDSA_GPU_CUDA=1 -I. \
      "-gencode=arch=compute_$arch,code=sm_$arch" -Xptxas -v \
      -x cu -c "attention/gpu/$src.hip.cc" -o "$build/$arch/$src.o" \
      > "$build/$arch/ptxas_$src.txt" 2>&1 &
  done
done
wait
: > "$out/ptxas.txt"
for arch in 90a 90; do
  for src in indexer_logits indexer_topk device_runtime; do
    cat "$build/$arch/ptxas_$src.txt" >> "$out/ptxas.txt"
    [ -s "$build/$arch/$src.o" ] || { cat "$build/$arch/ptxas_$src.txt"; exit 1; }
  done
  nvcc "-gencode=arch=compute_$arch,code=sm_$arch" -o "$build/$arch/indexer_bench" \
    "$build/$arch"/*.o "$build/bench.o" || exit 1
  echo "sm_$arch:"
  # The logits kernel that runs a 32-head prefill: on sm_90a the persistent
  # warp-specialised one (wide blocks of R = 8 rows), on sm_90 the mma.sync
  # one.
  if [ "$arch" = 90a ]; then kernel='PersistentKernelILNS_3gpu9Fp8FormatE0ELi8ELb1E'
  else kernel='MmaKernelILNS_3gpu9Fp8FormatE0'; fi
  grep -E "Compiling entry|registers|spill" "$build/$arch/ptxas_indexer_logits.txt" \
    "$build/$arch/ptxas_indexer_topk.txt" | grep -A2 "$kernel\|TopKKernel" \
    | grep -E "registers|spill" | sed 's/^.*ptxas info *: *//'
  cuobjdump -sass "$build/$arch/indexer_logits.o" > "$build/$arch/logits.sass"
  awk -v k="$kernel" '$0 ~ ("Function : .*" k) {on=1; next}
       /Function :/ {on=0}
       on' "$build/$arch/logits.sass" > "$out/mma_kernel_sm$arch.sass"
  printf '  SASS of the logits kernel (e4m3fn): '
  for op in QGMMA HGMMA HMMA FFMA LDSM LDGSTS SYNCS; do
    printf '%s=%s ' "$op" "$(grep -c "$op" "$out/mma_kernel_sm$arch.sass")"
  done
  echo
done

n=0
for test_bin in "$@"; do
  n=$((n + 1))
  [ -x "$test_bin" ] || { echo "no test binary $test_bin"; continue; }
  echo "== gtest $test_bin"
  "$test_bin" > "$out/gtest_$n.txt" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|path|checked|Failure" "$out/gtest_$n.txt" | head -20
  echo "== compute-sanitizer memcheck over $test_bin"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 "$test_bin" \
    > "$build/memcheck_$n.txt" 2>&1
  echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$build/memcheck_$n.txt" | tail -3
  tail -5 "$build/memcheck_$n.txt" > "$out/memcheck_$n.txt"
done

if [ "${DSA_NCU:-0}" = 1 ]; then
  echo "== ncu (one launch of each kernel, clocks left alone)"
  ncu --clock-control none -k "regex:IndexerLogitsPersistent|IndexerTopK" -c 2 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis \
    "$build/90a/indexer_bench" --heads=32 --tokens=8192 --iters=1 \
    > "$build/ncu.txt" 2>&1
  grep -E "IndexerLogitsPersistent|IndexerTopK|Duration|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Eligible Warps|highest-utilized|stalled" \
    "$build/ncu.txt" | head -40
fi

echo "== ours"
: > "$out/ours.txt"
for heads in 32 64; do
  for tokens in 1024 1900 8192; do
    "$build/90a/indexer_bench" --heads=$heads --tokens=$tokens --iters=30 \
      2>&1 | tee -a "$out/ours.txt" || echo "bench failed: heads=$heads tokens=$tokens"
  done
done
# Paged decode: 32 requests of 8K cached tokens, one query row each.
"$build/90a/indexer_bench" --heads=32 --tokens=8192 --decode=32 --iters=50 \
  2>&1 | tee -a "$out/ours.txt" || echo "bench failed: decode"
echo "-- the sm_90 build (mma.sync), for comparison"
for heads in 32 64; do
  "$build/90/indexer_bench" --heads=$heads --tokens=8192 --iters=30 2>&1 \
    | sed 's/^ours_/sm90_/' | tee -a "$out/ours_sm90.txt"
done

echo "== torch (same call)"
python3 attention/gpu/torch_reference.py "$out/ours.txt" 32 2>&1 | tee "$out/torch.txt"
