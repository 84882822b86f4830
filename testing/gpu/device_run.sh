#!/bin/bash
# The GPU run, in one call on the device machine (an NVIDIA H200 here: CUDA,
# PyTorch and the Nsight tools, no Bazel). It checks and times every GPU
# kernel of the project and, in the same call on the same card, the PyTorch
# equivalents and the card's ceilings:
#
#   testing/gpu/build_payload.sh      # here: bazel build --config=cuda, pack .device/gpu
#   testing/gpu/device_run.sh         # there, from the repository root (carry .device/gpu)
#
# In order of importance (each step has a time limit; the later ones are
# skipped when less than they need is left of DSA_GPU_RUN_SECONDS, default
# 420):
#   1. the matrix instructions in each kernel's SASS (HGMMA/QGMMA/HMMA, FFMA);
#   2. every gpu-tagged gtest: the kernels against float64 references, the
#      runtime calls as fault sites, the op suites, the dense ops and the
#      runner suite on the "cuda" platform, then every fault of a step in turn
#      (step_faults_gpu_test, the sweep of model/deepseek_v32/
#      step_faults_test.cc on "cuda"; DSA_GPU_FAULT_SECONDS, default 240,
#      bounds it);
#   3. compute-sanitizer memcheck over the op suites, racecheck over one;
#   4. our kernels timed at the presets' shapes, then the torch references
#      (torch.topk, cuDNN SDPA, cuBLAS, eager gathers) and the copy and
#      matmul ceilings in the same call;
#   5. the PyTorch binding built against the machine's torch, tested on CUDA
#      tensors and timed against eager PyTorch;
#   6. prefill_bench at GLM-5.1's real shapes (issue 9's H200 run);
#   7. the stack against transformers' own modules (engines/torch/
#      check_transformers.py: checkpoints built by transformers, our stack
#      on CUDA, transformers in bf16 and float64; DSA_GPU_CHECK_ARGS adds to
#      its flags);
#   8. transformers' models converted to the plugins (engines/torch/
#      transformers_gpu.sh: check_convert.py against transformers' own run,
#      bench_transformers.py against its eager and sdpa; DSA_HF_SECONDS,
#      DSA_HF_ARGS);
#   9. prefill_bench once per flag set of DSA_GPU_BENCH_RUNS (';' between
#      sets, e.g. "--model=glm-5.1 --max_num_batched_tokens=64 --workloads=
#      1k_c1;--model=glm-5.2 --spec_tokens=3 --tp=4"), each on cuda with its
#      JSON in $OUT/bench_<n>.json.
# DSA_GPU_SKIP_TIMING=1 leaves out the SASS census and step 4 (a check-only
# run), DSA_GPU_SKIP_SANITIZER=1 step 3; DSA_GPU_STEPS=6 (a comma list of
# step numbers) runs only those, and by default a payload packed for some
# steps (build_payload.sh's DSA_GPU_STEPS) runs those of 1 to 6 it holds. prefill_bench runs GLM-5.1 and then GLM-5.2
# with MTP=3, every workload, --op_times=true (DSA_GPU_PREFILL_MODELS=glm-5.2
# runs one of them: each takes most of a 600 s call); DSA_GPU_PREFILL_ARGS
# adds to its flags (e.g. --prompts=8), DSA_GPU_PREFILL_GLM52_ARGS to
# GLM-5.2's only.
# Everything goes to stdout and to
# $OUT/device_run.txt, prefill_bench's JSON to $OUT/prefill_bench_*.json.
set -u -o pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
payload="$root/${DSA_PAYLOAD:-.device/gpu}"
out="${OUT:-/tmp/dsa_gpu_out}"
budget="${DSA_GPU_RUN_SECONDS:-420}"
mkdir -p "$out"
work=/tmp/dsa_gpu_run
rm -rf "$work" && mkdir -p "$work/bin"
mkdir -p "$work/plugins"
if [ ! -d "$payload/bin" ]; then
  echo "device_run.sh: no payload at $payload (testing/gpu/build_payload.sh makes it)" >&2
  exit 2
