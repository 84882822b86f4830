#!/bin/bash
# Carried as .device/<name>/call.sh with bin/*.gz (the binaries it names, built by
# bazel build --config=cuda --dynamic_mode=off), lib/ (Debian's Abseil and
# protobuf objects, and for the traced runs libkernel_trace.so from
# //testing/gpu/kernel_trace), COMMIT, and for the A/B old/prefill_bench.gz.
# The merged tree (the crossover, the page-locked step inputs, the dense ops
# as before): the sparse kernels' whole suite, the op and stack suites on
# cuda, memcheck's report of the registered-memory test, prefill_bench bf16
# at 1k_c1 / 1900_c1 and 64-token steps.
set -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"; W=/tmp/p4; mkdir -p $W $OUT
exec > >(tee $OUT/log) 2>&1
for f in $D/bin/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/$n; chmod +x $W/$n; done
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
echo "commit $(cat $D/COMMIT)"
g() { local l=$1; shift; echo "== $(basename $1) $2"; timeout $l "$@" --gtest_brief=1 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|Expected|Which is' | head -14; }
g 150 $W/sparse_mla_kernels_test
g 90 $W/mla_ops_test --gtest_filter='*/cuda*'
g 120 $W/model_runner_test --gtest_filter='*/cuda*'
g 60 $W/platform_conformance_test
echo "== memcheck platform_conformance_test (registered memory)"
timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $W/platform_conformance_test --gtest_brief=1 --gtest_filter='*Registered*' 2>&1 | grep -E '=====|PASSED|FAILED' | grep -vE 'at 0x|Host Frame|^=========\s*$' | head -30
echo "== memcheck, API errors not reported"
timeout 60 compute-sanitizer --tool memcheck --report-api-errors no $W/platform_conformance_test --gtest_brief=1 --gtest_filter='*Registered*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -2
A="--platform=cuda --model=glm-5.1 --workloads=1k_c1,1900_c1 --arms=main,skip --runs=1"
echo "== prefill_bench bf16 1k_c1,1900_c1"
timeout 150 $W/prefill_bench $A --json=$OUT/p_bf16.json 2>&1 | grep -E '^(1k_c1|1900_c1)|rror'
python3 -c "
import json;d=json.load(open('$OUT/p_bf16.json'))
for w in d['workloads']:
  for n,a in w['arms'].items(): print(w['name'], n, 'ttft', a['median_ttft_ms'], 'prepare', round(a['prepare_ms'],3), 'issue', round(a['host_issue_ms'],3), 'tail', round(a['device_tail_ms'],3))"
echo "== 64-token steps"; timeout 120 $W/prefill_bench --platform=cuda --model=glm-5.1 --max_num_batched_tokens=64 --workloads=1k_c1 --prompts=2 --runs=1 --arms=main,skip --json=$OUT/p64.json 2>&1 | grep -E '^1k_c1|rror'
