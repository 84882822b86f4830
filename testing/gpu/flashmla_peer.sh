#!/bin/bash
# Issue 18 on the H200, one call: FlashMLA's sm_90 sparse prefill and fp8
# sparse decode (built by testing/gpu/peers/build_flashmla.sh) beside
# sparse_mla_bench, on the same inputs, in one call.
# - Prefill, bf16 cache, top-k 2048, T = 8192: three rounds of ours and
#   FlashMLA's interleaved at 128 and 64 heads (FlashMLA alone and with the
#   W_UV product by cuBLAS); T = 1024 and 32768 once.
# - Decode, fp8 cache, top-k 2048: 128 and 64 heads, 8K and 64K contexts,
#   1 / 32 / 128 requests, 1 and 4 query tokens a request, both binaries.
# Folder layout (this script beside bin/ and lib/): bin/sparse_mla_bench.gz,
# bin/flashmla_sparse_prefill.gz, bin/flashmla_sparse_decode.gz, optionally
# bin/sparse_mla_bench_stamps.gz (a build whose seesaw kernel records clock
# stamps, read by seesaw_stamps.py), lib/
# (Debian's Abseil objects sparse_mla_bench links), COMMIT.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/peer_out}"; mkdir -p "$out"
work=/tmp/peer_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
before() { [ $(( $(date +%s) - t0 )) -lt "$1" ]; }
cat "$here/COMMIT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,power.default_limit,power.max_limit,enforced.power.limit,temperature.gpu --format=csv
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
ours() { timeout 60 "$work/sparse_mla_bench" "$@" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed 's/^/ours /'; }
peer() { timeout 60 "$work/flashmla_sparse_prefill" "$@" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'; }
for r in 1 2 3; do
  echo "== $(el) prefill round $r (T = 8192, top-k 2048, 20 calls)"
  ours --iters=20 $H128 --tokens=8192
  peer --iters=20 --heads=128 --v=128 --tokens=8192
  ours --iters=20 $H64 --tokens=8192
  peer --iters=20 --heads=64 --v=256 --tokens=8192
  smi
done
echo "== $(el) prefill T = 1024 and 32768"
ours --iters=20 $H128 --tokens=1024 --then --iters=20 $H64 --tokens=1024
peer --iters=20 --heads=128 --v=128 --tokens=1024 --then --iters=20 --heads=64 --v=256 --tokens=1024
if before 200; then
  ours --iters=5 $H128 --tokens=32768 --then --iters=5 $H64 --tokens=32768
  peer --iters=5 --heads=128 --v=128 --tokens=32768 --then --iters=5 --heads=64 --v=256 --tokens=32768
fi
smi
oargs=(); pargs=()
for h in 128 64; do
  for ctx in 8192 65536; do
    for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do
      set -- $rm
      if [ $h = 128 ]; then hh="$H128"; else hh="$H64"; fi
      [ ${#oargs[@]} -gt 0 ] && oargs+=(--then) && pargs+=(--then)
      oargs+=(--mode=decode --cache=fp8 $hh --context=$ctx --requests=$1 --mtp=$2 --iters=30 --paths=picked)
      pargs+=(--heads=$h --context=$ctx --requests=$1 --mtp=$2 --iters=30)
    done
  done
done
if [ -x "$work/sparse_mla_bench_stamps" ]; then
  for hh in "$H128" "$H64"; do
    echo "== $(el) the stamped build ($hh, T = 8192; the last launch's blocks)"
    DSA_SEESAW_STAMPS_FILE="$out/stamps.bin" timeout 60 "$work/sparse_mla_bench_stamps" --iters=20 $hh --tokens=8192 2>&1 | grep -E "^sparse_mla|rror" | sed 's/^/stamped /'
    python3 "$here/seesaw_stamps.py" "$out/stamps.bin"
  done
fi
echo "== $(el) decode, fp8 cache: FlashMLA"
timeout 120 "$work/flashmla_sparse_decode" "${pargs[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
echo "== $(el) decode, fp8 cache: ours"
timeout 120 "$work/sparse_mla_bench" "${oargs[@]}" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed 's/^/ours /'
smi
echo "== $(el) done"
