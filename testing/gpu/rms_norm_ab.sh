#!/bin/bash
# Carried as .device/<name>/call.sh with bin/*.gz (dense_ops_test,
# model_runner_test, dense_bench, prefill_bench; built by bazel build
# --config=cuda --dynamic_mode=off), old/ (dense_bench.gz and
# prefill_bench.gz with the previous rms_norm kernel), optionally
# mid_bench.gz (a dense_bench of an intermediate kernel), lib/ (Debian's
# Abseil and protobuf objects, libkernel_trace.so and libcupti), COMMIT.
# rms_norm with its row in registers and vector accesses: the suites on cuda
# and memcheck over the norms, the norms of the stack's shapes old and new
# interleaved, prefill_bench old and new (GLM-5.1, bf16 weights, 1k_c1 and
# 1900_c1; the new build with fp8 weights too), a traced 1k_c1 step of the
# new build.
set -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"; W=/tmp/rn; mkdir -p $W/old $OUT
exec > >(tee $OUT/log) 2>&1
for f in $D/bin/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/$n; chmod +x $W/$n; done
for f in $D/old/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/old/$n; chmod +x $W/old/$n; done
benches="old new"
if [ -f $D/mid_bench.gz ]; then gunzip -c $D/mid_bench.gz > $W/mid_bench; chmod +x $W/mid_bench; benches="old mid new"; fi
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
S=testing/gpu/kernel_trace/summarize.py; T="env LD_PRELOAD=$D/lib/libkernel_trace.so"
echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
g() { local l=$1; shift; echo "== $(basename $1) $2"; timeout $l "$@" --gtest_brief=1 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|worst|Expected|Which is' | head -14; }
g 120 $W/dense_ops_test --gtest_filter='*/cuda*'
echo "== memcheck dense_ops_test cuda norms"; timeout 150 compute-sanitizer --tool memcheck --print-limit 5 $W/dense_ops_test --gtest_brief=1 --gtest_filter='*RmsNorm*/cuda*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -2
for round in 1 2 3; do for b in $benches; do
  B=$W/dense_bench; [ $b = old ] && B=$W/old/dense_bench; [ $b = mid ] && B=$W/mid_bench
  echo "== norms $b round $round"; timeout 60 $B 1024 2>&1 | grep -E '^rms_norm|rror'
done; done
pb() {  # name binary flags...
  local n=$1 B=$2; shift 2
  echo "== prefill_bench $n"
  timeout 150 $B --platform=cuda --model=glm-5.1 --workloads=1k_c1,1900_c1 --arms=main,skip --runs=1 --json=$OUT/p_$n.json "$@" 2>&1 | grep -E '^(1k_c1|1900_c1)|rror'
  python3 -c "
import json,sys;d=json.load(open('$OUT/p_$n.json'))
for w in d['workloads']:
  for a_name,a in w['arms'].items(): print(w.get('name',''), a_name, 'ttft', a['median_ttft_ms'], 'prepare', round(a['prepare_ms'],3), 'issue', round(a['host_issue_ms'],3), 'tail', round(a['device_tail_ms'],3), 'eq', a['outputs_equal_to_main'], a['caches_equal_to_main'])" 2>&1 | head -6
}
pb old $W/old/prefill_bench
pb new $W/prefill_bench
pb new_fp8 $W/prefill_bench --weights=fp8
g 150 $W/model_runner_test --gtest_filter='*/cuda*'
echo "== traced 1k_c1 skip, new"; DSA_KERNEL_TRACE=$W/t.csv timeout 120 $T $W/prefill_bench --platform=cuda --model=glm-5.1 --workloads=1k_c1 --prompts=3 --runs=1 --arms=skip 2>&1 | grep -E '^1k_c1|rror|kernel_trace'
timeout 60 python3 $S $W/t.csv --gaps 0 --kernels 12 | head -16; gzip -c $W/t.csv > $OUT/t.csv.gz
grep '^kernel' $W/t.csv | grep RmsNorm | awk -F, '{split($6,a,"RmsNorm"); k=substr(a[2],1,22); d=int(($3-$2)/1000); print k, d}' | sort | uniq -c | sort -k1 -nr | head -12
