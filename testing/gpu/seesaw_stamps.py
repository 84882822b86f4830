"""Reads the seesaw body's per-block clock stamps and prints where a block's
time goes: entry to Q ready, to the first S, the pairs' loop, the output's
store, and the gap on each multiprocessor between one block's end and the
next one's entry.

The stamps come from a diagnostic build of sparse_mla_bench, never from the
tree's own kernels: apply testing/gpu/seesaw_stamps.patch (the bf16 seesaw
instance records clock64 at those points for the last launch's blocks and
writes them at exit to $DSA_SEESAW_STAMPS_FILE), build, then revert it.

  git apply testing/gpu/seesaw_stamps.patch && bazel build --config=cuda \
      --dynamic_mode=off -c opt //attention/gpu/sparse_mla:bench; \
      git apply -R testing/gpu/seesaw_stamps.patch
  DSA_SEESAW_STAMPS_FILE=s.bin sparse_mla_bench ...; python3 seesaw_stamps.py s.bin
"""
import statistics
import struct
import sys


def main(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<I", data, 0)
    st = struct.unpack_from("<%dQ" % (n * 10), data, 4)
    blocks = [st[10 * b:10 * b + 10] for b in range(n)]
    blocks = [b for b in blocks if b[0] and b[5] and b[6]]
    def med(xs):
        return statistics.median(xs) if xs else float("nan")
    q = [b[2] - b[0] for b in blocks]
    first = [b[3] - b[0] for b in blocks]
    loop = [b[4] - b[3] for b in blocks]
    store = [b[5] - b[4] for b in blocks]
    end = [max(b[5], b[6], b[7]) for b in blocks]
    life = [e - b[0] for e, b in zip(end, blocks)]
    ns = [b[9] - b[8] for b in blocks if b[9] > b[8]]
    cyc = [b[5] - b[0] for b in blocks if b[9] > b[8]]
    ghz = sum(cyc) / sum(ns) if ns else float("nan")
    by_sm = {}
    for b, e in zip(blocks, end):
        by_sm.setdefault(b[1], []).append((b[0], e))
    gaps = []
    for sm, xs in by_sm.items():
        xs.sort()
        for (s0, e0), (s1, _) in zip(xs, xs[1:]):
            gaps.append(s1 - e0)
    span = {sm: max(e for _, e in xs) - min(s for s, _ in xs)
            for sm, xs in by_sm.items()}
    busy = {sm: sum(e - s for s, e in xs) for sm, xs in by_sm.items()}
    print("blocks %d on %d multiprocessors, clock %.3f GHz (clock64 over "
          "globaltimer)" % (len(blocks), len(by_sm), ghz))
    print("cycles a block, median: entry->Q ready %d, entry->first S %d, "
          "pairs' loop %d, store %d, whole block %d"
          % (med(q), med(first), med(loop), med(store), med(life)))
    print("mean: entry->first S %.0f, loop %.0f, store %.0f, block %.0f"
          % (statistics.mean(first), statistics.mean(loop),
             statistics.mean(store), statistics.mean(life)))
    print("gap between blocks on a multiprocessor, cycles: median %d, mean "
          "%.0f, p90 %d" % (med(gaps), statistics.mean(gaps) if gaps else 0,
                             sorted(gaps)[int(0.9 * len(gaps))] if gaps else 0))
    tot_span = sum(span.values())
    tot_busy = sum(busy.values())
    print("multiprocessors busy %.1f %% of their span; of a block: first S "
          "%.1f %%, loop %.1f %%, store %.1f %%"
          % (100.0 * tot_busy / tot_span, 100.0 * sum(first) / sum(life),
             100.0 * sum(loop) / sum(life), 100.0 * sum(store) / sum(life)))


if __name__ == "__main__":
    main(sys.argv[1])