fi
shopt -s nullglob
for f in "$payload"/bin/*.gz; do gzip -dc "$f" > "$work/bin/$(basename "$f" .gz)"; done
for f in "$payload"/plugins/*.gz; do gzip -dc "$f" > "$work/plugins/$(basename "$f" .gz)"; done
chmod +x "$work"/bin/*
shopt -u nullglob
B="$work/bin"
# Carried Abseil/protobuf; cuBLASLt from the CUDA toolkit (dlopened by the
# cuda platform's GEMM).
export LD_LIBRARY_PATH="$payload/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
# NCCL for the collectives of tensor-parallel ranks: PyTorch's NVIDIA wheel
# ships it outside the loader's path.
if [ -z "${DSA_NCCL_LIBRARY:-}" ]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$nccl_dir" ] && [ -f "$nccl_dir/libnccl.so.2" ] && export DSA_NCCL_LIBRARY="$nccl_dir/libnccl.so.2"
fi
exec > >(tee "$out/device_run.txt") 2>&1

steps="${DSA_GPU_STEPS:-1,2,3,4,5,6}"  # 7, 8 and 9 run only when asked
# A payload packed for some steps (build_payload.sh with DSA_GPU_STEPS) holds
# the binaries of those only: the others are left out, and said so.
if [ -f "$payload/STEPS" ]; then
  packed="$(cat "$payload/STEPS")" kept=""
  for s in ${steps//,/ }; do
    if [[ ",$packed," == *",$s,"* ]]; then kept="${kept:+$kept,}$s"
    elif [ -n "${DSA_GPU_STEPS:-}" ]; then
      echo "device_run.sh: step $s is not in the payload (packed for steps $packed); left out"
    fi
  done
  steps="$kept"
fi
# True when step $1 is to run.
want() { [[ ",$steps," == *",$1,"* ]]; }

t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
section() { echo; echo "==== [$(elapsed) s] $*"; }
# True when at least $1 seconds of the budget are left.
room() { [ $(( budget - $(elapsed) )) -ge "$1" ]; }
# A gtest binary: its summary, failures and the lines kernels print.
gtest() {
  local limit=$1; shift
  timeout "$limit" "$@" --gtest_brief=1 > "$work/gtest.txt" 2>&1
  local rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|Failure|Expected|Which is|actual|worst|path " \
    "$work/gtest.txt" | head -24
  echo "exit $rc"
}

section "card"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
nvcc --version 2>/dev/null | tail -1
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"

timing=1
[ "${DSA_GPU_SKIP_TIMING:-0}" = 1 ] && timing=0
census=$timing
want 1 || census=0
want 4 || timing=0
[ $census = 1 ] && section "matrix instructions in the SASS (sm_90a), per kernel"
# Each bench binary links every kernel library; list the kernels of its own op.
[ $census = 1 ] && for pair in indexer_bench:Logits sparse_mla_bench:SparseMla \
    dense_mha_bench:'Dense|Bf16Gemm' dense_bench:Gemm; do
  b="${pair%%:*}" family="${pair#*:}"
  cuobjdump -sass "$B/$b" 2>/dev/null | awk -v bin="$b" '
    function flush() { if (n != "" && (g + q + h + f) > 0) print bin, n, "HGMMA=" g, "QGMMA=" q, "HMMA=" h, "FFMA=" f }
    /Function : / { flush(); n = $3; g = q = h = f = 0; next }
    /HGMMA/ { g++ } /QGMMA/ { q++ } /HMMA/ { h++ } /FFMA/ { f++ }
    END { flush() }' \
    | sed -E 's/_ZN3dsa9attention3gpu[0-9]*(_GLOBAL__N__[0-9a-f_]+[a-z0-9_]+_hip_cc_[0-9a-f]+)?(indexer)?[0-9]*//' \
    | grep -E "$family" | cut -c1-150 | sort -u | head -24
done

if want 2; then
section "gtest: kernels against float64 references"
for t in vector_add_test mma_bf16_test runtime_faults_test indexer_kernels_test \
         cache_kernels_test sparse_mla_kernels_test dense_mha_kernels_test \
         dense_ops_kernels_test; do
  # dense_mha's float64 references take about 56 s on the H200; sparse_mla's
  # whole suite (prefill, decode and the gather pass) ran past 45 s and 50 s.
  limit=45
  [ "$t" = dense_mha_kernels_test ] && limit=100
  [ "$t" = sparse_mla_kernels_test ] && limit=150
  echo "-- $t"; gtest "$limit" "$B/$t"
done
section "gtest: op suites, dense ops, runner and platform on cuda"
echo "-- indexer_ops_test"; gtest 40 "$B/indexer_ops_test" --gtest_filter='*/cuda*'
echo "-- mla_ops_test"; gtest 60 "$B/mla_ops_test" --gtest_filter='*/cuda*'
echo "-- dense_ops_test"; gtest 30 "$B/dense_ops_test" --gtest_filter='*/cuda*'
echo "-- dense_fp8_ops_test"; gtest 30 "$B/dense_fp8_ops_test" --gtest_filter='*/cuda*'
echo "-- model_runner_test"; gtest 60 "$B/model_runner_test" --gtest_filter='*/cuda*'
echo "-- model_runner_ops_test"; gtest 40 "$B/model_runner_ops_test" --gtest_filter='*/cuda*'
echo "-- platform_conformance_test"; gtest 20 "$B/platform_conformance_test"
echo "-- profile_run_scratch_gpu_test"; gtest 30 "$B/profile_run_scratch_gpu_test"
section "gtest: every fault of a step in turn on cuda (step_faults_gpu_test)"
gtest "${DSA_GPU_FAULT_SECONDS:-240}" "$B/step_faults_gpu_test"
# Per case: its fallible calls and the sites they were at.
grep -E "^\[ faults" "$work/gtest.txt" | head -24
fi

