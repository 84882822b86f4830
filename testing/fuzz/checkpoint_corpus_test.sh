#!/usr/bin/env bash
# The checkpoint fuzzer's seed corpus is what make_checkpoint_corpus writes:
# every seed it writes is in the corpus with the same bytes.
#
#   checkpoint_corpus_test.sh MAKE_CHECKPOINT_CORPUS CORPUS_DIR CONFIG.json...
set -uo pipefail
make="$1"
corpus="$2"
shift 2
out="${TEST_TMPDIR:-$(mktemp -d)}/seeds"
mkdir -p "$out"
"$make" "$out" "$@" >/dev/null || { echo "FAIL: $make exited $?" >&2; exit 1; }
seeds=0
failures=0
for seed in "$out"/*; do
  name="$(basename "$seed")"
  seeds=$((seeds + 1))
  if [ ! -f "$corpus/$name" ]; then
    echo "FAIL: $name is not in $corpus" >&2
    failures=$((failures + 1))
  elif ! cmp -s "$seed" "$corpus/$name"; then
    echo "FAIL: $corpus/$name differs from what the generator writes" >&2
    failures=$((failures + 1))
  fi
done
[ "$seeds" -ge 50 ] || { echo "FAIL: only $seeds seeds written" >&2; exit 1; }
if [ "$failures" -ne 0 ]; then
  echo "write the corpus again:" \
    "bazel run //testing/fuzz:make_checkpoint_corpus -- \$PWD/$corpus" \
    "\$PWD/model/deepseek_v32/testdata/*.config.json" >&2
  exit 1
fi
echo "PASS: $seeds seeds"
