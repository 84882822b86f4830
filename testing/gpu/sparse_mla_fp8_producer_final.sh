#!/bin/bash
# Issue 18 on the H200, call 4: the committed tree (ff89914) against main
# before this session's producers (0f2226a), FlashMLA in the same call.
# sparse_mla kernels_test twice (two draws of its random inputs),
# mla_ops_test on cuda, compute-sanitizer memcheck over the fp8 and gather
# cases and racecheck over a crossover and a seesaw-fp8 case; fp8 decode
# at 128 and 64 heads (1, 32 and 128 requests; 1 and 4 query tokens; 8K and
# 64K contexts) on the picked path and the others, old and new, FlashMLA's
# fp8 sparse decode for each shape; bf16 decode at 32 / 128 / 512 rows
# beside FlashMLA's sparse prefill kernel; prefill at T = 8192 over bf16
# and fp8 caches, old and new, FlashMLA + W_UV. Folder layout:
# bin/{old,new}_bench.gz, bin/new_kernels_test.gz, bin/mla_ops_test.gz,
# bin/flashmla_sparse_{decode,prefill}.gz, lib/ (absl for mla_ops_test), COMMIT.
# Run from the repository root with the payload folder (call_lib.sh):
#   bash testing/gpu/sparse_mla_fp8_producer_final.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/call_lib.sh"
call_begin final2 "${1:?the payload folder}"
for k in 1 2; do
  echo "== $(el) sparse_mla kernels_test, draw $k"
  sparse_mla_suite "$work/new_kernels_test" $k
done
echo "== $(el) mla_ops_test, cuda"
timeout 60 "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure" "$out/mla_ops.txt" | head -6
sparse_mla_sanitizers "$work/new_kernels_test" \
  '*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8Cache64HeadsDecodeManyRows'
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX"
  fp8_decode new $CTX picked,+fp8,gather+seesaw
  fp8_decode old $CTX picked,+fp8,gather+seesaw
  flashmla_decode $CTX
  smi
done
echo "== $(el) bf16 decode: new, old, FlashMLA's sparse prefill kernel at the rows"
for rows in 32 128 512; do
  for b in new old; do
    timeout 30 "$work/${b}_bench" --mode=decode --cache=bf16 $H128 --context=8192 --requests=$rows --iters=30 --then \
      --mode=decode --cache=bf16 $H64 --context=8192 --requests=$rows --iters=30 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$b /"
  done
  timeout 30 "$work/flashmla_sparse_prefill" --iters=30 --heads=128 --v=128 --tokens=$rows --then --iters=30 --heads=64 --v=256 --tokens=$rows 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
done
echo "== $(el) prefill, T = 8192, bf16 and fp8 caches: new, old, FlashMLA + W_UV"
for b in new old; do
  timeout 120 "$work/${b}_bench" --iters=20 $H128 --tokens=8192 --then --iters=20 $H64 --tokens=8192 \
    --then --iters=10 --cache=fp8 $H128 --tokens=8192 --then --iters=10 --cache=fp8 $H64 --tokens=8192 2>&1 | grep -E "^sparse_mla|fail|rror" | sed "s/^/$b /"
done
timeout 90 "$work/flashmla_sparse_prefill" --iters=20 --heads=128 --v=128 --tokens=8192 --then --iters=20 --heads=64 --v=256 --tokens=8192 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
smi
echo "== $(el) done"
