"""Medians over the rounds of a dense prefill call's `--compare` lines.

Reads the lines testing/gpu/dense_mha_19.sh and dense_mha_rescale.sh gather
(each prefixed "r<round> <build> "): dense_mha_bench's "dense <preset>
<shape> ... total ... queued ..." and torch_baseline.py's "torch <preset>
<shape> ... sdpa+matmul ...". Prints, per build, preset and shape, the
medians of total and queued with their spread, torch's median, and the
ratios.

  python3 testing/gpu/dense_mha_compare_summary.py compare.txt
"""
import re
import statistics as st
import sys


def shape_of(line):
    if "T=8192" in line:
        return "T=8192"
    return "8x1024" if "8 requests" in line else "4x2048"


def main(path):
    ours, peer = {}, {}
    for line in open(path):
        f = line.split()
        if len(f) < 5:
            continue
        if f[2] == "dense":
            tot = float(re.search(r"total +([\d.]+)", line).group(1))
            q = float(re.search(r"queued +([\d.]+)", line).group(1))
            ours.setdefault((f[1], f[3], shape_of(line)), []).append((tot, q))
        elif f[2] == "torch" and "sdpa+matmul" in line:
            t = float(re.search(r"sdpa\+matmul +([\d.]+)", line).group(1))
            peer.setdefault((f[3], f[4]), []).append(t)
    for (build, preset, shape), xs in sorted(ours.items()):
        tot = st.median(x[0] for x in xs)
        q = st.median(x[1] for x in xs)
        ps = peer.get((preset, shape), [float("nan")])
        p = st.median(ps)
        print(f"median of {len(xs)} rounds: {build:5s} {preset:11s} "
              f"{shape:7s} total {tot:.3f} (min {min(x[0] for x in xs):.3f} "
              f"max {max(x[0] for x in xs):.3f}) queued {q:.3f} | torch "
              f"sdpa+matmul {p:.3f} (min {min(ps):.3f}) | peer/ours total "
              f"{p / tot:.3f}x queued {p / q:.3f}x")


if __name__ == "__main__":
    main(sys.argv[1])
