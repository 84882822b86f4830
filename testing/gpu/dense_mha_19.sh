#!/bin/bash
# The dense MHA prefill's schedule round on the lent H200 (issue 19, item 1),
# in one call: Nsight Compute's attention-kernel durations of every build
# (`bench --once`: GLM-5.1 / DeepSeek-V3.2 T = 1024, GLM-5.1 T = 8192,
# GLM-5.1 / DeepSeek-V3.2 4 x 2048, DeepSeek-V3.2 T = 8192); the build
# fastest at GLM-5.1 T = 8192 (other than base) then gets the whole
# kernels_test, compute-sanitizer memcheck and racecheck over the TMA
# body's cases; then ROUNDS rounds of `bench --compare` of base and that
# build and `torch_baseline.py --compare` in turns (the same shapes, medians
# over the rounds); last, the full bench of that build and the full
# torch_baseline. Every step has a timeout. Run from a folder that holds
#   <build>/*.gz   each build's dense_mha_bench and dense_mha_kernels_test
#                  (bazel build --config=cuda --dynamic_mode=off -c opt
#                  //attention/gpu/dense_mha:kernels_test
#                  //attention/gpu/dense_mha:bench, stripped, gzipped), one
#                  folder called base and any others (BUILDS lists them);
#   py/dense_mha/torch_baseline.py, py/device/torch_timing.py
# beside a copy of this script, run from the repository root (the rounds'
# medians: testing/gpu/dense_mha_compare_summary.py). Back under $OUT: run.txt, kt.txt,
# ncu.txt, compare.txt, bench_full.txt, torch_full.txt; figures in
# testing/bench/RESULTS.md ("Dense prefill: the consumers without turns
# ..."). DIAG=1 (the round's second call): after the builds' kernel
# durations, their persistent cases, Nsight Compute's sections for base's
# and cuDNN's attention kernels (GLM-5.1 T = 8192 and 4 x 2048) and the SM
# clock and power while base's and torch's --compare loops run (run.txt,
# ncu.txt, ncu_sections.txt, clocks.txt, compare.txt, kt.txt).
set -u -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/dense_out}"; mkdir -p "$out"
builds="${BUILDS:-base A B C}"; rounds="${ROUNDS:-3}"
w=/tmp/dense_run; rm -rf $w; mkdir -p $w
for v in $builds; do mkdir -p $w/$v; for f in $D/$v/*.gz; do gzip -dc $f > $w/$v/$(basename $f .gz); done; chmod +x $w/$v/*; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); sec() { echo; echo "==== [$(( $(date +%s) - t0 )) s] $*"; }
sec card; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
: > $out/ncu.txt
for v in $builds; do
  sec "ncu $v --once"
  timeout 45 ncu --clock-control none -k regex:DenseAttention --metrics gpu__time_duration.sum --csv $w/$v/dense_mha_bench --once > $w/ncu_$v.csv 2>&1; echo "exit $?"
  python3 - $w/ncu_$v.csv $v <<'PY' | tee -a $out/ncu.txt
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit()
h = rows[0]; vi = h.index("Metric Value"); ui = h.index("Metric Unit")
us = [float(r[vi].replace(",", "")) * {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(r[ui], 1.0) for r in rows[1:]]
names = ["glm T=1024", "deepseek T=1024", "glm T=8192", "glm 4x2048", "deepseek 4x2048", "deepseek T=8192"]
n = len(us) // len(names)
for s, name in enumerate(names):
    a = sorted(us[s * n:(s + 1) * n])
    if a: print(f"{sys.argv[2]} {name}: attention median {a[len(a) // 2]:.1f} us, min {a[0]:.1f} (n={len(a)})")
PY
done
if [ "${DIAG:-0}" = 1 ]; then
  # The second call: where the time goes, on base (the kept kernel) and on
  # cuDNN's SDPA kernel, and the SM clock and power while each loop runs.
  # The other builds' persistent cases first (their schedules differ).
  for v in $builds; do
    [ $v = base ] && continue
    sec "kernels_test $v: the persistent and 80-key cases"
    timeout 40 $w/$v/dense_mha_kernels_test --gtest_brief=1 --gtest_filter='*persistent*:*80key*' > $w/kt_$v.txt 2>&1; echo "exit $?" >> $w/kt_$v.txt
    grep -E "FAILED|Failure|PASSED|exit" $w/kt_$v.txt | tail -4; cat $w/kt_$v.txt >> $out/kt.txt
  done
  secs="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
  : > $out/ncu_sections.txt
  # bench --once: 8 attention launches a shape; GLM-5.1 T = 8192 is the 3rd
  # shape, GLM-5.1 4 x 2048 the 4th.
  for skip in 19 27; do
    sec "ncu sections: base, attention launch $skip"
    timeout 60 ncu --clock-control none -k regex:DenseAttention --launch-skip $skip --launch-count 1 $secs $w/base/dense_mha_bench --once 2>&1 | grep -v "^dense\|^==PROF==" | tee -a $out/ncu_sections.txt | grep -E "Duration|SM Frequency|Throughput|Hit Rate|Busy|Bandwidth|Issue|Stall|Warp Cycles" | head -30
  done
  # torch --compare: GLM-5.1 T = 8192 first (1 probe, 5 warm-up, 20 timed
  # calls): one of the timed calls.
  for skip in 10; do
    sec "ncu sections: cuDNN SDPA, launch $skip"
    timeout 80 ncu --clock-control none -k regex:"sdpa|fmha|flash|attn" --launch-skip $skip --launch-count 1 $secs python3 $D/py/dense_mha/torch_baseline.py --compare 2>&1 | grep -v "^torch\|^ceiling\|^==PROF==" | tee -a $out/ncu_sections.txt | grep -E "^  [a-z_]|Duration|SM Frequency|Throughput|Hit Rate|Busy|Bandwidth|Issue|Stall|Warp Cycles" | head -32
  done
  # Every pipe's utilisation (a metric regex), GLM-5.1 T = 8192: ours, cuDNN's.
  pipes='regex:^sm__(pipe|inst_executed_pipe)_.*(cycles_active|shared).*avg.pct_of_peak_sustained_elapsed$'
  sec "ncu pipes: base, GLM-5.1 T = 8192"
  timeout 40 ncu --clock-control none -k regex:DenseAttention --launch-skip 19 --launch-count 1 --metrics "$pipes" $w/base/dense_mha_bench --once 2>&1 | grep -E "sm__|ERROR" | grep -v " 0$\| 0\.00*$" | tee -a $out/ncu_sections.txt | head -30
  sec "ncu pipes: cuDNN SDPA, GLM-5.1 T = 8192"
  timeout 60 ncu --clock-control none -k regex:"sdpa|fmha|flash|attn" --launch-skip 10 --launch-count 1 --metrics "$pipes" python3 $D/py/dense_mha/torch_baseline.py --compare 2>&1 | grep -E "sm__|ERROR" | grep -v " 0$\| 0\.00*$" | tee -a $out/ncu_sections.txt | head -30
  sec "SM clock and power under the loops (nvidia-smi every 50 ms)"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 50 > $w/smi.csv 2>&1 &
  smi=$!
  sleep 1
  : > $w/phases.txt
  for v in base torch; do
    echo "$v begin $(date +%s.%N)" >> $w/phases.txt
    if [ $v = torch ]; then timeout 60 python3 $D/py/dense_mha/torch_baseline.py --compare | tee -a $out/compare.txt
    else timeout 40 $w/base/dense_mha_bench --compare | tee -a $out/compare.txt; fi
    echo "$v end $(date +%s.%N)" >> $w/phases.txt
    sleep 1
  done
  kill $smi
  python3 - $w/smi.csv $w/phases.txt <<'PY' | tee $out/clocks.txt
import sys, datetime, statistics as st
ph = {}
for l in open(sys.argv[2]):
    v, k, t = l.split(); ph.setdefault(v, {})[k] = float(t)
rows = []
for l in open(sys.argv[1]):
    f = [x.strip() for x in l.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
        rows.append((t, float(f[1]), float(f[2]), float(f[3])))
    except (ValueError, IndexError):
        pass
print(f"{len(rows)} samples")
for v, p in ph.items():
    r = [x for x in rows if p["begin"] <= x[0] <= p["end"] and x[2] > 300]
    if not r: print(v, "no busy samples"); continue
    print(f"{v}: {len(r)} busy samples (> 300 W): SM clock median {st.median(x[1] for x in r):.0f} MHz (min {min(x[1] for x in r):.0f}, max {max(x[1] for x in r):.0f}), power median {st.median(x[2] for x in r):.0f} W (max {max(x[2] for x in r):.0f}), temperature max {max(x[3] for x in r):.0f} C")
PY
  sec done
  exit 0
fi
best=$(python3 - $out/ncu.txt <<'PY'
import sys
m = {}
for l in open(sys.argv[1]):
    if " glm T=8192:" in l: m[l.split()[0]] = float(l.split("median")[1].split()[0])
c = {k: v for k, v in m.items() if k != "base"}
print(min(c, key=c.get) if c else "base")
PY
)
sec "winner at GLM-5.1 T = 8192: $best"
sec "kernels_test $best: every case"
timeout 110 stdbuf -oL $w/$best/dense_mha_kernels_test --gtest_brief=1 > $out/kt.txt 2>&1; rc=$?; echo "exit $rc" >> $out/kt.txt
grep -E "FAILED|Failure|PASSED|exit|tests ran" $out/kt.txt | tail -20
filt='*glm_80key_edges:*glm_80key_edges_e4m3fn:*glm_80key_persistent_1cta:*glm_persistent_2ctas:*deepseek_persistent_3ctas_e4m3fn:*deepseek_bf16_output'
sec "memcheck $best"
timeout 70 compute-sanitizer --tool memcheck --print-limit 5 $w/$best/dense_mha_kernels_test --gtest_brief=1 --gtest_filter="$filt" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" | tail -5
sec "racecheck $best"
timeout 90 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 5 $w/$best/dense_mha_kernels_test --gtest_brief=1 --gtest_filter='*glm_80key_persistent_1cta:*deepseek_persistent_1cta' 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|hazard" | tail -6
sec "ncu pipes and sections: $best, GLM-5.1 T = 8192"
timeout 40 ncu --clock-control none -k regex:DenseAttention --launch-skip 19 --launch-count 1 --metrics 'regex:^sm__pipe_(alu|fma|tensor|shared|xu)_cycles_active.avg.pct_of_peak_sustained_elapsed$' --section SpeedOfLight --section SchedulerStats $w/$best/dense_mha_bench --once 2>&1 | grep -E "sm__|Duration|SM Frequency|Issue Slots|Eligible|ERROR" | tee $out/ncu_sections.txt
: > $out/compare.txt
for r in $(seq $rounds); do
  for v in base $best torch; do
    [ $v = base ] && [ $r -gt 1 ] && [ $best = base ] && continue
    sec "round $r: $v --compare"
    if [ $v = torch ]; then timeout 60 python3 $D/py/dense_mha/torch_baseline.py --compare | sed "s/^/r$r torch /" | tee -a $out/compare.txt
    else timeout 40 $w/$v/dense_mha_bench --compare | sed "s/^/r$r $v /" | tee -a $out/compare.txt; fi
  done
done
python3 testing/gpu/dense_mha_compare_summary.py $out/compare.txt | tee -a $out/ncu.txt
sec "bench $best: every shape"; timeout 70 $w/$best/dense_mha_bench > $out/bench_full.txt 2>&1; echo "exit $?"; cat $out/bench_full.txt
if [ "${FULL_TORCH:-1}" = 1 ]; then sec "torch: every shape"; timeout 70 python3 $D/py/dense_mha/torch_baseline.py > $out/torch_full.txt 2>&1; cat $out/torch_full.txt; fi
[ $rc -ne 0 ] && echo "KERNELS_TEST FAILED"
sec done
