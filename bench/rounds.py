"""What the side-by-side benchmarks share (bench/bf16.py, bench/corpus/run.py): contenders timed in rounds of
about ROUND_S, every contender once per round in a rotating order (so that the VM's speed changes land on all
alike), and the results written as DIR/<prefix>-<date>.json and .md. Plain Python and numpy."""
import json
import os
import time

import numpy as np

ROUND_S = 0.1
MIN_ROUNDS = 5


def timed_round(fn, seconds):
    """Mean ms per call of fn() over about `seconds` (at least one call)."""
    runs, start = 0, time.perf_counter()
    while True:
        fn()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / runs * 1e3


def pct(values, q):
    return float(np.percentile(np.asarray(values), q))


def measure(fns, min_seconds, warmup_s=ROUND_S):
    """{name: [ms per call, one per round]}: each of fns (zero-argument callables) warmed up for warmup_s,
    then timed in at least MIN_ROUNDS rounds and min_seconds per contender."""
    names = list(fns)
    for fn in fns.values():
        timed_round(fn, warmup_s)
    rounds = {n: [] for n in names}
    start, r = time.perf_counter(), 0
    while r < MIN_ROUNDS or time.perf_counter() - start < min_seconds * len(names):
        for n in names[r % len(names):] + names[:r % len(names)]:
            rounds[n].append(timed_round(fns[n], ROUND_S))
        r += 1
    return rounds


def write(result, out, prefix, markdown):
    """Writes result as OUT/<prefix>-<date>.json and its markdown(result) as .md; prints the markdown."""
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, prefix + "-" + result["date"][:10])
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    text = markdown(result)
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)
