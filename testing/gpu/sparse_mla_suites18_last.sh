#!/bin/bash
# The committed tree's sparse MLA suites on the H200 (after the map keyed on
# the call's rows): sparse_mla kernels_test, mla_ops_test on cuda, memcheck
# over the seesaw cases, and one bench line a shape.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/last_out}"; mkdir -p "$out"
work=/tmp/last_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
echo "== $(el) sparse_mla kernels_test"
timeout 100 "$work/sparse_mla_kernels_test" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|SKIPPED \]" "$out/kernels_test.txt" | head -8
echo "== $(el) mla_ops_test, cuda"
timeout 60 "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure" "$out/mla_ops.txt" | head -6
echo "== $(el) memcheck over the seesaw cases"
timeout 100 compute-sanitizer --tool memcheck --print-limit 5 "$work/sparse_mla_kernels_test" --gtest_brief=1 \
  --gtest_filter='*MatchesFloat64Reference/Bf16Cache*:*SeesawFp8Crossover*' > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.txt" | head -3
timeout 60 "$work/sparse_mla_bench" --iters=20 --heads=128 --v=128 --nope=128 --tokens=8192 --then --iters=20 --heads=64 --v=256 --nope=192 --tokens=8192 2>&1 | grep -E "^sparse_mla|rror"
echo "== $(el) done"
