#!/usr/bin/env python3
"""A/B of one model under two nnc option sets or two nnc builds (and ONNX Runtime), interleaved in short rounds.

    python3 bench/ab.py MODEL.onnx --a="--disable-pass=batch-rows" --b="" [--threads=N] [--seconds=10]
    python3 bench/ab.py MODEL.onnx --a-nnc=../before/build/tools/nnc      (B: this tree's build)

Compiles MODEL.onnx twice to model.so files with the nnc executable (NNC_EXECUTABLE, else build/tools/nnc;
--a-nnc / --b-nnc for one contender: a build of another commit) and the extra options of --a and --b, loads both through the C ABI (python/nnc), checks each against
ONNX Runtime on the same random input, then times them and ORT (all graph optimisations) in rounds of
about 100 ms, the contenders' order alternating per round, so that the machine's speed changes land on
every contender alike. Prints each contender's median and p10-p90 per run (ms), the per-round paired
ratios B/A and ORT/B (medians, p10-p90), and the 1-minute load average before and after.
Uses the `python3` on PATH (onnxruntime, numpy).
"""
import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
import nnc  # noqa: E402


def timed(run, seconds):
    """Runs `run` for about `seconds`; the time per run (ms)."""
    n, start = 0, time.perf_counter()
    while True:
        run()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return 1e3 * elapsed / n


def percentiles(xs):
    return np.median(xs), np.percentile(xs, 10), np.percentile(xs, 90)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--a", default="", help="nnc options of contender A (space-separated)")
    p.add_argument("--b", default="", help="nnc options of contender B")
    p.add_argument("--a-nnc", default="", help="the nnc executable of contender A (default: NNC_EXECUTABLE)")
    p.add_argument("--b-nnc", default="", help="the nnc executable of contender B")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=10.0, help="total timed seconds per contender")
    p.add_argument("--round-seconds", type=float, default=0.1)
    args = p.parse_args()
    os.environ.setdefault("NNC_EXECUTABLE", os.path.join(REPO, "build", "tools", "nnc"))

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    session = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            for i in session.get_inputs()}
    want = session.run(None, feed)
    models = {}
    default_nnc = os.environ["NNC_EXECUTABLE"]
    for name, opts, exe in (("A", args.a, args.a_nnc), ("B", args.b, args.b_nnc)):
        os.environ["NNC_EXECUTABLE"] = exe or default_nnc
        m = nnc.compile(args.model, threads=args.threads, extra_args=opts.split())
        if exe:
            opts = (opts + " " if opts else "") + "nnc " + exe
        got = m.run(feed)
        err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
        scale = max(float(np.max(np.abs(w))) for w in want)
        print("%s (%s): max abs error vs ORT %.2e (largest output %.3g)" % (name, opts or "defaults", err, scale))
        models[name] = m
    runs = {"A": lambda: models["A"].run(feed), "B": lambda: models["B"].run(feed),
            "ORT": lambda: session.run(None, feed)}
    for run in runs.values():
        timed(run, 0.2)  # warm-up
    load_before = os.getloadavg()[0]
    samples = {k: [] for k in runs}
    rounds = max(1, int(args.seconds / args.round_seconds))
    order = list(runs)
    for r in range(rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            samples[k].append(timed(runs[k], args.round_seconds))
    load_after = os.getloadavg()[0]
    print("%d rounds of ~%.0f ms each, %d thread(s); load %.2f before, %.2f after" %
          (rounds, 1e3 * args.round_seconds, args.threads, load_before, load_after))
    for k, xs in samples.items():
        print("  %-4s median %.3f ms  (p10 %.3f, p90 %.3f)" % ((k,) + percentiles(xs)))
    a, b, o = (np.array(samples[k]) for k in ("A", "B", "ORT"))
    print("  A/B  (B's speed-up)  median %.3f  (p10 %.3f, p90 %.3f)" % percentiles(a / b))
    print("  ORT/B                median %.3f  (p10 %.3f, p90 %.3f)" % percentiles(o / b))


if __name__ == "__main__":
    main()
