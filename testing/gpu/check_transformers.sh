#!/bin/bash
# The GPU side of issue 17's checks, in one call on the device machine, from
# the payload that testing/gpu/build_check_payload.sh packed:
#   1. cache_kernels_test: the indexer K write and Q kernels against the CPU
#      kernels to the bit, the engines' numerics (bf16 roundings, vLLM's fp8
#      divisor, the Hadamard rotation) included;
#   2. model_runner_test on the cuda platform: the stack with
#      input_layernorm, YaRN, the MTP input, against the float64 reference;
#   3. check_transformers.py: checkpoints built with transformers, our stack
#      on CUDA against transformers' own modules in bf16 and float64.
#
#   bash PAYLOAD/check_transformers.sh            (OUT: where results go)
set -u -o pipefail
payload="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/check_out}"
mkdir -p "$out"
work=/tmp/dsa_check && rm -rf "$work" && mkdir -p "$work"
for f in "$payload"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$payload/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 DSA_STACK_LIBRARY="$payload/lib/libdsa_stack.so"
echo "payload commit $(cat "$payload/COMMIT")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
echo "==== cache_kernels_test"
timeout "${DSA_GTEST_SECONDS:-90}" "$work/cache_kernels_test" --gtest_brief=1 2>&1 | tail -25 || status=1
echo "==== model_runner_test (cuda)"
timeout "${DSA_GTEST_SECONDS:-90}" "$work/model_runner_test" --gtest_brief=1 --gtest_filter='*cuda*' 2>&1 \
  | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure|reference \]" | head -60 || status=1
echo "==== check_transformers"
PYTHONPATH="$payload/python" timeout "${DSA_CHECK_SECONDS:-330}" python3 \
  "$payload/check_transformers.py" --out "$out" "$@" 2>&1 | tee "$out/check_transformers.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
