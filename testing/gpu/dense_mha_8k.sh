#!/bin/bash
# The dense MHA prefill's wider-key-tile device run (issue 19, item 1): in
# one call on the lent H200, the new build's kernels_test, then the benches
# of three builds (old, mid, new) back to back with torch's cuDNN SDPA +
# matmul in the same call, compute-sanitizer memcheck over the new tile
# geometry's cases, and Nsight Compute's attention-kernel durations of each
# build (`bench --once`: GLM-5.1 / DeepSeek-V3.2 T=1024, GLM-5.1 T=8192).
# Lean on purpose: every step has a timeout and the whole call fits about
# 240 s. Run from a folder that holds
#   old/*.gz, mid/*.gz, new/*.gz   the builds' dense_mha_bench and
#                        dense_mha_kernels_test; the round's run (issue 19
#                        item 1) had old = 2d04db7 (64-key tiles), mid =
#                        b53d1a1 with its Q L2 prefetch call commented out
#                        (= a8eeaa8's kernel, the prefetch since removed),
#                        new = b53d1a1; any build works in any slot, a
#                        missing folder is skipped; each
#                        (bazel build --config=cuda
#                        --dynamic_mode=off -c opt
#                        //attention/gpu/dense_mha:kernels_test
#                        //attention/gpu/dense_mha:bench), stripped, gzipped;
#   py/dense_mha/torch_baseline.py, py/device/torch_timing.py
# beside a copy of this script. Six files come back under $OUT (run.txt,
# kt.txt, bench_{new,mid,old}.txt, torch.txt); figures in
# testing/bench/RESULTS.md ("Dense prefill: 80-key tiles at v = 256 ...").
set -u -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/dense_out}"; mkdir -p "$out"
w=/tmp/dense_run; rm -rf $w; mkdir -p $w
for v in old mid new; do [ -d $D/$v ] || continue; mkdir -p $w/$v; for f in $D/$v/*.gz; do gzip -dc $f > $w/$v/$(basename $f .gz); done; chmod +x $w/$v/*; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); sec() { echo; echo "==== [$(( $(date +%s) - t0 )) s] $*"; }
kt() { grep -E "^\[ +(RUN|OK|PASSED|FAILED|SKIPPED) +\]|Failure|worst|Expected|exit" "$1" | sed 's/ (sm90[^)]*decompression)//' | cut -c1-150; }
sec card; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
sec "kernels_test new: every case"
timeout 100 stdbuf -oL $w/new/dense_mha_kernels_test > $out/kt.txt 2>&1; rc=$?; echo "exit $rc" >> $out/kt.txt
kt $out/kt.txt | grep -E "80key|FAILED|Failure|PASSED|exit|SKIPPED" | tail -30
grep -c "^\[       OK" $out/kt.txt
for v in new mid old; do
  [ -d $w/$v ] || continue
  sec "bench $v"; timeout 60 $w/$v/dense_mha_bench > $out/bench_$v.txt 2>&1; echo "exit $?"; cat $out/bench_$v.txt
done
sec torch; timeout 60 python3 $D/py/dense_mha/torch_baseline.py | tee $out/torch.txt
sec "memcheck new: the 80-key cases, persistent"
timeout 50 compute-sanitizer --tool memcheck --print-limit 5 $w/new/dense_mha_kernels_test --gtest_brief=1 --gtest_filter='*glm_80key_edges:*glm_80key_edges_e4m3fn:*glm_80key_persistent_1cta:*glm_persistent_2ctas' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" | tail -5
for v in new mid old; do
  [ -d $w/$v ] || continue
  sec "ncu $v --once: the attention kernels' durations"
  timeout 40 ncu --clock-control none -k regex:DenseAttention --metrics gpu__time_duration.sum --csv $w/$v/dense_mha_bench --once > $w/ncu_$v.csv 2>&1; echo "exit $?"
  python3 - $w/ncu_$v.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit()
h = rows[0]; vi = h.index("Metric Value"); ui = h.index("Metric Unit")
us = [float(r[vi].replace(",", "")) * {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(r[ui], 1.0) for r in rows[1:]]
n = len(us) // 3
for s, name in enumerate(["GLM-5.1 T=1024", "DeepSeek-V3.2 T=1024", "GLM-5.1 T=8192"]):
    a = sorted(us[s * n:(s + 1) * n])
    if a: print(f"{name}: attention median {a[len(a) // 2]:.1f} us, min {a[0]:.1f} (n={len(a)})")
PY
done
[ $rc -ne 0 ] && echo "KERNELS_TEST FAILED"
sec done
