#!/bin/bash
# The dense MHA prefill's old-against-new device run (issue 19): two builds'
# dense_mha_bench and dense_mha_kernels_test side by side with torch's cuDNN
# SDPA + matmul, Nsight Compute's kernel durations and compute-sanitizer
# memcheck, in one call on the lent H200. Run from a folder that holds
#   old/*.gz, new/*.gz   the two builds' binaries (bazel build --config=cuda
#                        --dynamic_mode=off //attention/gpu/dense_mha:bench
#                        //attention/gpu/dense_mha:kernels_test), gzipped
#   py/dense_mha/torch_baseline.py, py/device/torch_timing.py
# beside a copy of this script; figures in testing/bench/RESULTS.md
# ("Dense prefill: a persistent tile scheduler").
set -u -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/dense_out}"; mkdir -p "$out"
w=/tmp/dense_run; rm -rf $w; mkdir -p $w/old $w/new
for v in old new; do for f in $D/$v/*.gz; do gzip -dc $f > $w/$v/$(basename $f .gz); done; chmod +x $w/$v/*; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); sec() { echo; echo "==== [$(( $(date +%s) - t0 )) s] $*"; }
kt() { grep -E "^\[ +(RUN|OK|PASSED|FAILED|SKIPPED) +\]|Failure|worst|Expected|exit" "$1" | sed 's/ (sm90[^)]*decompression)//' | cut -c1-140; }
sec card; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
sec "kernels_test new: persistent cases"
timeout 25 stdbuf -oL $w/new/dense_mha_kernels_test --gtest_filter='*persistent*' > $out/kt_p.txt 2>&1; rc=$?; echo "exit $rc" >> $out/kt_p.txt
kt $out/kt_p.txt
if [ $rc -ne 0 ]; then echo "PERSISTENT FAILED"; sec "old bench"; timeout 40 $w/old/dense_mha_bench; sec torch; timeout 50 python3 $D/py/dense_mha/torch_baseline.py; exit 1; fi
sec "bench new"; timeout 45 $w/new/dense_mha_bench | tee $out/bench_new.txt
sec "bench old"; timeout 45 $w/old/dense_mha_bench | tee $out/bench_old.txt
sec torch; timeout 50 python3 $D/py/dense_mha/torch_baseline.py | tee $out/torch.txt
sec "kernels_test new: the rest"
timeout 60 stdbuf -oL $w/new/dense_mha_kernels_test --gtest_filter='-*persistent*' > $out/kt_rest.txt 2>&1; echo "exit $?" >> $out/kt_rest.txt
kt $out/kt_rest.txt | grep -v "RUN\|  OK " | tail -45
sec "memcheck new kernels_test (persistent cases)"
timeout 35 compute-sanitizer --tool memcheck --print-limit 5 $w/new/dense_mha_kernels_test --gtest_brief=1 --gtest_filter='*glm_persistent_2ctas:*persistent_1cta' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" | tail -5
sec "ncu new --once: every kernel's duration"
timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum --csv $w/new/dense_mha_bench --once > $out/ncu_new.csv 2>&1; echo "exit $?"
python3 - $out/ncu_new.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
seq = [(r[ki][:60], float(r[vi].replace(",", "")) * {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(r[ui], 1.0)) for r in rows[1:]]
att = [i for i, (n, _) in enumerate(seq) if "DenseAttention" in n]
for shape in range(len(att) // 8):
    a4 = att[shape * 8 + 3]
    print("-- shape", shape, "(GLM 1024, DeepSeek 1024, GLM 8192): the 4th call's kernels")
    for n, us in seq[a4 - 4:a4 + 1]: print(f"{us:9.1f} us  {n}")
    end = att[shape * 8 + 8] - 4 if shape * 8 + 8 < len(att) else len(seq)
    print("   then the GEMM-only timings:", " ".join(f"{us:.1f}" for _, us in seq[att[shape * 8 + 7] + 1:end]))
PY
sec "ncu old: attention at GLM T=1024 (floor mode)"
timeout 20 ncu --clock-control none -k regex:DenseAttention --launch-skip 46 --launch-count 2 --metrics gpu__time_duration.sum --csv $w/old/dense_mha_bench --floor > $out/ncu_old.csv 2>&1; echo "exit $?"
python3 - $out/ncu_old.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
print("old attention kernel, GLM T=1024 (us):", [float(r[vi].replace(",", "")) * {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(r[ui], 1.0) for r in rows[1:]])
PY
sec done
