#!/bin/bash
# Issue 18 item 3 on the H200, one call: sparse MLA decode over fp8 and bf16
# caches, the gather pass's forms side by side. For each build X in bin/
# (sparse_mla_bench_X, sparse_mla_kernels_test_X, mla_ops_test_X; X a name
# such as "a" or "b", one form of the pass each): the sparse MLA kernels
# test (the gather pass against the every-position pass to the bit among
# them), the op suite on cuda, compute-sanitizer memcheck and racecheck
# over the gather pass, sparse_mla_bench at every fp8 decode shape of item
# 3 (the picked kernel; at 64 heads and 128 rows or more the gathered body
# and the fp8 seesaw body too) and ncu's kernel times at 128 heads, 32 x 8K
# and 1 x 8K. Then the bf16 decode shapes (the first build: the pass is not
# on their path), the build before the rewrite (sparse_mla_bench_before)
# on the fp8 shapes at 128 heads and under ncu, and torch.
#
# Folder layout (this script beside bin/ and lib/, carried as one path,
# e.g. .device/decode2/run.sh): bin/*.gz (bazel build --config=cuda
# --dynamic_mode=off -c opt, stripped, gzipped), lib/ (Debian's Abseil and
# protobuf objects they link, per ldd), torch_baseline.py and
# torch_timing.py (attention/gpu/sparse_mla, device), COMMIT (what each
# build is). Needs nothing else of the tree it runs in (the device machine
# runs in the session's own checkout, whatever worktree built the folder).
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/decode_out}"; mkdir -p "$out"
work=/tmp/decode_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
# A step's limit: its own, or what is left of the call's 230 s.
lim() { local l=$(( 230 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
cat "$here/COMMIT"
builds=$(cd "$work" && ls sparse_mla_bench_* | sed 's/^sparse_mla_bench_//' | grep -v '^before$')
H128="--heads=128 --v=128 --nope=128"; H64="--heads=64 --v=256 --nope=192"
ncu_shape() {  # binary, name, requests
  timeout $(lim 25) ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    --launch-count 4 "$1" --mode=decode --cache=fp8 $H128 --context=8192 --requests=$3 --iters=1 --paths=picked > "$out/ncu_$2_$3.txt" 2>&1
  echo "rc $? ($2, 128 heads, $3 x 8K)"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration|dram__bytes" "$out/ncu_$2_$3.txt" | sed 's/(dsa::attention[^)]*)//; s/(dsa::SparseMlaParams[^)]*)//' | cut -c1-110 | head -16
}
for x in $builds; do
  G="$work/sparse_mla_kernels_test_$x"
  echo "== $(el) [$x] gtest: sparse_mla kernels (the fp8 seesaw body's own test left out: unchanged)"
  timeout $(lim 45) "$G" --gtest_brief=1 --gtest_filter='-*SeesawFp8*' > "$out/kernels_test_$x.txt" 2>&1; echo "rc $?"
  grep -E "PASSED|FAILED|Failure|gather pass|Gathered|got|Expected" "$out/kernels_test_$x.txt" | head -20
  echo "== $(el) [$x] gtest: mla ops on cuda (sparse MLA)"
  timeout $(lim 20) "$work/mla_ops_test_$x" --gtest_brief=1 --gtest_filter='*SparseMla*/cuda*:*DenseEqualsSparse*/cuda*' > "$out/mla_ops_$x.txt" 2>&1; echo "rc $?"
  grep -E "PASSED|FAILED|Failure|got" "$out/mla_ops_$x.txt" | head -6
  echo "== $(el) [$x] memcheck (*SparseMlaGatherTest*, *Fp8FnuzCache64HeadsGatheredLeadingPadding), racecheck (*SparseMlaGatherTest*)"
  timeout $(lim 20) compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter='*SparseMlaGatherTest*:*Fp8FnuzCache64HeadsGatheredLeadingPadding' > "$out/memcheck_$x.txt" 2>&1; echo "rc $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck_$x.txt" | head -4
  timeout $(lim 20) compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
    --gtest_filter='*SparseMlaGatherTest*' > "$out/racecheck_$x.txt" 2>&1; echo "rc $?"
  grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck_$x.txt"
  args=()
  add() { [ ${#args[@]} -gt 0 ] && args+=(--then); args+=("$@"); }
  for h in "$H128" "$H64"; do
    for ctx in 8192 65536; do
      for rm in "1 1" "1 4" "32 1" "32 4" "64 4" "128 1" "128 4"; do
        set -- $rm
        paths=picked
        if [ "$h" = "$H64" ] && [ $(( $1 * $2 )) -ge 128 ]; then paths=picked,gather+seesaw,seesaw-fp8; fi
        if [ "$1 $2" = "64 4" ] && { [ "$h" = "$H128" ] || [ $ctx = 65536 ]; }; then continue; fi
        add --mode=decode --cache=fp8 $h --context=$ctx --requests=$1 --mtp=$2 --iters=10 --paths=$paths
      done
    done
  done
  echo "== $(el) [$x] bench: fp8 decode shapes"
  timeout $(lim 60) "$work/sparse_mla_bench_$x" "${args[@]}" > "$out/bench_$x.txt" 2>&1; echo "rc $?"
  grep -E "fail|row |rror" "$out/bench_$x.txt" | head -6
  echo "== $(el) [$x] ncu"
  ncu_shape "$work/sparse_mla_bench_$x" "$x" 32
  ncu_shape "$work/sparse_mla_bench_$x" "$x" 1
done
first=$(echo $builds | cut -d' ' -f1)
args=()
for h in "$H128" "$H64"; do
  for ctx in 8192 65536; do
    for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do
      set -- $rm
      add --mode=decode --cache=bf16 $h --context=$ctx --requests=$1 --mtp=$2 --iters=10 --paths=picked
    done
  done
done
echo "== $(el) [$first] bench: bf16 decode shapes"
timeout $(lim 40) "$work/sparse_mla_bench_$first" "${args[@]}" > "$out/bench_bf16.txt" 2>&1; echo "rc $?"
grep -E "fail|row |rror" "$out/bench_bf16.txt" | head -6
args=()
for ctx in 8192 65536; do
  for rm in "1 1" "1 4" "32 1" "32 4" "128 1" "128 4"; do
    set -- $rm
    add --mode=decode --cache=fp8 $H128 --context=$ctx --requests=$1 --mtp=$2 --iters=10 --paths=picked
  done
done
echo "== $(el) [before] bench: fp8, 128 heads"
timeout $(lim 30) "$work/sparse_mla_bench_before" "${args[@]}" > "$out/bench_before.txt" 2>&1; echo "rc $?"
grep -E "fail|row |rror" "$out/bench_before.txt" | head -6
echo "== $(el) [before] ncu"
ncu_shape "$work/sparse_mla_bench_before" before 32
ncu_shape "$work/sparse_mla_bench_before" before 1
echo "== $(el) torch"
PYTHONPATH="$here" timeout $(lim 40) python3 "$here/torch_baseline.py" --modes=decode --iters=5 > "$out/torch.txt" 2>&1; echo "rc $?"
echo "== $(el) table"
for f in $(cd "$out" && ls bench_*.txt); do
  echo "-- $f"
  grep -E "^sparse_mla" "$out/$f" | awk '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "%s h%s r%s m%s c%s %s %s\n", v["cache"], v["heads"], v["requests"], v["mtp"], v["context"], v["path"], v["median_ms"]}'
done
grep -E "^torch total" "$out/torch.txt" | awk '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "torch h%s rows%s c%s %s\n", v["heads"], v["rows"], v["context"], v["median_ms"]}'
echo "== $(el) done"
# What comes back from $OUT is at most 8 files: this log and one archive.
# (Written outside $OUT first: tar over a folder it writes into fails.)
tar czf /tmp/decode_results.tgz -C "$out" --exclude=run.txt . && \
  (cd "$out" && find . -type f ! -name run.txt -delete) && mv /tmp/decode_results.tgz "$out/results.tgz"
