#!/bin/bash
# Carried as .device/<name>/call.sh with bin/*.gz (dense_ops_test,
# dense_ops_kernels_test, model_runner_test, dense_bench, prefill_bench; built
# by bazel build --config=cuda --dynamic_mode=off), old/ (dense_bench.gz and
# prefill_bench.gz with the previous rms_norm kernel), lib/ (Debian's Abseil
# and protobuf objects, libkernel_trace.so and libcupti), COMMIT.
# rms_norm with its row in registers and vector accesses: the suites on cuda
# and memcheck over the norms, the norms of the stack's shapes old and new
# interleaved, prefill_bench old and new (GLM-5.1 bf16, 1k_c1 and 1900_c1),
# a traced 1k_c1 step of the new build.
set -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"; W=/tmp/rn; mkdir -p $W/old $OUT
exec > >(tee $OUT/log) 2>&1
for f in $D/bin/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/$n; chmod +x $W/$n; done
for f in $D/old/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/old/$n; chmod +x $W/old/$n; done
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
S=testing/gpu/kernel_trace/summarize.py; T="env LD_PRELOAD=$D/lib/libkernel_trace.so"
echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
g() { local l=$1; shift; echo "== $(basename $1) $2"; timeout $l "$@" --gtest_brief=1 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|worst|Expected|Which is' | head -14; }
g 120 $W/dense_ops_test --gtest_filter='*/cuda*'
g 60 $W/dense_ops_kernels_test
echo "== memcheck dense_ops_test cuda norms"; timeout 120 compute-sanitizer --tool memcheck --print-limit 5 $W/dense_ops_test --gtest_brief=1 --gtest_filter='*/cuda*RmsNorm*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -2
for round in 1 2 3; do for b in old new; do
  B=$W/dense_bench; [ $b = old ] && B=$W/old/dense_bench
  echo "== norms $b round $round"; timeout 60 $B 1024 2>&1 | grep -E '^rms_norm|rror'
done; done
A="--platform=cuda --model=glm-5.1 --workloads=1k_c1,1900_c1 --arms=main,skip --runs=1"
for b in old new; do
  B=$W/prefill_bench; [ $b = old ] && B=$W/old/prefill_bench
  echo "== prefill_bench $b bf16 1k_c1,1900_c1"
  timeout 150 $B $A --json=$OUT/p_$b.json 2>&1 | grep -E '^(1k_c1|1900_c1)|rror'
  python3 -c "
import json,sys;d=json.load(open('$OUT/p_$b.json'))
for w in d['workloads']:
  for n,a in w['arms'].items(): print(w.get('name',''), n, 'ttft', a['median_ttft_ms'], 'prepare', round(a['prepare_ms'],3), 'issue', round(a['host_issue_ms'],3), 'tail', round(a['device_tail_ms'],3), 'eq', a['outputs_equal_to_main'], a['caches_equal_to_main'])" 2>&1 | head -6
done
g 150 $W/model_runner_test --gtest_filter='*/cuda*'
echo "== 64-token steps, new"; timeout 100 $W/prefill_bench --platform=cuda --model=glm-5.1 --max_num_batched_tokens=64 --workloads=1k_c1 --prompts=2 --runs=1 --arms=main,skip --json=$OUT/p64.json 2>&1 | grep -E '^1k_c1|rror'
echo "== traced 1k_c1 skip, new"; DSA_KERNEL_TRACE=$W/t.csv timeout 120 $T $W/prefill_bench --platform=cuda --model=glm-5.1 --workloads=1k_c1 --prompts=3 --runs=1 --arms=skip 2>&1 | grep -E '^1k_c1|rror|kernel_trace'
timeout 60 python3 $S $W/t.csv --gaps 0 --kernels 16 | head -22; gzip -c $W/t.csv > $OUT/t.csv.gz
