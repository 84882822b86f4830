#!/bin/bash
# transformers' GLM-5 and DeepSeek-V3.2 models converted to the plugins'
# attention, on an NVIDIA GPU, in one call (issue 20): check_convert.py's
# checks (the converted model against transformers' own run, skip on and
# off) and bench_transformers.py's timings (TTFT and decode, converted with
# and without the skip against transformers' eager and sdpa), one process,
# each model built once.
#
#   testing/gpu/build_payload.sh              # here: the CUDA plugin in .device/gpu
#   engines/torch/transformers_gpu.sh         # there, from the repository root
#
# It builds the binding against the machine's torch (engines/torch/build.sh)
# while transformers builds the models and runs its own arms. Environment:
# DSA_PAYLOAD (default .device/gpu), DSA_HF_LIBRARY (a binding built already:
# no build), DSA_HF_SECONDS (the scripts' time budget, default 150),
# DSA_HF_ARGS (more flags for bench_transformers.py). Output on stdout and
# in $OUT: transformers_gpu.txt, check_convert.json, bench_transformers.json.
set -u -o pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
payload="${DSA_PAYLOAD:-.device/gpu}"
[[ "$payload" == /* ]] || payload="$root/$payload"
out="${OUT:-/tmp/dsa_hf_out}"
work=/tmp/dsa_hf
rm -rf "$work" && mkdir -p "$work/plugins" "$work/torch" "$out"
for p in cpu_platform attention_cpu cuda_platform; do
  gzip -dc "$payload/plugins/libdsa_$p.so.gz" > "$work/plugins/libdsa_$p.so"
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
lib="${DSA_HF_LIBRARY:-}"
build_pid=""
if [ -z "$lib" ]; then
  lib="$work/torch/libdsa_torch.so"
  ( CXX=/usr/bin/g++ timeout 120 bash engines/torch/build.sh "$work/torch" \
      > "$work/build.txt" 2>&1 || touch "$lib.failed" ) &
  build_pid=$!
fi
p="$work/plugins"
# shellcheck disable=SC2086
PYTHONPATH="$root/engines/torch" python3 engines/torch/bench_transformers.py \
  --check --library "$lib" --wait-library 150 \
  --plugins "$p/libdsa_cpu_platform.so:$p/libdsa_attention_cpu.so:$p/libdsa_cuda_platform.so" \
  --budget "${DSA_HF_SECONDS:-150}" --out "$out" ${DSA_HF_ARGS:-} 2>&1 \
  | tee "$out/transformers_gpu.txt"
status=$?
if [ -n "$build_pid" ]; then
  wait "$build_pid"
  echo "binding build: $(tail -1 "$work/build.txt")"
fi
exit "$status"
