#!/usr/bin/env python3
"""Reduced precision side by side: nnc -O2 with --precision=f32 and --precision=bf16 (model.so through the
C ABI, via python/nnc) against OpenVINO's CPU plugin with INFERENCE_PRECISION_HINT f32 and bf16 (its
default on AMX machines), on the benchmark models, in one process, interleaved.

Runs with the python3 on PATH (numpy, onnx, and `pip install openvino`; OpenVINO is optional: without it
only nnc's two precisions are timed). The models come from `python3 tests/models/make_models.py --bench DIR`
(ONNX backend-test layout, with ORT's f32 output as test_data_set_0/output_0.pb).

    python3 bench/bf16.py --models DIR [--only bert12_128,mlp_batch64] [--threads 1,2] [--min-seconds 3]
                          [--auto 1e-2]   (also nnc --precision=auto --accuracy=1e-2)

Each thread count runs in a process of its own (OpenVINO sizes its thread pool once per process). Per
model and thread count every contender runs in rounds of about 100 ms, all contenders once per round,
in a rotating order, for at least --min-seconds each (and 5 rounds); the process is pinned to the first T
cores (all contenders share them). Reported: median and p10-p90 of the per-round mean latency, the ratios
paired per round (OpenVINO bf16 / nnc bf16 > 1: nnc faster), and each contender's max abs error against the
f32 reference output divided by its max |value|. Writes bench/results/bf16-<date>.json and .md.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import nnc  # noqa: E402
from rounds import measure, pct, write as write_results  # noqa: E402  (bench/rounds.py)

DEFAULT_MODELS = ["bert12_128", "bert2_128", "gpt2_block_128", "mlp_batch64", "mlp_batch1", "resnet18_224",
                  "mobilenetv2_224"]


def load_case(models_dir, name):
    case = os.path.join(models_dir, name)
    x = np.load(os.path.join(case, "input_0.npy"))
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(case, "test_data_set_0", "output_0.pb")))
    return os.path.join(case, "model.onnx"), x, ref


def nnc_contender(onnx_path, precision, threads, work, accuracy=None):
    so = os.path.join(work, f"{os.path.basename(os.path.dirname(onnx_path))}.{precision}.so")
    started = time.time()
    model = nnc.compile(onnx_path, opt=2, precision=precision, output=so, threads=threads, accuracy=accuracy)
    name = model.inputs[0].name
    return (lambda x: model.run({name: x})[0]), time.time() - started


def openvino_contender(onnx_path, precision, threads):
    import openvino as ov
    core = ov.Core()
    started = time.time()
    compiled = core.compile_model(onnx_path, "CPU", {"INFERENCE_PRECISION_HINT": precision,
                                                     "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                     "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()

    def run(x):
        request.infer({0: x})
        return request.get_output_tensor(0).data.copy()
    return run, time.time() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", required=True)
    parser.add_argument("--only", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--min-seconds", type=float, default=3.0)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--auto", type=float, default=None, metavar="ACC",
                        help="also time nnc --precision=auto --accuracy=ACC (calibrated on generated inputs, "
                             "not on the input the errors are measured on)")
    args = parser.parse_args()
    try:
        import openvino
        ov_version = openvino.__version__
    except ImportError:
        ov_version = None
    thread_counts = [int(t) for t in args.threads.split(",")]
    if len(thread_counts) > 1:
        # One process per thread count: OpenVINO's thread pool (TBB) sizes itself once per process, from
        # the CPUs the process may use then (after a 1-thread run pinned to one CPU, a 2-thread run in the
        # same process ran OpenVINO on one thread).
        rows = []
        for t in thread_counts:
            out = os.path.join("/tmp", f"nnc-bf16-bench-{t}")
            subprocess.run([sys.executable, __file__, "--models", args.models, "--only", args.only, "--threads", str(t),
                            "--min-seconds", str(args.min_seconds), "--out", out] +
                           (["--auto", str(args.auto)] if args.auto else []), check=True)
            with open(max((os.path.join(out, f) for f in os.listdir(out) if f.endswith(".json")),
                          key=os.path.getmtime)) as f:
                part = json.load(f)
            rows += part["rows"]
        part["rows"] = rows
        write(part, args.out)
        return
    work = os.path.join("/tmp", "nnc-bf16-bench")
    os.makedirs(work, exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0))
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cpu": platform.processor() or open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0][3:],
              "openvino": ov_version, "load_before": os.getloadavg(),
              "commit": subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True).stdout.strip(), "rows": []}
    for threads in thread_counts:
        os.sched_setaffinity(0, set(cpus[:threads]))
        for name in args.only.split(","):
            onnx_path, x, ref = load_case(args.models, name)
            contenders, compile_s, errors = {}, {}, {}
            for precision in ("f32", "bf16"):
                try:
                    contenders[f"nnc {precision}"], compile_s[f"nnc {precision}"] = nnc_contender(
                        onnx_path, precision, threads, work)
                except nnc.CompileError as e:
                    print(f"{name}: nnc --precision={precision}: {e}", file=sys.stderr)
                if ov_version:
                    contenders[f"openvino {precision}"], compile_s[f"openvino {precision}"] = openvino_contender(
                        onnx_path, precision, threads)
            if args.auto:
                try:
                    contenders["nnc auto"], compile_s["nnc auto"] = nnc_contender(onnx_path, "auto", threads, work,
                                                                                  args.auto)
                except nnc.CompileError as e:
                    print(f"{name}: nnc --precision=auto: {e}", file=sys.stderr)
            scale = float(np.max(np.abs(ref)))
            for n, fn in contenders.items():
                errors[n] = float(np.max(np.abs(fn(x).astype(np.float64) - ref))) / scale
            rounds = measure({n: (lambda fn=fn: fn(x)) for n, fn in contenders.items()}, args.min_seconds)
            row = {"model": name, "threads": threads, "rounds": len(next(iter(rounds.values()))),
                   "ms": {n: {"median": pct(v, 50), "p10": pct(v, 10), "p90": pct(v, 90)} for n, v in rounds.items()},
                   "error": errors, "compile_s": compile_s, "load": os.getloadavg()}
            pairs = {"openvino bf16 / nnc bf16": ("openvino bf16", "nnc bf16"),
                     "nnc f32 / nnc bf16": ("nnc f32", "nnc bf16"),
                     "openvino f32 / nnc f32": ("openvino f32", "nnc f32"),
                     "nnc bf16 / nnc auto": ("nnc bf16", "nnc auto")}
            row["ratios"] = {}
            for label, (num, den) in pairs.items():
                if num in rounds and den in rounds:
                    ratios = [a / b for a, b in zip(rounds[num], rounds[den])]
                    row["ratios"][label] = {"median": pct(ratios, 50), "p10": pct(ratios, 10), "p90": pct(ratios, 90)}
            row["auto_accuracy"] = args.auto
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
    os.sched_setaffinity(0, set(cpus))
    write(result, args.out)


def write(result, out):
    write_results(result, out, "bf16", markdown)


def markdown(result):
    out = [f"bf16 benchmark {result['date']} (commit {result['commit']}), {result['cpu']}, OpenVINO "
           f"{result['openvino']}; 1-minute load at start {result['load_before'][0]:.2f}", "",
           "| model | T | nnc f32 ms | nnc bf16 ms | OpenVINO f32 ms | OpenVINO bf16 ms | OV bf16 / nnc bf16 "
           "(p10-p90) | nnc f32 / bf16 | error nnc bf16 | error OV bf16 |",
           "|---|---|---|---|---|---|---|---|---|---|"]

    def ms(row, n):
        m = row["ms"].get(n)
        return f"{m['median']:.3f}" if m else "-"

    def ratio(row, label):
        r = row["ratios"].get(label)
        return f"{r['median']:.2f} ({r['p10']:.2f}-{r['p90']:.2f})" if r else "-"
    geo = {}
    for row in result["rows"]:
        out.append(f"| {row['model']} | {row['threads']} | {ms(row, 'nnc f32')} | {ms(row, 'nnc bf16')} | "
                   f"{ms(row, 'openvino f32')} | {ms(row, 'openvino bf16')} | "
                   f"{ratio(row, 'openvino bf16 / nnc bf16')} | {ratio(row, 'nnc f32 / nnc bf16')} | "
                   f"{row['error'].get('nnc bf16', float('nan')):.1e} | {row['error'].get('openvino bf16', float('nan')):.1e} |")
        r = row["ratios"].get("openvino bf16 / nnc bf16")
        if r:
            geo.setdefault(row["threads"], []).append(math.log(r["median"]))
    autos = [row for row in result["rows"] if "nnc auto" in row["ms"]]
    if autos:
        out += ["", f"--precision=auto --accuracy={autos[0]['auto_accuracy']:g} (calibrated on generated inputs; the "
                "error is on the benchmark's input, against ONNX Runtime's f32 output):", "",
                "| model | T | nnc auto ms | nnc bf16 / nnc auto (p10-p90) | error nnc auto | error nnc bf16 |",
                "|---|---|---|---|---|---|"]
        for row in autos:
            out.append(f"| {row['model']} | {row['threads']} | {ms(row, 'nnc auto')} | "
                       f"{ratio(row, 'nnc bf16 / nnc auto')} | {row['error']['nnc auto']:.1e} | "
                       f"{row['error'].get('nnc bf16', float('nan')):.1e} |")
    out.append("")
    for t, logs in sorted(geo.items()):
        out.append(f"- {t} thread(s): geometric mean OpenVINO bf16 / nnc bf16 = {math.exp(sum(logs) / len(logs)):.2f} "
                   f"over {len(logs)} models")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
