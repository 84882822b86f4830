#!/bin/bash
# Issue 18 item 3 on the H200, one call (call 1 of 2026-12-04's second
# session): the fp8 producers' lane-resolved entries, whole-entry L2
# prefetch a pair ahead, 16-byte code loads and the bf16-domain conversion
# (row_access.h: Fp8Bf16Form) against the build before them, beside
# FlashMLA's sm_90 fp8 sparse decode. The new build's
# sparse_mla kernels_test (the fp8 seesaw and crossover bodies against the
# float64 reference and the gathered workspace to the bit; the gather and
# every-position passes against the host's conversion for every code),
# compute-sanitizer memcheck over the fp8 and gather cases and racecheck
# over a crossover and a seesaw-fp8 case; then fp8 decode at 128 and 64
# heads (1, 32 and 128 requests; 1 and 4 query tokens) on the fp8 paths,
# each build in turn a context at a time: old, new, and the new one without
# the bf16-domain form (nobf16) and without the L2 prefetch (nopf) at 8K;
# old and new at 64K; FlashMLA's figure for each shape. Folder layout:
# bin/{old,new,nobf16,nopf}_bench.gz, bin/new_kernels_test.gz,
# bin/flashmla_sparse_decode.gz, COMMIT.
# Run from the repository root with the payload folder (call_lib.sh):
#   bash testing/gpu/sparse_mla_fp8_producer.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/call_lib.sh"
call_begin prod "${1:?the payload folder}"
echo "== $(el) kernels_test (new)"
sparse_mla_suite "$work/new_kernels_test"
sparse_mla_sanitizers "$work/new_kernels_test" \
  '*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8FnuzCache64Heads'
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX"
  if [ $CTX = 8192 ]; then builds="old new nobf16 nopf"; else builds="old new"; fi
  for b in $builds; do fp8_decode $b $CTX picked,+fp8,gather+seesaw; done
  flashmla_decode $CTX
  smi
done
echo "== $(el) second round at 8K, new then old (order effects)"
fp8_decode new 8192 picked,+fp8,gather+seesaw
fp8_decode old 8192 picked,+fp8,gather+seesaw
echo "== $(el) prefill, fp8 cache, T = 8192 (the dequantised workspace), old then new"
for b in old new; do
  timeout 90 "$work/${b}_bench" --iters=10 --cache=fp8 $H128 --tokens=8192 --paths=picked \
    --then --iters=10 --cache=fp8 $H64 --tokens=8192 --paths=picked 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$b /"
done
smi
echo "== $(el) done"
