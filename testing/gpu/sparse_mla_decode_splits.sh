#!/bin/bash
# Issue 18 item 3 on the H200, call 6: decode at 1 and 4 rows with each
# row's top-k list split into parts of at least 128 indices (split, one
# tile pair a block) against the committed 256 (main = f228060), fp8 and
# bf16 caches at 64 and 128 heads, 8K, interleaved twice; FlashMLA's fp8
# sparse decode (alone and with W_UV) at the same shapes. Folder layout:
# bin/{main,split}_bench.gz, bin/flashmla_sparse_decode.gz.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/split_out}"; mkdir -p "$out"
work=/tmp/split_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
args=()
for cache in fp8 bf16; do for hh in "$H128" "$H64"; do for rm in "1 1" "1 4" "4 1" "8 1"; do set -- $rm
  [ ${#args[@]} -gt 0 ] && args+=(--then)
  args+=(--mode=decode --cache=$cache $hh --context=8192 --requests=$1 --mtp=$2 --iters=40)
done; done; done
for round in 1 2; do
  for b in main split; do
    echo "== $(el) round $round, $b"
    timeout 60 "$work/${b}_bench" "${args[@]}" 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$b /"
  done
done
pargs=()
for h in 128 64; do v=$([ $h = 128 ] && echo 128 || echo 256); for rm in "1 1" "1 4" "4 1" "8 1"; do set -- $rm
  [ ${#pargs[@]} -gt 0 ] && pargs+=(--then)
  pargs+=(--heads=$h --v=$v --context=8192 --requests=$1 --mtp=$2 --iters=40)
done; done
timeout 60 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
echo "== $(el) done"
