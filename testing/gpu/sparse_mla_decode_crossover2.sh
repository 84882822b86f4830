#!/bin/bash
# Issue 18 item 3 on the H200, the second call (after
# sparse_mla_decode_crossover.sh): the fp8 seesaw producers with the
# hardware's e4m3 -> f16 conversion (build "c") against the same without it
# (build "b"). Folder layout as that script's: bin/sparse_mla_{bench,
# kernels_test}_{b,c}.gz, COMMIT.
#
# Order (each step its own limit inside the call's 140 s): c's crossover and
# fp8 seesaw tests, the bench at 128 heads (b's seesaw-fp8x2 and
# gather+seesaw, c's seesaw-fp8x2, in turn per context) and at 64 heads
# (b's and c's seesaw-fp8 where it is picked, b's gather+seesaw), c's
# memcheck and racecheck over the crossover's cases, c's whole kernels
# test, ncu at 128 x 1.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/crossover2_out}"; mkdir -p "$out"
work=/tmp/crossover2_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*_[bc].gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
lim() { local l=$(( 140 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
cat "$here/COMMIT"
H128="--heads=128 --v=128 --nope=128"; H64="--heads=64 --v=256 --nope=192"
G="$work/sparse_mla_kernels_test_c"
echo "== $(el) [c] gtest: the crossover (to the bit against the gathered workspace) and the fp8 seesaw body"
timeout $(lim 30) "$G" --gtest_brief=1 --gtest_filter='*SeesawFp8Crossover*:*SeesawFp8MatchesFloat64Reference*' > "$out/test_c.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|differ|got" "$out/test_c.txt" | head -16
shapes() {
  local a=()
  for rm in $RM; do
    local r=${rm%x*} m=${rm#*x}
    [ ${#a[@]} -gt 0 ] && a+=(--then)
    a+=(--mode=decode --cache=fp8 $H --context=$ctx --requests=$r --mtp=$m --iters=10 --paths=$P)
  done
  echo "${a[@]}"
}
for ctx in 8192 65536; do
  for run in "b seesaw-fp8x2,gather+seesaw" "c seesaw-fp8x2"; do
    set -- $run; H=$H128; P=$2; RM="1x1 1x4 32x1 32x4 128x1 128x4"
    echo "== $(el) [$1] bench: fp8, 128 heads, context $ctx ($2)"
    timeout $(lim 25) "$work/sparse_mla_bench_$1" $(shapes) > "$out/bench_$1_$ctx.txt" 2>&1; echo "rc $?"
    grep -E "fail|rror" "$out/bench_$1_$ctx.txt" | head -4
  done
done
for ctx in 8192 65536; do
  for run in "b seesaw-fp8,gather+seesaw" "c seesaw-fp8"; do
    set -- $run; H=$H64; P=$2; RM="32x4 128x1"
    echo "== $(el) [$1] bench: fp8, 64 heads, context $ctx ($2)"
    timeout $(lim 15) "$work/sparse_mla_bench_$1" $(shapes) > "$out/bench64_$1_$ctx.txt" 2>&1; echo "rc $?"
    grep -E "fail|rror" "$out/bench64_$1_$ctx.txt" | head -4
  done
done
echo "== $(el) table"
for f in $(cd "$out" && ls bench*.txt); do
  grep -E "^sparse_mla" "$out/$f" | awk -v b="$f" '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "%s h%s r%s m%s c%s %s %s %s\n", b, v["heads"], v["requests"], v["mtp"], v["context"], v["path"], v["median_ms"], v["tflops"]}'
done
echo "== $(el) [c] memcheck, racecheck over the crossover's cases"
timeout $(lim 25) compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 \
  --gtest_filter='*SeesawFp8Crossover*' > "$out/memcheck_c.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck_c.txt" | head -4
timeout $(lim 20) compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter='*SeesawFp8Crossover*/Fp8Cache128HeadsBf16Io' > "$out/racecheck_c.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED|hazard" "$out/racecheck_c.txt" | head -4
echo "== $(el) [c] gtest: the whole sparse_mla kernels test"
timeout $(lim 60) "$G" --gtest_brief=1 > "$out/kernels_test_c.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure" "$out/kernels_test_c.txt" | head -12
echo "== $(el) [c] ncu, 128 heads, 128 x 8K"
timeout $(lim 20) ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum \
  --launch-count 2 "$work/sparse_mla_bench_c" --mode=decode --cache=fp8 $H128 --context=8192 --requests=128 --iters=1 --paths=seesaw-fp8x2 > "$out/ncu_c.txt" 2>&1
echo "rc $?"; grep -E "^  [A-Za-z_].*\(|gpu__time_duration|dram__bytes" "$out/ncu_c.txt" | cut -c1-110 | head -8
echo "== $(el) done"
tar czf /tmp/crossover2_results.tgz -C "$out" --exclude=run.txt . && \
  (cd "$out" && find . -type f ! -name run.txt -delete) && mv /tmp/crossover2_results.tgz "$out/results.tgz"
