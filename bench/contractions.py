#!/usr/bin/env python3
"""Contraction benchmark: nnc -O2 (model.so through the C ABI) side by side with ONNX Runtime on GEMM and
convolution layers, at 1 and 2 threads, as GFLOP/s and as a percentage of the machine's measured FMA peak.

Runs with the python3 on PATH (onnx, onnxruntime and numpy from scripts/setup.sh) and g++ (for
bench/fma_peak.cpp, built with -O2 -march=native into a temporary directory and run once at the start).

    python3 bench/contractions.py [--threads 1,2] [--cases REGEX] [--iterations N] [--nnc PATH]

Every case is one ONNX graph (opset 13, f32, numpy seed 0) written with onnx.helper: MatMuls with the weight
as an initializer (some with a bias + ReLU epilogue), one batched MatMul of two runtime inputs, and
ResNet-18/50 and MobileNetV2 convolution layers (NCHW, batch 1, bias, followed by ReLU). nnc compiles each
with `nnc CASE.onnx -o CASE.so -O2` (timed); the .so is loaded with ctypes and run with nnc_options.num_threads
= T. ONNX Runtime runs the same file with all graph optimisations, intra_op_num_threads = T, inter_op 1,
sequential execution, through an IO binding to preallocated buffers (as nnc writes into the caller's
buffers; neither side allocates or converts per run). After a check run and warm-up, the two are timed
alternately, one iteration each, so drift on a shared machine hits both alike. Before each timed run the
script waits until no runtime worker thread is running: ORT's idle workers spin for ~30 ms after a run
(session.intra_op.allow_spinning, on by default), which would otherwise take a core from nnc's next run.
The iteration count is capped by --iterations and by a time budget per case and thread count (--budget),
with at least --min-iterations.

Reported per case and thread count: median and p10-p90 latency (ms), FLOPs (2*M*N*K; conv
2*N*Cout*Hout*Wout*Cin/group*kh*kw; epilogues not counted), GFLOP/s at the median, % of the measured FMA peak
(peak_1t for T=1, peak_2t for T=2), ORT latency / nnc latency (> 1: nnc faster), and nnc's output against
ORT's (max abs error, max abs error / max |ORT|; a mismatch is flagged loudly and makes the exit status 1).

Load: /proc/loadavg is recorded at the start and before every measurement; a 1-minute load above 0.5 per core
at the start marks the whole report preliminary. Because this script's own threads raise the load average
as it goes, each measurement is judged by the CPU time other processes used during it instead (/proc/stat
minus this process's own CPU time): above 0.1 of a core per core, it is marked †.
Writes bench/results/contractions-<YYYY-MM-DD>.json (everything) and .md (the table; see bench/README.md).
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_benchmarks import git_commit, load_average, make_model, quiesce, stats  # noqa: E402  (shared helpers)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOAD_PER_CORE_LIMIT = 0.5   # 1-minute load average per core at the start (run_benchmarks.py's threshold)
OTHER_CPU_PER_CORE_LIMIT = 0.1  # other processes' CPU use per core during a measurement
RTOL = 1e-4                 # |nnc - ort| <= RTOL*|ort| + ATOL_REL*max|ort| element-wise
ATOL_REL = 1e-5


# --- machine state --------------------------------------------------------------------------------

def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    return "unknown"


def busy_ticks():
    """(all CPUs' busy clock ticks incl. steal, this process's user+system ticks over all its threads)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)  # user nice system irq softirq steal
    with open("/proc/self/stat") as f:
        own = f.read().rsplit(")", 1)[1].split()
    return busy, int(own[11]) + int(own[12])  # utime, stime (fields 14 and 15)


class OtherLoad:
    """Average CPU (in cores) that other processes used while the block ran."""

    def __enter__(self):
        self.t0, self.ticks0 = time.time(), busy_ticks()
        return self

    def __exit__(self, *exc):
        busy, own = busy_ticks()
        hz = os.sysconf("SC_CLK_TCK")
        wall = max(time.time() - self.t0, 1e-9)
        self.cores = max(0.0, (busy - self.ticks0[0]) - (own - self.ticks0[1])) / hz / wall
        return False


