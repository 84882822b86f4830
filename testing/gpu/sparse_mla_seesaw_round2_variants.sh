#!/bin/bash
# The sparse MLA seesaw body's second round on the H200 (issue 18, items 4
# and 1), first device run: the sanitizers and the gtests over the candidate
# build (e3), sparse_mla_bench at T = 8192 for the base commit and each
# variant side by side, two diagnostic builds (bench_xg: the consumers only
# wait for and release each part, no products; bench_xc: the producer copies
# nothing, so the consumers run on whatever shared memory holds; both with
# the bench's float64 check made non-fatal, built from temporary edits), and
# Nsight Compute over one launch of the candidate. Run from a folder that
# holds bin/*.gz (kernels_test_e3, mma_bf16_test, bench_main, bench,
# bench_e1, bench_e2, bench_e3, bench_xg, bench_xc: bazel build
# --config=cuda --dynamic_mode=off of //attention/gpu/sparse_mla:bench and
# :kernels_test at each commit, stripped and gzipped) and lib/ (Debian's
# Abseil shared objects), beside a copy of this script. Figures in
# testing/bench/RESULTS.md ("Sparse MLA prefill: the seesaw body").
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/ss_out}"; mkdir -p "$out"
work=/tmp/ss_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
K=_ZN3dsa9attention3gpu10sparse_mla21SparseMlaSeesawKernelILb0ELNS_3gpu9Fp8FormatE0EEEvNS1_15SparseMlaParamsElNS2_9MmaOutputE
for b in bench_main bench bench_e3; do
  cuobjdump --dump-sass --function "$K" "$work/$b" > "$out/$b.sass" 2>&1
  S="$out/$b.sass"
  echo "== SASS $b: HGMMA $(grep -c HGMMA $S) LDL/STL $(grep -cE 'LDL|STL' $S) FENCE $(grep -c FENCE $S) MEMBAR $(grep -c MEMBAR $S) STSM $(grep -c STSM $S) BAR.SYNC $(grep -c 'BAR.SYNC' $S) BAR.ARV $(grep -c 'BAR.ARV' $S) SYNCS $(grep -c SYNCS $S)"
done
G="$work/kernels_test_e3"
echo "== $(el) gtest: sparse_mla kernels e3"
timeout 100 "$G" 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|got|Expected" | head -40
echo "== $(el) gtest: mma_bf16"
timeout 30 "$work/mma_bf16_test" --gtest_brief=1 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" | head -8
echo "== $(el) racecheck e3"
timeout 90 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 "$G" --gtest_brief=1 --gtest_filter='*Bf16Cache100Heads' > "$out/racecheck.txt" 2>&1
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"; grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -8
echo "== $(el) memcheck e3"
F='*Bf16Cache128HeadsTileEdges:*Bf16Cache72HeadsF32Io:*Bf16Cache100Heads'
timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|Error" | head -8
H64="--heads=64 --v=256 --nope=192 --tokens=8192"; H128="--heads=128 --v=128 --nope=128 --tokens=8192"
echo "== $(el) bench A/B (64 heads then 128)"
for b in bench_main bench bench_e3 bench_xg; do
  echo "-- $b"; timeout 40 "$work/$b" --iters=10 $H64 --then --iters=10 $H128 2>&1 | grep -v "^\[bench\]" | grep -E "median|fail|row " | head -4
done
for b in bench_e1 bench_e2 bench_xc bench_e3 bench; do
  echo "-- $b"; timeout 25 "$work/$b" --iters=10 $H64 2>&1 | grep -v "^\[bench\]" | grep -E "median|fail|row " | head -3
done
echo "== $(el) ncu e3 (64 heads)"
timeout 120 ncu --clock-control none -k regex:Seesaw -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats "$work/bench_e3" --iters=1 $H64 > "$out/ncu.txt" 2>&1
grep -vE "^\[bench\]|^sparse_mla" "$out/ncu.txt" | grep -E "Throughput|Busy|Pipe|Hit Rate|Stall|stall|Issued|Eligible|Active|Bank|Registers|Duration|Elapsed|L2|L1|Shared|Warp Cycles|No Eligible|One or More" | head -80
echo "== $(el) done"
