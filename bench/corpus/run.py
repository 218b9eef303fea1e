#!/usr/bin/env python3
"""The real-model corpus, checked and timed: nnc -O0 and -O2 (model.so through the C ABI) against ONNX Runtime
and OpenVINO f32 on every model that export.py and shipped.py wrote.

Runs under the corpus venv (bench/corpus/setup.sh: onnxruntime 1.32, openvino, numpy; nnc's python package
from this checkout) with the nnc executable of NNC_EXECUTABLE, else build/tools/nnc:

    /work/venv-corpus/bin/python bench/corpus/run.py --models DIR [--only A,B] [--time] [--threads 1,2]

Check (always): each model is compiled at -O0 and -O2 and run on its inputs.npz; every output is compared
with ONNX Runtime's (all graph optimisations) on the same file: right when within rtol 1e-4 / atol 1e-5
elementwise, or when its largest absolute error is within 2e-6 of the output's largest magnitude (outputs of
large magnitude, where 1e-5 is below f32 rounding). --time adds the speed: per thread count, in a process
of its own pinned to the first T cores (OpenVINO sizes its pool once per process), nnc -O2, nnc -O0,
ONNX Runtime and OpenVINO (INFERENCE_PRECISION_HINT=f32) run in rounds of about 100 ms, every contender
once per round in a rotating order, for at least --min-seconds each; reported: medians with p10-p90 of
the per-round latency and the ratios paired per round. Writes bench/results/corpus-<date>.json and .md.
Exit status 1 when a model that compiled is wrong (a model nnc refuses is listed, not fatal).
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
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import nnc  # noqa: E402
from rounds import measure, pct, write as write_results  # noqa: E402  (bench/rounds.py)

WARMUP_S = 0.5  # a model's weights are paged in on its first runs (AlexNet's 234 MB)
RTOL, ATOL, REL_TO_MAX = 1e-4, 1e-5, 2e-6


def cases(models_dir, only):
    names = sorted(n for n in os.listdir(models_dir) if os.path.exists(os.path.join(models_dir, n, "meta.json")))
    return [n for n in names if not only or n in only or n.split("@")[0] in only]


def load_case(models_dir, name):
    case = os.path.join(models_dir, name)
    with open(os.path.join(case, "meta.json")) as f:
        meta = json.load(f)
    with np.load(os.path.join(case, "inputs.npz")) as z:
        feed = {k: z[k] for k in z.files}
    return os.path.join(case, "model.onnx"), meta, feed


def nnc_feed(meta, feed):
    """The inputs of nnc's model.so: the bound ones are constants in it."""
    return {k: v for k, v in feed.items() if k not in meta.get("bind", [])}


def ort_session(path, threads, opt=ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.graph_optimization_level = opt
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def compare(got, want):
    """(right, max abs error, max abs error / max |want|) over every output."""
    right, worst, worst_rel = True, 0.0, 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False, math.inf, math.inf
        if w.dtype.kind not in "fc":
            ok, err = bool(np.array_equal(g, w)), float(np.max(g != w)) if g.size else 0.0
            right, worst = right and ok, max(worst, err)
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if not np.all(np.isfinite(g64) == np.isfinite(w64)):
            return False, math.inf, math.inf
        finite = np.isfinite(w64)
        diff = np.abs(g64 - w64)[finite]
        err = float(diff.max()) if diff.size else 0.0
        scale = float(np.abs(w64[finite]).max()) if diff.size else 0.0
        ok = bool(np.all(diff <= ATOL + RTOL * np.abs(w64[finite]))) or err <= REL_TO_MAX * scale
        right, worst = right and ok, max(worst, err)
        worst_rel = max(worst_rel, err / scale if scale else err)
    return right, worst, worst_rel


def compile_so(path, meta, feed, opt, work, name):
    so = os.path.join(work, f"{name}.O{opt}.so")
    shapes = meta.get("shapes") or {}
    bind = {}
    for input_name in meta.get("bind", []):  # inputs a deployment fixes, made compile-time constants
        bind[input_name] = os.path.join(work, f"{name}.{input_name}.pb")
        with open(bind[input_name], "wb") as f:
            f.write(numpy_helper.from_array(feed[input_name], input_name).SerializeToString())
    started = time.time()
    try:
        nnc.compile(path, opt=opt, shapes=shapes, bind=bind, output=so).close()
    except nnc.CompileError as e:
        return None, time.time() - started, str(e).splitlines()[0][:400]
    return so, time.time() - started, None


def provenance(path, meta, work, name):
    """`nnc explain --json` at -O2: how many ONNX nodes the file has and which no group, folded or elided
    list names (each must be named somewhere). The bound inputs' files are compile_so's."""
    args = [nnc.executable(), "explain", path, "--json", "-O2"]
    for input_name, shape in (meta.get("shapes") or {}).items():
        args += ["--shape", f"{input_name}={'x'.join(map(str, shape))}"]
    for input_name in meta.get("bind", []):
        args += ["--bind", f"{input_name}={os.path.join(work, f'{name}.{input_name}.pb')}"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[0][:300] if done.stderr.strip() else "failed"}
    report = json.loads(done.stdout)
    return {"source_nodes": report["source_nodes"], "unaccounted": report["unaccounted"],
            "folded": len(report["folded"]), "elided": len(report["elided"])}


def check(models_dir, names, work):
    rows = []
    for name in names:
        path, meta, feed = load_case(models_dir, name)
        row = {"model": name, "family": meta.get("family"), "source": meta.get("source"),
               "exporter": meta.get("exporter"), "opset": meta.get("opset")}
        want = ort_session(path, 2).run(None, feed)
        for opt in (0, 2):
            so, seconds, error = compile_so(path, meta, feed, opt, work, name)
            entry = {"compile_s": round(seconds, 1), "so": so, "error": error}
            if so:
                try:
                    model = nnc.load(so, threads=2)
                    got = model.run(nnc_feed(meta, feed))
                    entry["right"], entry["max_abs"], entry["max_rel"] = compare(got, want)
                    model.close()
                except nnc.Error as e:
                    entry["right"], entry["error"] = False, f"run: {e}"
            row[f"O{opt}"] = entry
        row["provenance"] = provenance(path, meta, work, name)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("source",)}), flush=True)
    return rows


