#!/bin/bash
# Issue 18 item 3 on the H200, one call: sparse MLA decode over fp8 and bf16
# caches after the gather pass's rewrite. Correctness first (the sparse MLA
# kernels test, the gather pass against the every-position pass to the bit,
# the op suite on cuda, compute-sanitizer memcheck and racecheck over the
# gather pass), then sparse_mla_bench at every decode shape of item 3 (the
# picked kernel; at 64 heads and many rows the gathered body beside the
# picked fp8 seesaw body), the build before the rewrite on the shapes that
# pick the gather pass (the same inputs), torch, and per-kernel times of
# 128 heads, 32 x 8K under ncu, before and after.
#
# Folder layout (this script beside bin/ and lib/, carried as one path,
# e.g. .device/decode2/run.sh): bin/sparse_mla_kernels_test.gz,
# bin/sparse_mla_bench.gz, bin/sparse_mla_bench_before.gz (the bench built
# at the commit before the rewrite), bin/mla_ops_test.gz (bazel build
# --config=cuda --dynamic_mode=off -c opt, stripped, gzipped), lib/
# (Debian's Abseil and protobuf objects they link, per ldd),
# torch_baseline.py and torch_timing.py (attention/gpu/sparse_mla, device),
# COMMIT. Needs nothing else of the tree it runs in (the device machine
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
# A step's limit: its own, or what is left of the call's 400 s.
lim() { local l=$(( 400 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "build $(cat "$here/COMMIT")"
G="$work/sparse_mla_kernels_test"
B="$work/sparse_mla_bench"
B0="$work/sparse_mla_bench_before"
echo "== $(el) gtest: sparse_mla kernels (the fp8 seesaw body's own test left out: unchanged)"
timeout $(lim 75) "$G" --gtest_brief=1 --gtest_filter='-*SeesawFp8*' > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure| path |gather pass|got|Expected" "$out/kernels_test.txt" | head -50
echo "== $(el) gtest: mla ops on cuda (sparse MLA)"
timeout $(lim 20) "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*SparseMla*/cuda*:*DenseEqualsSparse*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|got" "$out/mla_ops.txt" | head -20
F='*SparseMlaGatherTest*:*Fp8FnuzCache64HeadsGatheredLeadingPadding'
echo "== $(el) memcheck ($F)"
timeout $(lim 35) compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -8
echo "== $(el) racecheck (*SparseMlaGatherTest*)"
timeout $(lim 25) compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter='*SparseMlaGatherTest*' > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"
grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -6
# Every decode shape of item 3 on the picked kernel, 128 heads first (fp8,
# then bf16: never measured before at 128 heads); at 64 heads and 32 x 4 or 128 rows of an
# fp8 cache also the gathered body (the heuristics pick seesaw-fp8 there
# from the pass's old time).
args=()
add() { [ ${#args[@]} -gt 0 ] && args+=(--then); args+=("$@"); }
for h in "--heads=128 --v=128 --nope=128" "--heads=64 --v=256 --nope=192"; do
  for cache in fp8 bf16; do
    for ctx in 8192 65536; do
      for req in 1 32 128; do
        for mtp in 1 4; do
          paths=picked
          if [ $cache = fp8 ] && [ "${h:8:2}" = 64 ] && [ $(( req * mtp )) -ge 128 ]; then
            paths=picked,gather+seesaw
          fi
          add --mode=decode --cache=$cache $h --context=$ctx --requests=$req --mtp=$mtp --iters=10 --paths=$paths
        done
      done
    done
  done
done
echo "== $(el) bench: every decode shape"
timeout $(lim 135) "$B" "${args[@]}" > "$out/bench.txt" 2>&1; echo "rc $?"
grep -E "fail|row |rror" "$out/bench.txt" | head -10
# The build before the rewrite, on the fp8 shapes that pick the gather pass
# at 128 heads (the same inputs: the bench's generator is seeded).
args=()
for ctx in 8192 65536; do
  for rm in "1 1" "32 1" "32 4" "128 1"; do
    set -- $rm
    add --mode=decode --cache=fp8 --heads=128 --v=128 --nope=128 --context=$ctx --requests=$1 --mtp=$2 --iters=10 --paths=picked
  done
done
echo "== $(el) bench before the rewrite: fp8, 128 heads"
timeout $(lim 30) "$B0" "${args[@]}" > "$out/bench_before.txt" 2>&1; echo "rc $?"
grep -E "fail|row |rror" "$out/bench_before.txt" | head -10
echo "== $(el) ncu: kernel times, 128 heads, 32 x 8K, fp8, mtp 1 (after, before)"
for b in "$B" "$B0"; do
  timeout $(lim 25) ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --launch-count 6 "$b" --mode=decode --cache=fp8 \
    --heads=128 --v=128 --nope=128 --context=8192 --requests=32 --iters=1 --paths=picked > "$out/ncu_$(basename "$b").txt" 2>&1; echo "rc $?"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration|dram__bytes" "$out/ncu_$(basename "$b").txt" | sed 's/(dsa::attention[^)]*)//' | cut -c1-150 | head -24
done
echo "== $(el) torch"
PYTHONPATH="$here" timeout $(lim 45) python3 "$here/torch_baseline.py" --modes=decode --contexts=8192 --iters=3 > "$out/torch.txt" 2>&1; echo "rc $?"
tail -2 "$out/torch.txt"
echo "== $(el) table"
for f in bench bench_before; do
  echo "-- $f"
  grep -E "^sparse_mla" "$out/$f.txt" | awk '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "%s h%s r%s m%s c%s %s %s\n", v["cache"], v["heads"], v["requests"], v["mtp"], v["context"], v["path"], v["median_ms"]}'
done
grep -E "^torch total" "$out/torch.txt" | awk '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "torch h%s rows%s c%s %s\n", v["heads"], v["rows"], v["context"], v["median_ms"]}'
echo "== $(el) done"
