# The device call scripts' shared part (sourced; bash). A call script lives
# in testing/gpu and takes its payload folder, the one `carry` brings
# (bin/*.gz, optionally lib/ and COMMIT), as its first argument:
#
#   bash testing/gpu/sparse_mla_fp8_producer_last.sh .device/final3
#
# call_begin NAME PAYLOAD unpacks PAYLOAD/bin/*.gz into $work
# (/tmp/NAME_run), puts PAYLOAD/lib and CUDA's libraries on the library
# path, sends everything printed to $out/run.txt as well ($OUT on the
# device, else /tmp/NAME_out) and prints PAYLOAD/COMMIT. Then:
# - el: the seconds since call_begin, as "[N s]";
# - smi: the SM clock, power, temperature and clock-event reasons;
# - sparse_mla_suite TEST: the sparse MLA kernels_test binary TEST once
#   (its log in $out/kernels_test.txt), its summary and bit comparisons;
# - sparse_mla_sanitizers TEST RACE_FILTER: memcheck over the fp8 and
#   gather cases, racecheck over RACE_FILTER;
# - fp8_decode BUILD CONTEXT PATHS: $work/BUILD_bench over the fp8 decode
#   shapes of DECODE_SHAPES at 128 and 64 heads, each on PATHS ("" for the
#   picked path only; "+fp8" names the body that dequantises for the head
#   count: seesaw-fp8x2 at 128 heads, seesaw-fp8 at 64), lines prefixed
#   with BUILD;
# - flashmla_decode CONTEXT: FlashMLA's fp8 sparse decode at the same
#   shapes (alone and with W_UV where the harness times it), "peer ".
# DECODE_SHAPES: "requests tokens" pairs, by default issue 18's;
# DECODE_ITERS: the timed calls a shape (30).
set -u -o pipefail
DECODE_SHAPES=("1 1" "1 4" "32 1" "32 4" "128 1" "128 4")
DECODE_ITERS=30
H64="--heads=64 --v=256 --nope=192"
H128="--heads=128 --v=128 --nope=128"

call_begin() {
  local name=$1
  payload="$(cd "$2" && pwd)"
  out="${OUT:-/tmp/${name}_out}"
  mkdir -p "$out"
  work="/tmp/${name}_run"
  rm -rf "$work"
  mkdir -p "$work"
  local f
  for f in "$payload"/bin/*.gz; do
    gzip -dc "$f" > "$work/$(basename "$f" .gz)"
  done
  chmod +x "$work"/*
  export LD_LIBRARY_PATH="$payload/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  exec > >(tee "$out/run.txt") 2>&1
  t0=$(date +%s)
  [ -f "$payload/COMMIT" ] && cat "$payload/COMMIT"
  return 0
}

el() { echo "[$(( $(date +%s) - t0 )) s]"; }

smi() {
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader
}

sparse_mla_suite() {
  local test=$1 log="$out/kernels_test${2:+_$2}.txt"
  timeout 100 "$test" --gtest_brief=1 > "$log" 2>&1
  echo "rc $?"
  grep -E "PASSED|FAILED|Failure|seed|gather pass|differ|not compared" "$log" | head -70
}

sparse_mla_sanitizers() {
  local test=$1 race=$2
  echo "== $(el) memcheck over the fp8 and gather cases"
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 "$test" --gtest_brief=1 \
    --gtest_filter='*Fp8*:*SparseMlaGatherTest*' > "$out/memcheck.txt" 2>&1
  echo "rc $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|seed" "$out/memcheck.txt" | head -6
  echo "== $(el) racecheck over $race"
  timeout 90 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 10 "$test" \
    --gtest_brief=1 --gtest_filter="$race" > "$out/racecheck.txt" 2>&1
  echo "rc $?"
  grep -E "RACECHECK SUMMARY|PASSED|FAILED|tests" "$out/racecheck.txt" | head -6
}

fp8_decode() {
  local build=$1 ctx=$2 paths=$3 args=() h hh fp8path p rm
  for h in 128 64; do
    if [ "$h" = 128 ]; then hh="$H128"; fp8path=seesaw-fp8x2; else hh="$H64"; fp8path=seesaw-fp8; fi
    p="${paths//+fp8/$fp8path}"
    for rm in "${DECODE_SHAPES[@]}"; do
      set -- $rm
      [ ${#args[@]} -gt 0 ] && args+=(--then)
      args+=(--mode=decode --cache=fp8 $hh --context="$ctx" --requests="$1" --mtp="$2"
        --iters="$DECODE_ITERS")
      [ -n "$p" ] && args+=(--paths="$p")
    done
  done
  timeout 150 "$work/${build}_bench" "${args[@]}" 2>&1 | grep -E "^sparse_mla|fail|row |rror" |
    sed "s/^/$build /"
}

flashmla_decode() {
  local ctx=$1 args=() h v rm
  for h in 128 64; do
    if [ "$h" = 128 ]; then v=128; else v=256; fi
    for rm in "${DECODE_SHAPES[@]}"; do
      set -- $rm
      [ ${#args[@]} -gt 0 ] && args+=(--then)
      args+=(--heads="$h" --v="$v" --context="$ctx" --requests="$1" --mtp="$2"
        --iters="$DECODE_ITERS")
    done
  done
  timeout 90 "$work/flashmla_sparse_decode" "${args[@]}" 2>&1 | grep -vE "^\[" | sed 's/^/peer /'
}
