#!/bin/bash
# Issue 18 on the H200, call 5: the committed tree after EntryOffset went
# back to its one-step form (call 4 measured the bf16 seesaw body 10 %
# slower with it written through EntryBlock / EntryOffsetOf), against main
# before this session (old). sparse_mla kernels_test; fp8 decode at 128 and
# 64 heads (1, 32 and 128 requests; 1 and 4 query tokens; 8K and 64K) on
# the picked path, FlashMLA's fp8 sparse decode alone and with the W_UV
# product by cuBLAS (the same work as our op); bf16 decode at 128 and 512
# rows and prefill at T = 8192 over bf16 and fp8 caches, new and old
# interleaved, FlashMLA + W_UV. Folder layout: bin/{old,new}_bench.gz,
# bin/new_kernels_test.gz, bin/flashmla_sparse_{decode,prefill}.gz, COMMIT.
# Run from the repository root with the payload folder (call_lib.sh):
#   bash testing/gpu/sparse_mla_fp8_producer_last.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/call_lib.sh"
call_begin final3 "${1:?the payload folder}"
echo "== $(el) sparse_mla kernels_test"
sparse_mla_suite "$work/new_kernels_test"
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX: new (picked), FlashMLA"
  fp8_decode new $CTX ""
  flashmla_decode $CTX
  smi
done
echo "== $(el) bf16 decode and prefill: new, old interleaved; FlashMLA + W_UV"
for b in new old new old; do
  timeout 60 "$work/${b}_bench" --mode=decode --cache=bf16 $H128 --context=8192 --requests=128 --iters=30 --then \
    --mode=decode --cache=bf16 $H64 --context=8192 --requests=512 --iters=30 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$b /"
done
for b in new old; do
  timeout 120 "$work/${b}_bench" --iters=20 $H128 --tokens=8192 --then --iters=20 $H64 --tokens=8192 \
    --then --iters=10 --cache=fp8 $H128 --tokens=8192 2>&1 | grep -E "^sparse_mla|fail|rror" | sed "s/^/$b /"
done
timeout 90 "$work/flashmla_sparse_prefill" --iters=20 --heads=128 --v=128 --tokens=8192 --then --iters=20 --heads=64 --v=256 --tokens=8192 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
smi
echo "== $(el) done"