def nnc_build_type(nnc):
    """CMAKE_BUILD_TYPE of the build tree the nnc binary came from (build/tools/nnc/nnc -> build/)."""
    d = os.path.dirname(os.path.abspath(nnc))
    for _ in range(3):
        try:
            with open(os.path.join(d, "CMakeCache.txt")) as f:
                for line in f:
                    if line.startswith("CMAKE_BUILD_TYPE:"):
                        return line.split("=", 1)[1].strip() or "unspecified"
        except OSError:
            pass
        d = os.path.dirname(d)
    return "unknown"


def fma_peak(work):
    """Builds and runs bench/fma_peak.cpp; returns its JSON object (GFLOP/s)."""
    exe = os.path.join(work, "fma_peak")
    src = os.path.join(REPO, "bench", "fma_peak.cpp")
    subprocess.run(["g++", "-O2", "-march=native", "-pthread", src, "-o", exe], check=True)
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# --- cases ----------------------------------------------------------------------------------------

def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def matmul(m, k, n, epilogue=False):
    """x[M,K] @ W[K,N] (W an initializer), optionally + b[N] and ReLU."""
    def build(rng):
        w = (rng.standard_normal((k, n), dtype=np.float32) / math.sqrt(k)).astype(np.float32)
        inits = [numpy_helper.from_array(w, "W")]
        nodes = [helper.make_node("MatMul", ["x", "W"], ["mm" if epilogue else "y"])]
        if epilogue:
            inits.append(numpy_helper.from_array((rng.standard_normal(n, dtype=np.float32) * 0.1)
                                                 .astype(np.float32), "b"))
            nodes += [helper.make_node("Add", ["mm", "b"], ["z"]), helper.make_node("Relu", ["z"], ["y"])]
        model = make_model("matmul", nodes, [f32("x", (m, k))], [f32("y", (m, n))], inits)
        return model, {"x": rng.standard_normal((m, k), dtype=np.float32)}
    name = f"matmul_{m}x{k}x{n}" + ("_bias_relu" if epilogue else "")
    desc = f"MatMul x[{m},{k}] @ W[{k},{n}] (W initializer)" + (" + bias[N] + ReLU" if epilogue else "")
    return name, desc, 2 * m * n * k, build


def batched_matmul(b, m, k, n):
    """a[B,M,K] @ c[B,K,N], both runtime inputs (attention scores-like)."""
    def build(rng):
        model = make_model("bmm", [helper.make_node("MatMul", ["a", "c"], ["y"])],
                           [f32("a", (b, m, k)), f32("c", (b, k, n))], [f32("y", (b, m, n))], [])
        return model, {"a": rng.standard_normal((b, m, k), dtype=np.float32),
                       "c": (rng.standard_normal((b, k, n), dtype=np.float32) / math.sqrt(k)).astype(np.float32)}
    return (f"bmm_{b}x{m}x{k}x{n}", f"batched MatMul a[{b},{m},{k}] @ c[{b},{k},{n}], both runtime inputs",
            2 * b * m * n * k, build)


