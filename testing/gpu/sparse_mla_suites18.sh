#!/bin/bash
# Folder layout: bin/{sparse_mla_bench,sparse_mla_kernels_test,mla_ops_test,flashmla_sparse_prefill}.gz,
# lib/ (Debian's Abseil objects mla_ops_test links), COMMIT.
# The final tree's sparse MLA suites on the H200 (issue 18): sparse_mla
# kernels_test, mla_ops_test's sparse MLA cases on cuda, memcheck over the
# fp8 seesaw cases; FlashMLA's sparse prefill kernel at decode row counts
# (the bf16 peer: sm_90 FlashMLA has no bf16 sparse decode) beside ours.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/final_out}"; mkdir -p "$out"
work=/tmp/final_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
echo "== $(el) sparse_mla kernels_test"
timeout 100 "$work/sparse_mla_kernels_test" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|tests ran|SKIPPED \]" "$out/kernels_test.txt" | head -10
echo "== $(el) mla_ops_test, cuda"
timeout 60 "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|tests ran" "$out/mla_ops.txt" | head -8
echo "== $(el) memcheck over the fp8 seesaw cases"
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 "$work/sparse_mla_kernels_test" --gtest_brief=1 \
  --gtest_filter='*SeesawFp8*:*SparseMlaGatherTest*' > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.txt" | head -3
echo "== $(el) bf16 decode shapes: ours, FlashMLA's sparse prefill kernel"
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
for rows in 32 128 512; do
  timeout 30 "$work/sparse_mla_bench" --mode=decode --cache=bf16 $H128 --context=8192 --requests=$rows --iters=30 --then \
    --mode=decode --cache=bf16 $H64 --context=8192 --requests=$rows --iters=30 2>&1 | grep -E "^sparse_mla|rror" | sed 's/^/ours /'
  timeout 30 "$work/flashmla_sparse_prefill" --iters=30 --heads=128 --v=128 --tokens=$rows --then --iters=30 --heads=64 --v=256 --tokens=$rows 2>&1 | sed 's/^/peer /'
done
echo "== $(el) done"