if want 3; then
section "compute-sanitizer: memcheck over the op suites on cuda, racecheck over top-k and the cache writes"
sanitize=1
[ "${DSA_GPU_SKIP_SANITIZER:-0}" = 1 ] && sanitize=0 && echo "(skipped: DSA_GPU_SKIP_SANITIZER=1)"
[ $sanitize = 1 ] && room 90 && timeout 40 compute-sanitizer --tool memcheck --print-limit 5 "$B/indexer_ops_test" \
  --gtest_brief=1 --gtest_filter='*/cuda*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -3
[ $sanitize = 1 ] && room 80 && timeout 40 compute-sanitizer --tool memcheck --print-limit 5 "$B/mla_ops_test" \
  --gtest_brief=1 --gtest_filter='*/cuda*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -3
[ $sanitize = 1 ] && room 70 && timeout 25 compute-sanitizer --tool racecheck --print-limit 5 "$B/indexer_ops_test" \
  --gtest_brief=1 --gtest_filter='*TopK*/cuda*:*KWrite*/cuda*' 2>&1 \
  | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" | tail -3
fi

if [ $timing = 1 ]; then
section "ours: indexer logits and top-k (fp8 cache, causal prefill of one request; decode 32 x 8K)"
: > "$work/ours_indexer.txt"
for h in 32 64; do
  for t in 1024 1900 8192; do
    timeout 10 "$B/indexer_bench" --heads=$h --tokens=$t --iters=30 >> "$work/ours_indexer.txt" 2>&1
  done
done
timeout 10 "$B/indexer_bench" --heads=32 --tokens=8192 --decode=32 --iters=50 >> "$work/ours_indexer.txt" 2>&1
# Top-k alone on long decode rows of N(0, 1) logits: 1 and 32 rows of 64K
# and 128K keys.
for r in 1 32; do
  for t in 65536 131072; do
    timeout 10 "$B/indexer_bench" --topk_only=1 --topk_rows=$r --tokens=$t --iters=50 >> "$work/ours_indexer.txt" 2>&1
  done
done
grep -E "^ours_|fail" "$work/ours_indexer.txt"
section "ours: sparse MLA (absorbed 576/512, top-k 2048, W_UV included)"
room 120 && timeout 40 stdbuf -oL "$B/sparse_mla_bench" \
  --mode=prefill --cache=bf16 --heads=64 --v=256 --nope=192 --tokens=8192 --iters=5 \
  --then --mode=prefill --cache=bf16 --heads=128 --v=128 --nope=128 --tokens=8192 --iters=3 \
  --then --mode=prefill --cache=bf16 --heads=64 --v=256 --nope=192 --tokens=1024 --iters=10 \
  --then --mode=prefill --cache=fp8 --heads=64 --v=256 --nope=192 --tokens=1900 --iters=5 \
  --then --mode=decode --cache=fp8 --heads=128 --v=128 --nope=128 --requests=32 --context=8192 --iters=20 \
  --then --mode=decode --cache=fp8 --heads=64 --v=256 --nope=192 --requests=32 --context=65536 --iters=20 \
  2>&1 | grep -E "^sparse_mla|fail"
section "ours: dense causal MHA prefill (K/V decompression included)"
room 100 && timeout 30 "$B/dense_mha_bench" 2>&1 | grep -E "^dense|fail|ceiling"
section "ours: indexer K write, indexer Q, MLA cache write"
room 90 && timeout 15 "$B/cache_bench" --iters=30 2>&1 | tail -14
section "ours: the layer's dense ops (cuBLASLt GEMM, RMSNorm) and one GLM-5.1-shaped layer step"
room 80 && timeout 12 "$B/dense_bench" 1024 8192 32 2>&1 | grep -E "backend|sum|rms_norm"
room 75 && timeout 20 "$B/layer_step_bench" --platform=cuda --iters=5 1024 8192 2>&1 | tail -8

