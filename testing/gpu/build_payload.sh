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
# into lib/ beside the binaries. Binaries and plugins are gzipped.
#
# Every binary links the kernels, so the whole payload is large (about 70 MB
# gzipped at sm_90a). DSA_GPU_STEPS, the device run's own list of steps
# (device_run.sh's header), packs only what those steps run and records the
# list in the payload's STEPS, which device_run.sh then runs by default:
#
#   DSA_GPU_STEPS=2,3 testing/gpu/build_payload.sh   # the gtests and sanitizers
#   DSA_GPU_STEPS=1,4 testing/gpu/build_payload.sh   # the SASS census and timing
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.device/gpu
steps="${DSA_GPU_STEPS:-1,2,3,4,5,6,7,8,9}"
if ! [[ "$steps" =~ ^[1-9](,[1-9])*$ ]]; then
  echo "build_payload.sh: DSA_GPU_STEPS='$steps' is not a comma list of steps 1 to 9" >&2
  exit 2
fi

# The binaries the device run uses: label=target=the steps that run it.
binaries=(
  vector_add_test=//attention/gpu/device:vector_add_test=2
  mma_bf16_test=//attention/gpu/device:mma_bf16_test=2
  runtime_faults_test=//attention/gpu/device:runtime_faults_test=2
  indexer_kernels_test=//attention/gpu/indexer:kernels_test=2
  cache_kernels_test=//attention/gpu/cache:kernels_test=2
  sparse_mla_kernels_test=//attention/gpu/sparse_mla:kernels_test=2
  dense_mha_kernels_test=//attention/gpu/dense_mha:kernels_test=2
  dense_ops_kernels_test=//attention/gpu/dense_ops:kernels_test=2
  indexer_ops_test=//attention:indexer_ops_test=2,3
  mla_ops_test=//attention:mla_ops_test=2,3
  dense_ops_test=//attention:dense_ops_test=2
  dense_fp8_ops_test=//attention:dense_fp8_ops_test=2
  model_runner_test=//model/deepseek_v32:model_runner_test=2
  model_runner_ops_test=//model/deepseek_v32:model_runner_ops_test=2
  step_faults_gpu_test=//model/deepseek_v32:step_faults_gpu_test=2
  platform_conformance_test=//testing:platform_conformance_test=2
  profile_run_scratch_gpu_test=//testing:profile_run_scratch_gpu_test=2
  indexer_bench=//attention/gpu/indexer:bench=1,4
  cache_bench=//attention/gpu/cache:bench=4
  sparse_mla_bench=//attention/gpu/sparse_mla:bench=1,4
  dense_mha_bench=//attention/gpu/dense_mha:bench=1,4
  dense_bench=//attention/gpu/dense_ops:bench=1,4
  layer_step_bench=//model/deepseek_v32:layer_step_bench=4
  prefill_bench=//bench/prefill:prefill_bench=6,9
)
# The plugin shared objects: torch.ops.dsa (5) and transformers (7, 8).
plugins=(
  //platform/cpu:libdsa_cpu_platform.so
  //platform/cuda:libdsa_cuda_platform.so
  //platform/rocm:libdsa_rocm_platform.so
  //attention/cpu:libdsa_attention_cpu.so
  //model/deepseek_v32:libdsa_stack.so
)
plugin_steps=5,7,8

# True when a step of the comma list $1 is one of $steps.
wanted() {
  local s
  for s in ${1//,/ }; do [[ ",$steps," == *",$s,"* ]] && return 0; done
  return 1
}
picked=()
for b in "${binaries[@]}"; do wanted "${b##*=}" && picked+=("${b%=*}"); done
binaries=("${picked[@]}")
wanted "$plugin_steps" || plugins=()

targets=()
[ ${#plugins[@]} -gt 0 ] && targets+=("${plugins[@]}")
[ ${#binaries[@]} -gt 0 ] && for b in "${binaries[@]}"; do targets+=("${b#*=}"); done
bazel build --config=cuda --dynamic_mode=off "$@" "${targets[@]}"
bin_dir="$(bazel info --config=cuda --dynamic_mode=off "$@" bazel-bin)"
path_of() { local t="${1#//}"; echo "$bin_dir/${t%%:*}/${t#*:}"; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/plugins"
for b in ${binaries[@]+"${binaries[@]}"}; do
  label="${b%%=*}"
  src="$(path_of "${b#*=}")"
  cp "$src" "$out/bin/$label"
  ldd "$src" | awk '$3 ~ /^(\/usr)?\/lib\/x86_64-linux-gnu\/lib(absl|protobuf|benchmark)/ {print $3}' \
    | while read -r lib; do cp -nL "$lib" "$out/lib/"; done
done
for p in ${plugins[@]+"${plugins[@]}"}; do cp "$(path_of "$p")" "$out/plugins/"; done
chmod -R u+w "$out"
strip --strip-debug "$out"/bin/* "$out"/lib/* "$out"/plugins/* 2>/dev/null || true
find "$out/bin" "$out/plugins" -type f -exec gzip -9 {} +
echo "$steps" > "$out/STEPS"
# The commit the binaries were built from: the device machine's copy of the
# tree has no history to ask (prefill_bench records it in its JSON).
{ git rev-parse --short=12 HEAD | tr -d '\n'
  git diff --quiet HEAD -- . ':!.device' || printf -- '-dirty'; echo; } > "$out/COMMIT"
du -sh "$out"
