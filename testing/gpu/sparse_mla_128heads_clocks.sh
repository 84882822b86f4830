#!/bin/bash
# Second device run for the 128-head prefill (issue 18, item 1): where the
# bench's event-timed op (10.2 ms at 128 heads) exceeds the sum of its
# kernels under Nsight Compute (9.17 ms). Runs the kept build's kernels_test,
# memcheck and racecheck; sparse_mla_bench of the kept build
# while nvidia-smi samples the SM clock, power and clock-event
# reasons every 20 ms; and, where nsys is installed, an nsys trace of the
# kept build's bench at 128 heads (each kernel's duration in a sustained
# run, and the gaps between them), as far as a call of about a minute goes.
# Folder layout as sparse_mla_128heads.sh.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/s18_out}"; mkdir -p "$out"
work=/tmp/s18_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
read -r -a builds < "$here/BUILDS"; tested="$(cat "$here/TESTED")"
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
G="$work/${tested}_kernels_test"
echo "== $(el) gtest: sparse_mla kernels_test ($tested, whole suite)"
timeout 45 "$G" --gtest_brief=1 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests from|Failure" | head -12
F='*Bf16Cache128HeadsTileEdges:*Bf16Cache72HeadsF32Io:*Bf16Cache100Heads:*Bf16Cache64HeadsTopk2048:*Bf16Cache128HeadsTrailingPadding:*Bf16Cache64HeadsLeadingPadding'
echo "== $(el) memcheck ($tested: $F)"
timeout 15 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" | head -8
echo "== $(el) racecheck ($tested: Bf16Cache100Heads, Bf16Cache128HeadsTileEdges, Bf16Cache64HeadsTopk2048)"
timeout 20 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter='*Bf16Cache100Heads:*Bf16Cache128HeadsTileEdges:*Bf16Cache64HeadsTopk2048' > "$out/racecheck.txt" 2>&1
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"; grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -6
echo "== $(el) bench with clocks sampled (iters 40)"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 20 > "$out/clocks.csv" 2>&1 &
smi=$!
for v in "$tested"; do
  echo "mark $v $(date +%H:%M:%S.%N)" >> "$out/marks.txt"
  timeout 15 "$work/${v}_bench" --iters=40 $H64 --tokens=8192 --then --iters=40 $H128 --tokens=8192 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$v /" | awk -v d="$(date +%H:%M:%S)" '{print d, $0}'
done
kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
python3 - "$out/clocks.csv" <<'PY'
import sys, statistics
rows = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        rows.append((f[0], float(f[1].split()[0]), float(f[2].split()[0]), f[3], f[4]))
    except (IndexError, ValueError):
        pass
busy = [r for r in rows if r[2] > 250]
print(f"samples {len(rows)}, busy (power > 250 W) {len(busy)}")
if busy:
    c = sorted(r[1] for r in busy); p = sorted(r[2] for r in busy)
    print(f"busy SM clock MHz: min {c[0]:.0f} median {statistics.median(c):.0f} max {c[-1]:.0f}; "
          f"power W: median {statistics.median(p):.0f} max {p[-1]:.0f}")
    reasons = {}
    for r in busy:
        reasons[r[4]] = reasons.get(r[4], 0) + 1
    print("clock-event reasons while busy:", reasons)
PY
if command -v nsys >/dev/null && [ $(( $(date +%s) - t0 )) -lt 45 ]; then
  echo "== $(el) nsys $tested (iters 10, 128 heads)"
  timeout 20 nsys profile --trace=cuda --sample=none --cpuctxsw=none -o "$work/trace" "$work/${tested}_bench" --iters=10 $H128 --tokens=8192 2>&1 | grep -E "^sparse_mla|rror"
  timeout 15 nsys stats --report cuda_gpu_trace --format csv --output "$work/gpu" "$work/trace.nsys-rep" > /dev/null 2>&1
  ls "$work"/gpu* 2>/dev/null
  python3 - "$work"/gpu*cuda_gpu_trace*.csv "$out/nsys_calls.txt" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
ks = []
for r in rows:
    name = r.get("Name", "")
    try:
        s, d = float(r["Start (ns)"]), float(r["Duration (ns)"])
    except (KeyError, ValueError):
        continue
    if "memset" in name.lower() or "memcpy" in name.lower() or "CUDA mem" in name:
        continue
    ks.append((s, d, name, r.get("GrdX", ""), r.get("GrdY", "")))
ks.sort()
# Each kernel's shape: a seesaw launch's grid x (1: 64 heads, 2: 128); the
# GEMM after it the same. A call: 2 (64 heads) or 4 (128 heads) pairs.
shape, tagged = None, []
for k in ks:
    if "Seesaw" in k[2]:
        shape = 64 if k[3] == "1" else 128
    tagged.append((shape,) + k)
lines = []
for sh, per in ((64, 4), (128, 8)):
    seq = [t[1:] for t in tagged if t[0] == sh]
    calls = [seq[i:i + per] for i in range(0, len(seq) - per + 1, per)]
    stats = []
    for i, c in enumerate(calls):
        span = (c[-1][0] + c[-1][1] - c[0][0]) / 1e6
        busy = sum(d for s, d, n, gx, gy in c) / 1e6
        ss = [d / 1e6 for s, d, n, gx, gy in c if "Seesaw" in n]
        other = busy - sum(ss)
        gaps = [(c[j + 1][0] - c[j][0] - c[j][1]) / 1e3 for j in range(len(c) - 1)]
        stats.append((span, busy, sum(ss), other))
        lines.append(f"h{sh} call {i}: span {span:.3f} ms, busy {busy:.3f}, seesaw {' '.join(f'{x:.3f}' for x in ss)}, "
                     f"other {other:.3f}, gaps us {' '.join(f'{g:.0f}' for g in gaps)}")
    timed = stats[3:] if len(stats) > 3 else stats
    if timed:
        med = lambda j: sorted(x[j] for x in timed)[len(timed) // 2]
        print(f"NSYS h{sh}: {len(calls)} calls, timed {len(timed)}: median span {med(0):.3f} ms, busy {med(1):.3f}, "
              f"seesaw {med(2):.3f}, other {med(3):.3f}; a call's pairs: {per // 2}")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
for l in lines[:2] + lines[-2:]:
    print(l)
PY
else
  echo "no nsys"
fi
echo "== $(el) done"