def conv(label, cin, cout, hw, k, stride, pad, group=1):
    """Conv NCHW batch 1 with bias, then ReLU."""
    hout = (hw + 2 * pad - k) // stride + 1

    def build(rng):
        fan_in = cin // group * k * k
        w = (rng.standard_normal((cout, cin // group, k, k), dtype=np.float32) / math.sqrt(fan_in)).astype(np.float32)
        bias = (rng.standard_normal(cout, dtype=np.float32) * 0.1).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], kernel_shape=[k, k], strides=[stride, stride],
                                  pads=[pad] * 4, group=group),
                 helper.make_node("Relu", ["c"], ["y"])]
        model = make_model("conv", nodes, [f32("x", (1, cin, hw, hw))], [f32("y", (1, cout, hout, hout))],
                           [numpy_helper.from_array(w, "W"), numpy_helper.from_array(bias, "b")])
        return model, {"x": rng.standard_normal((1, cin, hw, hw), dtype=np.float32)}
    kind = "dwconv" if group == cin and group > 1 else "conv"
    name = f"{kind}{k}x{k}s{stride}_{cin}to{cout}_{hw}"
    desc = (f"{label}: Conv {k}x{k} stride {stride} pad {pad}" + (f" group {group}" if group > 1 else "")
            + f", {cin}->{cout} channels, {hw}x{hw} -> {hout}x{hout}, + bias + ReLU")
    return name, desc, 2 * cout * hout * hout * (cin // group) * k * k, build


CASES = [
    matmul(1024, 1024, 1024),
    matmul(256, 1024, 4096, epilogue=True),
    matmul(128, 768, 3072),
    matmul(128, 3072, 768),
    matmul(1, 784, 512, epilogue=True),
    matmul(64, 784, 512, epilogue=True),
    batched_matmul(12, 128, 64, 128),
    conv("ResNet-18 conv2_x", 64, 64, 56, 3, 1, 1),
    conv("ResNet-18 conv4_x", 256, 256, 14, 3, 1, 1),
    conv("ResNet-18 conv3_1 (downsampling)", 64, 128, 56, 3, 2, 1),
    conv("ResNet-18 conv4_1 (downsampling)", 128, 256, 28, 3, 2, 1),
    conv("ResNet-50 bottleneck reduce", 256, 64, 56, 1, 1, 0),
    conv("ResNet-50 bottleneck expand", 64, 256, 56, 1, 1, 0),
    conv("ResNet-50 bottleneck reduce, 14 x 14", 1024, 256, 14, 1, 1, 0),
    conv("ResNet-50 bottleneck reduce, 7 x 7", 2048, 512, 7, 1, 1, 0),
    conv("ResNet-50 bottleneck expand, 7 x 7", 512, 2048, 7, 1, 1, 0),
    conv("ResNet-50 conv5_x 3 x 3, 7 x 7", 512, 512, 7, 3, 1, 1),
    conv("ResNet-50 conv5_1 shortcut (downsampling)", 1024, 2048, 14, 1, 2, 0),
    conv("ResNet stem", 3, 64, 224, 7, 2, 3),
    conv("MobileNetV2 depthwise", 144, 144, 56, 3, 1, 1, group=144),
    conv("MobileNetV2 depthwise, stride 2", 96, 96, 112, 3, 2, 1, group=96),
    conv("MobileNetV2 expansion 1x1", 32, 192, 112, 1, 1, 0),
]


# --- runners --------------------------------------------------------------------------------------

MAX_RANK = 8


class NncTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64))]


class NncOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("num_threads", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("device_buffers", ctypes.c_int32), ("cuda_graphs", ctypes.c_int32)]


class NncError(RuntimeError):
    pass


class NncModel:
    """A model.so (include/nnc/model.h) with num_threads set, bound once to fixed f32 input/output arrays."""

    def __init__(self, lib, threads, inputs, outputs):
        self.lib = lib
        lib.nnc_last_error.restype = ctypes.c_char_p
        lib.nnc_model_last_error.restype = ctypes.c_char_p
        lib.nnc_model_last_error.argtypes = [ctypes.c_void_p]
        lib.nnc_model_destroy.argtypes = [ctypes.c_void_p]
        lib.nnc_model_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                      ctypes.c_size_t]
        opts = NncOptions(ctypes.sizeof(NncOptions), threads, 0, 0, 0)
        self.handle = ctypes.c_void_p()
        if lib.nnc_model_create(ctypes.byref(self.handle), ctypes.byref(opts)) != 0:
            raise RuntimeError(lib.nnc_last_error().decode())
        self.keep = (inputs, outputs)  # the arrays must outlive the structs that point at them
        self.shapes = [(ctypes.c_int64 * MAX_RANK)(*a.shape) for a in inputs + outputs]
        structs = [NncTensor(a.ctypes.data, a.nbytes, 1, a.ndim, s) for a, s in zip(inputs + outputs, self.shapes)]
        self.ins = (NncTensor * len(inputs))(*structs[:len(inputs)])
        self.outs = (NncTensor * len(outputs))(*structs[len(inputs):])
        self.n_in, self.n_out = ctypes.c_size_t(len(inputs)), ctypes.c_size_t(len(outputs))

    def run(self):
        if self.lib.nnc_model_run(self.handle, self.ins, self.n_in, self.outs, self.n_out) != 0:
            raise NncError(self.lib.nnc_model_last_error(self.handle).decode())

    def close(self):
        if self.handle:
            self.lib.nnc_model_destroy(self.handle)
            self.handle = None


