#!/bin/bash
# Issue 19 item 3 on the H200, one call: the indexer logits kernel as the
# heuristics pick it (two or four math warpgroups), each count forced on the
# same inputs, and the build before (its own binary) on the same device.
# Correctness first (the logits cases of the indexer kernels test: every
# persistent variant with two math groups, and with four where its blocks
# are wide), then indexer_bench at T = 1024 / 1900 / 8192 for 32 and 64
# heads and paged decode (32 requests of 8K), each variant checked against
# float64 before it is timed, torch in the same call, compute-sanitizer
# memcheck over the kernels test's persistent cases, and Nsight Compute
# over one launch at 64 heads, T = 8192.
#
# Folder layout (this script beside bin/ and lib/, carried as one path,
# e.g. .device/logits/run.sh): bin/indexer_kernels_test.gz,
# bin/indexer_bench.gz, bin/indexer_bench_before.gz (bazel build
# --config=cuda --dynamic_mode=off -c opt, stripped, gzipped; _before: the
# build before the four math groups), lib/ (the Debian shared objects they
# link, per ldd; none today), COMMIT. Run from the repository root (the
# torch side is attention/gpu/indexer/torch_baseline.py).
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/logits_out}"; mkdir -p "$out"
work=/tmp/logits_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
# A step's limit: its own, or what is left of the call's 200 s.
lim() { local l=$(( 200 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "build $(cat "$here/COMMIT")"
T="$work/indexer_kernels_test"
B="$work/indexer_bench"
B0="$work/indexer_bench_before"

echo "== $(el) gtest: indexer logits kernels"
timeout $(lim 60) "$T" --gtest_brief=1 --gtest_filter='*IndexerLogits*' > "$out/kernels_test.txt" 2>&1; rc=$?; echo "rc $rc"
grep -E "PASSED|FAILED|Failure" "$out/kernels_test.txt" | cut -c1-400 | head -20
grep -c "_4g" "$out/kernels_test.txt" | sed 's/^/cases with four-group variants: /'
# A variant that hangs would cost every bench step its limit: the picked
# kernel only then.
groups=auto,2,4; [ $rc -eq 124 ] && groups=auto

echo "== $(el) bench: before, then the picked kernel and each count of groups"
for h in 32 64; do
  for t in 1024 1900 8192; do
    timeout $(lim 15) "$B0" --heads=$h --tokens=$t --iters=30 >> "$out/bench_before.txt" 2>&1 || echo "before h$h T$t rc $?"
    timeout $(lim 15) "$B" --heads=$h --tokens=$t --iters=30 --groups=$groups >> "$out/bench.txt" 2>&1 || echo "new h$h T$t rc $?"
  done
done
# Decode rows take narrow blocks, which four groups do not.
timeout $(lim 15) "$B0" --heads=32 --tokens=8192 --decode=32 --iters=50 >> "$out/bench_before.txt" 2>&1 || echo "before decode rc $?"
timeout $(lim 15) "$B" --heads=32 --tokens=8192 --decode=32 --iters=50 --groups=${groups%,4} >> "$out/bench.txt" 2>&1 || echo "new decode rc $?"
echo "-- before"; grep -E "^ours_.*logits" "$out/bench_before.txt"
echo "-- new (auto first, then 2 and 4 forced)"; grep -E "^ours_.*logits|^check logits" "$out/bench.txt"
grep -E "want|failed|rror" "$out"/bench*.txt | head -10

echo "== $(el) torch"
# The picked kernel's lines (the first of each shape) for the table.
grep -E "^ours_" "$out/bench.txt" | awk '{k=$1" "$2" "$3" "$4} !($1 ~ /logits/) || !seen[k]++' > "$out/ours.txt"
timeout $(lim 90) python3 attention/gpu/indexer/torch_baseline.py "$out/ours.txt" 32 > "$out/torch.txt" 2>&1; echo "rc $?"
grep -E "^torch|^ceiling|^\| (logits|decode)" "$out/torch.txt"

F='*glm_32x128:*dsv32_64x128:*decode_32x128:*pages_64x128:*decode_pages_32x128:*long_32x128:*mixed_64x128'
echo "== $(el) memcheck ($F)"
timeout $(lim 90) compute-sanitizer --tool memcheck --print-limit 5 "$T" --gtest_brief=1 --gtest_filter="$F" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -8

echo "== $(el) ncu: one launch, 64 heads, T = 8192 (the picked kernel)"
timeout $(lim 40) ncu --clock-control none -k regex:IndexerLogitsPersistent --launch-count 1 \
  --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis \
  --page raw "$B" --heads=64 --tokens=8192 --iters=1 --check=0 > "$out/ncu.txt" 2>&1; echo "rc $?"
grep -E "gpu__time_duration.sum|sm__inst_executed_pipe_tensor|sm__pipe_tensor_op|smsp__issue_active.avg.pct|warps_issue_stalled_(long_scoreboard|barrier|wait|math_pipe_throttle|short_scoreboard|mio_throttle|membar|sleeping|dispatch_stall|no_instruction|not_selected|selected|branch_resolving|lg_throttle|tex_throttle|drain|imc_miss|misc)_per_warp_active.pct " "$out/ncu.txt" | head -30
echo "== $(el) done"
