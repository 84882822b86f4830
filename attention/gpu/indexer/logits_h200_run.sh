#!/bin/bash
# Issue 19 item 3 on the H200, one call: the indexer logits kernel with two
# and with four math warpgroups (and the build before them, from its own
# binary) on the same device. Correctness first (the logits cases of the
# indexer kernels test, every persistent variant with each count of math
# groups), then indexer_bench at T = 1024 / 1900 / 8192 for 32 and 64 heads
# (wide blocks, the heuristics' choice, and narrow ones) and paged decode
# (32 requests of 8K), each variant checked against float64 before it is
# timed, torch in the same call, compute-sanitizer memcheck over the
# kernels test's persistent cases, and Nsight Compute over one launch at
# 32 heads, T = 8192.
#
# Folder layout (this script beside bin/ and lib/, carried as one path,
# e.g. .device/logits/run.sh): bin/indexer_kernels_test.gz,
# bin/indexer_bench.gz, bin/indexer_bench_before.gz (bazel build
# --config=cuda --dynamic_mode=off -c opt, stripped, gzipped; _before: the
# parent commit's), lib/ (Debian's Abseil and benchmark objects they link,
# per ldd), COMMIT. Run from the repository root (the torch side is
# attention/gpu/indexer/torch_baseline.py).
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/logits_out}"; mkdir -p "$out"
work=/tmp/logits_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
# A step's limit: its own, or what is left of the call's 320 s.
lim() { local l=$(( 320 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "build $(cat "$here/COMMIT")"
T="$work/indexer_kernels_test"
B="$work/indexer_bench"
B0="$work/indexer_bench_before"

echo "== $(el) gtest: indexer logits kernels"
timeout $(lim 60) "$T" --gtest_brief=1 --gtest_filter='*IndexerLogits*' > "$out/kernels_test.txt" 2>&1; rc=$?; echo "rc $rc"
# A variant that hangs would cost every bench step its limit: time only
# the two-group kernel then.
groups=2,4; [ $rc -eq 124 ] && groups=2
grep -E "PASSED|FAILED|Failure|rows\)" "$out/kernels_test.txt" | cut -c1-400 | head -40

echo "== $(el) bench: before / groups 2,4 (wide, the heuristics' blocks) / narrow groups 2,4"
for h in 32 64; do
  for t in 1024 1900 8192; do
    timeout $(lim 15) "$B0" --heads=$h --tokens=$t --iters=30 >> "$out/bench_before.txt" 2>&1 || echo "before h$h T$t rc $?"
    timeout $(lim 15) "$B" --heads=$h --tokens=$t --iters=30 --groups=$groups >> "$out/bench.txt" 2>&1 || echo "new h$h T$t rc $?"
    timeout $(lim 15) "$B" --heads=$h --tokens=$t --iters=30 --blocks=narrow --groups=$groups >> "$out/bench_narrow.txt" 2>&1 || echo "narrow h$h T$t rc $?"
  done
done
timeout $(lim 15) "$B0" --heads=32 --tokens=8192 --decode=32 --iters=50 >> "$out/bench_before.txt" 2>&1 || echo "before decode rc $?"
timeout $(lim 15) "$B" --heads=32 --tokens=8192 --decode=32 --iters=50 --groups=$groups >> "$out/bench.txt" 2>&1 || echo "new decode rc $?"
echo "-- before"; grep -E "^ours_.*logits" "$out/bench_before.txt"
echo "-- new"; grep -E "^ours_.*logits|^check logits" "$out/bench.txt"
echo "-- narrow"; grep -E "^ours_.*logits" "$out/bench_narrow.txt"
grep -E "want|failed|rror" "$out"/bench*.txt | head -10

echo "== $(el) torch"
grep -E "^ours_" "$out/bench.txt" > "$out/ours.txt"
timeout $(lim 90) python3 attention/gpu/indexer/torch_baseline.py "$out/ours.txt" 32 > "$out/torch.txt" 2>&1; echo "rc $?"
grep -E "^torch|^ceiling|^\| (logits|decode)" "$out/torch.txt"

F='*glm_32x128:*dsv32_64x128:*decode_32x128:*pages_64x128:*decode_pages_32x128:*long_32x128'
echo "== $(el) memcheck ($F)"
timeout $(lim 90) compute-sanitizer --tool memcheck --print-limit 5 "$T" --gtest_brief=1 --gtest_filter="$F" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -8

echo "== $(el) ncu: one launch each, 32 heads, T = 8192 (each count of groups)"
for g in ${groups//,/ }; do
  timeout $(lim 40) ncu --clock-control none -k regex:IndexerLogitsPersistent --launch-count 1 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section LaunchStats \
    "$B" --heads=32 --tokens=8192 --iters=1 --check=0 --groups=$g > "$out/ncu_g$g.txt" 2>&1; echo "rc $?"
  grep -E "Duration|Throughput|Issue Slots Busy|Eligible Warps|No Eligible|Registers Per|Stall|Warp Cycles Per Issued" "$out/ncu_g$g.txt" | head -16
done
echo "== $(el) done"
