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
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/prod3_out}"; mkdir -p "$out"
work=/tmp/prod3_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
G="$work/roll_kernels_test"
echo "== $(el) kernels_test (roll)"
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
  if [ $CTX = 8192 ]; then builds="old new new2 roll"; else builds="new2 roll"; fi
  for b in $builds; do dec $b $CTX; done
  pargs=()
  for h in 128 64; do for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do set -- $rm
    [ ${#pargs[@]} -gt 0 ] && pargs+=(--then)
    pargs+=(--heads=$h --context=$CTX --requests=$1 --mtp=$2 --iters=30)
  done; done
  timeout 60 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
  smi
done
echo "== $(el) second round at 8K: roll, new2 (order effects)"
dec roll 8192; dec new2 8192
echo "== $(el) done"
