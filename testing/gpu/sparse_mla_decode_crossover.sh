#!/bin/bash
# Issue 18 item 3 on the H200, one call: sparse MLA decode over an fp8 cache
# at 128 heads, the crossover (seesaw-fp8x2: a row's two head groups as a
# cluster of two blocks, each producer dequantising half of every tile for
# both) against the gathered workspace (gather+seesaw) and main's build.
#
# Folder layout (this script beside bin/, carried as one path, e.g.
# .device/decode18/run.sh): bin/sparse_mla_{bench,kernels_test}_X.gz for
# each build X (bazel build --config=cuda --dynamic_mode=off -c opt,
# stripped, gzipped): "main" (the build before), "a" (the crossover with
# the next part's loads issued before this part's stores), "b" (the
# crossover loading each part right before its wait); COMMIT says what
# each is. The binaries link nothing beyond libc / libstdc++.
#
# Order (each step its own limit inside the call's 370 s): the crossover's
# tests (a, b), the bench at every fp8 decode shape of item 3 (128 heads:
# main's picked, a's gather+seesaw and seesaw-fp8x2, b's seesaw-fp8x2, in
# turn per context; 64 heads: a's picked), ncu's kernel times at 128 x 1
# and 32 x 1, compute-sanitizer memcheck and racecheck over the
# crossover's cases, then the whole kernels test of build a.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/crossover_out}"; mkdir -p "$out"
work=/tmp/crossover_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
lim() { local l=$(( 370 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
cat "$here/COMMIT"
H128="--heads=128 --v=128 --nope=128"; H64="--heads=64 --v=256 --nope=192"
X='*SeesawFp8Crossover*'
# A build whose crossover test hangs (rc 124) runs no more crossover steps.
declare -A hung=([a]=0 [b]=0)
for x in a b; do
  echo "== $(el) [$x] gtest: the crossover against the gathered workspace to the bit"
  timeout $(lim 40) "$work/sparse_mla_kernels_test_$x" --gtest_brief=1 --gtest_filter="$X" > "$out/crossover_test_$x.txt" 2>&1; rc=$?; echo "rc $rc"
  [ $rc -eq 124 ] && hung[$x]=1
  grep -E "PASSED|FAILED|Failure|differ|worst|got|Expected|Which" "$out/crossover_test_$x.txt" | head -24
done
shapes() {  # heads flags, context, paths
  local a=()
  for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do
    set -- $rm
    [ ${#a[@]} -gt 0 ] && a+=(--then)
    a+=(--mode=decode --cache=fp8 $H --context=$ctx --requests=$1 --mtp=$2 --iters=10 --paths=$P)
  done
  echo "${a[@]}"
}
for ctx in 8192 65536; do
  for run in "main picked" "a gather+seesaw,seesaw-fp8x2" "b seesaw-fp8x2"; do
    set -- $run; H=$H128; P=$2
    if [ "${hung[$1]:-0}" = 1 ]; then P=${P/seesaw-fp8x2/}; P=${P%,}; [ -z "$P" ] && continue; fi
    echo "== $(el) [$1] bench: fp8, 128 heads, context $ctx ($2)"
    timeout $(lim 40) "$work/sparse_mla_bench_$1" $(shapes) > "$out/bench_$1_$ctx.txt" 2>&1; echo "rc $?"
    grep -E "fail|rror" "$out/bench_$1_$ctx.txt" | head -4
  done
done
for ctx in 8192 65536; do
  H=$H64; P=picked
  echo "== $(el) [a] bench: fp8, 64 heads, context $ctx"
  timeout $(lim 30) "$work/sparse_mla_bench_a" $(shapes) > "$out/bench_a64_$ctx.txt" 2>&1; echo "rc $?"
  grep -E "fail|rror" "$out/bench_a64_$ctx.txt" | head -4
done
echo "== $(el) table"
for f in $(cd "$out" && ls bench_*.txt); do
  grep -E "^sparse_mla" "$out/$f" | awk -v b="$f" '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "%s h%s r%s m%s c%s %s %s %s\n", b, v["heads"], v["requests"], v["mtp"], v["context"], v["path"], v["median_ms"], v["tflops"]}'
done
ncu_shape() {  # build, path, requests
  if [ "$2" = seesaw-fp8x2 ] && [ "${hung[$1]}" = 1 ]; then return; fi
  timeout $(lim 30) ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread \
    --launch-count 4 "$work/sparse_mla_bench_$1" --mode=decode --cache=fp8 $H128 --context=8192 --requests=$3 --iters=1 --paths=$2 > "$out/ncu_$1_$2_$3.txt" 2>&1
  echo "rc $? ($1, $2, 128 heads, $3 x 8K)"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration|dram__bytes" "$out/ncu_$1_$2_$3.txt" | sed 's/(dsa::attention[^)]*)//; s/(dsa::SparseMlaParams[^)]*)//' | cut -c1-110 | head -16
}
echo "== $(el) ncu"
ncu_shape a seesaw-fp8x2 128
ncu_shape a gather+seesaw 128
ncu_shape a seesaw-fp8x2 32
ncu_shape b seesaw-fp8x2 128
[ "${hung[a]}" = 1 ] && X='-*SeesawFp8Crossover*'
echo "== $(el) [a] memcheck, racecheck over the crossover's cases"
G="$work/sparse_mla_kernels_test_a"
timeout $(lim 45) compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 \
  --gtest_filter="$X" > "$out/memcheck_a.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck_a.txt" | head -4
timeout $(lim 45) compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter="$X/Fp8Cache128HeadsBf16Io:$X/Fp8Cache128HeadsDequantisedTileEdges" > "$out/racecheck_a.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED|hazard" "$out/racecheck_a.txt" | head -6
echo "== $(el) [a] gtest: the whole sparse_mla kernels test"
timeout $(lim 150) "$G" --gtest_brief=1 > "$out/kernels_test_a.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|tests ran" "$out/kernels_test_a.txt" | head -20
echo "== $(el) done"
tar czf /tmp/crossover_results.tgz -C "$out" --exclude=run.txt . && \
  (cd "$out" && find . -type f ! -name run.txt -delete) && mv /tmp/crossover_results.tgz "$out/results.tgz"
