#!/bin/bash
# Issue 18 items 1 and 3 on the H200, one call: the seesaw producer's L2
# prefetch of the next wave's Q and top-k indices (Producer::
# PrefetchNextWave), and the fp8 producer's general conversion out of line.
# Builds: old (main before both), fast (the fp8 fast conversion, inlined
# general form), new (both); *stamps_bench: old and new with
# testing/gpu/seesaw_stamps.patch. Steps: new's sparse_mla kernels_test,
# memcheck over the seesaw cases, racecheck over two; bf16 prefill at T =
# 8192, 128 and 64 heads, old and new interleaved over three rounds with
# FlashMLA's kernel once a round; the stamped builds' block timelines; fp8
# decode at 64 heads (fast against new) and the picked paths at 128 heads.
# Folder layout: bin/*.gz, seesaw_stamps.py.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/pf_out}"; mkdir -p "$out"
work=/tmp/pf_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
G="$work/new_kernels_test"
echo "== $(el) kernels_test (new)"
timeout 90 "$G" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|path seesaw-fp8|GatheredInPasses|tests" "$out/kernels_test.txt" | head -30
echo "== $(el) memcheck over the seesaw cases (bf16 and fp8)"
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 \
  --gtest_filter='*MatchesFloat64Reference/Bf16Cache*:*SeesawFp8*' > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -4
echo "== $(el) racecheck"
timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 10 "$G" --gtest_brief=1 \
  --gtest_filter='*MatchesFloat64Reference/Bf16Cache128HeadsTileEdges:*SeesawFp8MatchesFloat64Reference/Fp8Cache64HeadsDecodeManyRows' > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt" | head -4
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
b() { local v=$1; shift; timeout 60 "$work/${v}_bench" "$@" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$v /"; }
for r in 1 2 3; do
  echo "== $(el) bf16 prefill round $r (T = 8192, 20 calls)"
  b old --iters=20 $H128 --tokens=8192
  b new --iters=20 $H128 --tokens=8192
  b old --iters=20 $H64 --tokens=8192
  b new --iters=20 $H64 --tokens=8192
  timeout 60 "$work/flashmla_sparse_prefill" --iters=20 --heads=128 --v=128 --tokens=8192 --then --iters=20 --heads=64 --v=256 --tokens=8192 2>&1 | sed 's/^/peer /'
  smi
done
echo "== $(el) T = 1024 and 32768, old and new"
b old --iters=20 $H128 --tokens=1024 --then --iters=20 $H64 --tokens=1024 --then --iters=5 $H128 --tokens=32768
b new --iters=20 $H128 --tokens=1024 --then --iters=20 $H64 --tokens=1024 --then --iters=5 $H128 --tokens=32768
for v in oldstamps stamps; do
  for hh in "$H128" "$H64"; do
    echo "== $(el) $v ($hh, T = 8192; the last launch's blocks)"
    DSA_SEESAW_STAMPS_FILE="$out/$v.bin" timeout 60 "$work/${v}_bench" --iters=20 $hh --tokens=8192 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$v /"
    python3 "$here/seesaw_stamps.py" "$out/$v.bin"
  done
done
echo "== $(el) fp8 decode: fast against new at 64 heads (picked), and 128 heads"
args=()
for ctx in 8192 65536; do for rm in "32 1" "32 4" "128 1" "128 4"; do set -- $rm
  [ ${#args[@]} -gt 0 ] && args+=(--then)
  args+=(--mode=decode --cache=fp8 $H64 --context=$ctx --requests=$1 --mtp=$2 --iters=30 --paths=seesaw-fp8)
done; done
b fast "${args[@]}"
b new "${args[@]}"
args=()
for rm in "1 1" "1 4" "16 1" "32 1" "32 4" "128 1"; do set -- $rm
  [ ${#args[@]} -gt 0 ] && args+=(--then)
  args+=(--mode=decode --cache=fp8 $H64 --context=8192 --requests=$1 --mtp=$2 --iters=30 --paths=picked,gather+seesaw,seesaw-fp8)
done
b new "${args[@]}"
smi
echo "== $(el) done"