class OrtModel:
    """An ORT session (all graph optimisations, T intra-op threads) with IO bound to fixed arrays."""

    def __init__(self, path, threads, feeds, outputs, spinning):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if not spinning:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.binding = self.sess.io_binding()
        self.values = [ort.OrtValue.ortvalue_from_numpy(a) for a in list(feeds.values()) + outputs]
        for name, v in zip(feeds, self.values):
            self.binding.bind_ortvalue_input(name, v)
        for o, v in zip(self.sess.get_outputs(), self.values[len(feeds):]):
            self.binding.bind_ortvalue_output(o.name, v)

    def run(self):
        self.sess.run_with_iobinding(self.binding)


def start_loaded(args, cores):
    return args.load_start[0] > LOAD_PER_CORE_LIMIT * cores


def timed(fn):
    quiesce()
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def compare(y, ref):
    y64, r64 = y.astype(np.float64), ref.astype(np.float64)
    scale = float(np.max(np.abs(r64))) if r64.size else 0.0
    diff = np.abs(y64 - r64)
    max_abs = float(diff.max()) if diff.size else 0.0
    bad = ~(diff <= RTOL * np.abs(r64) + ATOL_REL * scale)  # NaN in either side counts as bad
    return {"max_abs_err": max_abs, "max_rel_err": max_abs / scale if scale > 0 else max_abs,
            "mismatched_elements": int(bad.sum()), "max_abs_ort": scale, "matches": not bool(bad.any())}


