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
# bin/flashmla_sparse_decode.gz, seesaw_fp8_stamps.py, COMMIT.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/prod2_out}"; mkdir -p "$out"
work=/tmp/prod2_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
G="$work/new2_kernels_test"
echo "== $(el) kernels_test (new2)"
timeout 100 "$G" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|gather pass|differ|not compared|skipped" "$out/kernels_test.txt" | head -70
echo "== $(el) memcheck over the fp8 cases"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter='*Fp8*:*SparseMlaGatherTest*' > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -4
echo "== $(el) racecheck over two crossover cases and a seesaw-fp8 case"
timeout 90 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 10 "$G" --gtest_brief=1 \
  --gtest_filter='*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8Cache128HeadsBf16Io:*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8Cache64HeadsDecodeManyRows' > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED|tests" "$out/racecheck.txt" | head -6
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
dec() {  # build, context
  local b=$1 ctx=$2 args=() h hh fp8path
  for h in 128 64; do
    if [ $h = 128 ]; then hh="$H128"; fp8path=seesaw-fp8x2; else hh="$H64"; fp8path=seesaw-fp8; fi
    for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do
      set -- $rm
      [ ${#args[@]} -gt 0 ] && args+=(--then)
      args+=(--mode=decode --cache=fp8 $hh --context=$ctx --requests=$1 --mtp=$2 --iters=30 --paths=$fp8path,gather+seesaw)
    done
  done
  timeout 150 "$work/${b}_bench" "${args[@]}" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$b /"
}
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX"
  if [ $CTX = 8192 ]; then builds="old new new2 new2x"; else builds="new new2"; fi
  for b in $builds; do dec $b $CTX; done
  pargs=()
  for h in 128 64; do for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do set -- $rm
    [ ${#pargs[@]} -gt 0 ] && pargs+=(--then)
    pargs+=(--heads=$h --context=$CTX --requests=$1 --mtp=$2 --iters=30)
  done; done
  timeout 60 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
  smi
done
echo "== $(el) second round at 8K: new2, new (order effects)"
dec new2 8192; dec new 8192
echo "== $(el) stamps: seesaw-fp8, 64 heads, 128 x 1 and 32 x 4, 8K"
for rm in "128 1" "32 4"; do set -- $rm
  DSA_SEESAW_STAMPS_FILE="$out/stamps_$1x$2.bin" timeout 60 "$work/stamps_bench" --mode=decode --cache=fp8 $H64 --context=8192 \
    --requests=$1 --mtp=$2 --iters=10 --paths=seesaw-fp8 2>&1 | grep -E "^sparse_mla|rror"
  python3 "$here/seesaw_fp8_stamps.py" "$out/stamps_$1x$2.bin"
done
echo "== $(el) done"
