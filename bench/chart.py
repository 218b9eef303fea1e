#!/usr/bin/env python3
"""Speed relative to ONNX Runtime, as a PNG: one bar per workload and thread count.

Reads the JSON files run_benchmarks.py wrote (one per thread count) and draws, per workload, ORT's
time over nnc fused's (> 1: nnc is faster; the ratio paired round by round where the file has it,
else the medians'), at each thread count, with the geometric mean and the
1.0 and 0.8 lines the issue's targets name. Runs on the default `python3` (the one with onnxruntime)
with matplotlib installed (`pip install matplotlib`).

    python3 bench/chart.py bench/results/DATE-2t.json bench/results/DATE-1t.json -o bench/results/DATE.png
"""
import argparse
import json
import math
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # a clear message instead of a traceback
    sys.exit("chart.py needs matplotlib: pip install matplotlib")


def ratios(path):
    """{workload: ORT / nnc fused (paired round by round where recorded, else the medians' ratio)},
    threads, date, machine line."""
    data = json.load(open(path))
    out = {}
    for w in data["workloads"]:
        m = w["measurements"]
        paired = (w.get("paired") or {}).get("ort_all_over_nnc_fused")
        if paired:  # round by round (run_benchmarks.py): less moved by the machine's changes of speed
            out[w["name"]] = paired
        elif "nnc_fused" in m and "ort_all" in m and m["nnc_fused"].get("median_ms"):
            out[w["name"]] = m["ort_all"]["median_ms"] / m["nnc_fused"]["median_ms"]
    machine = data["machine"]
    return out, data["threads"], data["timestamp"], f'{machine["cores"]} cores, {machine["cpu_model"]}'


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="run_benchmarks.py JSON files (one per thread count)")
    ap.add_argument("-o", "--out", required=True, help="the PNG to write")
    args = ap.parse_args()
    runs = [ratios(p) for p in args.results]
    names = sorted(set().union(*(r[0].keys() for r in runs)))
    fig, ax = plt.subplots(figsize=(12, 0.42 * len(names) + 2))
    height = 0.8 / len(runs)
    colors = ["#3465a4", "#f57900", "#4e9a06", "#75507b"]
    for i, (r, threads, stamp, _) in enumerate(runs):
        ys = [n_ + (i - (len(runs) - 1) / 2) * height for n_ in range(len(names))]
        values = [r.get(n, float("nan")) for n in names]
        present = [v for v in values if not math.isnan(v)]
        geomean = math.exp(sum(math.log(v) for v in present) / len(present))
        ax.barh(ys, values, height=height, color=colors[i % len(colors)],
                label=f"{threads} thread(s): geometric mean {geomean:.2f}x")
        for y, v in zip(ys, values):
            if not math.isnan(v):
                ax.text(v + 0.02, y, f"{v:.2f}", va="center", fontsize=7)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.axvline(0.8, color="gray", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ONNX Runtime time / nnc fused time  (> 1: nnc is faster; dashed: 0.8)")
    ax.set_title(f"nnc -O2 vs ONNX Runtime (all optimisations), {runs[0][3]}, {runs[0][2][:16]} UTC", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
