#!/bin/bash
# Issue 19 item 3 on the H200, one call: the indexer logits kernel as the
# heuristics pick it, each count of math groups forced on the same inputs
# (2 and 4), and the build before (its own binary) on the same device.
# Correctness first (the logits cases of the indexer kernels test: every
# persistent variant with two math groups, and with four where its blocks
# are wide), then indexer_bench at T = 1024 / 1900
# / 8192 for 32 and 64 heads and paged decode (32 requests of 8K), each
# variant checked against float64 before it is timed (the 64-head T = 8192
# list twice, for the spread), torch in the same call, compute-sanitizer
# memcheck over the kernels test's persistent cases, Nsight Compute over
# one launch of the four-group kernel at 64 heads, T = 8192, and its SASS
# (cuobjdump) with its instruction counts.
#
# Folder layout (this script beside bin/ and lib/, carried as one path,
# e.g. .device/logits64/run.sh): bin/indexer_kernels_test.gz,
# bin/indexer_bench.gz, bin/indexer_bench_before.gz, optionally
# bin/indexer_ops_test.gz (//attention:indexer_ops_test; bazel build
# --config=cuda --dynamic_mode=off -c opt, stripped, gzipped; _before: the
# build this branch started from), lib/ (the Debian shared objects they
# link, per ldd: Abseil's for the ops test), COMMIT. Run from the
# repository root (the torch side is attention/gpu/indexer/torch_baseline.py).
# At most 8 files come back from $OUT: the script writes 8.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/logits_out}"; mkdir -p "$out"
work=/tmp/logits_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
# A step's limit: its own, or what is left of the call's 260 s.
lim() { local l=$(( 260 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "build $(cat "$here/COMMIT")"
T="$work/indexer_kernels_test"
B="$work/indexer_bench"
B0="$work/indexer_bench_before"

echo "== $(el) gtest: indexer logits kernels"
timeout $(lim 60) "$T" --gtest_brief=1 --gtest_filter='*IndexerLogits*' > "$out/kernels_test.txt" 2>&1; rc=$?; echo "rc $rc"
grep -E "PASSED|FAILED|Failure" "$out/kernels_test.txt" | cut -c1-400 | head -20
grep -c "_4g" "$out/kernels_test.txt" | sed 's/^/lines naming four-group variants: /'
# A variant that hangs would cost every bench step its limit: the picked
# kernel only then.
ok=1; [ $rc -eq 124 ] && ok=0

echo "== $(el) bench: before, then the picked kernel and each count of groups"
for h in 32 64; do
  for t in 1024 1900 8192; do
    groups=auto,2,4; [ $h = 64 ] && [ $t = 8192 ] && groups=auto,2,4,4
    [ $ok = 0 ] && groups=auto
    timeout $(lim 15) "$B0" --heads=$h --tokens=$t --iters=30 >> "$out/bench_before.txt" 2>&1 || echo "before h$h T$t rc $?"
    timeout $(lim 20) "$B" --heads=$h --tokens=$t --iters=30 --groups=$groups >> "$out/bench.txt" 2>&1 || echo "new h$h T$t rc $?"
  done
done
# Decode rows take narrow blocks, which four groups do not.
groups=auto,2; [ $ok = 0 ] && groups=auto
timeout $(lim 15) "$B0" --heads=32 --tokens=8192 --decode=32 --iters=50 >> "$out/bench_before.txt" 2>&1 || echo "before decode rc $?"
timeout $(lim 15) "$B" --heads=32 --tokens=8192 --decode=32 --iters=50 --groups=$groups >> "$out/bench.txt" 2>&1 || echo "new decode rc $?"
echo "-- before"; grep -E "^ours_.*logits" "$out/bench_before.txt"
echo "-- new (auto first, then each forced)"; grep -E "^ours_.*logits|^check logits" "$out/bench.txt"
grep -E "want|failed|rror" "$out"/bench*.txt | head -10

echo "== $(el) torch"
# The picked kernel's lines (the first of each shape) for the table.
grep -E "^ours_" "$out/bench.txt" | awk '{k=$1" "$2" "$3" "$4} !($1 ~ /logits/) || !seen[k]++' > "$work/ours.txt"
timeout $(lim 90) python3 attention/gpu/indexer/torch_baseline.py "$work/ours.txt" 32 > "$out/torch.txt" 2>&1; echo "rc $?"
grep -E "^torch|^ceiling|^\| (logits|decode)" "$out/torch.txt"

F='*glm_32x128:*dsv32_64x128:*decode_32x128:*pages_64x128:*decode_pages_32x128:*long_32x128:*mixed_64x128'
echo "== $(el) memcheck ($F)"
timeout $(lim 90) compute-sanitizer --tool memcheck --print-limit 5 "$T" --gtest_brief=1 --gtest_filter="$F" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -8

echo "== $(el) indexer_ops_test: the logits op's cases (every platform, cuda included)"
if [ -x "$work/indexer_ops_test" ]; then
  timeout $(lim 40) "$work/indexer_ops_test" --gtest_brief=1 --gtest_filter='*LogitsTest*' > "$work/ops_test.txt" 2>&1; echo "rc $?"
  grep -E "PASSED|FAILED|Failure|SKIPPED" "$work/ops_test.txt" | cut -c1-300 | head -12
  { echo "--- indexer_ops_test --gtest_filter='*LogitsTest*'"; cat "$work/ops_test.txt"; } >> "$out/kernels_test.txt"
fi

for gr in 4; do
  echo "== $(el) ncu: one launch, 64 heads, T = 8192, groups $gr"
  timeout $(lim 40) ncu --clock-control none -k regex:IndexerLogitsPersistent --launch-count 1 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis \
    --page raw "$B" --heads=64 --tokens=8192 --iters=1 --check=0 --groups=$gr > "$work/ncu_$gr.txt" 2>&1; echo "rc $?"
  grep -E "gpu__time_duration.sum|sm__inst_executed_pipe_tensor|sm__pipe_tensor_op|smsp__issue_active.avg.pct|sm__inst_executed.avg.per_cycle_active |warps_issue_stalled_(long_scoreboard|barrier|wait|math_pipe_throttle|short_scoreboard|mio_throttle|membar|sleeping|dispatch_stall|no_instruction|not_selected|selected|branch_resolving|lg_throttle|tex_throttle|drain|imc_miss|misc)_per_warp_active.pct " "$work/ncu_$gr.txt" | head -30
  cat "$work/ncu_$gr.txt" >> "$out/ncu.txt"
done

echo "== $(el) SASS: 64 heads, wide, TMA keys, four groups (Li4ELb1ELb1ELi4EE)"
timeout $(lim 30) cuobjdump -sass "$B" 2>/dev/null | awk '/Function :/{keep = ($0 ~ /Li4ELb1ELb1ELi4EE/)} keep' > "$out/sass.txt"; echo "rc $?"
awk '/Function :/{name=$3} /^ +\/\*[0-9a-f]+\*\/ /{n[name]++; split($2,a,"."); op=a[1]; if (op ~ /^@/) op=$3; c[name" "op]++} END{for (k in n) print "instructions", n[k], k; for (k in c) if (c[k] >= 20) print k, c[k]}' "$out/sass.txt" | sort | head -60
echo "== $(el) done"
