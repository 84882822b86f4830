#!/bin/bash
# The dense MHA prefill's old-against-new device run (issue 19): two builds'
# dense_mha_bench and dense_mha_kernels_test side by side with torch's cuDNN
# SDPA + matmul, Nsight Compute's kernel durations and compute-sanitizer
# memcheck, in one call on the lent H200. Run from a folder that holds
#   old/*.gz, new/*.gz   the two builds' binaries (bazel build --config=cuda
#                        --dynamic_mode=off //attention/gpu/dense_mha:bench
#                        //attention/gpu/dense_mha:kernels_test), gzipped;
#   mid/*.gz             optional: a build between them, whose kernels'
#                        durations Nsight Compute reads too
#   py/dense_mha/torch_baseline.py, py/device/torch_timing.py
# beside a copy of this script (DENSE_AB_CONFIRM=1: after a full run, a
# change to the TMA body alone: its test cases, the new bench, torch and the
# kernel durations); figures in testing/bench/RESULTS.md
# ("Dense prefill: a persistent tile scheduler", and the sections after it).
set -u -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/dense_out}"; mkdir -p "$out"
w=/tmp/dense_run; rm -rf $w; mkdir -p $w/old $w/new
for v in old new mid; do [ -d $D/$v ] || continue; mkdir -p $w/$v; for f in $D/$v/*.gz; do gzip -dc $f > $w/$v/$(basename $f .gz); done; chmod +x $w/$v/*; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); sec() { echo; echo "==== [$(( $(date +%s) - t0 )) s] $*"; }
kt() { grep -E "^\[ +(RUN|OK|PASSED|FAILED|SKIPPED) +\]|Failure|worst|Expected|exit" "$1" | sed 's/ (sm90[^)]*decompression)//' | cut -c1-140; }
sec card; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ "${DENSE_AB_CONFIRM:-0}" = 1 ]; then
  # A change to the TMA body alone, after a full run: its cases, the new
  # bench and torch in the same call, the new kernels' durations.
  sec "kernels_test new: the TMA body's cases"
  timeout 90 stdbuf -oL $w/new/dense_mha_kernels_test --gtest_filter='Cases/*:-*_warp:*_sm90_pipelined:*tiny*:*own_gemm*' > $out/kt.txt 2>&1; rc=$?; echo "exit $rc" >> $out/kt.txt
  kt $out/kt.txt | grep -v "RUN\|  OK " | tail -40
  [ $rc -ne 0 ] && { echo "KERNELS_TEST FAILED"; exit 1; }
  sec "bench new"; timeout 70 $w/new/dense_mha_bench | tee $out/bench_new.txt
  sec torch; timeout 70 python3 $D/py/dense_mha/torch_baseline.py | tee $out/torch.txt
fi
if [ "${DENSE_AB_CONFIRM:-0}" != 1 ]; then
sec "kernels_test new: every case"
timeout 150 stdbuf -oL $w/new/dense_mha_kernels_test > $out/kt.txt 2>&1; rc=$?; echo "exit $rc" >> $out/kt.txt
kt $out/kt.txt | grep -v "RUN\|  OK " | tail -60
sec "bench new"; timeout 70 $w/new/dense_mha_bench | tee $out/bench_new.txt
sec "bench old"; timeout 70 $w/old/dense_mha_bench | tee $out/bench_old.txt
sec torch; timeout 70 python3 $D/py/dense_mha/torch_baseline.py | tee $out/torch.txt
if [ $rc -ne 0 ]; then echo "KERNELS_TEST FAILED"; exit 1; fi
sec "memcheck new kernels_test (persistent, tile edges, bf16 output, tiny fp8)"
timeout 80 compute-sanitizer --tool memcheck --print-limit 5 $w/new/dense_mha_kernels_test --gtest_brief=1 --gtest_filter='*glm_persistent_2ctas:*persistent_1cta:*glm_tile_edges_e4m3fn:*deepseek_bf16_output:*tiny_v32' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" | tail -5
ncu_ms() {  # every kernel's duration (us) of `bench --once`, per shape: the 4th call's kernels
python3 - "$1" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
seq = [(r[ki][:60], float(r[vi].replace(",", "")) * {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(r[ui], 1.0)) for r in rows[1:]]
att = [i for i, (n, _) in enumerate(seq) if "DenseAttention" in n]
for shape in range(len(att) // 8):
    a = [seq[i][1] for i in att[shape * 8:shape * 8 + 8]]
    a4 = att[shape * 8 + 3]
    print("-- shape", shape, "(GLM 1024, DeepSeek 1024, GLM 8192): the 4th call's kernels; attention of the 8 calls: median", sorted(a)[4], "min", min(a))
    for n, us in seq[att[shape * 8 + 2] + 1:a4 + 1]: print(f"{us:9.1f} us  {n}")
PY
}
fi
for v in new mid old; do
  [ -d $w/$v ] && ls $w/$v/dense_mha_bench >/dev/null 2>&1 || continue
  sec "ncu $v --once: every kernel's duration"
  timeout 45 ncu --clock-control none --metrics gpu__time_duration.sum --csv $w/$v/dense_mha_bench --once > $out/ncu_$v.csv 2>&1; echo "exit $?"
  ncu_ms $out/ncu_$v.csv
done
[ "${DENSE_AB_CONFIRM:-0}" = 1 ] && { sec done; exit 0; }
sec "ncu new: the attention at GLM-5.1 T=1024, speed of light and warp states"
timeout 40 ncu --clock-control none -k regex:DenseAttention --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy $w/new/dense_mha_bench --once > $out/ncu_sol.txt 2>&1; echo "exit $?"
grep -E "Duration|Throughput|Pipe|Stall|Warp Cycles|Issued|Eligible|Active Warps|DRAM|L2 Cache|Compute \(SM\)|Memory \[" $out/ncu_sol.txt | head -40
sec done
