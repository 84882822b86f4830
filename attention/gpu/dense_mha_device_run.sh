#!/bin/bash
# Dense MHA prefill on the H200 (branch h-dense): SASS check (HGMMA/HMMA),
# Bf16WarpMma + WarpgroupBf16Mma tests, the kernel gtest (float64
# references) for the three attention bodies (sm_90a pipelined wgmma, sm_90a
# plain wgmma via DSA_DENSE_ATTENTION=plain, sm_90 mma.sync; the bf16 GEMM
# on wgmma, or on mma.sync with DSA_BF16_GEMM=warp), memcheck,
# timings of ours and, in the same call, torch SDPA (cuDNN) + the
# decompression matmul. Binaries: bazel build --config=cuda
# [--define=DSA_CUDA_ARCHS=90]; see attention/gpu/dense_mha_device_run.sh.
#
# Usage: dense_mha_device_run.sh [DIR]: DIR (default: this script's folder)
# holds the binaries, plain or gzipped (*.gz), and torch_dense_mha.py.
set -u
src="$(cd "${1:-$(dirname "$0")}" && pwd)"
t0=$(date +%s)
d=/tmp/dense_bin
mkdir -p "$d"
for f in "$src"/*; do
  case "$f" in
    *.gz) b="$(basename "$f" .gz)"; gzip -dc "$f" > "$d/$b" && chmod +x "$d/$b" ;;
    *dense_mha_*|*mma_bf16_test) cp "$f" "$d/" ;;
  esac
done
cp "$src/torch_dense_mha.py" "$d/"
stamp() { echo "---- [$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader

stamp "SASS (per kernel: HGMMA HMMA LDSM FFMA)"
for b in dense_mha_kernels_test dense_mha_kernels_test_sm90; do
  echo "$b:"
  cuobjdump -sass "$d/$b" 2>&1 | awk '
    /Function : / { if (name != "") printf "  %s HGMMA=%d HMMA=%d LDSM=%d FFMA=%d\n", name, g, h, l, f;
                    name = $3; g = 0; h = 0; l = 0; f = 0; next }
    /HGMMA/ { g++ } /HMMA/ { h++ } /LDSM/ { l++ } /FFMA/ { f++ }
    END { if (name != "") printf "  %s HGMMA=%d HMMA=%d LDSM=%d FFMA=%d\n", name, g, h, l, f }' \
  | grep -E "DenseAttentionKernelILi(256ELi256|192ELi128)|Bf16GemmKernel" \
  | sed -E 's/_ZN3dsa9attention3gpu[0-9]+_GLOBAL__N__[0-9a-f_]+(dense_mha|gemm_bf16)_hip_cc_[0-9a-f]+//'
done

stamp "mma_bf16_test"
timeout 8 "$d/mma_bf16_test" --gtest_brief=1 2>&1 | grep -v "^Bf16WarpMma" | tail -12

stamp "memcheck (background) + dense_mha_kernels_test sm_90a pipelined"
( timeout 28 compute-sanitizer --tool memcheck --leak-check no "$d/dense_mha_kernels_test" \
    --gtest_filter='*tiny*:*one_token*:Shapes/Bf16GemmTest.*/0:Shapes/Bf16GemmTest.*/2:*Args*' \
    --gtest_brief=1 > /tmp/memcheck.txt 2>&1; echo "memcheck rc=$?" >> /tmp/memcheck.txt ) &
mc=$!
timeout 15 "$d/dense_mha_kernels_test" 2>&1 | grep -vE "^\[ +(RUN|OK) |^seed|^\[-" | tail -22
stamp "dense_mha_kernels_test sm_90a plain attention + warp gemm (DSA_DENSE_ATTENTION=plain DSA_BF16_GEMM=warp)"
DSA_DENSE_ATTENTION=plain DSA_BF16_GEMM=warp timeout 12 "$d/dense_mha_kernels_test" --gtest_filter='Cases/*:Shapes/*' 2>&1 \
  | grep -vE "^\[ +(RUN|OK) |^seed|^\[-" | tail -14
stamp "dense_mha_kernels_test sm_90 (warp body)"
timeout 12 "$d/dense_mha_kernels_test_sm90" --gtest_filter='Cases/*' 2>&1 \
  | grep -vE "^\[ +(RUN|OK) |^seed|^\[-" | tail -14
wait $mc
stamp "memcheck output"
tail -8 /tmp/memcheck.txt

stamp "dense_mha_bench sm_90a pipelined"
timeout 16 "$d/dense_mha_bench" 2>&1 | tail -15
stamp "dense_mha_bench sm_90a plain attention, wgmma gemm --quick"
DSA_DENSE_ATTENTION=plain timeout 7 "$d/dense_mha_bench" --quick 2>&1 | tail -9
stamp "dense_mha_bench sm_90 --quick"
timeout 7 "$d/dense_mha_bench_sm90" --quick 2>&1 | tail -9

stamp "torch SDPA + matmul"
timeout 16 python3 "$d/torch_dense_mha.py" 2>&1 | tail -10
stamp "done"
