#!/bin/bash
# Sparse MLA prefill at 128 heads, a row's two head groups as a cluster over
# the bf16 cache (seesaw-x2, issue 18, item 1), one call on the H200: the
# base build's sparse_mla_bench and the cluster build's at T = 8192,
# interleaved (128 heads, then 64 heads to show it unchanged), 3 rounds;
# Nsight Compute per seesaw launch (duration, L2 reads from the SMs, L2 hit
# rate, clock) of both builds at 128 heads; the cluster build's
# kernels_test suite, memcheck over the crossover's cases and racecheck over
# two of them. Folder layout: bin/base_{bench,kernels_test}.gz and
# bin/x2_{bench,kernels_test}.gz.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/s18x_out}"; mkdir -p "$out"
work=/tmp/s18x_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
before() { [ $(( $(date +%s) - t0 )) -lt "$1" ]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader
K0=_ZN3dsa9attention3gpu10sparse_mla21SparseMlaSeesawKernelILb0ELNS_3gpu9Fp8FormatE0EEEvNS1_15SparseMlaParamsElNS2_9MmaOutputE
K2=_ZN3dsa9attention3gpu10sparse_mla34SparseMlaSeesawBf16CrossoverKernelILNS_3gpu9Fp8FormatE0EEEvNS1_15SparseMlaParamsElNS2_9MmaOutputE
sass() {
  local S="$work/$1_$2.sass"; cuobjdump --dump-sass --function "$3" "$work/$1_bench" > "$S" 2>&1
  echo "SASS $1 $2: HGMMA $(grep -c HGMMA "$S") LDL/STL $(grep -cE 'LDL|STL' "$S") LDGSTS $(grep -c LDGSTS "$S") LDG $(grep -c 'LDG' "$S") STS $(grep -c 'STS' "$S") STAS $(grep -ciE 'STAS|ST\.ASYNC' "$S") md5 $(sed 's|/\*[0-9a-f]*\*/||g' "$S" | md5sum | cut -c1-8)"
}
sass base seesaw "$K0"; sass x2 seesaw "$K0"; sass x2 crossover "$K2"
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
hung=0
b() {
  local v=$1; shift
  if [ "$v" = x2 ] && [ "$hung" = 1 ]; then echo "x2 skipped (hung before)"; return; fi
  timeout 40 "$work/${v}_bench" "$@" > "$work/b.txt" 2>&1; local rc=$?
  grep -E "^sparse_mla|fail|row |rror" "$work/b.txt" | sed "s/^/$v /"
  if [ "$rc" != 0 ]; then echo "$v rc $rc"; tail -n 3 "$work/b.txt"; [ "$rc" = 124 ] && [ "$v" = x2 ] && hung=1; fi
}
round() {
  echo "== $(el) bench round $1 (T = 8192, iters 20)"
  b base --iters=20 $H128 --tokens=8192
  b x2 --iters=20 $H128 --tokens=8192
  b base --iters=20 $H128 --tokens=8192
  b x2 --iters=20 $H128 --tokens=8192
  b base --iters=20 $H64 --tokens=8192
  b x2 --iters=20 $H64 --tokens=8192
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader
}
M=gpu__time_duration.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed
prof() {
  local v=$1
  [ "$v" = x2 ] && [ "$hung" = 1 ] && return
  echo "== $(el) ncu $v (128 heads, the seesaw launches of the check call and the first timed ones)"
  timeout 90 ncu --clock-control none --kernel-name regex:Seesaw --launch-count 8 --metrics "$M" --csv --print-units base \
    --log-file "$out/ncu_$v.csv" "$work/${v}_bench" --iters=1 $H128 --tokens=8192 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$v /"
  python3 - "$v" "$out/ncu_$v.csv" <<'PY' | tee -a "$out/ncu_summary.txt"
import collections, csv, sys
build, path = sys.argv[1], sys.argv[2]
lines = open(path, errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
if start is None:
    print(f"{build}: no ncu table"); sys.exit()
ks = collections.OrderedDict()
for row in csv.DictReader(lines[start:]):
    try:
        k = ks.setdefault(int(row["ID"]), {"name": row["Kernel Name"][:40], "grid": row["Grid Size"]})
        k[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    except (KeyError, ValueError):
        continue
t = []
for i, k in ks.items():
    us = k.get("gpu__time_duration.sum", 0) / 1e3
    rd = k.get("lts__t_sectors_srcunit_tex_op_read.sum", 0) * 32 / 1e9
    t.append((us, rd, k.get("lts__t_sector_hit_rate.pct", 0), k.get("sm__cycles_elapsed.avg.per_second", 0) / 1e9))
    print(f"{build} k{i} {k['name']} grid{k['grid']} {us:.1f}us L2rd {rd:.2f}GB L2hit {t[-1][2]:.1f}% "
          f"dramR {k.get('dram__bytes_read.sum', 0) / 1e9:.3f}GB clk {t[-1][3]:.2f}GHz "
          f"sm {k.get('sm__throughput.avg.pct_of_peak_sustained_elapsed', 0):.1f}%")
if t:
    n = len(t)
    print(f"SUM {build}: {n} seesaw launches, mean {sum(x[0] for x in t) / n / 1e3:.4f} ms, "
          f"L2 reads {sum(x[1] for x in t) / n:.2f} GB a launch ({4 * sum(x[1] for x in t) / n:.1f} GB a call), "
          f"L2 hit {sum(x[2] for x in t) / n:.1f}%, {sum(x[3] for x in t) / n:.2f} GHz")
PY
}
round 1
prof base; prof x2
G="$work/x2_kernels_test"
echo "== $(el) gtest: sparse_mla kernels_test (x2, whole suite)"
timeout 150 "$G" --gtest_brief=1 > "$out/gtest.txt" 2>&1; echo "rc $?"
grep -E "seesaw-x2 and seesaw|PASSED|FAILED|Failure|expected" "$out/gtest.txt" | head -n 30
F='*SeesawCrossoverEqualsSeesawToTheBit/*'
echo "== $(el) memcheck (x2: $F)"
timeout 110 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" > "$out/memcheck.txt" 2>&1; echo "rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid|differ" "$out/memcheck.txt" | head -12
R='*SeesawCrossoverEqualsSeesawToTheBit/Bf16Cache128HeadsTileEdges:*SeesawCrossoverEqualsSeesawToTheBit/Bf16Cache100HeadsManyRowsLeadingPadding'
echo "== $(el) racecheck (x2: $R)"
timeout 110 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter="$R" > "$out/racecheck.txt" 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED|differ" "$out/racecheck.txt"; grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -6
before 330 && round 2
before 390 && round 3
echo "== $(el) done"
