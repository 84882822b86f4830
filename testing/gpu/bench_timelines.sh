#!/bin/bash
# Carried as .device/<name>/call.sh with bin/*.gz (the binaries it names, built by
# bazel build --config=cuda --dynamic_mode=off), lib/ (Debian's Abseil and
# protobuf objects, and for the traced runs libkernel_trace.so from
# //testing/gpu/kernel_trace), COMMIT, and for the A/B old/prefill_bench.gz.
# The merged tree's suites on cuda; the sparse prefill bench in fresh
# processes (single calls and queued calls); raw device timelines of the
# 1k_c1 skip arm and of 64-token steps, brought back gzipped.
set -o pipefail
D="$(cd "$(dirname "$0")" && pwd)"; W=/tmp/trace2; mkdir -p $W $OUT
exec > >(tee $OUT/log) 2>&1
for f in $D/bin/*.gz; do n=$(basename $f .gz); gunzip -c $f > $W/$n; chmod +x $W/$n; done
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
S=testing/gpu/kernel_trace/summarize.py; T="env LD_PRELOAD=$D/lib/libkernel_trace.so"
echo "commit $(cat $D/COMMIT)"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader; }
g() { local l=$1; shift; echo "== $(basename $1) $2"; timeout $l "$@" --gtest_brief=1 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED)|Failure|worst' | head -12; }
g 120 $W/model_runner_test --gtest_filter='*/cuda*'
g 60 $W/mla_ops_test --gtest_filter='*/cuda*'
g 60 $W/dense_ops_test --gtest_filter='*/cuda*'
g 60 $W/model_runner_ops_test
echo "== memcheck mla_ops_test cuda"; timeout 90 compute-sanitizer --tool memcheck --print-limit 5 $W/mla_ops_test --gtest_brief=1 --gtest_filter='*/cuda*' 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -2
H64="--heads=64 --v=256 --nope=192 --tokens=8192"; H128="--heads=128 --v=128 --nope=128 --tokens=8192"
sp() { timeout 90 $W/sparse_mla_bench "$@" 2>&1 | grep -E '^sparse_mla|rror' | sed -E 's/.*(heads=[0-9]+).*(median_ms=[^ ]+).*(check_worst=[^ ]+) (queued_ms=[^ ]+)/\1 \2 \4 \3/'; }
echo "== sparse_mla_bench, fresh processes: 64 heads, 128 heads, 128 heads, 64 heads (clock/power/temp before each)"
for a in "$H64" "$H128" "$H128" "$H64"; do smi; sp --iters=20 $a; done
echo "== the same in one process, 64 then 128, twice"; smi; sp --iters=20 $H64 --then --iters=20 $H128 --then --iters=20 $H64 --then --iters=20 $H128; smi
echo "== dense prefill, every shape: ours, torch, ours"
timeout 100 $W/dense_mha_bench 2>&1 | grep -E '^dense|fail'
timeout 100 python3 attention/gpu/dense_mha/torch_baseline.py 2>&1 | grep -vE '^\s*$'
timeout 100 $W/dense_mha_bench 2>&1 | grep -E '^dense|fail'
P="$W/prefill_bench --platform=cuda --model=glm-5.1"
echo "== prefill_bench 1k_c1 skip arm, 5 prompts, traced"
DSA_KERNEL_TRACE=$W/p1k.csv timeout 150 $T $P --workloads=1k_c1 --prompts=5 --runs=1 --arms=skip --json=$OUT/p1k.json 2>&1 | grep -E '^1k_c1|rror|kernel_trace'
echo "== prefill_bench 64-token steps, main arm, traced"
DSA_KERNEL_TRACE=$W/p64.csv timeout 150 $T $P --max_num_batched_tokens=64 --workloads=1k_c1 --prompts=2 --runs=1 --arms=main --json=$OUT/p64.json 2>&1 | grep -E '^1k_c1|rror|kernel_trace'
timeout 60 python3 $S $W/p64.csv --gaps 0 --kernels 12 --calls 30
ls -la $W/*.csv; gzip -c $W/p1k.csv > $OUT/p1k.csv.gz; gzip -c $W/p64.csv > $OUT/p64.csv.gz; ls -la $OUT
