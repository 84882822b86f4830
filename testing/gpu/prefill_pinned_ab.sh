#!/bin/bash
# Carried as .device/<name>/call.sh with bin/*.gz (the binaries it names, built by
# bazel build --config=cuda --dynamic_mode=off), lib/ (Debian's Abseil and
# protobuf objects, and for the traced runs libkernel_trace.so from
# //testing/gpu/kernel_trace), COMMIT, and for the A/B old/prefill_bench.gz.
# rms_norm with its row in registers, rope's loads batched, the bench's step
# inputs page-locked: the suites on cuda, then prefill_bench before (63a1ce0)
# and after, GLM-5.1 bf16 at 1k_c1 and 1900_c1, and 64-token steps.
set -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"; W=/tmp/p3; mkdir -p $W/old $OUT
exec > >(tee $OUT/log) 2>&1
for f in $D/bin/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/$n; chmod +x $W/$n; done
gunzip -c $D/old/prefill_bench.gz > $W/old/prefill_bench; chmod +x $W/old/prefill_bench
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
S=testing/gpu/kernel_trace/summarize.py; T="env LD_PRELOAD=$D/lib/libkernel_trace.so"
echo "commit $(cat $D/COMMIT)"
g() { local l=$1; shift; echo "== $(basename $1) $2"; timeout $l "$@" --gtest_brief=1 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|worst|Expected|Which is' | head -14; }
g 90 $W/dense_ops_test --gtest_filter='*/cuda*'
g 60 $W/platform_conformance_test
g 120 $W/model_runner_test --gtest_filter='*/cuda*'
g 60 $W/dense_ops_kernels_test
echo "== memcheck dense_ops_test cuda (norms, rope)"; timeout 90 compute-sanitizer --tool memcheck --print-limit 5 $W/dense_ops_test --gtest_brief=1 --gtest_filter='*/cuda*RmsNorm*:*/cuda*Rope*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -2
echo "== memcheck platform_conformance_test (registered memory)"; timeout 60 compute-sanitizer --tool memcheck --print-limit 5 $W/platform_conformance_test --gtest_brief=1 --gtest_filter='*Registered*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -2
A="--platform=cuda --model=glm-5.1 --workloads=1k_c1,1900_c1 --arms=main,skip --runs=1"
for b in old new; do
  B=$W/prefill_bench; [ $b = old ] && B=$W/old/prefill_bench
  echo "== prefill_bench $b bf16 1k_c1,1900_c1"
  timeout 150 $B $A --json=$OUT/p_$b.json 2>&1 | grep -E '^(1k_c1|1900_c1)|rror'
  python3 -c "
import json,sys;d=json.load(open('$OUT/p_$b.json'))
for w in d['workloads']:
  for n,a in w['arms'].items(): print(w['name'] if 'name' in w else '', n, 'ttft', a['median_ttft_ms'], 'prepare', round(a['prepare_ms'],3), 'issue', round(a['host_issue_ms'],3), 'tail', round(a['device_tail_ms'],3))" 2>&1 | head -6
  cp $OUT/p_$b.json $OUT/p_${b}_last.json 2>/dev/null
done
echo "== 64-token steps, new"; timeout 120 $W/prefill_bench --platform=cuda --model=glm-5.1 --max_num_batched_tokens=64 --workloads=1k_c1 --prompts=2 --runs=1 --arms=main,skip --json=$OUT/p64.json 2>&1 | grep -E '^1k_c1|rror'
echo "== traced 1k_c1 skip, new"; DSA_KERNEL_TRACE=$W/t.csv timeout 120 $T $W/prefill_bench --platform=cuda --model=glm-5.1 --workloads=1k_c1 --prompts=3 --runs=1 --arms=skip 2>&1 | grep -E '^1k_c1|rror|kernel_trace'
timeout 60 python3 $S $W/t.csv --gaps 0 --kernels 14 | head -18; gzip -c $W/t.csv > $OUT/t.csv.gz
