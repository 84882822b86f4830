#!/bin/bash
# Sparse MLA prefill at 128 heads against 2 x 64 heads (issue 18, item 1), one
# call on the H200: sparse_mla_bench at T = 8192 for each build, interleaved;
# Nsight Compute per kernel (duration, L2 hit rate, DRAM bytes) of every
# kernel of the 64- and 128-head runs; the kernels_test suite, memcheck and
# racecheck over the seesaw cases of the build under test. Folder layout:
# bin/<build>_bench.gz and bin/<build>_kernels_test.gz, builds in BUILDS
# (the first the base), the build under test in TESTED.
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/s18_out}"; mkdir -p "$out"
work=/tmp/s18_run; rm -rf "$work"; mkdir -p "$work"
for f in "$here"/bin/*.gz; do gzip -dc "$f" > "$work/$(basename "$f" .gz)"; done
chmod +x "$work"/*
# The per-kernel table of an ncu log.
cat > "$work/ncu_summary.py" <<'PY'
"""Per-kernel table of an ncu --csv --print-units base log of sparse_mla_bench
runs (64 heads, then 128 heads): each kernel's duration, L2 hit rate, DRAM
bytes and L2 read sectors from the SMs, then per shape the sums a call
(the bench's 4 calls of each shape averaged) by kind (seesaw body, other)."""
import collections
import csv
import sys


def main(build, path):
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print(f"{build}: no ncu table in {path}")
        return
    kernels = collections.OrderedDict()
    for row in csv.DictReader(lines[start:]):
        try:
            k = kernels.setdefault(int(row["ID"]), {
                "name": row["Kernel Name"], "grid": row["Grid Size"]})
            k[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
    shape, sums, calls = None, collections.defaultdict(float), collections.Counter()
    for i, k in kernels.items():
        seesaw = "Seesaw" in k["name"]
        if seesaw:
            g = k["grid"].strip("()").split(",")
            dims = [int(x) for x in g]
            shape = 128 if 2 in dims[:2] and max(dims[:2]) > 2 else 64
        kind = "seesaw" if seesaw else k["name"][:40]
        us = k.get("gpu__time_duration.sum", 0) / 1e3
        role = "seesaw" if seesaw else "other"
        sums[(shape, role)] += us
        sums[(shape, role + "_hit")] += us * k.get("lts__t_sector_hit_rate.pct", 0)
        sums[(shape, role + "_clk")] += us * k.get("sm__cycles_elapsed.avg.per_second", 0) / 1e9
        sums[(shape, role + "_l2rd")] += k.get("lts__t_sectors_srcunit_tex_op_read.sum", 0) * 32 / 1e9
        sums[(shape, role + "_dram")] += (k.get("dram__bytes_read.sum", 0) +
                                          k.get("dram__bytes_write.sum", 0)) / 1e9
        calls[(shape, role)] += 1
        sums[(shape, "dram")] += (k.get("dram__bytes_read.sum", 0) +
                                  k.get("dram__bytes_write.sum", 0)) / 1e9
        print(f"{build} k{i} h{shape} {kind} grid{k['grid']} {us:.1f}us "
              f"L2hit {k.get('lts__t_sector_hit_rate.pct', 0):.1f}% "
              f"dramR {k.get('dram__bytes_read.sum', 0) / 1e9:.3f}GB "
              f"dramW {k.get('dram__bytes_write.sum', 0) / 1e9:.3f}GB "
              f"L2rd {k.get('lts__t_sectors_srcunit_tex_op_read.sum', 0) * 32 / 1e9:.2f}GB "
              f"clk {k.get('sm__cycles_elapsed.avg.per_second', 0) / 1e9:.2f}GHz")
    for shape in (64, 128):
        s, o, d = (sums[(shape, x)] / 4 for x in ("seesaw", "other", "dram"))
        line = (f"SUM {build} h{shape} per call: total {(s + o) / 1e3:.3f} ms, "
                f"DRAM {d:.2f} GB")
        for role in ("seesaw", "other"):
            t = sums[(shape, role)]
            if t == 0:
                continue
            line += (f"; {role} {t / 4e3:.3f} ms in {calls[(shape, role)] // 4} "
                     f"launches, L2 hit {sums[(shape, role + '_hit')] / t:.1f}%, "
                     f"L2 reads {sums[(shape, role + '_l2rd')] / 4:.2f} GB, "
                     f"DRAM {sums[(shape, role + '_dram')] / 4:.2f} GB, "
                     f"{sums[(shape, role + '_clk')] / t:.2f} GHz")
        print(line)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
PY
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec > >(tee "$out/run.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
read -r -a builds < "$here/BUILDS"; tested="$(cat "$here/TESTED")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
K=_ZN3dsa9attention3gpu10sparse_mla21SparseMlaSeesawKernelILb0ELNS_3gpu9Fp8FormatE0EEEvNS1_15SparseMlaParamsElNS2_9MmaOutputE
for v in "${builds[@]}"; do
  S="$work/$v.sass"; cuobjdump --dump-sass --function "$K" "$work/${v}_bench" > "$S" 2>&1
  echo "SASS $v: HGMMA $(grep -c HGMMA $S) LDL/STL $(grep -cE 'LDL|STL' $S) LDGSTS $(grep -c LDGSTS $S) STG.E.EF $(grep -c 'STG.E.EF' $S) STG $(grep -c 'STG' $S) md5 $(sed 's|/\*[0-9a-f]*\*/||g' $S | md5sum | cut -c1-8)"
