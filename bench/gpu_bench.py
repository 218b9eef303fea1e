#!/usr/bin/env python3
"""GPU benchmark: nnc --target=cuda (eager -O0, fused -O2, fused without CUDA Graphs) side by side with
PyTorch eager and torch.compile on the same GPU, over the real models (tests/models/make_models.py).

Run by scripts/gpu_check.sh on a GPU machine (python3 with torch, onnx, numpy):
    python3 bench/gpu_bench.py --nnc build-gpucheck/tools/nnc --models build-gpucheck/models --out $OUT
--device cpu runs the same measurements on the CPU (nnc --target=cpu, torch eager on the CPU) so the
script itself can be checked on a machine without a GPU.

nnc is timed by `nnc bench --json` on the model's own test inputs (model runs only, host buffers in and
out: the times include the input/output copies over PCIe, as a caller of the C ABI sees them). PyTorch
is timed with CUDA events around each call (device time of the same computation, inputs already on the
GPU), after warm-up; torch.compile's compilation is excluded. Each row reports the median and the
10th/90th percentiles in milliseconds. Writes OUT/gpu_bench.json and OUT/gpu_bench.md.

--precisions f32,bf16,fp16 adds nnc -O2 at each reduced precision (GEMMs against weights on bf16/f16
operands, f32 accumulation), each with its error: max |output - test_data_set_0's output| / max |that
output| (the models' reference outputs are f32 ones from ORT or PyTorch).
"""
import tempfile
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from onnx import TensorProto, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentiles(ms):
    s = sorted(ms)
    def at(p):
        pos = p * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)
    return {"median_ms": statistics.median(s), "p10_ms": at(0.1), "p90_ms": at(0.9)}


def read_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def model_inputs(case):
    data = os.path.join(case, "test_data_set_0")
    files = sorted(f for f in os.listdir(data) if f.startswith("input_"))
    return [os.path.join(data, f) for f in files]


def nnc_bench(nnc, case, target, iterations, warmup, extra):
    args = [nnc, "bench", os.path.join(case, "model.onnx"), "--target=" + target, "--json",
            "--iterations=%d" % iterations, "--warmup=%d" % warmup] + extra
    for pb in model_inputs(case):
        name, _ = read_pb(pb)
        args.append("--input=%s=%s" % (name, pb))
    env = dict(os.environ)
    if os.environ.get("NNC_LD_LIBRARY_PATH"):  # nnc's own libraries, kept away from torch's (gpu_check.sh)
        env["LD_LIBRARY_PATH"] = os.environ["NNC_LD_LIBRARY_PATH"]
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-500:]}
    return json.loads(out.stdout)


def torch_times(name, case, device, iterations, warmup, compiled):
    import torch
    sys.path.insert(0, os.path.join(REPO, "tests", "models"))
    import export_torch  # noqa: E402

    cls, _ = export_torch.MODELS[name]
    torch.manual_seed(0)  # the exporter's seeding: the same weights as model.onnx
    gen = torch.Generator().manual_seed(1)
    model = cls().eval()
    with torch.no_grad():
        export_torch.randomize_batchnorm(model, gen)
    model = model.to(device)
    if compiled:
        if not hasattr(torch, "compile"):
            return {"error": "torch %s has no torch.compile" % torch.__version__}
        model = torch.compile(model)
    x = [torch.from_numpy(read_pb(pb)[1]).to(device) for pb in model_inputs(case)]
    expected = read_pb(os.path.join(case, "test_data_set_0", "output_0.pb"))[1]
    ms = []
    with torch.no_grad():
        for _ in range(warmup):
            y = model(*x)
        got = y.detach().cpu().numpy()
        err = float(np.max(np.abs(got - expected))) if got.shape == expected.shape else float("nan")
        for _ in range(iterations):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*x)
                end.record()
                end.synchronize()
                ms.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                model(*x)
                ms.append((time.perf_counter() - t0) * 1e3)
    r = percentiles(ms)
    r["max_abs_error_vs_ort"] = err
    return r


