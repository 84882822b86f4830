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
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/prod_out}"; mkdir -p "$out"
work=/tmp/prod_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
G="$work/new_kernels_test"
echo "== $(el) kernels_test (new)"
timeout 100 "$G" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|gather pass|differ|not compared|skipped" "$out/kernels_test.txt" | head -70
FP8CASES='*Fp8*:*SparseMlaGatherTest*'
echo "== $(el) memcheck over the fp8 cases"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$FP8CASES" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -4
echo "== $(el) racecheck over a crossover case and a seesaw-fp8 case"
timeout 80 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 10 "$G" --gtest_brief=1 \
  --gtest_filter='*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8FnuzCache64Heads' > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED|tests" "$out/racecheck.txt" | head -6
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
dec() {  # build, context
  local b=$1 ctx=$2 args=() h hh fp8path
  for h in 128 64; do
    if [ $h = 128 ]; then hh="$H128"; fp8path=seesaw-fp8x2; else hh="$H64"; fp8path=seesaw-fp8; fi
    for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do
      set -- $rm
      [ ${#args[@]} -gt 0 ] && args+=(--then)
      args+=(--mode=decode --cache=fp8 $hh --context=$ctx --requests=$1 --mtp=$2 --iters=30 --paths=picked,$fp8path,gather+seesaw)
    done
  done
  timeout 150 "$work/${b}_bench" "${args[@]}" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$b /"
}
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX"
  if [ $CTX = 8192 ]; then builds="old new nobf16 nopf"; else builds="old new"; fi
  for b in $builds; do dec $b $CTX; done
  pargs=()
  for h in 128 64; do for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do set -- $rm
    [ ${#pargs[@]} -gt 0 ] && pargs+=(--then)
    pargs+=(--heads=$h --context=$CTX --requests=$1 --mtp=$2 --iters=30)
  done; done
  timeout 60 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
  smi
done
echo "== $(el) second round at 8K, new then old (order effects)"
dec new 8192; dec old 8192
echo "== $(el) prefill, fp8 cache, T = 8192 (the dequantised workspace), old then new"
for b in old new; do
  timeout 90 "$work/${b}_bench" --iters=10 --cache=fp8 $H128 --tokens=8192 --paths=picked \
    --then --iters=10 --cache=fp8 $H64 --tokens=8192 --paths=picked 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$b /"
done
smi
echo "== $(el) done"
