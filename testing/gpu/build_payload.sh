#!/bin/bash
# Builds, on this machine, everything the GPU run needs (gtests, benchmarks,
# the plugin shared objects; --config=cuda, sm_90a unless a
# --define=DSA_CUDA_ARCHS=... given here says otherwise) and packs it into
# .device/gpu, the git-ignored folder that travels to the device machine:
#
#   testing/gpu/build_payload.sh [bazel flags]   # here
#   testing/gpu/device_run.sh                    # there, from the repository root
#
# The device machine has no Bazel (DESIGN.md section 7). The project's own
# libraries are linked statically (--dynamic_mode=off); Debian's Abseil,
# protobuf and benchmark shared objects, which that machine lacks, are copied
# into lib/ beside the binaries. Binaries and plugins are gzipped to stay
# well under what a call carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.device/gpu

# The binaries the device run uses: label=target.
binaries=(
  vector_add_test=//attention/gpu/device:vector_add_test
  mma_bf16_test=//attention/gpu/device:mma_bf16_test
  runtime_faults_test=//attention/gpu/device:runtime_faults_test
  indexer_kernels_test=//attention/gpu/indexer:kernels_test
  cache_kernels_test=//attention/gpu/cache:kernels_test
  sparse_mla_kernels_test=//attention/gpu/sparse_mla:kernels_test
  dense_mha_kernels_test=//attention/gpu/dense_mha:kernels_test
  dense_ops_kernels_test=//attention/gpu/dense_ops:kernels_test
  indexer_ops_test=//attention:indexer_ops_test
  mla_ops_test=//attention:mla_ops_test
  dense_ops_test=//attention:dense_ops_test
  model_runner_test=//model/deepseek_v32:model_runner_test
  model_runner_ops_test=//model/deepseek_v32:model_runner_ops_test
  step_faults_gpu_test=//model/deepseek_v32:step_faults_gpu_test
  platform_conformance_test=//testing:platform_conformance_test
  profile_run_scratch_gpu_test=//testing:profile_run_scratch_gpu_test
  indexer_bench=//attention/gpu/indexer:bench
  cache_bench=//attention/gpu/cache:bench
  sparse_mla_bench=//attention/gpu/sparse_mla:bench
  dense_mha_bench=//attention/gpu/dense_mha:bench
  dense_bench=//attention/gpu/dense_ops:bench
  layer_step_bench=//model/deepseek_v32:layer_step_bench
  prefill_bench=//bench/prefill:prefill_bench
)
plugins=(
  //platform/cpu:libdsa_cpu_platform.so
  //platform/cuda:libdsa_cuda_platform.so
  //platform/rocm:libdsa_rocm_platform.so
  //attention/cpu:libdsa_attention_cpu.so
  //model/deepseek_v32:libdsa_stack.so
)

targets=("${plugins[@]}")
for b in "${binaries[@]}"; do targets+=("${b#*=}"); done
bazel build --config=cuda --dynamic_mode=off "$@" "${targets[@]}"
bin_dir="$(bazel info --config=cuda --dynamic_mode=off "$@" bazel-bin)"
path_of() { local t="${1#//}"; echo "$bin_dir/${t%%:*}/${t#*:}"; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/plugins"
for b in "${binaries[@]}"; do
  label="${b%%=*}"
  src="$(path_of "${b#*=}")"
  cp "$src" "$out/bin/$label"
  ldd "$src" | awk '$3 ~ /^(\/usr)?\/lib\/x86_64-linux-gnu\/lib(absl|protobuf|benchmark)/ {print $3}' \
    | while read -r lib; do cp -nL "$lib" "$out/lib/"; done
done
for p in "${plugins[@]}"; do cp "$(path_of "$p")" "$out/plugins/"; done
chmod -R u+w "$out"
strip --strip-debug "$out"/bin/* "$out"/lib/* "$out"/plugins/* 2>/dev/null || true
gzip -9 "$out"/bin/* "$out"/plugins/*
# The commit the binaries were built from: the device machine's copy of the
# tree has no history to ask (prefill_bench records it in its JSON).
{ git rev-parse --short=12 HEAD | tr -d '\n'
  git diff --quiet HEAD -- . ':!.device' || printf -- '-dirty'; echo; } > "$out/COMMIT"
du -sh "$out"
