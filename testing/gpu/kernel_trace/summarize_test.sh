#!/bin/bash
# summarize.py over a made-up trace whose figures are known: two windows that
# run the same two kernels (lead 0.2 ms, busy 1.0 ms, idle 0.3 ms, tail 0.1
# ms), one window of a different kernel, and the gap's host call.
set -euo pipefail
summarize=$1
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
cat > "$trace" <<'CSV'
kind,start_ns,end_ns,stream_or_thread,correlation,name
runtime,0,100000,7,1,cudaDeviceSynchronize_v3020
runtime,100000,290000,7,2,cudaLaunchKernel_v7000
kernel,300000,900000,13,2,void ns::Body<64; 2>(Params) [128;1;1]x[384;1;1]
runtime,900000,1150000,7,3,cublasLtMatmul
kernel,1200000,1600000,13,3,nvjet_tst [8;1;1]x[128;1;1]
runtime,1600000,1700000,7,4,cudaEventSynchronize_v3020
kernel,1900000,2500000,13,5,void ns::Body<64; 2>(Params) [128;1;1]x[384;1;1]
runtime,2500000,2750000,7,6,cublasLtMatmul
kernel,2800000,3200000,13,6,nvjet_tst [8;1;1]x[128;1;1]
runtime,3200000,3300000,7,7,cudaEventSynchronize_v3020
kernel,3400000,3500000,13,8,void ns::Other(int) [1;1;1]x[32;1;1]
runtime,3400000,3600000,7,9,cudaStreamSynchronize_v3020
CSV
out=$(python3 "$summarize" "$trace" --gaps 1 --calls 2)
echo "$out"
fail() { echo "FAIL: $1" >&2; exit 1; }
grep -q '^5 device records, 7 host calls$' <<<"$out" || fail "record counts"
grep -Eq '^ +2 +1\.200 +600\.0  ns::Body<64; 2> \[128;1;1\]x\[384;1;1\]$' \
  <<<"$out" || fail "the body's total and median"
# lead 0.2, span 1.3, busy 1.0, idle 0.3, tail 0.1: both timed windows.
grep -Eq '^ +2 +2 +0\.200 +1\.300 +1\.000 +0\.300 +0\.100  ns::Body' \
  <<<"$out" || fail "the grouped timed windows"
grep -Eq '^ +1 +1 +0\.100 +0\.100 +0\.100 +0\.000 +0\.100  ns::Other' \
  <<<"$out" || fail "the third window"
grep -Eq '^ +300\.0 us  after ns::Body' <<<"$out" || fail "the longest gap"
grep -Eq '^ +250\.0 us in cublasLtMatmul$' <<<"$out" || fail "the gap's call"
# cublasLtMatmul: 2 calls, 0.5 ms in all; then a synchronisation's 0.2 ms.
grep -Eq '^ +2 +0\.500 +250\.00  runtime cublasLtMatmul$' <<<"$out" \
  || fail "the calls' table"
grep -A3 'host calls with the most' <<<"$out" | tail -1 \
  | grep -Eq '^ +[12] +0\.200 .* runtime cuda(Event|Stream)Synchronize_v3020$' \
  || fail "the calls' order"
# The second window record by record: the body 0.2 ms in, 0.2 ms idle
# before it; nvjet 1.1 ms in after 0.3 ms idle, with the call under the gap.
out=$(python3 "$summarize" "$trace" --detail 1 --min_gap_us 250)
echo "$out"
grep -Eq '^ +0\.200 +600\.0 +200\.0  ns::Body<64; 2>' <<<"$out" || fail "detail: body"
grep -Eq '^ +1\.100 +400\.0 +300\.0  nvjet_tst' <<<"$out" || fail "detail: nvjet"
grep -Eq '^ +250\.0 us in cublasLtMatmul$' <<<"$out" || fail "detail: the call"
grep -q '^device idle in the window: 0.500 ms before its last record, 0.100 ms after it$' \
  <<<"$out" || fail "detail: idle"
python3 "$summarize" "$trace" --detail 3 >/dev/null 2>&1 && fail "detail: no window 3"
echo PASS
