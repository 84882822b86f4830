#!/usr/bin/env bash
# Builds the fuzz targets with --config=fuzz (clang-15, libFuzzer, ASan,
# UBSan) and runs each for SECONDS on a copy of its seed corpus; prints the
# executions, the coverage reached (libFuzzer's cov: edges and ft: features
# at the end of the run) and the crashes of every target, and fails when any
# crashed.
#
#   testing/fuzz/run_fuzzers.sh [SECONDS [TARGET...]]    # default 30 s, all
#
# Crashing inputs, logs and the grown corpora are kept under $FUZZ_OUT
# (default: a new directory under /tmp, printed at the end). Extra libFuzzer
# flags come from $FUZZ_FLAGS, e.g. FUZZ_FLAGS="-fork=2 -ignore_crashes=1"
# to keep fuzzing past a crash and count every one.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() {
  echo "usage: testing/fuzz/run_fuzzers.sh [SECONDS [TARGET...]]" >&2
  exit 2
}
seconds="${1:-30}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage
shift $(( $# > 0 ? 1 : 0 ))
all_targets=(
  attention_ops_fuzzer
  batch_metadata_fuzzer
  checkpoint_fuzzer
  model_config_fuzzer
  plan_args_fuzzer
  plugin_abi_fuzzer
)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -d "testing/fuzz/corpus/$t" ] || { echo "unknown target $t" >&2; usage; }
done

testing/setup_debian.sh --fuzz
bazel --max_idle_secs=300 build --config=fuzz "${targets[@]/#///testing/fuzz:}"
bin="$(bazel --max_idle_secs=300 info --config=fuzz bazel-bin)/testing/fuzz"

out="${FUZZ_OUT:-$(mktemp -d /tmp/dsa_fuzz.XXXXXX)}"
mkdir -p "$out"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
if command -v llvm-symbolizer-15 >/dev/null 2>&1; then
  export ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer-15)"
fi

# One line naming a crash: the sanitizer's error and the first frame of
# project code, UBSan's file:line message, or the target's own message.
cause_of() {
  awk '
    /runtime error:|^[a-z_]+_fuzzer: |ERROR: libFuzzer/ && !what {
      print; done = 1; exit
    }
    /ERROR: (Address|Leak)Sanitizer/ && !what {
      what = $0; sub(/^.*ERROR: /, "", what); sub(/ on address.*/, "", what)
      next
    }
    what && /^ *#[0-9]+ / && !/__asan|__interceptor|__lsan|operator new|malloc|memcpy|memmove|libc\.so/ {
      frame = $0; sub(/^ *#[0-9]+ 0x[0-9a-f]+ in /, "", frame)
      sub(/ \(.*$/, "", frame)
      print what " in " frame; done = 1; exit
    }
    END { if (!done && what) print what }'
}

failed=0
printf '%-24s %12s %7s %7s %8s\n' target executions cov ft crashes
for t in "${targets[@]}"; do
  dir="$out/$t"
  rm -rf "$dir"
  mkdir -p "$dir/artifacts"
  cp -r "testing/fuzz/corpus/$t" "$dir/corpus"
  chmod -R u+w "$dir/corpus"
  # A hang is a finding too: no input may take 25 s.
  # shellcheck disable=SC2086
  "$bin/$t" -max_total_time="$seconds" -timeout=25 -print_final_stats=1 \
    -print_funcs=0 -artifact_prefix="$dir/artifacts/" ${FUZZ_FLAGS:-} \
    "$dir/corpus" >"$dir/log" 2>&1 || true
  # Plain runs end with final stats; fork mode (-fork=N) reports "#N: ..."
  # status lines.
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)"
  if [ -z "$execs" ]; then
    execs="$(sed -n 's/^#\([0-9][0-9]*\)[: ].*/\1/p' "$dir/log" | tail -1)"
  fi
  crashes="$(find "$dir/artifacts" -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) |
    wc -l)"
  # The last status line's coverage: "#N ... cov: C ft: F ...".
  cov="$(sed -n 's/.* cov: \([0-9][0-9]*\) .*/\1/p' "$dir/log" | tail -1)"
  ft="$(sed -n 's/.* ft: \([0-9][0-9]*\) .*/\1/p' "$dir/log" | tail -1)"
  printf '%-24s %12s %7s %7s %8s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "$crashes"
  if [ "$crashes" -ne 0 ] || [ -z "$execs" ]; then
    failed=1
    echo "--- $t: the first report in $dir/log"
    awk '/ERROR: |runtime error:|^[a-z_]+_fuzzer: / {on = 1}
         on && !/^ +0x[0-9a-f]+: / {print "  " $0; if (++n == 30) exit}
         on && /^SUMMARY/ {exit}' "$dir/log"
    # What each input does, replayed: the sanitizer's error or the
    # target's own message, counted (the first 50 inputs).
    echo "--- $t: crashes by cause (count, cause, an input)"
    find "$dir/artifacts" -type f | sort | head -50 | while read -r a; do
      cause="$(timeout 60 "$bin/$t" "$a" 2>&1 | cause_of || true)"
      printf '%s\t%s\n' "${cause:-unknown}" "$a"
    done | sed -E 's/offset [0-9]+/offset N/; s/\[[-0-9, ]*\]/[..]/g;
        s/dtype -?[0-9]+/dtype N/; s/overflow: [-0-9]+ \* [-0-9]+/overflow:/' |
      sort | awk -F'\t' '{n[$1]++; if (!($1 in f)) f[$1]=$2}
        END {for (c in n) printf "  %5d  %s\n         %s\n", n[c], c, f[c]}'
    echo "  all inputs: $dir/artifacts/"
  fi
done
echo "logs, corpora and crashing inputs: $out"
if [ "$failed" -ne 0 ]; then
  echo "run_fuzzers.sh: a fuzz target crashed (or did not run); keep the input" \
    "under testing/fuzz/ as a regression and fix the code" >&2
  exit 1
fi
