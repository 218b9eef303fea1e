#!/usr/bin/env python3
"""Benchmarks nnc (eager -O0 and fused -O2) against ONNX Runtime and PyTorch eager on CPU.

Produces bench/results/<date>.json (every sample's statistics, load averages, machine info) and
bench/results/<date>.md (the tables README includes). See bench/README.md.

Workloads: every <name>/model.onnx in the models directory (tests/models/make_models.py output) plus
micro-graphs built here with onnx.helper: a GELU-like pointwise chain on 1M elements, softmax over
1024x1024, a decomposed layernorm over 4096x1024 and a 512^3 MatMul with a bias+ReLU epilogue.

All runtimes get the same input tensors, the same thread count (nproc unless --threads), and the same
warm-up and iteration counts. nnc is timed by an `nnc bench --serve --aot` process (which compiles -O0 and -O2
to model.so files, loads them as a user does, and times model runs only, not compilation; --nnc-jit times the
in-process JIT instead), ORT in this process, interleaved round by round (see
run_interleaved); PyTorch after them in a /usr/bin/python3 subprocess (bench/torch_worker.py) because
Debian's python3-torch 1.13 lives there.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = "/usr/bin/python3"
TORCH_WORKER = os.path.join(REPO, "bench", "torch_worker.py")
# Every runtime warms up for at least this long as well as the --warmup runs: a model of microseconds
# ran 3x slower for its first few milliseconds at 2 threads (the second core coming out of idle), far
# more than 3 runs (bench/NOTES.md, 2026-11-27 later).
WARMUP_MS = 100
# At each switch in the interleaved timeline a contender runs untimed for at least this long (and once):
# after the wait for the other runtimes' threads to stop, the second core is coming out of idle (the
# batch-1 MLP at 2 threads read 0.056 ms instead of 0.013 with one untimed run).
SWITCH_WARMUP_MS = 20
# Each contender is timed for at least --min-seconds in all, in rounds of about this long (at least
# --rounds of them): this VM's speed steps between levels (SqueezeNet at 1 thread: 5.5, 7.0, 8.3 or
# 10.5 ms per run) from one tenth of a second to the next, with no steal time reported. 20 runs of a
# few milliseconds each, in 10 rounds, sampled a state or two: the same code read 1.14 and 0.74 against
# ORT in two runs minutes apart (bench/NOTES.md, 2026-11-29, sixteenth session). Short rounds put the
# contenders of a round in the same state, and many of them let each contender meet every state.
ROUND_MS = 100
MAX_ROUNDS = 60
# With fewer threads than cores, every contender runs on the same cores (the first `threads` of this
# process's CPUs; --no-pin: wherever the scheduler puts them). Unpinned, the 1-thread nnc process and
# the Python process running ORT sat on different vCPUs, and this VM's vCPUs slow down independently:
# nnc read 7.98-8.36 ms on SqueezeNet for a whole workload (21 rounds) while ORT read 5.4-7.0, paired
# 0.73, against 1.09 in the run before (bench/NOTES.md, sixteenth session).
# Above this 1-minute load average per core a measurement is not trustworthy (the brief's threshold).
LOAD_PER_CORE_LIMIT = 0.5
STEAL_PERCENT_LIMIT = 5.0  # per vCPU, during one measurement: a VM neighbour took a core
# What nnc's timings run: the model.so files users deploy (`nnc bench --aot`); main() empties it for
# --nnc-jit (the in-process JIT, as a C++ caller of nnc's API runs it).
NNC_ARTIFACT_FLAGS = ["--aot"]
# Models that take tens to hundreds of milliseconds per run in nnc get fewer iterations.
SLOW_WORKLOADS = {"model_resnet18", "model_mobilenetv2", "resnet18_224", "resnet50_224", "mobilenetv2_224",
                  "squeezenet_224", "bert2_128", "gpt2_block_128", "layernorm_gelu_residual"}


# --- machine state --------------------------------------------------------------------------------

def load_average():
    with open("/proc/loadavg") as f:
        return [float(v) for v in f.read().split()[:3]]


def cpu_ticks():
    """Per CPU: (all ticks, steal ticks) from /proc/stat; {} where it is not readable."""
    ticks = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *values = line.split()
                if name.startswith("cpu") and name != "cpu":
                    v = [int(x) for x in values]
                    ticks[name] = (sum(v[:8]), v[7] if len(v) > 7 else 0)
    except OSError:
        pass
    return ticks


def steal_percent(before, after):
    """The largest share of one CPU's time the hypervisor gave to other guests between two readings:
    on a VM, a vCPU that loses its physical core stalls one pool thread (and then the whole run)."""
    worst = 0.0
    for cpu, (total, steal) in after.items():
        if cpu in before and total > before[cpu][0]:
            worst = max(worst, 100.0 * (steal - before[cpu][1]) / (total - before[cpu][0]))
    return round(worst, 1)


def cpu_info():
    model, flags = "unknown", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    simd = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return model, simd


def git_commit():
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+uncommitted" if dirty else "")
    except OSError:
        return "unknown"


def blas_library():
    """Debian's python3-torch does its GEMMs through whichever libblas.so.3 the alternatives system selects."""
    path = "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"
    return os.path.realpath(path) if os.path.exists(path) else "unknown"


