#!/usr/bin/env python3
"""Reads a kernel_trace CSV and says where a program's device time went.

The device timeline is cut into windows at the program's synchronising calls
(cudaEventSynchronize, cudaStreamSynchronize, cudaDeviceSynchronize and their
driver forms): a window runs from one synchronisation's return to the next
one's. Within a window:

  lead   from the window's start (the host free to issue) to the first device
         record's start: the host's work before the device has anything;
  busy   the union of the device records' intervals;
  idle   the span from the first device start to the last device end, less
         busy: the device waiting inside the window;
  tail   from the last device end to the synchronisation's return.

Windows that run the same records (by name, in order) are grouped, and each
group reported with its medians, so that a benchmark's timed calls read as
one line. `--gaps N` lists the N longest idle gaps inside the windows with the
records on either side and the host calls under the gap.

`--calls N` lists the N host calls the program spent most host time in, with
their counts (how many runtime and driver calls a program makes a step, which
the tracing itself slows but does not change).

`--detail K` prints the K-th window (0 first; negative from the end) record by
record: each record's start from the window's start, its length, the device's
idle time before it, and for idle gaps of at least `--min_gap_us` the host calls
under them.

  python3 summarize.py trace.csv [--gaps 10] [--kernels 15] [--calls 20]
                       [--detail K [--min_gap_us 20]]
"""

import argparse
import collections
import re
import signal
import statistics
import sys

DEVICE = ("kernel", "memcpy", "memset")
HOST = ("runtime", "driver")
SYNC = re.compile(
    r"^(cudaEventSynchronize|cudaStreamSynchronize|cudaDeviceSynchronize|"
    r"cuEventSynchronize|cuStreamSynchronize|cuCtxSynchronize)(_v\d+)?$")


def short(name, width=70):
    """A record's name without its argument list, at most `width` long."""
    dims = re.search(r" \[[^\]]*\]x\[[^\]]*\]$", name)
    tail = dims.group(0) if dims else ""
    name = name[:dims.start()] if dims else name
    if name.endswith(")"):  # cut the last top-level parenthesised group
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = re.sub(r"^void ", "", name)
    if len(name) > width:
        name = name[:width - 3] + "..."
    return name + tail


def load(path):
    device, host = [], []
    with open(path, errors="replace") as f:
        header = f.readline()
        if not header.startswith("kind,"):
            sys.exit(f"{path}: not a kernel_trace CSV (no header line)")
        # Split by hand, not by the csv module: a name is the rest of the
        # line, commas, quotes and all.
        for n, line in enumerate(f, start=2):
            row = line.rstrip("\n").split(",", 5)
            if len(row) < 6:
                sys.exit(f"{path}:{n}: {len(row)} fields, 6 expected")
            kind, start, end = row[0], int(row[1]), int(row[2])
            rec = (start, end, kind, int(row[3]), int(row[4]), row[5])
            if kind in DEVICE:
                device.append(rec)
            elif kind in HOST:
                host.append(rec)
    device.sort()
    host.sort()
    return device, host


def sync_ends(host):
    """The ends of the synchronising calls, overlapping ones merged."""
    spans = sorted((s, e) for s, e, _, _, _, name in host
                   if SYNC.match(name))
    merged = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [e for _, e in merged]


def union_ns(recs):
    total, cur_s, cur_e = 0, None, None
    for s, e, *_ in recs:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def windows(device, host):
    ends = sync_ends(host)
    out, i = [], 0
    start = device[0][0] if device else 0
    for end in ends:
        recs = []
        while i < len(device) and device[i][0] < end:
            recs.append(device[i])
            i += 1
        if recs:
            out.append((start, end, recs))
        start = end
    if i < len(device):
        out.append((start, device[-1][1], device[i:]))
    return out


def ms(ns):
    return ns / 1e6


def host_under(host, s, e, n=4):
    """The n host calls with the most time inside [s, e)."""
    under = collections.Counter()
    for hs, he, _, _, _, name in host:
        if he > s and hs < e:
            under[name] += min(he, e) - max(hs, s)
    return under.most_common(n)


