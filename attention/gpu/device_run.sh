#!/bin/bash
# One call on the lent H200 (no Bazel there): builds the indexer kernels and
# their bench with that machine's nvcc, shows which matrix instructions the
# logits kernel uses (SASS), runs the gtest suite (a binary built here with
# `bazel build --config=cuda //attention/gpu:indexer_kernels_test`, passed as
# $1) plainly and under compute-sanitizer memcheck, times our kernels at the
# presets' shapes, and in the same call the torch equivalents and the card's
# ceilings (torch_reference.py). The table comes last.
#
# Usage (from the repository root, or any copy of it):
#   attention/gpu/device_run.sh [path/to/indexer_kernels_test]
# Environment: DSA_CUDA_ARCH (default 90), OUT (default /tmp/dsa_out).
set -u -o pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/dsa_out}"
mkdir -p "$out"
arch="${DSA_CUDA_ARCH:-90}"
test_bin="${1:-}"
build=/tmp/dsa_build
mkdir -p "$build"
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
  --format=csv
nvcc --version | tail -1

echo "== build (nvcc, sm_$arch)"
gencode="-gencode=arch=compute_$arch,code=sm_$arch"
flags="-std=c++17 -O3 -DDSA_GPU_CUDA=1 -I. $gencode"
for src in indexer_logits indexer_topk device_runtime; do
  nvcc $flags -Xptxas -v -x cu -c "attention/gpu/$src.hip.cc" \
    -o "$build/$src.o" > "$build/ptxas_$src.txt" 2>&1 &
done
g++ -std=c++17 -O2 -I. -c attention/gpu/indexer_bench.cc -o "$build/bench.o" || exit 1
wait
cat "$build"/ptxas_*.txt > "$out/ptxas.txt"
for src in indexer_logits indexer_topk device_runtime; do
  [ -s "$build/$src.o" ] || { cat "$build/ptxas_$src.txt"; exit 1; }
done
grep -E "Compiling entry|registers|spill" "$out/ptxas.txt" | grep -A2 "MmaKernel\|TopKKernel" | grep -v "^--"
nvcc $gencode -o "$build/indexer_bench" "$build"/*.o || exit 1

echo "== SASS of the logits kernel (e4m3fn instance)"
cuobjdump -sass "$build/indexer_logits.o" > "$build/indexer_logits.sass"
awk '/Function : .*IndexerLogitsMmaKernelILNS_3gpu9Fp8FormatE0/ {on=1; next}
     /Function :/ {on=0}
     on' "$build/indexer_logits.sass" > "$out/mma_kernel.sass"
for op in HMMA QGMMA HGMMA FFMA LDSM; do
  printf '%s=%s ' "$op" "$(grep -c "$op" "$out/mma_kernel.sass")"
done
echo

if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== gtest"
  "$test_bin" 2>&1 | tee "$out/gtest.txt" | grep -E "^\[  (PASSED|FAILED)|FAILED|path|checked|Failure" 
  echo "== compute-sanitizer memcheck over the gtest"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$test_bin" \
    > "$out/memcheck.txt" 2>&1
  echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.txt" | tail -3
else
  echo "== gtest skipped: no test binary given"
fi

if [ "${DSA_NCU:-0}" = 1 ]; then
  echo "== ncu (one launch of each kernel, clocks left alone)"
  ncu --clock-control none -k "regex:IndexerLogitsMma|IndexerTopK" -c 2 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis \
    "$build/indexer_bench" --heads=32 --tokens=8192 --iters=1 \
    > "$out/ncu.txt" 2>&1
  grep -E "IndexerLogitsMma|IndexerTopK|Duration|Throughput|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Stall|Eligible|No Eligible" \
    "$out/ncu.txt" | head -60
fi

echo "== ours"
: > "$out/ours.txt"
for heads in 32 64; do
  for tokens in 1024 1900 8192; do
    "$build/indexer_bench" --heads=$heads --tokens=$tokens --iters=30 \
      2>&1 | tee -a "$out/ours.txt" || echo "bench failed: heads=$heads tokens=$tokens"
  done
done

echo "== torch (same call)"
python3 attention/gpu/torch_reference.py "$out/ours.txt" 2>&1 | tee "$out/torch.txt"