def measure(name, path, so_path, feeds, out_shape, threads, args, cores):
    """Check run, warm-up, then ORT and nnc timed alternately; returns the measurement record."""
    rec = {"threads": threads, "load_before": load_average()}
    ort_out = np.zeros(out_shape, np.float32)
    ort_model = OrtModel(path, threads, feeds, [ort_out], args.ort_spinning)
    nnc_model = None
    if so_path:
        nnc_out = np.full(out_shape, np.nan, np.float32)
        inputs = [np.ascontiguousarray(a) for a in feeds.values()]
        try:
            nnc_model = NncModel(ctypes.CDLL(so_path), threads, inputs, [nnc_out])
        except (OSError, RuntimeError) as e:
            rec["nnc_error"] = f"load/create: {e}"
    runners = {"ort": ort_model.run}
    if nnc_model:
        runners["nnc"] = nnc_model.run
    ms, n, done = {}, 0, 0
    with OtherLoad() as other:
        try:
            # Check run (its outputs are compared below, and so are the last run's), then warm-up within a
            # quarter of the budget.
            warm = {k: timed(fn) for k, fn in runners.items()}
            first = (nnc_out.copy(), ort_out.copy()) if nnc_model else None
            spent = sum(warm.values()) / 1e3
            while done < args.warmup and spent < args.budget / 4:
                for k, fn in runners.items():
                    warm[k] = timed(fn)
                spent += sum(warm.values()) / 1e3
                done += 1
            pair_s = sum(warm.values()) / 1e3
            n = max(min(args.min_iterations, args.iterations),
                    min(args.iterations, int(args.budget / max(pair_s, 1e-9))))
            ms = {k: [] for k in runners}
            for _ in range(n):
                for k, fn in runners.items():  # alternate: one ORT iteration, one nnc iteration
                    ms[k].append(timed(fn))
        except NncError as e:  # nnc_model_run failed: keep nothing of nnc, time ORT alone
            rec["nnc_error"] = f"run: {e}"
            nnc_model.close()
            nnc_model = None
            ms = {"ort": [timed(ort_model.run) for _ in range(max(n, args.min_iterations))]}
    if nnc_model:
        nnc_model.close()
    rec.update(warmup_runs=done, iterations=n, other_cpu_cores=round(other.cores, 3), load_after=load_average())
    rec["other_busy"] = bool(other.cores > OTHER_CPU_PER_CORE_LIMIT * cores)
    reasons = [f"1-minute load {args.load_start[0]:.2f} at the script's start"] if start_loaded(args, cores) else []
    if rec["other_busy"]:
        reasons.append(f"other processes used {other.cores:.2f} cores during the measurement")
    rec["loaded"], rec["loaded_reasons"] = bool(reasons), reasons
    for k, v in ms.items():
        rec[k] = stats(v)
    if "nnc" in rec:
        checks = [compare(*first), compare(nnc_out, ort_out)]
        rec["check"] = dict(max(checks, key=lambda c: (not c["matches"], np.nan_to_num(c["max_abs_err"], nan=np.inf))),
                            matches=all(c["matches"] for c in checks), runs_checked="first and last")
        if not rec["check"]["matches"]:
            print(f"\n*** MISMATCH: {name} threads={threads}: nnc differs from ORT "
                  f"(max abs {rec['check']['max_abs_err']:.3e}, max abs / max|ORT| {rec['check']['max_rel_err']:.3e}, "
                  f"{rec['check']['mismatched_elements']} elements outside rtol {RTOL} + {ATOL_REL}*max|ORT|) ***\n",
                  file=sys.stderr, flush=True)
    return rec


def compile_nnc(nnc, onnx_path, so_path):
    cmd = [nnc, onnx_path, "-o", so_path, "-O2"]
    t = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    secs = time.time() - t
    if proc.returncode != 0:
        return None, secs, " ".join(cmd), (proc.stderr or proc.stdout).strip()[-800:] or f"exit {proc.returncode}"
    return so_path, secs, " ".join(cmd), None


# --- report ---------------------------------------------------------------------------------------

def derived(rec, flops, peaks):
    """GFLOP/s at the median, % of the thread count's FMA peak, and ORT / nnc."""
    peak = peaks.get(f"peak_{rec['threads']}t")
    for k in ("ort", "nnc"):
        if k in rec:
            g = flops / (rec[k]["median_ms"] * 1e-3) / 1e9
            rec[k]["gflops"] = g
            rec[k]["pct_peak"] = 100 * g / peak if peak else None
    if "ort" in rec and "nnc" in rec:
        rec["ort_over_nnc"] = rec["ort"]["median_ms"] / rec["nnc"]["median_ms"]


def fmt_ms(m, mark):
    return f"{m['median_ms']:.3f} ({m['p10_ms']:.3f}–{m['p90_ms']:.3f}){mark}"


def fmt_pct(m):
    return f"{m['pct_peak']:.1f}%" if m.get("pct_peak") is not None else "n/a"


def row(case, rec):
    mark = "†" if rec.get("other_busy") else ""
    o, n = rec.get("ort"), rec.get("nnc")
    cells = [case["name"], str(rec["threads"]), f"{case['flops'] / 1e9:.3f}"]
    cells += [fmt_ms(o, mark), f"{o['gflops']:.1f}", fmt_pct(o)] if o else ["error", "", ""]
    if n:
        cells += [fmt_ms(n, mark), f"{n['gflops']:.1f}", fmt_pct(n), f"{rec['ort_over_nnc']:.2f}"]
        c = rec["check"]
        cells.append(f"{c['max_abs_err']:.1e} / {c['max_rel_err']:.1e}" + ("" if c["matches"] else " **MISMATCH**"))
    else:
        cells += ["error", "", "", "n/a", "n/a"]
    cells += [f"{case['compile_s']:.1f}" if case.get("compile_s") is not None else "n/a", str(rec.get("iterations", 0))]
    return "| " + " | ".join(cells) + " |"


