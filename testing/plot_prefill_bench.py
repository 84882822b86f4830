#!/usr/bin/env python3
"""Draws prefill_bench's JSON: median TTFT per workload and arm, with every
run as a dot and the run-to-run range as an error bar, one panel per workload
(their TTFTs differ by orders of magnitude).

    python3 testing/plot_prefill_bench.py RESULT.json OUT.png|svg|pdf

Uses matplotlib from Debian (python3-matplotlib; `testing/setup_debian.sh
--plot` installs it). The picture is written through a temporary file and a
rename, so OUT is either untouched or complete.
"""
import json
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

ARM_COLOURS = {"main": "#7f7f7f", "skip": "#1f77b4", "no_indexer": "#bcbd22"}


def main(argv):
    if len(argv) != 3:
        print("usage: plot_prefill_bench.py RESULT.json OUT.png", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        result = json.load(f)
    workloads = result["workloads"]
    if not workloads:
        print("plot_prefill_bench.py: no workloads in " + argv[1], file=sys.stderr)
        return 2
    platform = result["platform"]
    model = result["model"]
    fig, axes = plt.subplots(
        1, len(workloads), figsize=(3.2 * len(workloads) + 0.6, 4.2), squeeze=False
    )
    for ax, w in zip(axes[0], workloads):
        names = list(w["arms"].keys())
        for i, name in enumerate(names):
            arm = w["arms"][name]
            colour = ARM_COLOURS.get(name, "#333333")
            label = name + (" (bound)" if arm.get("bound") else "")
            if arm["median_ttft_ms"] is None:
                ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8)
                continue
            runs = arm["ttft_ms"]
            median = arm["median_ttft_ms"]
            ax.bar(
                i,
                median,
                color=colour,
                alpha=0.5 if arm.get("bound") else 0.9,
                hatch="//" if arm.get("bound") else None,
                label=label,
                yerr=[[median - min(runs)], [max(runs) - median]],
                capsize=4,
            )
            ax.plot([i] * len(runs), runs, "k.", markersize=4)
            scored = arm["indexer_calls"]
            ax.annotate(
                "%d/%d scored" % (scored["scored"], scored["total"]),
                (i, median),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        title = "%s: %d x %d tok" % (w["name"], w["prompts"], w["prompt_len"])
        if w.get("change_pct") is not None:
            title += "\nskip %+.1f%%" % w["change_pct"]
            rng = w.get("change_range_pct")
            if rng:
                title += " [%+.1f, %+.1f]" % (rng[0], rng[1])
        if w.get("outputs_equal") is not None:
            title += ", outputs %s" % ("equal" if w["outputs_equal"] else "DIFFER")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("median TTFT (ms)")
        ax.set_ylim(bottom=0)
    where = "%s %s" % (platform["name"], platform["arch"])
    if platform.get("emulated"):
        where += " (EMULATED on %s kernels)" % platform.get("executes_on", "cpu")
    fig.suptitle(
        "prefill_bench: %s on %s, %d runs per arm (ABBA), commit %s"
        % (model["name"], where, result["runs"], result["commit"]),
        fontsize=10,
    )
    fig.tight_layout()
    out = argv[2]
    directory = os.path.dirname(os.path.abspath(out))
    suffix = os.path.splitext(out)[1] or ".png"
    fd, tmp = tempfile.mkstemp(suffix=suffix, dir=directory)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
