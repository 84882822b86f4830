#!/bin/bash
# Issue 18 item 3 on the H200, call 6: decode at 1 and 4 rows with each
# row's top-k list split into parts of at least 128 indices (split, one
# tile pair a block) against the committed 256 (main = f228060), fp8 and
# bf16 caches at 64 and 128 heads, 8K, interleaved twice; FlashMLA's fp8
# sparse decode (alone and with W_UV) at the same shapes. Folder layout:
# bin/{main,split}_bench.gz, bin/flashmla_sparse_decode.gz.
# Run from the repository root with the payload folder (call_lib.sh):
#   bash testing/gpu/sparse_mla_decode_splits.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/call_lib.sh"
call_begin split "${1:?the payload folder}"
DECODE_SHAPES=("1 1" "1 4" "4 1" "8 1")
DECODE_ITERS=40
args=()
for cache in fp8 bf16; do for hh in "$H128" "$H64"; do for rm in "${DECODE_SHAPES[@]}"; do set -- $rm
  [ ${#args[@]} -gt 0 ] && args+=(--then)
  args+=(--mode=decode --cache=$cache $hh --context=8192 --requests=$1 --mtp=$2 --iters=$DECODE_ITERS)
done; done; done
for round in 1 2; do
  for b in main split; do
    echo "== $(el) round $round, $b"
    timeout 60 "$work/${b}_bench" "${args[@]}" 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$b /"
  done
done
flashmla_decode 8192
echo "== $(el) done"