done
H64="--heads=64 --v=256 --nope=192"; H128="--heads=128 --v=128 --nope=128"
b() { local v=$1; shift; timeout 40 "$work/${v}_bench" "$@" 2>&1 | grep -E "^sparse_mla|fail|row |rror" | sed "s/^/$v /"; }
round() {
  echo "== $(el) bench round $1 (T = 8192, iters 20)"
  for v in "${builds[@]}"; do b "$v" --iters=20 $H64 --tokens=8192 --then --iters=20 $H128 --tokens=8192; done
}
M=gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.avg.per_second
prof() {
  local v=$1
  echo "== $(el) ncu $v"
  timeout 60 ncu --clock-control none --metrics "$M" --csv --print-units base --log-file "$out/ncu_$v.csv" \
    "$work/${v}_bench" --iters=1 $H64 --tokens=8192 --then --iters=1 $H128 --tokens=8192 2>&1 | grep -E "^sparse_mla|rror" | sed "s/^/$v /"
  python3 "$work/ncu_summary.py" "$v" "$out/ncu_$v.csv" | tee -a "$out/ncu_summary.txt" | grep -E "^SUM|no ncu"
}
round 1
prof "${builds[0]}"; prof "$tested"
G="$work/${tested}_kernels_test"
echo "== $(el) gtest: sparse_mla kernels_test ($tested, whole suite)"
timeout 120 "$G" --gtest_brief=1 2>&1 | tail -n 25 | grep -vE "^\s*$"
F='*Bf16Cache128HeadsTileEdges:*Bf16Cache72HeadsF32Io:*Bf16Cache100Heads:*Bf16Cache64HeadsTopk2048'
echo "== $(el) memcheck ($tested: $F)"
timeout 70 compute-sanitizer --tool memcheck --print-limit 5 "$G" --gtest_brief=1 --gtest_filter="$F" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED|Invalid" | head -8
echo "== $(el) racecheck ($tested: Bf16Cache100Heads, Bf16Cache128HeadsTileEdges)"
timeout 70 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 "$G" --gtest_brief=1 \
  --gtest_filter='*Bf16Cache100Heads:*Bf16Cache128HeadsTileEdges' > "$out/racecheck.txt" 2>&1
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.txt"; grep -E "^=+ (Error|Warning)" "$out/racecheck.txt" | sort | uniq -c | sort -rn | head -6
# The rest while the call's time lasts (seconds since its start).
before() { [ $(( $(date +%s) - t0 )) -lt "$1" ]; }
before 230 && round 2
for v in "${builds[@]:1}"; do [ "$v" = "$tested" ] || { before 250 && prof "$v"; }; done
before 270 && round 3
echo "== $(el) done"
