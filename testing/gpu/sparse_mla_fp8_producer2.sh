#!/bin/bash
# Issue 18 item 3 on the H200, call 2: the crossover's parts loaded one part
# ahead of their stores within a pair (new2) and across pairs too (new2x,
# ptxas spills 108 bytes), its rope by cp.async, the 64-head producer
# without the L2 prefetch, against call 1's build (new) and the build
# before (old), beside FlashMLA's fp8 sparse decode; new2's kernels_test,
# memcheck over the fp8 cases and racecheck over two crossover cases and a
# seesaw-fp8 case; a stamped build's timeline of a seesaw-fp8 pair at 64
# heads, 128 rows (testing/gpu/seesaw_fp8_stamps.patch). Folder layout:
# bin/{old,new,new2,new2x,stamps}_bench.gz, bin/new2_kernels_test.gz,
# bin/flashmla_sparse_decode.gz, COMMIT; the
# stamps reader is testing/gpu/seesaw_fp8_stamps.py.
# Run from the repository root with the payload folder (call_lib.sh):
#   bash testing/gpu/sparse_mla_fp8_producer2.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/call_lib.sh"
call_begin prod2 "${1:?the payload folder}"
echo "== $(el) kernels_test (new2)"
sparse_mla_suite "$work/new2_kernels_test"
sparse_mla_sanitizers "$work/new2_kernels_test" \
  '*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8Cache128HeadsBf16Io:*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8Cache64HeadsDecodeManyRows'
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX"
  if [ $CTX = 8192 ]; then builds="old new new2 new2x"; else builds="new new2"; fi
  for b in $builds; do fp8_decode $b $CTX +fp8,gather+seesaw; done
  flashmla_decode $CTX
  smi
done
echo "== $(el) second round at 8K: new2, new (order effects)"
fp8_decode new2 8192 +fp8,gather+seesaw
fp8_decode new 8192 +fp8,gather+seesaw
echo "== $(el) stamps: seesaw-fp8, 64 heads, 128 x 1 and 32 x 4, 8K"
for rm in "128 1" "32 4"; do set -- $rm
  DSA_SEESAW_STAMPS_FILE="$out/stamps_$1x$2.bin" timeout 60 "$work/stamps_bench" --mode=decode --cache=fp8 $H64 --context=8192 \
    --requests=$1 --mtp=$2 --iters=10 --paths=seesaw-fp8 2>&1 | grep -E "^sparse_mla|rror"
  python3 "$here/seesaw_fp8_stamps.py" "$out/stamps_$1x$2.bin"
done
echo "== $(el) done"
