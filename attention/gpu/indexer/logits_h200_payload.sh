#!/bin/bash
# Builds the payload of logits_h200_run.sh (issue 19 item 3) on a developer
# machine: the kernels test, the bench and indexer_ops_test of this tree,
# and the bench of BEFORE (a commit; its tree exported with git archive and
# built in a folder of its own), stripped and gzipped into OUT/bin, the
# Abseil shared objects they link into OUT/lib, the run script as
# OUT/run.sh and this tree's commit as OUT/COMMIT. Then, from the
# repository root of the checkout the device call sends:
#   bash OUT/run.sh          (carry ["OUT"])
#
#   attention/gpu/indexer/logits_h200_payload.sh BEFORE [OUT]   # OUT: .device/logits64
set -euo pipefail
cd "$(dirname "$0")/../../.."
before="${1:?usage: logits_h200_payload.sh BEFORE_COMMIT [OUT]}"
out="${2:-.device/logits64}"
flags=(--config=cuda --dynamic_mode=off -c opt)
bazel build "${flags[@]}" //attention/gpu/indexer:kernels_test \
  //attention/gpu/indexer:bench //attention:indexer_ops_test
bin="$(bazel info "${flags[@]}" bazel-bin)"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
git archive "$before" | tar -x -C "$tmp"
(cd "$tmp" && bazel build "${flags[@]}" //attention/gpu/indexer:bench &&
  cp -L "$(bazel info "${flags[@]}" bazel-bin)/attention/gpu/indexer/bench" \
    "$tmp/indexer_bench_before" && bazel shutdown)
rm -rf "$out"; mkdir -p "$out/bin" "$out/lib"
cp -L "$bin/attention/gpu/indexer/kernels_test" "$tmp/indexer_kernels_test"
cp -L "$bin/attention/gpu/indexer/bench" "$tmp/indexer_bench"
cp -L "$bin/attention/indexer_ops_test" "$tmp/indexer_ops_test"
for f in indexer_kernels_test indexer_bench indexer_bench_before indexer_ops_test; do
  chmod u+w "$tmp/$f"; strip "$tmp/$f"; gzip -c "$tmp/$f" > "$out/bin/$f.gz"
  ldd "$tmp/$f" | awk '/libabsl|libatomic|libprotobuf|libbenchmark/{print $3}' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
done
cp attention/gpu/indexer/logits_h200_run.sh "$out/run.sh"
git rev-parse --short HEAD > "$out/COMMIT"
du -sh "$out"
