#!/usr/bin/python3
"""Draws prefill_bench's JSON: median TTFT per workload and arm, with every
run as a dot and the run-to-run range as an error bar, one panel per workload
(their TTFTs differ by orders of magnitude).

    python3 bench/prefill/plot_prefill_bench.py RESULT.json OUT.png|svg|pdf

RESULT.json has the schema of bench/prefill/report/result.proto, where a
figure a run does not have is absent (files written before that schema carry
null there; both read the same).

Uses matplotlib from Debian (python3-matplotlib; `testing/setup_debian.sh
--plot` installs it). The picture is written through a temporary file and a
rename, so OUT is either untouched or complete; an OUT that names anything
but a regular file (a device, a fifo, a symbolic link) is refused.
"""
import json
import os
import stat
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

ARM_COLOURS = {"main": "#7f7f7f", "skip": "#1f77b4", "no_indexer": "#bcbd22"}


def draw(ax, w, runs_key, median_key, change_key, ylabel):
    names = list(w["arms"].keys())
    for i, name in enumerate(names):
        arm = w["arms"][name]
        colour = ARM_COLOURS.get(name, "#333333")
        if arm.get(median_key) is None:
            ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8)
            continue
        runs = arm[runs_key]
        median = arm[median_key]
        ax.bar(
            i,
            median,
            color=colour,
            alpha=0.5 if arm.get("bound") else 0.9,
            hatch="//" if arm.get("bound") else None,
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
    ax.set_xticklabels(
        [n + ("\n(bound)" if w["arms"][n].get("bound") else "") for n in names],
        fontsize=8,
    )
    title = "%s: %d x %d tok" % (w["name"], w["prompts"], w["prompt_len"])
    change = w.get(change_key)
    if change and change.get("pct") is not None:
        title += "\nskip %+.1f%%" % change["pct"]
        if change.get("range_pct"):
            title += " [%+.1f, %+.1f]" % tuple(change["range_pct"])
        title += " " + change.get("verdict", "")
    if w.get("outputs_equal") is not None:
        title += "\noutputs %s" % ("equal" if w["outputs_equal"] else "DIFFER")
    ax.set_title(title, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_ylim(bottom=0)


def main(argv):
    if len(argv) != 3:
        print("usage: plot_prefill_bench.py RESULT.json OUT.png", file=sys.stderr)
        return 2
    out = argv[2]
    # The rename would replace a device, fifo or symlink with the picture (a
    # regular file where /dev/null was): only a regular file, or a new one.
    if os.path.lexists(out) and not stat.S_ISREG(os.lstat(out).st_mode):
        print("plot_prefill_bench.py: %s is not a regular file: only regular "
              "files are written" % out[:200], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        result = json.load(f)
    workloads = result["workloads"]
    if not workloads:
        print("plot_prefill_bench.py: no workloads in " + argv[1], file=sys.stderr)
        return 2
    platform = result["platform"]
    model = result["model"]
    # Row 0: TTFT (wall clock); row 1: the same on the process's CPU-time
    # clock, which other load on a shared machine does not stretch.
    rows = [("ttft_ms", "median_ttft_ms", "change", "median TTFT (ms)")]
    if all("ttft_cpu_ms" in a for w in workloads for a in w["arms"].values()):
        rows.append(("ttft_cpu_ms", "median_ttft_cpu_ms", "change_cpu",
                     "median CPU-time TTFT (ms)"))
    fig, axes = plt.subplots(
        len(rows), len(workloads),
        figsize=(3.4 * len(workloads) + 0.6, 3.8 * len(rows) + 0.4),
        squeeze=False,
    )
    for row, (runs_key, median_key, change_key, ylabel) in enumerate(rows):
        for ax, w in zip(axes[row], workloads):
            draw(ax, w, runs_key, median_key, change_key, ylabel)
    where = "%s %s" % (platform["name"], platform["arch"])
    if platform.get("emulated"):
        where += " (EMULATED on %s kernels)" % platform.get("executes_on", "cpu")
    fig.suptitle(
        "prefill_bench: %s on %s, %d runs per arm (ABBA), commit %s"
        % (model["name"], where, result["runs"], result["commit"]),
        fontsize=10,
    )
    fig.tight_layout()
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
