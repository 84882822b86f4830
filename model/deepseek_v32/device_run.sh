#!/bin/bash
# The layer step on the GPU machine (no Bazel there): unpacks the binaries
# device_pack.sh packed beside this script and runs, most important first,
# each section only while the run is under ~50 s:
#  - the dense op suite on cuda (gemm on cuBLASLt, and forced onto the tiled
#    fallback), then the runner suite on cuda: from this branch (skips,
#    naming the attention op it lacks) and, when packed, from a merged tree
#    that has every attention op (model_runner_test_full);
#  - one GLM-5.1-shaped layer step (layer_step_bench_full when packed, else
#    the layer's dense ops), the gemm per projection (dense_bench), and the
#    same gemms and RMSNorm in torch, in the same call;
#  - compute-sanitizer memcheck over the dense op suite.
set -u
D="$(cd "$(dirname "$0")" && pwd)"
W=/tmp/dsa_step
rm -rf "$W" && mkdir -p "$W" && tar xJf "$D/payload.tar.xz" -C "$W"
export LD_LIBRARY_PATH="$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
# cuBLASLt is dlopen'ed: the toolkit's, or the one torch's wheels carry.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
B="$W/bin"
t0=$(date +%s)
stamp() { echo "-- t=$(( $(date +%s) - t0 ))s"; }
time_left() { [ $(( $(date +%s) - t0 )) -lt "${1:-50}" ]; }
nvidia-smi -L
echo "== dense op suite on cuda (gemm on cuBLASLt where x is bf16)"
timeout 15 "$B/dense_ops_test" --gtest_brief=1 --gtest_filter='*/cuda'; echo "rc=$?"
echo "== the same, gemm forced onto the tiled fallback"
DSA_GEMM_BACKEND=tiled timeout 8 "$B/dense_ops_test" --gtest_brief=1 --gtest_filter='*Gemm*/cuda'; echo "rc=$?"; stamp
echo "== runner suite on cuda (this branch alone)"
timeout 8 "$B/model_runner_test" --gtest_filter='*/cuda:*/cuda_*' > "$W/runner.txt" 2>&1; echo "rc=$?"
grep -A1 ": Skipped" "$W/runner.txt" | grep -v -e "Skipped" -e "^--" | sort | uniq -c | head -3
grep -E "^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test" "$W/runner.txt"; stamp
if [ -x "$B/model_runner_test_full" ]; then
  echo "== runner suite on cuda, merged tree (every attention op and the dense ops on cuda)"
  timeout 25 "$B/model_runner_test_full" --gtest_filter='*/cuda:*/cuda_*' > "$W/runner_full.txt" 2>&1; echo "rc=$?"
  grep -E "^\[ +(OK|FAILED) +\] .*[0-9] ms" "$W/runner_full.txt" | sed 's/, where GetParam.*(/ (/' | head -30
  grep -E "\[ reference \]" "$W/runner_full.txt" | sed -E 's/.*relative error ([^ ]+).*/\1 &/' | sort -g | tail -5 | cut -d' ' -f2-
  grep -B1 -A3 "Failure" "$W/runner_full.txt" | grep -v "reference tolerance" | head -24
  grep -A1 ": Skipped" "$W/runner_full.txt" | grep -v -e "Skipped" -e "^--" | sort | uniq -c | head -3
  grep -E "^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test" "$W/runner_full.txt"; stamp
fi
if time_left 45; then
  echo "== one GLM-5.1-shaped layer step on cuda (bf16 activations, nothing read back)"
  bench="$B/layer_step_bench"; [ -x "$B/layer_step_bench_full" ] && bench="$B/layer_step_bench_full"
  timeout 15 "$bench" --platform=cuda --iters=5 1024 8192 2>&1 | tail -9; stamp
fi
if time_left 45; then
  echo "== gemm per projection (ours), then torch's in the same call"
  timeout 8 "$B/dense_bench" 1024 8192 32 | grep -E "backend|sum|rms_norm"; stamp
fi
if time_left 42; then
  timeout 15 python3 "$D/dense_torch_reference.py" 1024 8192 32 | grep -E "sum|rms_norm"; stamp
fi
if time_left 50; then
  echo "== compute-sanitizer memcheck (gemm both backends, rope, rms_norm, residual, cast)"
  timeout 8 compute-sanitizer --tool memcheck --print-limit 10 "$B/dense_ops_test" --gtest_brief=1 \
    --gtest_filter='*BatchedGemm*/cuda:*Misaligned*/cuda:*Rope*/cuda:*RmsNorm*/cuda:*ResidualAdd*/cuda' 2>&1 | tail -3
  DSA_GEMM_BACKEND=tiled timeout 5 compute-sanitizer --tool memcheck --print-limit 10 "$B/dense_ops_test" \
    --gtest_brief=1 --gtest_filter='*BatchedGemm*/cuda' 2>&1 | tail -2; stamp
fi