def torch_version():
    try:
        out = subprocess.run([TORCH_PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, timeout=120)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def nnc_build_type(nnc):
    """CMAKE_BUILD_TYPE of the build tree the binary came from (a Debug nnc compiles slowly but its kernels
    are LLVM-optimised the same way; the runtime around them is not)."""
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(nnc))), "CMakeCache.txt")
    try:
        with open(cache) as f:
            for line in f:
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    return line.split("=", 1)[1].strip() or "unspecified"
    except OSError:
        pass
    return "unknown"


def stats(ms):
    a = np.asarray(ms, dtype=np.float64)
    # Linear interpolation between order statistics: the same percentile definition as `nnc bench`.
    return {"median_ms": float(np.percentile(a, 50)), "p10_ms": float(np.percentile(a, 10)),
            "p90_ms": float(np.percentile(a, 90)), "min_ms": float(a.min()), "samples": len(ms)}


class Measurement:
    """Brackets one measurement with load-average readings."""

    def __init__(self, cores):
        self.cores = cores

    def __enter__(self):
        self.load_before = load_average()
        self.ticks_before = cpu_ticks()
        self.start = time.time()
        return self

    def __exit__(self, *exc):
        self.load_after = load_average()
        self.steal_pct = steal_percent(self.ticks_before, cpu_ticks())
        self.wall_s = time.time() - self.start
        return False

    def record(self, **fields):
        fields.update(load_before=self.load_before, load_after=self.load_after, wall_s=round(self.wall_s, 2),
                      loaded=self.load_before[0] > LOAD_PER_CORE_LIMIT * self.cores, steal_pct=self.steal_pct,
                      stolen=self.steal_pct > STEAL_PERCENT_LIMIT)
        return fields


# --- micro-graphs ---------------------------------------------------------------------------------

def scalar(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def make_model(name, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="nnc-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def gelu_chain(rng):
    """x*0.5*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) as 9 pointwise nodes on 2^20 floats."""
    n = 1 << 20
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["x2"]),
        helper.make_node("Mul", ["x2", "x"], ["x3"]),
        helper.make_node("Mul", ["x3", "k_cubic"], ["a"]),
        helper.make_node("Add", ["x", "a"], ["b"]),
        helper.make_node("Mul", ["b", "k_sqrt_2_over_pi"], ["s"]),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Add", ["t", "k_one"], ["u"]),
        helper.make_node("Mul", ["x", "k_half"], ["h"]),
        helper.make_node("Mul", ["h", "u"], ["y"]),
    ]
    inits = [scalar("k_cubic", 0.044715), scalar("k_sqrt_2_over_pi", math.sqrt(2 / math.pi)), scalar("k_one", 1.0),
             scalar("k_half", 0.5)]
    model = make_model("gelu_chain_1M", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], inits)
    return model, {"x": rng.standard_normal(n, dtype=np.float32)}, {}


def softmax(rng):
    shape = [1024, 1024]
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    model = make_model("softmax_1024x1024", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], [])
    return model, {"x": rng.standard_normal(shape, dtype=np.float32)}, {}


