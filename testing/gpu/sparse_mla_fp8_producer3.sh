#!/bin/bash
# Issue 18 item 3 on the H200, call 3: the 64-head producer's rolling
# pipeline (roll: each of a row's loads of the next part issued just before
# the same load of this part converts; ptxas spills 84 bytes) and the
# lookahead's block-table entry checked only where its offset is used,
# the crossover back to a part at a time (call 1's), against call 1's
# build (new), call 2's (new2) and the build before (old), beside
# FlashMLA's fp8 sparse decode; roll's kernels_test, memcheck over the fp8
# cases, racecheck over two crossover cases and a seesaw-fp8 case.
# Folder layout: bin/{old,new,new2,roll}_bench.gz, bin/roll_kernels_test.gz,
# bin/flashmla_sparse_decode.gz, COMMIT.
# Run from the repository root with the payload folder (call_lib.sh):
#   bash testing/gpu/sparse_mla_fp8_producer3.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/call_lib.sh"
call_begin prod3 "${1:?the payload folder}"
echo "== $(el) kernels_test (roll)"
sparse_mla_suite "$work/roll_kernels_test"
sparse_mla_sanitizers "$work/roll_kernels_test" \
  '*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8Cache128HeadsBf16Io:*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8Cache64HeadsDecodeManyRows'
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX"
  if [ $CTX = 8192 ]; then builds="old new new2 roll"; else builds="new2 roll"; fi
  for b in $builds; do fp8_decode $b $CTX +fp8,gather+seesaw; done
  flashmla_decode $CTX
  smi
done
echo "== $(el) second round at 8K: roll, new2 (order effects)"
fp8_decode roll 8192 +fp8,gather+seesaw
fp8_decode new2 8192 +fp8,gather+seesaw
echo "== $(el) done"
