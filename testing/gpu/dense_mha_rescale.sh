#!/bin/bash
# The rescale skip's second call (issue 19, item 1): carried as
# .device/<name>/call.sh beside base/ and R/ (each dense_mha_bench.gz and
# dense_mha_kernels_test.gz, bazel build --config=cuda --dynamic_mode=off -c
# opt, stripped) and py/ (torch_baseline.py, torch_timing.py). First compute-sanitizer memcheck over the 80-key edge
# case of both builds with the test's own messages (the first call saw it
# fail under memcheck on R), R's whole kernels_test twice and base's once;
# then ROUNDS rounds of base, R and torch --compare (T = 8192, 4 x 2048,
# 8 x 1024) through dense_mha_compare_summary.py (from the repository root,
# where the device tool runs it); last, with bin/, prefill_bench.
set -u -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/dense_out}"; mkdir -p "$out"
w=/tmp/dense_rs; rm -rf $w; mkdir -p $w
for v in base R; do mkdir -p $w/$v; for f in $D/$v/*.gz; do gzip -dc $f > $w/$v/$(basename $f .gz); done; chmod +x $w/$v/*; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); sec() { echo; echo "==== [$(( $(date +%s) - t0 )) s] $*"; }
sec card; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for v in R base; do
  for tool in memcheck none; do
    sec "$v glm_80key_edges under $tool"
    pre=""; [ $tool = memcheck ] && pre="compute-sanitizer --tool memcheck --print-limit 5"
    timeout 60 $pre $w/$v/dense_mha_kernels_test --gtest_filter='*glm_80key_edges' 2>&1 | grep -vE '^\[ +(RUN|OK) ' | tail -25
  done
done
sec "R kernels_test whole, twice"
timeout 150 $w/R/dense_mha_kernels_test --gtest_brief=1 --gtest_repeat=2 2>&1 | grep -E 'FAILED|Failure|PASSED|worst' | tail -12
sec "base kernels_test whole"
timeout 90 $w/base/dense_mha_kernels_test --gtest_brief=1 2>&1 | grep -E 'FAILED|Failure|PASSED' | tail -6
: > $out/compare.txt
for r in $(seq ${ROUNDS:-5}); do
  for v in base R torch; do
    sec "round $r: $v --compare"
    if [ $v = torch ]; then timeout 60 python3 $D/py/dense_mha/torch_baseline.py --compare | sed "s/^/r$r torch /" >> $out/compare.txt
    else timeout 40 $w/$v/dense_mha_bench --compare | sed "s/^/r$r $v /" >> $out/compare.txt; fi
  done
done
grep -E "glm5.1" $out/compare.txt | sed 's/  */ /g' | cut -c1-150
python3 testing/gpu/dense_mha_compare_summary.py $out/compare.txt
# With bin/prefill_bench.gz and lib/ (Debian's Abseil and protobuf objects):
# the stack at this tree, GLM-5.1 bf16, 1k_c1 and 1900_c1.
if [ -f $D/bin/prefill_bench.gz ]; then
  gzip -dc $D/bin/prefill_bench.gz > $w/prefill_bench; chmod +x $w/prefill_bench
  sec "prefill_bench $(cat $D/COMMIT 2>/dev/null)"
  LD_LIBRARY_PATH="$D/lib:$LD_LIBRARY_PATH" timeout 150 $w/prefill_bench --platform=cuda --model=glm-5.1 --workloads=1k_c1,1900_c1 --arms=main,skip --runs=1 --json=$out/p.json 2>&1 | grep -E '^(1k_c1|1900_c1)|rror'
  python3 -c "
import json;d=json.load(open('$out/p.json'))
for w in d['workloads']:
  for n,a in w['arms'].items(): print(w['name'], n, 'ttft', a['median_ttft_ms'], 'issue', round(a['host_issue_ms'],3), 'tail', round(a['device_tail_ms'],3), 'eq', a['outputs_equal_to_main'], a['caches_equal_to_main'])"
fi
sec done
