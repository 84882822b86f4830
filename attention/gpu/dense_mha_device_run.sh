#!/bin/bash
# One call on the lent H200 for the dense MHA prefill (no Bazel there): the
# SASS of the attention and GEMM kernels (HGMMA on sm_90a, HMMA on sm_90),
# the Bf16WarpMma / WarpgroupBf16Mma tests, the kernel gtest (float64
# references) for both attention bodies, compute-sanitizer memcheck on the
# small cases, our timings and, in the same call, torch SDPA (cuDNN) + the
# decompression matmul (torch_dense_mha.py).
#
# Build here, then carry the binaries (gzipped if the payload is tight):
#   bazel build --config=cuda //attention/gpu:dense_mha_kernels_test \
#     //attention/gpu:dense_mha_bench //platform/gpu:mma_bf16_test
#   (and the same two dense targets with --define=DSA_CUDA_ARCHS=90, copied
#   as dense_mha_kernels_test_sm90 / dense_mha_bench_sm90)
# Usage: dense_mha_device_run.sh BIN_DIR   (BIN_DIR also holds the script)
set -u
d="${1:?usage: dense_mha_device_run.sh BIN_DIR}"
t0=$(date +%s)
stamp() { echo "---- [$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader

stamp "SASS (per kernel: HGMMA HMMA LDSM FFMA)"
for b in dense_mha_kernels_test dense_mha_kernels_test_sm90; do
  [ -x "$d/$b" ] || continue
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
timeout 10 "$d/mma_bf16_test" --gtest_brief=1 2>&1 | grep -v "^Bf16WarpMma" | tail -15

stamp "memcheck (background) + dense_mha_kernels_test sm_90a"
( timeout 30 compute-sanitizer --tool memcheck --leak-check no "$d/dense_mha_kernels_test" \
    --gtest_filter='*tiny*:*one_token*:Shapes/Bf16GemmTest.*/0:Shapes/Bf16GemmTest.*/2:*Args*' \
    --gtest_brief=1 > /tmp/memcheck.txt 2>&1; echo "memcheck rc=$?" >> /tmp/memcheck.txt ) &
mc=$!
timeout 25 "$d/dense_mha_kernels_test" 2>&1 | grep -vE "^\[ +(RUN|OK) |^seed" | tail -30
if [ -x "$d/dense_mha_kernels_test_sm90" ]; then
  stamp "dense_mha_kernels_test sm_90 (warp body)"
  timeout 20 "$d/dense_mha_kernels_test_sm90" 2>&1 | grep -vE "^\[ +(RUN|OK) |^seed" | tail -25
fi
wait $mc
stamp "memcheck output"
tail -12 /tmp/memcheck.txt

stamp "dense_mha_bench sm_90a"
timeout 20 "$d/dense_mha_bench" 2>&1 | tail -16
if [ -x "$d/dense_mha_bench_sm90" ]; then
  stamp "dense_mha_bench sm_90 --quick"
  timeout 9 "$d/dense_mha_bench_sm90" --quick 2>&1 | tail -10
fi

stamp "torch SDPA + matmul"
timeout 18 python3 "$d/torch_dense_mha.py" 2>&1 | tail -12
stamp "done"
