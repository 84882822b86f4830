#!/bin/bash
# The sparse MLA prefill's device run for the seesaw body (issue 18, items 1
# and 4): the family's gtests (the seesaw cases against float64), the device
# layer's mma test, the op suite on cuda, sparse_mla_bench at the issue's
# shapes for this build and two others side by side, torch eager at the same
# shapes, compute-sanitizer memcheck and racecheck over small seesaw cases,
# in one call on the lent H200. Run from a folder that holds
#   bin/*.gz         kernels_test, bench, mma_bf16_test, mla_ops_test of the
#                    build under test (bazel build --config=cuda
#                    --dynamic_mode=off //attention/gpu/sparse_mla:kernels_test
#                    //attention/gpu/sparse_mla:bench
#                    //attention/gpu/device:mma_bf16_test
#                    //attention:mla_ops_test); bench_a, kernels_test_a of a
#                    second build; bench_main of the base commit
#   lib/             Debian's Abseil shared objects (build_payload.sh's way)
#   py/              torch_baseline.py and torch_timing.py
#   COMMIT           the build's commit
# beside a copy of this script; figures in testing/bench/RESULTS.md
# ("Sparse MLA prefill: the seesaw body").
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/ss_out}"; mkdir -p "$out"
work=/tmp/ss_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 PYTHONPATH="$here/py"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
K=_ZN3dsa9attention3gpu10sparse_mla21SparseMlaSeesawKernelILb0ELNS_3gpu9Fp8FormatE0EEEvNS1_15SparseMlaParamsElNS2_9MmaOutputE
cuobjdump --dump-sass --function "$K" "$work/kernels_test" > "$out/seesaw_test.sass" 2>&1
cuobjdump --dump-sass --function "$K" "$work/bench" > "$out/seesaw.sass" 2>&1
S="$out/seesaw.sass"
echo "== $(el) SASS $K: HGMMA $(grep -c HGMMA $S), LDL/STL $(grep -cE 'LDL|STL' $S), LDGSTS $(grep -c LDGSTS $S), FENCE $(grep -c FENCE $S), MUFU.EX2 $(grep -c MUFU.EX2 $S)"
G="$work/kernels_test"; B="$work/bench"
echo "== $(el) smoke"
timeout 30 "$G" --gtest_brief=1 --gtest_filter='*Bf16Cache100Heads*:*Bf16Cache72HeadsF32Io*' 2>&1 | tail -4; rc=$?
if [ "$rc" -ne 0 ]; then
  echo "smoke failed ($rc): the second build instead"
  G="$work/kernels_test_a"; B="$work/bench_a"
fi
echo "== $(el) gtest: sparse_mla kernels ($G)"
timeout 120 "$G" 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |  [A-Za-z0-9]+: path|Failure|got|Expected" | head -60
echo "== $(el) gtest: mma_bf16"
timeout 30 "$work/mma_bf16_test" --gtest_brief=1 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" | head -8
echo "== $(el) gtest: mla ops on cuda"
timeout 60 "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*/cuda*' 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" | head -8
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
echo "== $(el) bench: $B"
timeout 150 "$B" --iters=10 $H64 --tokens=8192 --then --iters=10 $H128 --tokens=8192 \
  --then --iters=20 $H64 --tokens=1024 --then --iters=20 $H128 --tokens=1024 \
  --then --iters=5 $H64 --tokens=32768 --then --iters=5 $H128 --tokens=32768 \
  --then --iters=10 $H64 --tokens=8192 --topk=1024 --then --iters=10 $H64 --tokens=8192 --topk=4096 \
  --then --iters=10 $H64 --tokens=8192 --then --iters=10 $H128 --tokens=8192 2>&1 | grep -v "^\[bench\]" | tee "$out/ours.txt"
echo "== $(el) bench: the second build, same call"
timeout 60 "$work/bench_a" --iters=10 $H64 --tokens=8192 --then --iters=10 $H128 --tokens=8192 2>&1 | grep -v "^\[bench\]"
echo "== $(el) bench: the base commit, same call"
timeout 60 "$work/bench_main" --iters=5 $H64 --tokens=8192 --then --iters=5 $H128 --tokens=8192 2>&1 | grep -v "^\[bench\]"
echo "== $(el) torch eager, same card"
timeout 100 python3 "$here/py/torch_baseline.py" --iters 5 --modes prefill 2>&1 | tail -10
echo "== $(el) compute-sanitizer memcheck / racecheck ($G)"
F='*Bf16Cache128HeadsTileEdges:*Bf16Cache72HeadsF32Io:*Bf16Cache100Heads'
timeout 90 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|Error" | head -8
timeout 90 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 "$G" --gtest_brief=1 --gtest_filter='*Bf16Cache100Heads' > "$out/racecheck.txt" 2>&1
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"; grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -12
echo "== $(el) done"