def markdown(result):
    info, peaks = result["machine"], result["fma_peak"]
    recs = [r for c in result["cases"] for r in c["runs"]]
    busy = [r for r in recs if r.get("other_busy")]
    mismatched = [f"{c['name']} (T={r['threads']})" for c in result["cases"] for r in c["runs"]
                  if "check" in r and not r["check"]["matches"]]
    lines = [f"# nnc vs ONNX Runtime: GEMM and convolution layers, {result['date']}", ""]
    if mismatched:
        lines += [f"**MISMATCH: nnc's output differs from ORT's in {', '.join(mismatched)}.**", ""]
    start_load = result["load_start"][0] > LOAD_PER_CORE_LIMIT * info["cores"]
    if start_load or busy:
        why = ([f"the 1-minute load average was {result['load_start'][0]:.2f} at the start, above "
                f"{LOAD_PER_CORE_LIMIT} per core ({LOAD_PER_CORE_LIMIT * info['cores']:g} on {info['cores']} cores)"]
               if start_load else [])
        if busy:
            why.append(f"other processes used more than {OTHER_CPU_PER_CORE_LIMIT} of a core per core during "
                       f"{len(busy)} of {len(recs)} measurements (marked †)")
        lines += [f"**Preliminary, machine loaded:** {'; '.join(why)}. Absolute times are inflated and noisy; "
                  "the ORT / nnc ratios, measured alternately, are more meaningful.", ""]
    zmm = f", zmm {peaks['zmm_1t']:.1f} / {peaks['zmm_2t']:.1f}" if peaks.get("zmm_1t") is not None else ""
    suspect = (" — **suspect: measured while other processes were busy, so % of peak reads high**"
               if peaks.get("suspect") else "")
    load = "/".join(f"{v:.2f}" for v in result["load_start"])
    lines += [
        f"Machine: {info['cpu_model']}, {info['cores']} cores; {info['os']}. Measured f32 FMA peak "
        f"(bench/fma_peak.cpp, GFLOP/s, 1 / 2 threads): ymm {peaks['ymm_1t']:.1f} / {peaks['ymm_2t']:.1f}{zmm}; "
        f"peak_1t {peaks['peak_1t']:.1f}, peak_2t {peaks['peak_2t']:.1f} "
        f"(clock ≈ {peaks.get('clock_ghz_1t', 0):.2f} GHz from a dependent-add chain){suspect}. "
        f"Load average {load} at start.",
        f"Software: nnc {info['nnc_commit']} ({info['nnc_build_type']} build), `nnc CASE.onnx -o CASE.so -O2`, "
        f"run through the C ABI with nnc_options.num_threads = T; ONNX Runtime {info['onnxruntime']} "
        f"(CPUExecutionProvider, all graph optimisations, intra_op_num_threads = T, inter_op 1, sequential, "
        f"spinning {'on' if result['ort_spinning'] else 'off (--ort-spinning turns it on)'}, IO binding).",
        f"Method: a check run, up to {result['warmup']} warm-up runs, then up to {result['iterations']} iterations "
        f"(at least {min(result['min_iterations'], result['iterations'])}, within {result['budget_s']:g} s per row) "
        "timed alternately ORT, nnc, ORT, nnc, ...; cells are median ms (p10–p90). GFLOP/s at the median; "
        "% of peak_1t for T=1 and peak_2t for T=2. ORT / nnc > 1 means nnc is faster. Error: max |nnc − ORT| / "
        "that divided by max |ORT| (a mismatch is an element outside "
        f"{RTOL:g}·|ORT| + {ATOL_REL:g}·max|ORT|). Before each timed run the script waits until no runtime "
        "worker thread is running (ORT's idle workers spin ~30 ms after a run). "
        "Compile: seconds for nnc -O2.",
        "",
        "| case | T | GFLOP | ORT ms | ORT GFLOP/s | ORT % peak | nnc ms | nnc GFLOP/s | nnc % peak | ORT / nnc "
        "| error abs / rel | compile s | iters |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cases"]:
        for r in c["runs"]:
            lines.append(row(c, r))
    lines.append("")
    for c in result["cases"]:
        lines.append(f"- `{c['name']}`: {c['description']}.")
        errors = [c.get("compile_error")] + [r.get("nnc_error") for r in c["runs"]]
        for e in filter(None, errors):
            lines.append(f"  - nnc failed: `{e.splitlines()[-1] if e else 'no message'}`")
    return "\n".join(lines) + "\n"