def detail(window, host, min_gap_ns):
    w_start, w_end, recs = window
    print(f"window of {len(recs)} records, {ms(w_end - w_start):.3f} ms from "
          "its start to the synchronisation's return")
    print(f"{'start ms':>9} {'length us':>10} {'idle before us':>15}  record")
    prev_end = w_start
    idle = 0
    for s, e, kind, _, _, name in recs:
        gap = max(0, s - prev_end)
        idle += gap
        print(f"{ms(s - w_start):9.3f} {(e - s) / 1e3:10.1f} "
              f"{gap / 1e3:15.1f}  {short(name, 60)}")
        if gap >= min_gap_ns:
            for call, t in host_under(host, prev_end, s):
                print(f"{'':36}{t / 1e3:9.1f} us in {call}")
        prev_end = max(prev_end, e)
    print(f"device idle in the window: {ms(idle):.3f} ms before its last "
          f"record, {ms(w_end - prev_end):.3f} ms after it")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--gaps", type=int, default=8)
    ap.add_argument("--kernels", type=int, default=15)
    ap.add_argument("--calls", type=int, default=0)
    ap.add_argument("--detail", type=int, default=None)
    ap.add_argument("--min_gap_us", type=float, default=20.0)
    a = ap.parse_args()
    device, host = load(a.trace)
    if not device:
        sys.exit(f"{a.trace}: no device records (was the program traced?)")

    by_name = collections.defaultdict(list)
    for s, e, kind, _, _, name in device:
        by_name[short(name)].append(e - s)
    print(f"{len(device)} device records, {len(host)} host calls")
    print(f"{'count':>6} {'total ms':>10} {'median us':>10}  record")
    for name, d in sorted(by_name.items(), key=lambda kv: -sum(kv[1])
                          )[:a.kernels]:
        print(f"{len(d):6d} {ms(sum(d)):10.3f} "
              f"{statistics.median(d) / 1e3:10.1f}  {name}")

    all_windows = windows(device, host)
    if a.detail is not None:
        if not -len(all_windows) <= a.detail < len(all_windows):
            sys.exit(f"--detail {a.detail}: the trace has {len(all_windows)} "
                     "windows")
        detail(all_windows[a.detail], host, a.min_gap_us * 1e3)
        return

    groups = collections.OrderedDict()
    gaps = []
    for w_start, w_end, recs in all_windows:
        first, last = recs[0][0], max(r[1] for r in recs)
        busy = union_ns(recs)
        row = dict(lead=first - w_start, span=last - first, busy=busy,
                   idle=(last - first) - busy, tail=w_end - last,
                   n=len(recs))
        sig = tuple(short(r[5], 40) for r in recs)
        sig = sig if len(sig) <= 12 else (sig[:6], len(sig))
        groups.setdefault(sig, []).append(row)
        prev_end = recs[0][1]
        for j in range(1, len(recs)):
            s = recs[j][0]
            if s > prev_end:
                gaps.append((s - prev_end, prev_end, s, recs[j - 1][5],
                             recs[j][5]))
            prev_end = max(prev_end, recs[j][1])

    print("\nwindows between synchronisations, grouped by what they ran "
          "(medians, ms):")
    print(f"{'windows':>7} {'records':>7} {'lead':>8} {'span':>9} {'busy':>9} "
          f"{'idle':>8} {'tail':>8}  first record")
    for sig, rows in groups.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        first = sig[0] if isinstance(sig[0], str) else sig[0][0]
        print(f"{len(rows):7d} {int(med['n']):7d} {ms(med['lead']):8.3f} "
              f"{ms(med['span']):9.3f} {ms(med['busy']):9.3f} "
              f"{ms(med['idle']):8.3f} {ms(med['tail']):8.3f}  {first}")

    if a.gaps > 0 and gaps:
        print(f"\nthe {min(a.gaps, len(gaps))} longest idle gaps inside "
              "windows, and the host calls under each:")
        for length, s, e, before, after in sorted(gaps, reverse=True)[:a.gaps]:
            print(f"  {length / 1e3:9.1f} us  after {short(before, 50)}"
                  f"  before {short(after, 50)}")
            for name, t in host_under(host, s, e):
                print(f"      {t / 1e3:9.1f} us in {name}")


    if a.calls > 0 and host:
        calls = collections.defaultdict(list)
        for hs, he, kind, _, _, name in host:
            calls[f"{kind} {name}"].append(he - hs)
        print(f"\nthe {min(a.calls, len(calls))} host calls with the most "
              "time in them:")
        print(f"{'count':>8} {'total ms':>10} {'median us':>10}  call")
        for name, d in sorted(calls.items(), key=lambda kv: -sum(kv[1])
                              )[:a.calls]:
            print(f"{len(d):8d} {ms(sum(d)):10.3f} "
                  f"{statistics.median(d) / 1e3:10.2f}  {name}")


if __name__ == "__main__":
    # Output piped into `head` ends quietly when the reader has enough.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
