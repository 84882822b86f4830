#!/usr/bin/env bash
# Builds testing/gpu/peers/flashmla_sparse_{prefill,decode}.cu against a FlashMLA
# checkout and the CUTLASS its csrc/cutlass submodule pins (FlashMLA's own
# sources are read from there, never copied into this project), for sm_90a,
# with the flags FlashMLA's setup.py gives nvcc.
#
#   testing/gpu/peers/build_flashmla.sh FLASHMLA_DIR CUTLASS_DIR OUT_DIR
#
# OUT_DIR gets flashmla_sparse_prefill and flashmla_sparse_decode.
set -euo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 FLASHMLA_DIR CUTLASS_DIR OUT_DIR" >&2
  exit 2
fi
flashmla=$1 cutlass=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
csrc=$flashmla/csrc
for f in "$csrc/sm90/prefill/sparse/instantiations/phase1_k576.cu" \
  "$csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h128.cu" \
  "$cutlass/include/cute/tensor.hpp"; do
  [[ -f $f ]] || { echo "$0: missing $f" >&2; exit 1; }
done
nvcc=${NVCC:-nvcc}
flags=(-std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a
  --expt-relaxed-constexpr --expt-extended-lambda --use_fast_math
  -DNDEBUG -D_USE_MATH_DEFINES -U__CUDA_NO_HALF_OPERATORS__
  -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_HALF2_OPERATORS__
  -U__CUDA_NO_BFLOAT16_CONVERSIONS__
  --ptxas-options=-v,--register-usage-level=10,--warn-on-spills
  -I"$csrc" -I"$csrc/sm90" -I"$csrc/kerutils/include"
  -I"$cutlass/include" -I"$cutlass/tools/util/include" -lineinfo)
mkdir -p "$out"
"$nvcc" "${flags[@]}" -o "$out/flashmla_sparse_prefill" \
  "$here/flashmla_sparse_prefill.cu" \
  "$csrc/sm90/prefill/sparse/instantiations/phase1_k576.cu" -lcublas -lcuda &
prefill=$!
"$nvcc" "${flags[@]}" -o "$out/flashmla_sparse_decode" \
  "$here/flashmla_sparse_decode.cu" \
  "$csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h64.cu" \
  "$csrc/sm90/decode/sparse_fp8/instantiations/v32_persistent_h128.cu" \
  "$csrc/smxx/decode/combine/combine.cu" \
  "$csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu" \
  -lcublas -lcuda &
decode=$!
wait "$prefill" && wait "$decode"
echo "built $out/flashmla_sparse_prefill $out/flashmla_sparse_decode"