def layernorm(rng):
    """LayerNorm over the last axis as torch.onnx exports it at opset 13 (9 nodes)."""
    shape, d = [4096, 1024], 1024
    gamma = (rng.random(d, dtype=np.float32) + 0.5).astype(np.float32)
    beta = (rng.standard_normal(d, dtype=np.float32) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "k_two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["var", "k_eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["y"]),
    ]
    inits = [scalar("k_two", 2.0), scalar("k_eps", 1e-5), numpy_helper.from_array(gamma, "gamma"),
             numpy_helper.from_array(beta, "beta")]
    model = make_model("layernorm_4096x1024", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return model, {"x": rng.standard_normal(shape, dtype=np.float32)}, {"gamma": gamma, "beta": beta}


def rmsnorm(rng):
    """RMSNorm over the last axis as PyTorch's LLaMA-style module exports it (6 nodes)."""
    shape, d = [4096, 1024], 1024
    weight = (rng.random(d, dtype=np.float32) + 0.5).astype(np.float32)
    nodes = [
        helper.make_node("Pow", ["x", "k_two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["ms", "k_eps"], ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Reciprocal", ["rms"], ["inv"]),
        helper.make_node("Mul", ["x", "inv"], ["n"]),
        helper.make_node("Mul", ["n", "weight"], ["y"]),
    ]
    inits = [scalar("k_two", 2.0), scalar("k_eps", 1e-6), numpy_helper.from_array(weight, "weight")]
    model = make_model("rmsnorm_4096x1024", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return model, {"x": rng.standard_normal(shape, dtype=np.float32)}, {"weight": weight}


def matmul_bias_relu(rng):
    n = 512
    w = (rng.standard_normal((n, n), dtype=np.float32) / math.sqrt(n)).astype(np.float32)
    b = (rng.standard_normal(n, dtype=np.float32) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["z"]),
             helper.make_node("Relu", ["z"], ["y"])]
    model = make_model("matmul_bias_relu_512", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])],
                       [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    return model, {"x": rng.standard_normal((n, n), dtype=np.float32)}, {"W": w, "b": b}


def attention(rng):
    """Self-attention over 1,024 tokens as BERT exports it (Q = K = V = x: the harness feeds one input):
    softmax(x . xT / sqrt(64) + padding mask) . x, 12 heads of 64."""
    heads, seq, d = 12, 1024, 64
    mask = np.where(rng.random(seq) < 0.1, -10000.0, 0.0).astype(np.float32).reshape(1, 1, 1, seq)
    nodes = [
        helper.make_node("Transpose", ["x"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["x", "kt"], ["s"]),
        helper.make_node("Div", ["s", "k_root_d"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "x"], ["y"]),
    ]
    shape = [1, heads, seq, d]
    model = make_model("attention_12x1024", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                       [scalar("k_root_d", math.sqrt(d)), numpy_helper.from_array(mask, "mask")])
    return model, {"x": rng.standard_normal(shape, dtype=np.float32)}, {"mask": mask}


MICRO = {
    "gelu_chain_1M": (gelu_chain, "9-node tanh-GELU pointwise chain, 2^20 floats"),
    "softmax_1024x1024": (softmax, "Softmax(axis=-1) over [1024, 1024]"),
    "layernorm_4096x1024": (layernorm, "decomposed LayerNorm (9 nodes, opset 13) over [4096, 1024]"),
    "rmsnorm_4096x1024": (rmsnorm, "decomposed RMSNorm (7 nodes, as LLaMA-style modules export it) over [4096, 1024]"),
    "matmul_bias_relu_512": (matmul_bias_relu, "MatMul [512,512]x[512,512] + bias + ReLU"),
    "attention_12x1024": (attention, "self-attention, 12 heads x 1024 tokens x 64, scale + padding mask"),
}


# --- workloads ------------------------------------------------------------------------------------

def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def prepare_workloads(models_dir, work_dir, only):
    """Returns [{name, kind, description, onnx, inputs: {name: (array, pb path)}, input_npy, params_npz}]."""
    workloads = []
    if os.path.isdir(models_dir):
        for name in sorted(os.listdir(models_dir)):
            path = os.path.join(models_dir, name, "model.onnx")
            if not os.path.exists(path) or (only and name not in only):
                continue
            model = onnx.load(path)
            (input_name,) = graph_inputs(model)
            x = np.load(os.path.join(models_dir, name, "input_0.npy"))
            pb = os.path.join(models_dir, name, "test_data_set_0", "input_0.pb")
            ops = sorted({n.op_type for n in model.graph.node})
            workloads.append({"name": name, "kind": "model", "onnx": path, "inputs": {input_name: (x, pb)},
                              "input_npy": os.path.join(models_dir, name, "input_0.npy"), "params_npz": None,
                              "description": f"{len(model.graph.node)} ONNX nodes; input {list(x.shape)}; "
                                             f"ops {', '.join(ops)}"})
    else:
        print(f"warning: models directory {models_dir} not found; real models skipped "
              f"(generate with: python3 tests/models/make_models.py {models_dir})", file=sys.stderr)
    os.makedirs(work_dir, exist_ok=True)
    for name, (build, description) in MICRO.items():
        if only and name not in only:
            continue
        model, inputs, params = build(np.random.default_rng(0))
        case = os.path.join(work_dir, name)
        os.makedirs(case, exist_ok=True)
        path = os.path.join(case, "model.onnx")
        onnx.save(model, path)
        files = {}
        for input_name, arr in inputs.items():
            pb = os.path.join(case, f"{input_name}.pb")
            with open(pb, "wb") as f:
                f.write(numpy_helper.from_array(arr, input_name).SerializeToString())
            files[input_name] = (arr, pb)
        (first,) = inputs.values()
        npy = os.path.join(case, "input.npy")
        np.save(npy, first)
        npz = os.path.join(case, "params.npz")
        np.savez(npz, **params)
        workloads.append({"name": name, "kind": "micro", "onnx": path, "inputs": files, "input_npy": npy,
                          "params_npz": npz, "description": description})
    return workloads


# --- runners --------------------------------------------------------------------------------------

def run_nnc(nnc, workload, iterations, warmup, threads, cores):
    """nnc alone (`nnc bench --json`: eager and fused interleaved), for the thread-degradation runs."""
    cmd = [nnc, "bench", workload["onnx"], "--json", f"--iterations={iterations}", f"--warmup={warmup}",
           f"--warmup-ms={WARMUP_MS}", f"--threads={threads}"] + NNC_ARTIFACT_FLAGS
    for input_name, (_, pb) in workload["inputs"].items():
        cmd += ["--input", f"{input_name}={pb}"]
    with Measurement(cores) as m:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip()[-500:], "command": " ".join(cmd)}
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    report = json.loads(line)
    eager, fused = report["runs"]
    out = {}
    for key, run in (("nnc_eager", eager), ("nnc_fused", fused)):
        out[key] = m.record(**{k: run[k] for k in ("median_ms", "p10_ms", "p90_ms", "min_ms")}, samples=iterations,
                            label=run["label"], kernels=run["kernels"], bytes_moved=run["bytes_moved"],
                            nnc_load_before=report["load_before"], nnc_load_after=report["load_after"])
    out["nnc_speedup_median"] = report["speedup_median"]
    out["nnc_command"] = " ".join(cmd)
    return out


def running_threads(pids):
    """How many threads of the processes `pids` (this one's other than the calling thread) are running
    or runnable (state R)."""
    me, busy = str(threading.get_native_id()), 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # the process exited
            continue
        for tid in tids:
            if pid == "self" and tid == me:
                continue
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    busy += f.read().rsplit(")", 1)[1].split()[0] == "R"
            except OSError:  # the thread exited
                pass
    return busy


def quiesce(pids=("self",), timeout_s=0.2):
    """Waits until no runtime thread but the caller is running: ORT's idle workers spin for ~30 ms after
    a run (session.intra_op.allow_spinning, on by default) and nnc's pool briefly too, which in an
    interleaved timeline would take a core from the next contender's runs. Returns the seconds waited."""
    t0 = time.perf_counter()
    while running_threads(pids) and time.perf_counter() - t0 < timeout_s:
        time.sleep(0.0005)
    return time.perf_counter() - t0


def ort_session(workload, level, threads):
    """An ORT session with its inputs and outputs bound to buffers allocated once (IOBinding), as nnc
    bench keeps its output buffers: both sides time the inference, not the allocation of fresh result
    arrays. Returns (run, bound output buffers, the outputs of a plain run)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = level
    sess = ort.InferenceSession(workload["onnx"], so, providers=["CPUExecutionProvider"])
    feeds = {name: arr for name, (arr, _) in workload["inputs"].items()}
    outputs = sess.run(None, feeds)
    binding = sess.io_binding()
    for name, arr in feeds.items():
        binding.bind_cpu_input(name, arr)
    bound = [np.empty_like(o) for o in outputs]
    for meta, buf in zip(sess.get_outputs(), bound):
        binding.bind_output(meta.name, "cpu", 0, buf.dtype, list(buf.shape), buf.ctypes.data)
    return (lambda: sess.run_with_iobinding(binding)), bound, outputs


def run_interleaved(nnc, workload, iterations, warmup, threads, cores, rounds=5, min_seconds=0.0):
    """nnc eager and fused (an `nnc bench --serve` process, which times its own runs), ORT with all and
    with no graph optimisations (in this process): warmed up, then `rounds` rounds, each running every
    contender in turn (the order reversed every other round), SWITCH_WARMUP_MS of untimed runs (at least
    one) and iterations / rounds timed runs each, so a slowdown of the machine lands on all of them alike
    instead of on one's whole row.

    Besides each contender's statistics over all its runs, the ratios are also taken round by round
    (`paired`: the median over rounds of one contender's round median over another's): a VM whose
    speed changes by 1.5x from one ten-second stretch to the next (the Sapphire Rapids-class box,
    2026-11-29) moves both sides of a round alike, where the medians of all runs can each land in a
    different stretch.

    `iterations` and `rounds` are minimums: with min_seconds, the runs per contender are raised to last that
    long at the rate ORT ran its warm-up, split in rounds of about ROUND_MS (both recorded in the result)."""
    cmd = [nnc, "bench", workload["onnx"], "--serve", f"--warmup={warmup}", f"--warmup-ms={WARMUP_MS}",
           f"--threads={threads}"] + NNC_ARTIFACT_FLAGS
    for input_name, (_, pb) in workload["inputs"].items():
        cmd += ["--input", f"{input_name}={pb}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("{"):
            proc.kill()
            return {"error": (proc.stderr.read() or line).strip()[-500:], "command": " ".join(cmd)}
        ready = json.loads(line)
        ort_runs, reference, run_ms = {}, None, None
        for key, level in (("ort_all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
                           ("ort_none", ort.GraphOptimizationLevel.ORT_DISABLE_ALL)):
            run, bound, outputs = ort_session(workload, level, threads)
            warm_start = time.perf_counter()
            warm_until, i = warm_start + WARMUP_MS / 1e3, 0
            while i < warmup or time.perf_counter() < warm_until:  # as nnc bench and torch_worker.py do
                run()
                i += 1
            if run_ms is None:
                run_ms = (time.perf_counter() - warm_start) * 1e3 / i
            ort_runs[key] = (run, bound, outputs)
            if reference is None:
                reference = outputs[0]
        samples = {"nnc_eager": [], "nnc_fused": [], "ort_all": [], "ort_none": []}
        round_medians = {key: [] for key in samples}

        def close_round(key, n):
            round_medians[key].append(float(np.median(samples[key][-n:])))

        def nnc_round(n):
            proc.stdin.write(f"run {n} {SWITCH_WARMUP_MS}\n")
            proc.stdin.flush()
            reply = proc.stdout.readline()
            if not reply.startswith("{"):
                raise RuntimeError(f"{workload['name']}: nnc bench --serve: {(proc.stderr.read() or reply)[-500:]}")
            got = json.loads(reply)
            samples["nnc_eager"] += got["eager"]
            samples["nnc_fused"] += got["fused"]
            close_round("nnc_eager", len(got["eager"]))
            close_round("nnc_fused", len(got["fused"]))

        def ort_round(key, n):
            run = ort_runs[key][0]
            warm_until = time.perf_counter() + SWITCH_WARMUP_MS / 1e3
            run()  # untimed, as nnc's: the other contenders have had the caches and the cores idled
            while time.perf_counter() < warm_until:
                run()
            for _ in range(n):
                start = time.perf_counter()
                run()
                samples[key].append((time.perf_counter() - start) * 1e3)
            close_round(key, n)

        contenders = [nnc_round, lambda n: ort_round("ort_all", n), lambda n: ort_round("ort_none", n)]
        if min_seconds > 0:
            iterations = max(iterations, math.ceil(min_seconds * 1e3 / run_ms))
            rounds = max(rounds, min(MAX_ROUNDS, iterations, round(iterations * run_ms / ROUND_MS)))
        rounds = min(rounds, iterations)
        per_round = max(1, iterations // rounds)
        with Measurement(cores) as m:
            done, r = 0, 0
            while done < iterations:
                n = min(per_round, iterations - done)
                for contender in (contenders if r % 2 == 0 else contenders[::-1]):
                    quiesce(["self", str(proc.pid)])  # the last contender's pool has stopped spinning
                    contender(n)
                done, r = done + n, r + 1
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    for key, (_, bound, outputs) in ort_runs.items():
        if not np.allclose(bound[0], outputs[0], rtol=1e-5, atol=1e-6, equal_nan=True):
            raise RuntimeError(f"{workload['name']}: ORT's bound output differs from its plain run ({key})")
    out = {key: m.record(**stats(ms)) for key, ms in samples.items()}
    for key, idx in (("nnc_eager", 0), ("nnc_fused", 1)):
        out[key].update(kernels=ready["kernels"][idx], bytes_moved=ready["bytes_moved"][idx])
    out["nnc_speedup_median"] = out["nnc_eager"]["median_ms"] / out["nnc_fused"]["median_ms"]

    def paired(over, under):
        return float(np.median([a / b for a, b in zip(round_medians[over], round_medians[under])]))

    out["paired"] = {"rounds": len(round_medians["nnc_fused"]),
                     "ort_all_over_nnc_fused": paired("ort_all", "nnc_fused"),
                     "nnc_eager_over_nnc_fused": paired("nnc_eager", "nnc_fused")}
    out["nnc_command"] = " ".join(cmd)
    out["iterations"], out["rounds"] = iterations, len(round_medians["nnc_fused"])
    return out, reference


def run_torch(workload, iterations, warmup, threads, cores, reference):
    out_npy = os.path.join(os.path.dirname(workload["input_npy"]), "torch_bench_output.npy")
    spec = {"kind": workload["kind"], "name": workload["name"], "input_npy": workload["input_npy"],
            "params_npz": workload["params_npz"], "iterations": iterations, "warmup": warmup,
            "warmup_ms": WARMUP_MS, "threads": threads,
            "output_npy": out_npy}
    with Measurement(cores) as m:
        proc = subprocess.run([TORCH_PYTHON, TORCH_WORKER], input=json.dumps(spec), capture_output=True, text=True,
                              timeout=900)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-500:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    y = np.load(out_npy)
    # Only a timing of the same computation is worth comparing: check torch against ORT's output.
    diff = float(np.max(np.abs(y.astype(np.float64) - reference))) if y.shape == reference.shape else float("inf")
    return m.record(**stats(result["ms"]), threads=result["threads"], max_abs_diff_vs_ort=diff,
                    matches_ort=bool(diff <= 1e-3 + 1e-3 * float(np.max(np.abs(reference)))))


def thread_degradation(nnc, models_dir, iterations, warmup, cores):
    """Fused ResNet-18 with --threads=2, with and without a `yes > /dev/null` hog on one core."""
    path = os.path.join(models_dir, "model_resnet18", "model.onnx")
    pb = os.path.join(models_dir, "model_resnet18", "test_data_set_0", "input_0.pb")
    if not os.path.exists(path):
        return {"error": f"{path} not found"}
    workload = {"onnx": path, "inputs": {graph_inputs(onnx.load(path))[0]: (None, pb)}}
    runs = []
    # Baseline, hogged, baseline again: the second baseline shows how much the shared machine drifted.
    for hog in (False, True, False):
        proc = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if hog else None
        try:
            time.sleep(1.0 if hog else 0.0)  # let the hog get scheduled before timing starts
            r = run_nnc(nnc, workload, iterations, warmup, 2, cores)
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
        if "error" in r:
            return r
        runs.append({"hog": hog, "fused": r["nnc_fused"], "eager": r["nnc_eager"]})
    base = [r["fused"]["median_ms"] for r in runs if not r["hog"]]
    hogged = next(r["fused"]["median_ms"] for r in runs if r["hog"])
    ratio = hogged / (sum(base) / len(base))
    verdict = ("collapses (>3x)" if ratio > 3 else "degrades more than fair share (>2x)" if ratio > 2
               else "degrades gracefully (<=2x)")
    return {"threads": 2, "iterations": iterations, "warmup": warmup, "runs": runs, "fused_ratio": ratio,
            "verdict": verdict}


def compile_times(nnc, workloads, work_dir, repeats=3):
    """`nnc MODEL.onnx -o MODEL.so` (-O2, the AOT path users run) per workload, `repeats` times: wall and
    CPU seconds (the compile uses every core for its LLVM parts). Run after all timing, so its load
    touches no measurement."""
    times = {}
    for w in workloads:
        out = os.path.join(work_dir, f"{w['name']}.compile.so")
        walls, cpus = [], []
        for _ in range(repeats):
            before = os.times()
            t0 = time.perf_counter()
            proc = subprocess.run([nnc, w["onnx"], "-o", out], capture_output=True, text=True)
            wall = time.perf_counter() - t0
            after = os.times()
            if proc.returncode != 0:
                times[w["name"]] = {"error": (proc.stderr or "").strip()[-500:]}
                break
            walls.append(wall)
            cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
        else:
            times[w["name"]] = {"wall_s": sorted(walls), "cpu_s": sorted(cpus), "load_after": load_average()}
        if os.path.exists(out):
            os.remove(out)
    return times


# --- report ---------------------------------------------------------------------------------------

def cell(m):
    if m is None:
        return "n/a"
    if "error" in m:
        return "error"
    mark = ("†" if m.get("loaded") else "") + ("‡" if m.get("stolen") else "")
    return f"{m['median_ms']:.3f} ({m['p10_ms']:.3f}–{m['p90_ms']:.3f}){mark}"


def markdown(result):
    info, rows = result["machine"], result["workloads"]
    measured = [m for w in rows for m in w["measurements"].values() if isinstance(m, dict)]
    loaded = [m for m in measured if m.get("loaded")]
    stolen = [m for m in measured if m.get("stolen")]
    total = sum(1 for m in measured if "median_ms" in m)
    lines = [f"# nnc CPU benchmarks, {result['date']}", ""]
    artifact = ("nnc runs in-process (its JIT)" if result.get("nnc_artifact") == "jit"
                else "nnc runs the model.so files it wrote, loaded through the C ABI")
    if stolen:
        lines += [f"**Steal time:** during {len(stolen)} measurement(s) (marked ‡) the hypervisor gave more than "
                  f"{STEAL_PERCENT_LIMIT}% of one vCPU's time to other guests (the worst: "
                  f"{max(m['steal_pct'] for m in stolen)}%); a thread on that vCPU stalled, so those times "
                  "are inflated, at 2 threads most.", ""]
    if loaded:
        lines += [f"**Preliminary, machine loaded:** the 1-minute load average was above {LOAD_PER_CORE_LIMIT} "
                  "per core "
                  f"({LOAD_PER_CORE_LIMIT * info['cores']:.1f} on {info['cores']} cores) at the start of "
                  f"{len(loaded)} of {total} measurements (marked †). Other processes shared the cores, so "
                  "absolute times are inflated and noisy; ratios measured back to back are more meaningful.", ""]
    lines += [
        f"Machine: {info['cpu_model']}, {info['cores']} cores (nproc), SIMD {'/'.join(info['simd']) or 'none'}; "
        f"{info['os']}. Load average (1/5/15 min) {fmt_load(result['load_start'])} at start, "
        f"{fmt_load(result['load_end'])} at end.",
        f"Software: nnc {info['nnc_commit']} ({info['nnc_build_type']} build), "
        f"ONNX Runtime {info['onnxruntime']} (CPUExecutionProvider), "
        f"PyTorch {info['torch'] or 'not available'} eager (1.13 predates torch.compile, so no compiled-PyTorch "
        f"column), numpy {info['numpy']}.",
        f"Method: {result['threads']} threads for every runtime; {result['warmup']} warm-up run(s), and "
        f"{result.get('warmup_ms', 0)} ms of them at least, then "
        f"{result['iterations']} timed runs ({result['slow_iterations']} for the slow models)"
        + (f", raised to last at least {result['min_seconds']:g} s per contender" if result.get("min_seconds") else "")
        + "; identical input tensors; nnc (eager, fused) and ORT (all, no opts) interleaved in "
        + (f"rounds of about {result['round_ms']} ms (at least {result['rounds']}; counts per workload below)"
           if result.get("min_seconds") else f"{result.get('rounds', 5)} rounds")
        + (f", all pinned to CPU {', '.join(map(str, result['pinned_cpus']))}" if result.get("pinned_cpus") else "")
        + f", PyTorch after them. Cells are median ms (p10–p90). nnc times exclude compilation; {artifact}. "
        "`fused vs eager` = nnc eager median / nnc fused median; `ORT / nnc fused` > 1 means nnc fused is faster "
        "than ORT with all graph optimisations; in parentheses, each ratio paired round by round (the median over "
        "the rounds of the two contenders' round medians), which a change of the machine's speed between rounds "
        "moves less.", "",
        f"| workload | nnc eager (-O0) | nnc fused (-O2) | fused vs eager | ORT (all opts) | ORT (no opts) "
        f"| PyTorch eager, {result['threads']} threads / 1 thread | ORT / nnc fused | kernels eager→fused "
        "| load1 at start |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for w in rows:
        ms = w["measurements"]
        e, f, oa, on, pt, pt1 = (ms.get(k) for k in ("nnc_eager", "nnc_fused", "ort_all", "ort_none", "torch",
                                                     "torch_1t"))
        ok = lambda m: m is not None and "median_ms" in m  # noqa: E731
        pair = w.get("paired") or {}
        speed = f"{e['median_ms'] / f['median_ms']:.2f}x" if ok(e) and ok(f) else "n/a"
        vs_ort = f"{oa['median_ms'] / f['median_ms']:.2f}" if ok(oa) and ok(f) else "n/a"
        if "nnc_eager_over_nnc_fused" in pair:
            speed += f" ({pair['nnc_eager_over_nnc_fused']:.2f}x)"
        if "ort_all_over_nnc_fused" in pair:
            vs_ort += f" ({pair['ort_all_over_nnc_fused']:.2f})"
        kernels = f"{e['kernels']}→{f['kernels']}" if ok(e) and ok(f) else "n/a"
        loads = [m["load_before"][0] for m in ms.values() if isinstance(m, dict) and "load_before" in m]
        load = f"{min(loads):.2f}–{max(loads):.2f}" if loads else "n/a"
        torch_cell = " / ".join(cell(m) + ("" if not ok(m) or m.get("matches_ort") else " (output differs from ORT!)")
                                for m in (pt, pt1))
        lines.append(f"| {w['name']} | {cell(e)} | {cell(f)} | {speed} | {cell(oa)} | {cell(on)} | {torch_cell} "
                     f"| {vs_ort} | {kernels} | {load} |")
    lines.append("")
    summary = geomeans(rows)
    if summary:
        lines += [summary, ""]
    for w in rows:
        timed = f" {w['iterations']} timed runs per contender in {w['rounds']} rounds." if w.get("rounds") else ""
        lines.append(f"- `{w['name']}`: {w['description']}.{timed}")
        for key, m in w["measurements"].items():
            if isinstance(m, dict) and "error" in m:
                lines.append(f"  - {key} failed: `{m['error'].splitlines()[-1] if m['error'] else 'no message'}`")
    lines.append("- PyTorch column: the GELU chain and MatMul+bias+ReLU run as the same op sequence as the ONNX "
                 "graph (one eager kernel per op); softmax and layernorm use torch.softmax / F.layer_norm, which are "
                 "single native kernels. Real models are the tests/models/export_torch.py modules with the exporter's "
                 "weights; every PyTorch output was checked against ORT's. "
                 f"This PyTorch's BLAS is {info.get('torch_blas', 'unknown')}"
                 + (" (netlib reference BLAS: unblocked and single-threaded, so PyTorch's Linear/MatMul times "
                    "here say little about PyTorch)" if "/blas/libblas.so" in info.get("torch_blas", "") else "")
                 + "; its convolutions go through oneDNN.")
    compiles = result.get("compile_times")
    if compiles:
        lines += ["", "## Compile time: `nnc MODEL.onnx -o MODEL.so` (-O2)", "",
                  "Each model compiled three times after all timing (wall seconds, sorted; CPU seconds of the "
                  "compiler and the linker it runs).", "",
                  "| workload | wall s | CPU s |", "|---|---|---|"]
        for name, c in compiles.items():
            if "error" in c:
                lines.append(f"| {name} | error | |")
            else:
                lines.append(f"| {name} | {' / '.join(f'{v:.2f}' for v in c['wall_s'])} "
                             f"| {' / '.join(f'{v:.2f}' for v in c['cpu_s'])} |")
    deg = result.get("thread_degradation")
    if deg:
        lines += ["", "## Thread-pool degradation: fused ResNet-18, --threads=2, one core hogged by `yes > /dev/null`",
                  ""]
        if "error" in deg:
            lines.append(f"Not measured: {deg['error']}")
        else:
            lines += ["| run | nnc fused median (p10–p90) ms | nnc eager median ms | load1 at start |",
                      "|---|---|---|---|"]
            for i, r in enumerate(deg["runs"]):
                name = "with `yes` hog" if r["hog"] else ("baseline" if i == 0 else "baseline again")
                lines.append(f"| {name} | {cell(r['fused'])} | {r['eager']['median_ms']:.3f} "
                             f"| {r['fused']['load_before'][0]:.2f} |")
            lines += ["", f"Fused slowdown with the hog: **{deg['fused_ratio']:.2f}x** (hogged median / mean of "
                      "the two "
                      f"baseline medians), {deg['iterations']} iterations each: {deg['verdict']}. With 2 pool threads "
                      "and a hog on 2 cores, a perfectly balanced dynamic schedule would see about 1.5x (3 runnable "
                      "threads share 2 cores); a static split that waits for the slowest thread about 2x."]
    return "\n".join(lines) + "\n"


def geomeans(rows):
    """One line: the geometric means of ORT / nnc fused and of fused vs eager, and the lowest of each,
    from the medians and from the paired ratios."""
    def ratios(over, under, paired_key):
        plain, paired = {}, {}
        for w in rows:
            m = w["measurements"]
            a, b = m.get(over), m.get(under)
            if a and b and "median_ms" in a and "median_ms" in b:
                plain[w["name"]] = a["median_ms"] / b["median_ms"]
                if paired_key in (w.get("paired") or {}):
                    paired[w["name"]] = w["paired"][paired_key]
        return plain, paired

    def describe(label, values):
        if not values:
            return ""
        g = math.exp(sum(math.log(v) for v in values.values()) / len(values))
        low = min(values, key=values.get)
        return f"{label} {g:.2f} (lowest {values[low]:.2f}, {low})"

    parts = []
    for title, (plain, paired) in (("ORT / nnc fused", ratios("ort_all", "nnc_fused", "ort_all_over_nnc_fused")),
                                   ("fused vs eager", ratios("nnc_eager", "nnc_fused", "nnc_eager_over_nnc_fused"))):
        got = [d for d in (describe("medians", plain), describe("paired", paired)) if d]
        if got:
            parts.append(f"{title}, geometric mean over {len(plain)} workloads: " + "; ".join(got))
    return ("**" + ".** **".join(parts) + ".**") if parts else ""


def fmt_load(load):
    return "/".join(f"{v:.2f}" for v in load)


# --- main -----------------------------------------------------------------------------------------

def main():
    cores = os.cpu_count() or 1
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nnc", default=os.path.join(REPO, "build-bench", "tools", "nnc"), help="nnc binary (Release)")
    p.add_argument("--models", default=os.path.join(REPO, "build-bench", "models"),
                   help="directory of <name>/model.onnx from tests/models/make_models.py")
    p.add_argument("--work", default=os.path.join(REPO, "build-bench", "bench-work"), help="scratch directory")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"), help="where <date>.json/.md go")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5,
                   help="interleaved rounds per workload (iterations / rounds timed runs per contender each)")
    p.add_argument("--slow-iterations", type=int, default=10, help="iterations for ResNet-18 and MobileNetV2")
    p.add_argument("--min-seconds", type=float, default=2.0,
                   help="time each contender for at least this long per workload, in rounds of about "
                        f"{ROUND_MS} ms (raises --iterations and --rounds; 0: exactly those)")
    p.add_argument("--threads", type=int, default=cores)
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--skip-degradation", action="store_true")
    p.add_argument("--skip-compile-times", action="store_true", help="no compile-time table")
    p.add_argument("--no-pin", action="store_true",
                   help="with fewer --threads than cores, do not pin every contender to the same cores")
    p.add_argument("--nnc-jit", action="store_true",
                   help="time nnc's in-process JIT instead of the model.so files `nnc MODEL.onnx -o MODEL.so` writes")
    p.add_argument("--date", default=datetime.date.today().isoformat(), help="result file name stem")
    args = p.parse_args()
    global NNC_ARTIFACT_FLAGS
    NNC_ARTIFACT_FLAGS = [] if args.nnc_jit else ["--aot"]
    if not os.access(args.nnc, os.X_OK):
        sys.exit(f"run_benchmarks: {args.nnc} is not an executable nnc; build it with\n  cmake -S {REPO} -B "
                 f"{REPO}/build-bench -DCMAKE_BUILD_TYPE=Release && cmake --build {REPO}/build-bench --target nnc")
    only = {s for s in args.only.split(",") if s}
    torch_ver = None if args.skip_torch else torch_version()
    cpu_model, simd = cpu_info()
    result = {
        "date": args.date, "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": cores, "cpu_model": cpu_model, "simd": simd, "os": f"{platform.system()} "
                    f"{platform.release()}", "nnc_commit": git_commit(),
                    "nnc_build_type": nnc_build_type(args.nnc), "onnxruntime": ort.__version__,
                    "torch": torch_ver, "torch_blas": blas_library(), "numpy": np.__version__,
                    "python": platform.python_version()},
        "nnc_artifact": "jit" if args.nnc_jit else "so",
        "threads": args.threads, "iterations": args.iterations, "warmup": args.warmup, "warmup_ms": WARMUP_MS,
        "slow_iterations": args.slow_iterations, "rounds": args.rounds, "min_seconds": args.min_seconds,
        "round_ms": ROUND_MS, "load_per_core_limit": LOAD_PER_CORE_LIMIT,
        "load_start": load_average(), "workloads": [],
    }
    start = time.time()
    workloads = prepare_workloads(args.models, args.work, only)
    all_cpus = sorted(os.sched_getaffinity(0))
    pinned = all_cpus[:args.threads] if args.threads < len(all_cpus) and not args.no_pin else None
    result["pinned_cpus"] = pinned
    if pinned:  # inherited by nnc bench, ORT's threads and the PyTorch worker
        os.sched_setaffinity(0, pinned)
    for w in workloads:
        iters = args.slow_iterations if w["name"] in SLOW_WORKLOADS else args.iterations
        ms = {}
        print(f"[{time.time() - start:6.1f}s] {w['name']} ({iters} iterations, load {fmt_load(load_average())})",
              flush=True)
        nnc, reference = run_interleaved(args.nnc, w, iters, args.warmup, args.threads, cores, args.rounds,
                                         args.min_seconds)
        if "error" in nnc:
            sys.exit(f"run_benchmarks: {w['name']}: nnc bench failed: {nnc['error']}\n  {nnc['command']}")
        for key in ("nnc_eager", "nnc_fused", "ort_all", "ort_none"):
            ms[key] = nnc[key]
        timed = nnc.get("iterations", iters)  # raised by --min-seconds
        if torch_ver:
            ms["torch"] = run_torch(w, timed, args.warmup, args.threads, cores, reference.astype(np.float64))
            # PyTorch's OpenMP pool spin-waits at barriers; on an oversubscribed machine its multi-threaded
            # time can collapse, so a single-thread run shows what the kernels themselves cost.
            if args.threads != 1:
                ms["torch_1t"] = run_torch(w, timed, args.warmup, 1, cores, reference.astype(np.float64))
        for key, m in ms.items():
            print(f"    {key:10s} {cell(m)}" + (f"  {m['error']}" if "error" in m else ""), flush=True)
        result["workloads"].append({"name": w["name"], "kind": w["kind"], "description": w["description"],
                                    "iterations": timed, "rounds": nnc.get("rounds"),
                                    "measurements": ms, "paired": nnc.get("paired"),
                                    "nnc_command": nnc.get("nnc_command") or nnc.get("command")})
    if pinned:
        os.sched_setaffinity(0, all_cpus)  # the hog test and the compile times use the whole machine
    if not args.skip_degradation and (not only or "model_resnet18" in only):
        print(f"[{time.time() - start:6.1f}s] thread degradation (ResNet-18, --threads=2, yes hog)", flush=True)
        result["thread_degradation"] = thread_degradation(args.nnc, args.models, args.slow_iterations, args.warmup,
                                                          cores)
    if not args.skip_compile_times:
        print(f"[{time.time() - start:6.1f}s] compile times (nnc MODEL.onnx -o MODEL.so, 3 each)", flush=True)
        result["compile_times"] = compile_times(args.nnc, [w for w in workloads if w["kind"] == "model"], args.work)
    result["load_end"] = load_average()
    result["total_wall_s"] = round(time.time() - start, 1)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.date}.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(os.path.join(args.out, f"{args.date}.md"), "w") as f:
        f.write(md)
    print(md)
    print(f"wrote {args.out}/{args.date}.json and .md in {result['total_wall_s']}s")


if __name__ == "__main__":
    main()
