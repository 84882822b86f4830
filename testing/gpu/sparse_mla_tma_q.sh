#!/bin/bash
# Issue 18 on the H200, one call: the seesaw body's Q by TMA (a 3-D tensor
# map over q, nine boxes from one producer thread; seesaw::QMap) against
# the committed tree before it (old). The new tree's sparse_mla
# kernels_test and mla_ops_test on cuda, memcheck over the seesaw cases and
# racecheck over three; bf16 prefill at T = 8192, 128 and 64 heads, old and
# new interleaved over three rounds, FlashMLA's kernel (+ W_UV) once a
# round; the new build's block timeline (stamps_bench, built with
# testing/gpu/seesaw_stamps.patch); the fp8 decode shapes of item 3 on the
# picked paths; fp8 prefill. Folder layout: bin/*.gz, lib/,
# seesaw_stamps.py.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/tq_out}"; mkdir -p "$out"
work=/tmp/tq_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
smi() { nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader; }
G="$work/new_kernels_test"
echo "== $(el) kernels_test (new)"
timeout 90 "$G" --gtest_brief=1 > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|tests" "$out/kernels_test.txt" | head -10
echo "== $(el) mla_ops_test, cuda"
timeout 60 "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|tests ran" "$out/mla_ops.txt" | head -6
echo "== $(el) memcheck over the seesaw cases (bf16 and fp8)"
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 \
  --gtest_filter='*MatchesFloat64Reference/Bf16Cache*:*SeesawFp8*' > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -4
echo "== $(el) racecheck"
timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 10 "$G" --gtest_brief=1 \
  --gtest_filter='*MatchesFloat64Reference/Bf16Cache128HeadsTileEdges:*MatchesFloat64Reference/Bf16Cache64HeadsLeadingPadding:*SeesawFp8MatchesFloat64Reference/Fp8Cache64HeadsDecodeManyRows' > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt" | head -4
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
b() { local v=$1; shift; timeout 90 "$work/${v}_bench" "$@" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$v /"; }
for r in 1 2 3; do
  echo "== $(el) bf16 prefill round $r (T = 8192, 20 calls)"
  b old --iters=20 $H128 --tokens=8192
  b new --iters=20 $H128 --tokens=8192
  b old --iters=20 $H64 --tokens=8192
  b new --iters=20 $H64 --tokens=8192
  timeout 60 "$work/flashmla_sparse_prefill" --iters=20 --heads=128 --v=128 --tokens=8192 --then --iters=20 --heads=64 --v=256 --tokens=8192 2>&1 | sed 's/^/peer /'
  smi
done
echo "== $(el) T = 1024 and 32768, new"
b new --iters=20 $H128 --tokens=1024 --then --iters=20 $H64 --tokens=1024 --then --iters=5 $H128 --tokens=32768 --then --iters=5 $H64 --tokens=32768
for hh in "$H128" "$H64"; do
  echo "== $(el) stamps, new ($hh, T = 8192; the last launch's blocks)"
  DSA_SEESAW_STAMPS_FILE="$out/stamps.bin" timeout 60 "$work/stamps_bench" --iters=20 $hh --tokens=8192 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/stamps /"
  python3 "$here/seesaw_stamps.py" "$out/stamps.bin"
done
echo "== $(el) fp8 decode, picked paths, old and new"
oargs=()
for h in 128 64; do for rm in "1 1" "32 1" "32 4" "128 1" "128 4"; do set -- $rm
  if [ $h = 128 ]; then hh="$H128"; else hh="$H64"; fi
  [ ${#oargs[@]} -gt 0 ] && oargs+=(--then)
  oargs+=(--mode=decode --cache=fp8 $hh --context=8192 --requests=$1 --mtp=$2 --iters=30 --paths=picked)
done; done
b old "${oargs[@]}"
b new "${oargs[@]}"
echo "== $(el) bf16 decode, picked paths, new"
bargs=()
for h in 128 64; do for rm in "1 1" "32 1" "128 1" "128 4"; do set -- $rm
  if [ $h = 128 ]; then hh="$H128"; else hh="$H64"; fi
  [ ${#bargs[@]} -gt 0 ] && bargs+=(--then)
  bargs+=(--mode=decode --cache=bf16 $hh --context=8192 --requests=$1 --mtp=$2 --iters=30)
done; done
b new "${bargs[@]}"
echo "== $(el) fp8 prefill, T = 8192, new (picked)"
b old --iters=10 --cache=fp8 $H128 --tokens=8192 --then --iters=10 --cache=fp8 $H64 --tokens=8192
b new --iters=10 --cache=fp8 $H128 --tokens=8192 --then --iters=10 --cache=fp8 $H64 --tokens=8192
smi
echo "== $(el) done"