def nnc_error(nnc, case, target, precision):
    """max |nnc output - reference output| / max |reference output| over the model's outputs."""
    refs = {}
    data = os.path.join(case, "test_data_set_0")
    for f in sorted(os.listdir(data)):
        if f.startswith("output_"):
            name, value = read_pb(os.path.join(data, f))
            refs[name] = value.astype(np.float64)
    with tempfile.TemporaryDirectory(prefix="nnc-gpu-bench-") as out:
        args = [nnc, "run", os.path.join(case, "model.onnx"), "--target=" + target, "--precision=" + precision,
                "--output-dir", out]
        for pb in model_inputs(case):
            args += ["--input", "%s=%s" % (read_pb(pb)[0], pb)]
        env = dict(os.environ)
        if os.environ.get("NNC_LD_LIBRARY_PATH"):
            env["LD_LIBRARY_PATH"] = os.environ["NNC_LD_LIBRARY_PATH"]
        done = subprocess.run(args, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            return None
        err = 0.0
        for name, want in refs.items():
            _, got = read_pb(os.path.join(out, name + ".pb"))
            err = max(err, float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30)))
        return err


def cell(r):
    if not r or "error" in r:
        return "error" if r else "—"
    text = "%.3f (%.3f–%.3f)" % (r["median_ms"], r["p10_ms"], r["p90_ms"])
    if r.get("max_rel_error") is not None:
        text += ", err %.1e" % r["max_rel_error"]
    return text


def nnc_run(result, index):
    if "error" in result:
        return {"error": result["error"]}
    run = result["runs"][index]
    return {k: run[k] for k in ("median_ms", "p10_ms", "p90_ms", "kernels")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nnc", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--skip-compile", action="store_true", help="no torch.compile row")
    p.add_argument("--precisions", default="", help="also nnc -O2 at these --precision values (f32,bf16,fp16)")
    a = p.parse_args()
    precisions = [x for x in a.precisions.split(",") if x]
    target = "cuda" if a.device == "cuda" else "cpu"
    device_name = a.device
    try:
        import torch
        if a.device == "cuda":
            device_name = torch.cuda.get_device_name(0)
        torch_version = torch.__version__
    except Exception as e:  # noqa: BLE001 (reported, not fatal: the nnc rows still run)
        torch_version = "unavailable (%s)" % e
    rows = []
    for name in sorted(os.listdir(a.models)):
        case = os.path.join(a.models, name)
        if not os.path.isfile(os.path.join(case, "model.onnx")):
            continue
        row = {"model": name}
        both = nnc_bench(a.nnc, case, target, a.iterations, a.warmup, [])
        row["nnc_eager"], row["nnc_fused"] = nnc_run(both, 0), nnc_run(both, 1)
        if target == "cuda":
            row["nnc_fused_no_graphs"] = nnc_run(nnc_bench(a.nnc, case, target, a.iterations, a.warmup,
                                                           ["--no-cuda-graphs"]), 1)
        for precision in precisions:
            r = nnc_run(nnc_bench(a.nnc, case, target, a.iterations, a.warmup, ["--precision=" + precision]), 1)
            if "error" not in r:
                r["max_rel_error"] = nnc_error(a.nnc, case, target, precision)
            row["nnc_fused_" + precision] = r
        for key, compiled in (("torch_eager", False), ("torch_compile", True)):
            if compiled and a.skip_compile:
                continue
            try:
                row[key] = torch_times(name, case, a.device, a.iterations, a.warmup, compiled)
            except Exception as e:  # noqa: BLE001
                row[key] = {"error": str(e)[-300:]}
        rows.append(row)
        print(name, json.dumps(row), flush=True)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": device_name, "torch": torch_version, "iterations": a.iterations, "warmup": a.warmup,
              "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "gpu_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    cols = ["nnc_eager", "nnc_fused", "nnc_fused_no_graphs"] + ["nnc_fused_" + x for x in precisions] + \
        ["torch_eager", "torch_compile"]
    cols = [c for c in cols if any(c in r for r in rows)]
    lines = ["# nnc on %s, %s" % (device_name, result["date"]), "",
             "Median (p10–p90) ms per run, %d runs after %d warm-up; torch %s." % (a.iterations, a.warmup,
                                                                                     torch_version), "",
             "| model | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for r in rows:
        lines.append("| %s | %s |" % (r["model"], " | ".join(cell(r.get(c)) for c in cols)))
    with open(os.path.join(a.out, "gpu_bench.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all("error" not in r.get("nnc_fused", {"error": 1}) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