def contenders(path, meta, row, feed, threads):
    out = {}
    for opt in (2, 0):
        so = row[f"O{opt}"].get("so")
        if so and row[f"O{opt}"].get("right"):
            model = nnc.load(so, threads=threads)
            out[f"nnc -O{opt}"] = (lambda m, f: lambda: m.run(f))(model, nnc_feed(meta, feed))
    session = ort_session(path, threads)
    out["onnxruntime"] = lambda: session.run(None, feed)
    try:
        import openvino as ov
        compiled = ov.Core().compile_model(path, "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY"})
        request = compiled.create_infer_request()
        out["openvino f32"] = lambda: request.infer(feed)
    except Exception as e:  # OpenVINO refuses some files; the row says so
        print(f"{row['model']}: openvino: {str(e).splitlines()[0][:200]}", file=sys.stderr)
    return out


RATIOS = {"onnxruntime / nnc": ("onnxruntime", "nnc -O2"), "openvino / nnc": ("openvino f32", "nnc -O2"),
          "eager / fused": ("nnc -O0", "nnc -O2")}


def time_rows(models_dir, rows, threads, min_seconds):
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(cpus[:threads]))
    timed = []
    for row in rows:
        path, meta, feed = load_case(models_dir, row["model"])
        fns = contenders(path, meta, row, feed, threads)
        rounds = measure(fns, min_seconds, WARMUP_S)
        t = {"model": row["model"], "threads": threads, "rounds": len(next(iter(rounds.values()))),
             "load": os.getloadavg()[0],
             "ms": {n: {"median": pct(v, 50), "p10": pct(v, 10), "p90": pct(v, 90)} for n, v in rounds.items()},
             "ratios": {}}
        for label, (num, den) in RATIOS.items():
            if num in rounds and den in rounds:
                r = [a / b for a, b in zip(rounds[num], rounds[den])]
                t["ratios"][label] = {"median": pct(r, 50), "p10": pct(r, 10), "p90": pct(r, 90)}
        timed.append(t)
        print(json.dumps(t), flush=True)
    os.sched_setaffinity(0, set(cpus))
    return timed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--work", default="/tmp/nnc-corpus-work")
    parser.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    parser.add_argument("--timing-child", help=argparse.SUPPRESS)  # a JSON file of checked rows
    args = parser.parse_args()
    os.environ.setdefault("NNC_EXECUTABLE", os.path.join(REPO, "build", "tools", "nnc"))
    if args.timing_child:
        with open(args.timing_child) as f:
            rows = json.load(f)
        json.dump(time_rows(args.models, rows, int(args.threads), args.min_seconds), sys.stdout)
        return
    os.makedirs(args.work, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cpu": cpu_name(), "cores": os.cpu_count(), "load_before": os.getloadavg(),
              "onnxruntime": ort.__version__, "openvino": openvino_version(),
              "commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True).stdout.strip()}
    result["rows"] = check(args.models, cases(args.models, only), args.work)
    result["timing"] = []
    if args.time:
        rows_file = os.path.join(args.work, "checked.json")
        with open(rows_file, "w") as f:
            json.dump(result["rows"], f)
        for t in args.threads.split(","):
            child = subprocess.run([sys.executable, __file__, "--models", args.models, "--threads", t,
                                    "--min-seconds", str(args.min_seconds), "--timing-child", rows_file],
                                   check=True, capture_output=True, text=True)
            sys.stderr.write(child.stderr)
            result["timing"] += json.loads(child.stdout.strip().splitlines()[-1])
    result["load_after"] = os.getloadavg()
    write(result, args.out)
    wrong = [r["model"] for r in result["rows"] for o in ("O0", "O2") if r[o].get("so") and not r[o].get("right")]
    sys.exit(1 if wrong else 0)


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def openvino_version():
    try:
        import openvino
        return openvino.__version__
    except ImportError:
        return None


def write(result, out):
    write_results(result, out, "corpus", markdown)


def status(entry):
    if entry.get("error"):
        return "refused" if not entry.get("so") else "run error"
    return "ok" if entry.get("right") else f"WRONG ({entry.get('max_abs', 0):.1e})"


def named(row):
    p = row.get("provenance") or {}
    if "source_nodes" not in p:
        return p.get("error", "-")
    return f"{p['source_nodes'] - len(p['unaccounted'])} of {p['source_nodes']}"


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def family_table(result):
    """Geometric means of the paired ratios per family (shipped files as one family) and thread count."""
    family = {r["model"]: ("shipped (other exporters)" if (r.get("source") or "").startswith("pypi:") else r["family"])
              for r in result["rows"]}
    cells = {}
    for t in result["timing"]:
        for label in ("onnxruntime / nnc", "openvino / nnc"):
            r = t["ratios"].get(label)
            if r:
                for f in (family[t["model"]], "all"):
                    cells.setdefault((f, t["threads"], label), []).append(r["median"])
    families = sorted({f for f, _, _ in cells if f != "all"}) + ["all"]
    rows = ["| family | models | ORT / nnc, 1 thread | OpenVINO / nnc, 1 thread | ORT / nnc, 2 threads | "
            "OpenVINO / nnc, 2 threads |", "|---|---|---|---|---|---|"]
    for f in families:
        n = len(cells.get((f, 1, "onnxruntime / nnc"), []))
        vals = [geomean(cells.get((f, t, label), [])) for t in (1, 2) for label in ("onnxruntime / nnc", "openvino / nnc")]
        rows.append(f"| {f} | {n} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    return rows + [""]


def markdown(result):
    out = [f"Real-model corpus, {result['date']} (commit {result['commit']}), {result['cpu']}, {result['cores']} "
           f"cores; ONNX Runtime {result['onnxruntime']}, OpenVINO {result['openvino']} (f32); 1-minute load "
           f"{result['load_before'][0]:.2f} at the start, {result['load_after'][0]:.2f} at the end", "",
           "| model | family | exporter, opset | -O0 | -O2 | -O2 max error (rel) | ONNX nodes named (explain) |",
           "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        out.append(f"| {r['model']} | {r['family']} | {r['exporter']}, {r['opset']} | {status(r['O0'])} | "
                   f"{status(r['O2'])} | {r['O2'].get('max_rel', float('nan')):.1e} | {named(r)} |")
    refused = [(r["model"], o, r[o]["error"]) for r in result["rows"] for o in ("O0", "O2") if r[o].get("error")]
    if refused:
        out += ["", "Refused or failed:", ""] + [f"- {m} -{o}: `{e}`" for m, o, e in refused]
    right = sum(1 for r in result["rows"] if r["O0"].get("right") and r["O2"].get("right"))
    out += ["", f"{right} of {len(result['rows'])} models right at -O0 and -O2."]
    if result["timing"]:
        out += ["", "| model | T | nnc -O2 ms | nnc -O0 ms | ORT ms | OpenVINO ms | ORT / nnc | OpenVINO / nnc | "
                "eager / fused |", "|---|---|---|---|---|---|---|---|---|"]

        def ms(t, n):
            m = t["ms"].get(n)
            return f"{m['median']:.2f}" if m else "-"

        def ratio(t, label):
            r = t["ratios"].get(label)
            return f"{r['median']:.2f} ({r['p10']:.2f}-{r['p90']:.2f})" if r else "-"
        geo = {}
        for t in result["timing"]:
            out.append(f"| {t['model']} | {t['threads']} | {ms(t, 'nnc -O2')} | {ms(t, 'nnc -O0')} | "
                       f"{ms(t, 'onnxruntime')} | {ms(t, 'openvino f32')} | {ratio(t, 'onnxruntime / nnc')} | "
                       f"{ratio(t, 'openvino / nnc')} | {ratio(t, 'eager / fused')} |")
            for label, r in t["ratios"].items():
                geo.setdefault((t["threads"], label), []).append(r["median"])
        out.append("")
        out += family_table(result)
        for (threads, label), values in sorted(geo.items()):
            g = math.exp(sum(math.log(v) for v in values) / len(values))
            below = sum(1 for v in values if v < 0.8) if label != "eager / fused" else sum(1 for v in values if v < 1)
            what = "below 0.8" if label != "eager / fused" else "below 1.0"
            out.append(f"- {threads} thread(s), {label}: geometric mean {g:.2f} over {len(values)} models, "
                       f"{below} {what}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
