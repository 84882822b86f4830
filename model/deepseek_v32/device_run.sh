#!/bin/bash
# helper "step", round 1 (and 2): the dense ops of a layer step (gemm on cuBLASLt and
# on the tiled fallback, rms_norm, rope, residual_add, cast, random_fill) on
# the H200, the runner suite on cuda (skips, naming the attention op it
# lacks), and one GLM-5.1-shaped layer's dense ops timed, with torch's
# equivalents in the same call.
set -u
D="$(cd "$(dirname "$0")" && pwd)"
W=/tmp/dsa_step
rm -rf "$W" && mkdir -p "$W" && tar xJf "$D/payload.tar.xz" -C "$W"
export LD_LIBRARY_PATH="$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
# cuBLASLt is dlopen'ed: the toolkit's, or the one torch's wheels carry.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
ldconfig -p | grep -m2 cublasLt
B="$W/bin"
t0=$(date +%s)
stamp() { echo "-- t=$(( $(date +%s) - t0 ))s"; }
nvidia-smi -L
echo "== dense op suite on cuda (gemm on cuBLASLt where x is bf16)"
timeout 20 "$B/dense_ops_test" --gtest_brief=1 --gtest_filter='*/cuda'; echo "rc=$?"; stamp
echo "== the same, gemm forced onto the tiled fallback"
DSA_GEMM_BACKEND=tiled timeout 10 "$B/dense_ops_test" --gtest_brief=1 --gtest_filter='*Gemm*/cuda'; echo "rc=$?"; stamp
echo "== runner suite on cuda (skips while an attention op is missing)"
timeout 10 "$B/model_runner_test" --gtest_filter='*/cuda:*/cuda_*' > "$W/runner.txt" 2>&1; echo "rc=$?"
grep -A1 ": Skipped" "$W/runner.txt" | grep -v -e "Skipped" -e "^--" | sort | uniq -c | head -5
grep -E "^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test" "$W/runner.txt"; stamp
if [ -x "$B/model_runner_test_full" ]; then
echo "== runner suite on cuda, built from h-step merged with the integration branch and h-elem (all seven attention ops + dense ops on cuda)"
timeout 45 "$B/model_runner_test_full" --gtest_filter='*/cuda:*/cuda_*' > "$W/runner_full.txt" 2>&1; echo "rc=$?"
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|actual|error|Skipped" "$W/runner_full.txt" | head -60
grep -A1 ": Skipped" "$W/runner_full.txt" | grep -v -e "Skipped" -e "^--" | sort | uniq -c | head -5; stamp
echo "== one GLM-5.1-shaped layer step on cuda (full step, bf16 activations), then its dense ops"
timeout 25 "$B/layer_step_bench_full" --platform=cuda --iters=10 1024 8192 2>&1 | tail -12; stamp
fi
echo "== timings (ours): gemm per projection, then one layer's dense ops"
timeout 12 "$B/dense_bench" 1024 8192 32; stamp
DSA_GEMM_BACKEND=tiled timeout 6 "$B/dense_bench" 1024; stamp
timeout 12 "$B/layer_step_bench" --platform=cuda --iters=20 32; stamp
echo "== timings (torch, same card, same call)"
timeout 20 python3 "$D/dense_torch_reference.py" 1024 8192 32; stamp
echo "== compute-sanitizer memcheck (gemm both backends, rope, rms_norm, residual)"
timeout 20 compute-sanitizer --tool memcheck --print-limit 10 "$B/dense_ops_test" --gtest_brief=1 \
  --gtest_filter='*BatchedGemm*/cuda:*Rope*/cuda:*RmsNorm*/cuda:*ResidualAdd*/cuda' 2>&1 | tail -5
DSA_GEMM_BACKEND=tiled timeout 12 compute-sanitizer --tool memcheck --print-limit 10 "$B/dense_ops_test" \
  --gtest_brief=1 --gtest_filter='*BatchedGemm*/cuda' 2>&1 | tail -3; stamp
