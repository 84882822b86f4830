#!/bin/bash
# Issue 18 item 3 on the H200, one call: sparse MLA decode over fp8 and bf16
# caches. Correctness first (the sparse MLA kernels test, the fp8 seesaw
# body's own test, the op suite on cuda, compute-sanitizer memcheck and
# racecheck over the new paths' small cases), then sparse_mla_bench at every
# decode shape of item 3 (fp8: the picked kernel, the warp-level one that ran
# before and the fp8 seesaw body on the same inputs), fp8 prefill, torch,
# and per-kernel times of one shape under ncu.
#
# Folder layout (this script beside bin/ and lib/, carried as one path,
# e.g. .device/decode/run.sh): bin/sparse_mla_kernels_test.gz,
# bin/sparse_mla_bench.gz, bin/mla_ops_test.gz (bazel build --config=cuda
# --dynamic_mode=off, stripped, gzipped), lib/ (Debian's Abseil and protobuf
# objects they link, per ldd), torch_baseline.py, COMMIT. Run from the
# repository root (torch_baseline.py reads attention/gpu/device).
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/decode_out}"; mkdir -p "$out"
work=/tmp/decode_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
# A step's limit: its own, or what is left of the call's 370 s.
lim() { local l=$(( 370 - ($(date +%s) - t0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "build $(cat "$here/COMMIT")"
G="$work/sparse_mla_kernels_test"
echo "== $(el) gtest: sparse_mla kernels"
timeout $(lim 110) "$G" --gtest_brief=1 --gtest_filter='-*SeesawFp8*' > "$out/kernels_test.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure| path |got|Expected" "$out/kernels_test.txt" | head -50
echo "== $(el) gtest: the fp8 seesaw body"
timeout $(lim 60) "$G" --gtest_brief=1 --gtest_filter='*SeesawFp8*' > "$out/kernels_test_fp8.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure| path |got|Expected" "$out/kernels_test_fp8.txt" | head -30
echo "== $(el) gtest: mla ops on cuda (sparse MLA)"
timeout $(lim 40) "$work/mla_ops_test" --gtest_brief=1 --gtest_filter='*SparseMla*/cuda*:*DenseEqualsSparse*/cuda*' > "$out/mla_ops.txt" 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|got" "$out/mla_ops.txt" | head -20
F='*Fp8Cache128HeadsBf16Io:*Fp8FnuzCache64HeadsGatheredLeadingPadding'
echo "== $(el) memcheck ($F)"
timeout $(lim 70) compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" "$out/memcheck.txt" | head -8
echo "== $(el) racecheck (*Fp8Cache128HeadsBf16Io)"
timeout $(lim 60) compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter='*Fp8Cache128HeadsBf16Io' > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"
grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -6
B="$work/sparse_mla_bench"
args=()
for cache in fp8 bf16; do
  for h in "--heads=64 --v=256 --nope=192" "--heads=128 --v=128 --nope=128"; do
    for ctx in 8192 65536; do
      for req in 1 32 128; do
        for mtp in 1 4; do
          [ ${#args[@]} -gt 0 ] && args+=(--then)
          paths=picked; [ $cache = fp8 ] && paths=picked,mma,seesaw-fp8
          args+=(--mode=decode --cache=$cache $h --context=$ctx --requests=$req --mtp=$mtp --iters=10 --paths=$paths)
        done
      done
    done
  done
done
echo "== $(el) bench: every decode shape (fp8: picked, mma = the body before, seesaw-fp8)"
timeout $(lim 150) "$B" "${args[@]}" > "$out/bench.txt" 2>&1; echo "rc $?"
grep -E "fail|row |rror" "$out/bench.txt" | head -10
echo "== $(el) bench: fp8 prefill T = 8192 (picked = dequant+seesaw, seesaw-fp8)"
timeout $(lim 40) "$B" --cache=fp8 --heads=64 --v=256 --nope=192 --tokens=8192 --iters=5 --paths=picked,seesaw-fp8 \
  --then --cache=fp8 --heads=128 --v=128 --nope=128 --tokens=8192 --iters=5 --paths=picked,seesaw-fp8 > "$out/bench_prefill.txt" 2>&1; echo "rc $?"
grep -E "^sparse_mla|fail|row |rror" "$out/bench_prefill.txt"
echo "== $(el) torch"
PYTHONPATH="$PWD/attention/gpu/device" timeout $(lim 80) python3 "$here/torch_baseline.py" --modes=decode --iters=5 > "$out/torch.txt" 2>&1; echo "rc $?"
tail -2 "$out/torch.txt"
echo "== $(el) table"
grep -E "^sparse_mla" "$out/bench.txt" | awk '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "%s h%s r%s m%s c%s %s %s\n", v["cache"], v["heads"], v["requests"], v["mtp"], v["context"], v["path"], v["median_ms"]}'
grep -E "^torch total" "$out/torch.txt" | awk '{for(i=1;i<=NF;i++){split($i,a,"="); v[a[1]]=a[2]}; printf "torch h%s rows%s c%s %s\n", v["heads"], v["rows"], v["context"], v["median_ms"]}'
echo "== $(el) ncu: kernel times, 128 heads, 32 x 8K, fp8, mtp 1 (gather+seesaw, then seesaw-fp8)"
timeout $(lim 40) ncu --clock-control none --metrics gpu__time_duration.sum --launch-count 14 "$B" --mode=decode --cache=fp8 \
  --heads=128 --v=128 --nope=128 --context=8192 --requests=32 --iters=1 --paths=picked,seesaw-fp8 > "$out/ncu.txt" 2>&1; echo "rc $?"
grep -E "^  [A-Za-z_].*\(|gpu__time_duration" "$out/ncu.txt" | sed 's/(dsa::attention[^)]*)//' | cut -c1-150 | head -30
echo "== $(el) done"