section "torch, same card: ceilings, the logits reference, torch.topk"
room 70 && timeout 30 python3 attention/gpu/indexer/torch_baseline.py "$work/ours_indexer.txt" 32 2>&1 | tail -40
section "torch: gather + softmax sparse MLA (+ W_UV matmul)"
room 60 && timeout 25 python3 attention/gpu/sparse_mla/torch_baseline.py --iters=3 2>&1 | grep -E "total|w_uv"
section "torch: SDPA (cuDNN) + the K/V decompression matmul"
room 50 && timeout 25 python3 attention/gpu/dense_mha/torch_baseline.py 2>&1 | tail -8
section "torch: the memory-bound ops and the dense ops"
room 40 && timeout 15 python3 attention/gpu/cache/torch_baseline.py --iters=20 2>&1 | tail -10
room 35 && timeout 15 python3 attention/gpu/dense_ops/torch_baseline.py 1024 8192 32 2>&1 | grep -E "sum|rms_norm"

fi  # timing

want 5 && section "PyTorch binding (torch.ops.dsa), built against this torch, on CUDA tensors"
if ! want 5; then
  :
elif room 30 && CXX=/usr/bin/g++ timeout 60 bash engines/torch/build.sh "$work/torch" > "$work/torch_build.txt" 2>&1; then
  tail -1 "$work/torch_build.txt"
  p="$work/plugins"
  export DSA_TORCH_LIBRARY="$work/torch/libdsa_torch.so"
  export DSA_TORCH_PLUGINS="$p/libdsa_cpu_platform.so:$p/libdsa_attention_cpu.so:$p/libdsa_cuda_platform.so"
  export DSA_TORCH_PLATFORM_PLUGINS="$p/libdsa_cpu_platform.so:$p/libdsa_rocm_platform.so:$p/libdsa_cuda_platform.so"
  export DSA_STACK_LIBRARY="$p/libdsa_stack.so"
  PYTHONPATH="$root/engines/torch" timeout 40 python3 -m pytest -q -p no:cacheprovider -rs engines/torch/tests 2>&1 | tail -10
  room 15 && PYTHONPATH="$root/engines/torch" timeout 20 python3 engines/torch/bench.py --device cuda --repeats 20 \
    --plugins="$DSA_TORCH_PLUGINS" 2>&1 | tail -12
else
  tail -5 "$work/torch_build.txt" 2>/dev/null
fi

if want 6; then
section "prefill_bench on cuda at the real shapes: GLM-5.1 (78 layers + MTP), GLM-5.2 with MTP=3"
commit=""
[ -f "$payload/COMMIT" ] && commit="--commit=$(cat "$payload/COMMIT")"
for m in ${DSA_GPU_PREFILL_MODELS:-glm-5.1 glm-5.2}; do
  room 60 || break
  extra=""
  [ $m = glm-5.2 ] && extra="--spec_tokens=3 ${DSA_GPU_PREFILL_GLM52_ARGS:-}"
  # shellcheck disable=SC2086
  timeout $(( budget - $(elapsed) )) "$B/prefill_bench" --platform=cuda --model=$m $extra \
    --op_times=true $commit --json="$out/prefill_bench_${m//[.-]/}.json" ${DSA_GPU_PREFILL_ARGS:-} 2>&1 | tail -40
done
fi
if want 7; then
section "the stack against transformers (check_transformers.py)"
# shellcheck disable=SC2086
DSA_STACK_LIBRARY="$work/plugins/libdsa_stack.so" PYTHONPATH="$root/engines/torch" \
  timeout $(( budget - $(elapsed) )) python3 engines/torch/check_transformers.py \
  --out "$out" ${DSA_GPU_CHECK_ARGS:-} 2>&1 | tee "$out/check_transformers.txt" | tail -60
fi
if want 8; then
section "transformers' models converted to the plugins (transformers_gpu.sh)"
lib=""
[ -f "$work/torch/libdsa_torch.so" ] && lib="$work/torch/libdsa_torch.so"
DSA_PAYLOAD="$payload" DSA_HF_LIBRARY="$lib" \
  timeout $(( budget - $(elapsed) )) bash engines/torch/transformers_gpu.sh 2>&1 | tail -80
fi
if want 9; then
section "prefill_bench runs of DSA_GPU_BENCH_RUNS"
commit=""
[ -f "$payload/COMMIT" ] && commit="--commit=$(cat "$payload/COMMIT")"
echo "NCCL: ${DSA_NCCL_LIBRARY:-not found}"
n=0
IFS=';' read -r -a bench_runs <<< "${DSA_GPU_BENCH_RUNS:-}"
for flags in "${bench_runs[@]}"; do
  n=$((n + 1))
  room 30 || break
  echo "-- run $n: $flags"
  # shellcheck disable=SC2086
  timeout $(( budget - $(elapsed) )) "$B/prefill_bench" --platform=cuda $flags \
    $commit --json="$out/bench_$n.json" 2>&1 | tail -30
done
fi
section "done"
