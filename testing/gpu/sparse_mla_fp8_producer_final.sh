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
# bin/flashmla_sparse_{decode,prefill}.gz, lib/ (absl for mla_ops_test).
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/final2_out}"; mkdir -p "$out"
work=/tmp/final2_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
G="$work/new_kernels_test"
for k in 1 2; do
  echo "== $(el) sparse_mla kernels_test, draw $k"
  timeout 100 "$G" --gtest_brief=1 > "$out/kernels_test_$k.txt" 2>&1; echo "rc $?"
  grep -E "PASSED|FAILED|Failure|seed|differ|not compared" "$out/kernels_test_$k.txt" | head -40
done
echo "== $(el) mla_ops_test, cuda"
timeout 60 "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure" "$out/mla_ops.txt" | head -6
echo "== $(el) memcheck over the fp8 and gather cases"
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter='*Fp8*:*SparseMlaGatherTest*' > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|seed" "$out/memcheck.txt" | head -6
echo "== $(el) racecheck over a crossover case and a seesaw-fp8 case"
timeout 80 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 10 "$G" --gtest_brief=1 \
  --gtest_filter='*SeesawFp8CrossoverEqualsGatheredToTheBit/Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding:*SeesawFp8EqualsGatheredToTheBit/Fp8Cache64HeadsDecodeManyRows' > "$out/racecheck.txt" 2>&1; echo "rc $?"
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
  dec new $CTX; dec old $CTX
  pargs=()
  for h in 128 64; do for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do set -- $rm
    [ ${#pargs[@]} -gt 0 ] && pargs+=(--then)
    pargs+=(--heads=$h --context=$CTX --requests=$1 --mtp=$2 --iters=30)
  done; done
  timeout 60 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
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
