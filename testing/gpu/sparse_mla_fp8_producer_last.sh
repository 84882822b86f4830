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
# bin/new_kernels_test.gz, bin/flashmla_sparse_{decode,prefill}.gz.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/final3_out}"; mkdir -p "$out"
work=/tmp/final3_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cat "$here/COMMIT"
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
echo "== $(el) sparse_mla kernels_test"
timeout 100 "$work/new_kernels_test" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|seed|differ|not compared" "$out/kernels_test.txt" | head -30
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
for CTX in 8192 65536; do
  echo "== $(el) decode, fp8 cache, context $CTX: new (picked), FlashMLA"
  args=(); pargs=()
  for h in 128 64; do
    if [ $h = 128 ]; then hh="$H128"; v=128; else hh="$H64"; v=256; fi
    for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do set -- $rm
      [ ${#args[@]} -gt 0 ] && args+=(--then) && pargs+=(--then)
      args+=(--mode=decode --cache=fp8 $hh --context=$CTX --requests=$1 --mtp=$2 --iters=30)
      pargs+=(--heads=$h --v=$v --context=$CTX --requests=$1 --mtp=$2 --iters=30)
    done
  done
  timeout 120 "$work/new_bench" "${args[@]}" 2>&1 | grep -E "^sparse_mla|fail|rror" | sed "s/^/new /"
  timeout 90 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
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
