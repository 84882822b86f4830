#!/bin/bash
# Dense MHA prefill on the H200 (branch h-dense; attention/gpu/
# dense_mha_device_run.sh): SASS (HGMMA on sm_90a, HMMA on sm_90), the mma
# tests, the kernel gtest (float64 references) for sm_90a (pipelined wgmma
# attention + wgmma GEMM; round 3 passed the other bodies), memcheck, our
# timings and,
# in the same call, torch SDPA (cuDNN) + the decompression matmul.
#
# The binaries (built on the development machine, carried gzipped):
#   bazel build --config=cuda //attention/gpu:dense_mha_kernels_test \
#     //attention/gpu:dense_mha_bench //platform/gpu:mma_bf16_test
# (--define=DSA_CUDA_ARCHS=90 builds the sm_90 variant: mma.sync bodies.)
# Usage: dense_mha_device_run.sh [DIR]: DIR (default: this script's folder)
# holds them, plain or gzipped (*.gz), and torch_dense_mha.py.
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
cp "$src/torch_dense_mha.py" "$d/" 2>/dev/null || cp "$(dirname "$0")/torch_dense_mha.py" "$d/"
stamp() { echo "---- [$(( $(date +%s) - t0 )) s] $*"; }

stamp "SASS (HGMMA HMMA LDSM FFMA)"
for b in dense_mha_kernels_test; do
  echo "$b:"
  cuobjdump -sass "$d/$b" 2>&1 | awk '
    /Function : / { if (name != "") printf "  %s HGMMA=%d HMMA=%d LDSM=%d FFMA=%d\n", name, g, h, l, f;
                    name = $3; g = 0; h = 0; l = 0; f = 0; next }
    /HGMMA/ { g++ } /HMMA/ { h++ } /LDSM/ { l++ } /FFMA/ { f++ }
    END { if (name != "") printf "  %s HGMMA=%d HMMA=%d LDSM=%d FFMA=%d\n", name, g, h, l, f }' \
    | grep -E "DenseAttentionKernelILi(256ELi256|192ELi128)ELb1|Bf16GemmKernelILb1" \
    | sed -E 's/_ZN3dsa9attention3gpu[0-9]+_GLOBAL__N__[0-9a-f_]+(dense_mha|gemm_bf16)_hip_cc_[0-9a-f]+//'
done

stamp "mma_bf16_test"
timeout 6 "$d/mma_bf16_test" --gtest_brief=1 2>&1 | grep -v "^Bf16WarpMma" | tail -4

stamp "tests: sm_90a defaults, and memcheck beside them"
( timeout 13 compute-sanitizer --tool memcheck --leak-check no "$d/dense_mha_kernels_test" \
    --gtest_filter='*tiny*:*one_token*:Shapes/Bf16GemmTest.*/0:Shapes/Bf16GemmTest.*/2:*Args*' \
    --gtest_brief=1 > /tmp/memcheck.txt 2>&1; echo "memcheck rc=$?" >> /tmp/memcheck.txt ) &
p1=$!
timeout 13 "$d/dense_mha_kernels_test" 2>&1 | grep -vE "^\[ +(RUN|OK) |^seed|^\[-|^$" | tail -17
wait $p1
stamp "memcheck"
tail -3 /tmp/memcheck.txt

stamp "dense_mha_bench sm_90a"
timeout 11 "$d/dense_mha_bench" 2>&1 | tail -15

stamp "dense_mha_bench sm_90a, plain warpgroup attention (DSA_DENSE_ATTENTION=plain) --t8192"
DSA_DENSE_ATTENTION=plain timeout 5 "$d/dense_mha_bench" --t8192 2>&1 | tail -3

stamp "torch SDPA + matmul"
timeout 11 python3 "$d/torch_dense_mha.py" 2>&1 | tail -9
stamp "done"
