#!/bin/bash
# The sparse MLA seesaw body's second round on the H200, second device run:
# the gtests, mla_ops on cuda and the sanitizers over the build under test
# (f), the seesaw cases and racecheck over f5, sparse_mla_bench at T = 8192
# for the base commit and each variant side by side, then the build under
# test at the issue's other shapes, the stall reasons and torch eager (this
# run passed its time limit during the second e3 bench, before those).
# Folder layout as sparse_mla_seesaw_round2_variants.sh (bin/: kernels_test_f,
# kernels_test_f5, mla_ops_test_f, mma_bf16_test, bench_main, bench_e2,
# bench_e3, bench_e4, bench_f, bench_f5; py/: torch_baseline.py and
# torch_timing.py).
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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
K=_ZN3dsa9attention3gpu10sparse_mla21SparseMlaSeesawKernelILb0ELNS_3gpu9Fp8FormatE0EEEvNS1_15SparseMlaParamsElNS2_9MmaOutputE
cuobjdump --dump-sass --function "$K" "$work/bench_f" > "$out/f.sass" 2>&1; S="$out/f.sass"
echo "== SASS f: HGMMA $(grep -c HGMMA $S) LDL/STL $(grep -cE 'LDL|STL' $S) FENCE $(grep -c FENCE $S) MEMBAR $(grep -c MEMBAR $S) STSM $(grep -c STSM $S) BAR.SYNC $(grep -c 'BAR.SYNC' $S) BAR.ARV $(grep -c 'BAR.ARV' $S)"
G="$work/kernels_test_f"
echo "== $(el) gtest: sparse_mla kernels f"
timeout 60 "$G" 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|got|Expected" | head -40
echo "== $(el) gtest: mma_bf16"
timeout 20 "$work/mma_bf16_test" --gtest_brief=1 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" | head -8
echo "== $(el) gtest: mla ops on cuda (f)"
timeout 40 "$work/mla_ops_test_f" --gtest_brief=1 --gtest_filter='*/cuda*' 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" | head -8
echo "== $(el) racecheck / memcheck f"
timeout 40 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 "$G" --gtest_brief=1 --gtest_filter='*Bf16Cache100Heads:*Bf16Cache128HeadsTileEdges' > "$out/racecheck.txt" 2>&1
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"; grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -6
F='*Bf16Cache128HeadsTileEdges:*Bf16Cache72HeadsF32Io:*Bf16Cache100Heads'
timeout 40 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|Error" | head -6
echo "== $(el) f5: seesaw cases, racecheck"
timeout 30 "$work/kernels_test_f5" --gtest_brief=1 --gtest_filter='*Bf16Cache100Heads:*Bf16Cache128HeadsTileEdges:*Bf16Cache128HeadsTrailingPadding:*Bf16Cache72HeadsF32Io' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|got" | head -6
timeout 30 compute-sanitizer --tool racecheck --racecheck-report all "$work/kernels_test_f5" --gtest_brief=1 --gtest_filter='*Bf16Cache128HeadsTileEdges' 2>&1 | grep -E "RACECHECK SUMMARY|FAILED"
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
b() { echo "-- $1"; shift; timeout 40 "$@" 2>&1 | grep -v "^\[bench\]" | grep -E "median|fail|row " | head -6; }
echo "== $(el) bench A/B at T = 8192 (64 heads, 128 heads)"
for v in main e3 e4 f f5 e2; do b $v "$work/bench_$v" --iters=10 $H64 --tokens=8192 --then --iters=10 $H128 --tokens=8192; done
for v in f e3; do b $v "$work/bench_$v" --iters=10 $H64 --tokens=8192 --then --iters=10 $H128 --tokens=8192; done
echo "== $(el) bench f: T = 1024, 32768, top-k sweep"
b f "$work/bench_f" --iters=20 $H64 --tokens=1024 --then --iters=20 $H128 --tokens=1024 --then --iters=10 $H64 --tokens=8192 --topk=1024 --then --iters=10 $H64 --tokens=8192 --topk=4096
echo "== $(el) stall reasons f (64 heads)"
timeout 40 ncu --clock-control none -k regex:Seesaw -c 1 --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum.per_second' "$work/bench_f" --iters=1 $H64 --tokens=8192 > "$out/ncu.txt" 2>&1
grep -E "stalled|pipe_tensor|shared|lts__" "$out/ncu.txt" | head -40
echo "== $(el) torch eager"
timeout 30 python3 "$here/py/torch_baseline.py" --iters 5 --modes prefill 2>&1 | tail -8
echo "== $(el) done"