# --- main -----------------------------------------------------------------------------------------

def main():
    cores = os.cpu_count() or 1
    today = datetime.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nnc", default=os.path.join(REPO, "build", "tools", "nnc"),
                   help="nnc binary (default build/tools/nnc, from scripts/setup.sh)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--cases", default="", help="regular expression: run the cases whose name it matches (re.search)")
    p.add_argument("--iterations", type=int, default=50, help="at most this many timed iterations per row")
    p.add_argument("--min-iterations", type=int, default=3, help="at least this many, whatever the budget")
    p.add_argument("--warmup", type=int, default=3, help="at most this many warm-up runs after the check run")
    p.add_argument("--budget", type=float, default=8.0, help="seconds of timed runs per case and thread count")
    p.add_argument("--ort-spinning", action="store_true",
                   help="leave ONNX Runtime's session.intra_op.allow_spinning on (its default). Off by default here: "
                        "its idle workers keep spinning after a run and take a core from nnc's next, interleaved "
                        "run (measured 2026-11-25: MatMul 128x768x3072 at 2 threads, nnc 6.3 ms with spinning on, "
                        "3.1 ms off; ORT itself was no slower with it off)")
    p.add_argument("--json", default=os.path.join(REPO, "bench", "results", f"contractions-{today}.json"))
    p.add_argument("--md", default=os.path.join(REPO, "bench", "results", f"contractions-{today}.md"))
    p.add_argument("--work", default=None, help="keep the .onnx/.so files here (default: a temporary directory)")
    p.add_argument("--fma-peak", default=None, metavar="FILE",
                   help="reuse fma_peak's JSON output from FILE instead of measuring it now")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    args = p.parse_args()
    pattern = re.compile(args.cases)
    cases = [c for c in CASES if pattern.search(c[0])]
    if args.list:
        for name, desc, flops, _ in cases:
            print(f"{name:34s} {flops / 1e9:8.3f} GFLOP  {desc}")
        return 0
    if not cases:
        sys.exit(f"contractions: no case matches {args.cases!r} (--list shows them)")
    if os.path.isdir(args.nnc):  # a build tree whose nnc lives one level down
        args.nnc = os.path.join(args.nnc, "nnc")
    if not os.access(args.nnc, os.X_OK):
        sys.exit(f"contractions: {args.nnc} is not an executable nnc (scripts/setup.sh build, or pass --nnc)")
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    args.load_start = load_average()
    tmp = tempfile.TemporaryDirectory(prefix="nnc-contractions-")
    work = args.work or tmp.name
    os.makedirs(work, exist_ok=True)
    start = time.time()
    if args.fma_peak:
        with open(args.fma_peak) as f:
            peaks = json.loads(f.read().strip().splitlines()[-1])
        peaks["source"] = os.path.abspath(args.fma_peak)
    else:
        print(f"load average at start {args.load_start}; measuring FMA peak (bench/fma_peak.cpp) ...", flush=True)
        with OtherLoad() as other:
            peaks = fma_peak(tmp.name)
        peaks.update(source="measured", other_cpu_cores=round(other.cores, 3))
    # Two threads should nearly double one thread's peak; if not, something else held a core.
    peaks["suspect"] = bool(cores >= 2 and peaks["peak_2t"] < 1.6 * peaks["peak_1t"]
                            or peaks.get("other_cpu_cores", 0) > OTHER_CPU_PER_CORE_LIMIT * cores)
    print(f"  FMA peak {json.dumps(peaks)}", flush=True)
    if peaks["suspect"]:
        print("  warning: the FMA peak looks disturbed by other load (peak_2t < 1.6 x peak_1t or other processes "
              "busy); % of peak may read too high. Rerun on a quiet machine or pass --fma-peak FILE.",
              file=sys.stderr, flush=True)
    result = {
        "date": today, "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": cores, "cpu_model": cpu_model(), "os": f"{platform.system()} {platform.release()}",
                    "nnc": os.path.abspath(args.nnc), "nnc_commit": git_commit(),
                    "nnc_build_type": nnc_build_type(args.nnc), "onnxruntime": ort.__version__,
                    "onnx": onnx.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "fma_peak": peaks, "threads": thread_counts, "iterations": args.iterations,
        "min_iterations": args.min_iterations, "warmup": args.warmup, "budget_s": args.budget,
        "ort_spinning": args.ort_spinning, "load_per_core_limit": LOAD_PER_CORE_LIMIT,
        "other_cpu_per_core_limit": OTHER_CPU_PER_CORE_LIMIT, "rtol": RTOL, "atol_rel": ATOL_REL,
        "load_start": args.load_start, "cases": [],
    }
    for name, desc, flops, build in cases:
        model, feeds = build(np.random.default_rng(0))
        path, so = os.path.join(work, f"{name}.onnx"), os.path.join(work, f"{name}.so")
        onnx.save(model, path)
        out_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
        so_path, compile_s, cmd, err = compile_nnc(args.nnc, path, so)
        case = {"name": name, "description": desc, "flops": flops, "compile_s": compile_s, "nnc_command": cmd,
                "inputs": {k: list(v.shape) for k, v in feeds.items()}, "output": out_shape, "runs": []}
        if err:
            case["compile_error"] = err
            print(f"*** nnc failed to compile {name}: {err.splitlines()[-1] if err else ''}", file=sys.stderr)
        print(f"[{time.time() - start:6.1f}s] {name}: {flops / 1e9:.3f} GFLOP, nnc -O2 compile {compile_s:.1f} s",
              flush=True)
        for t in thread_counts:
            rec = measure(name, path, so_path, feeds, out_shape, t, args, cores)
            derived(rec, flops, peaks)
            case["runs"].append(rec)
            o, n = rec.get("ort"), rec.get("nnc")
            line = f"    T={t} ORT {o['median_ms']:9.3f} ms {o['gflops']:7.1f} GFLOP/s {fmt_pct(o):>6s}"
            if n:
                line += (f" | nnc {n['median_ms']:9.3f} ms {n['gflops']:7.1f} GFLOP/s {fmt_pct(n):>6s}"
                         f" | ORT/nnc {rec['ort_over_nnc']:.2f} | err {rec['check']['max_rel_err']:.1e}"
                         + ("" if rec["check"]["matches"] else " MISMATCH"))
            else:
                line += f" | nnc: {rec.get('nnc_error') or 'not compiled'}"
            print(line + f" | {rec['iterations']} iters" + (" †" if rec["other_busy"] else ""), flush=True)
        result["cases"].append(case)
    result["load_end"] = load_average()
    result["total_wall_s"] = round(time.time() - start, 1)
    for path in (args.json, args.md):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(args.md, "w") as f:
        f.write(md)
    print(md)
    print(f"wrote {args.json} and {args.md} in {result['total_wall_s']} s")
    failed = any("check" in r and not r["check"]["matches"] for c in result["cases"] for r in c["runs"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
