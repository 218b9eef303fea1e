#!/usr/bin/env python3
"""Serving benchmark: a model.so behind Triton Inference Server (`python -m nnc.serve`) against ONNX Runtime
behind the same server (the same pytriton Python backend, an onnxruntime.InferenceSession in its infer
function), at client concurrency 1, 8 and 32; plus each engine's in-process latency (no server), which
bounds what serving can reach. Triton's own ONNX Runtime backend is not on PyPI (pytriton ships only the
Python backend), so ORT's path here has the same Python hop as nnc's.

Runs with the Python of the serving test's venv (tests/serving/test_serving.sh makes it: nvidia-pytriton,
tritonclient) with onnxruntime added:

    build/serving/venv/bin/pip install onnxruntime
    NNC_EXECUTABLE=build/tools/nnc PYTHONPATH=python build/serving/venv/bin/python bench/serving.py \\
        [--models build/models] [--names model_mobilenetv2,model_resnet18] [--concurrency 1,8,32] \\
        [--round-s 1.5] [--rounds 6] [--threads 2]

Each model (tests/models' exports, batch 1) is compiled with nnc -O2 and served at its exact shapes by one
instance of each engine with --threads threads, both servers up at once on loopback ports. At each
concurrency C, C client threads (gRPC, one client each, in this process: they share the machine's cores with
the servers, alike for both) send the model's input back to back; a round lasts --round-s per engine, the
engines alternate in rotating order, --rounds rounds. Reported per model and C: requests/s (median over
rounds, p10-p90), latency p50/p90/p99 over every request, and nnc/ORT throughput paired per round. Both
servers' answers to the same input are compared first (a mismatch aborts). Load (/proc/loadavg) is recorded.
Writes bench/results/serving-<date>.json and .md.
"""
import argparse
import datetime
import os
import platform
import signal
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "serving"))
import rounds  # noqa: E402
from serving_test import free_ports  # noqa: E402  (the serving test's loopback ports)

ORT_SERVER = r'''
import sys, numpy as np, onnxruntime as ort
sys.path.insert(0, sys.argv[1])
from nnc.serve import _python_libdir_first
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
model, name, http, grpc, metrics, threads = sys.argv[2], sys.argv[3], *map(int, sys.argv[4:8])
options = ort.SessionOptions()
options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
ins, outs = session.get_inputs(), session.get_outputs()
def infer(requests):
    return [dict(zip([o.name for o in outs], session.run(None, {i.name: r[i.name] for i in ins}))) for r in requests]
_python_libdir_first()
with Triton(config=TritonConfig(http_address="127.0.0.1", grpc_address="127.0.0.1", http_port=http, grpc_port=grpc,
                                metrics_port=metrics, exit_timeout_secs=10)) as triton:
    triton.bind(model_name=name, infer_func=infer,
                inputs=[Tensor(name=i.name, dtype=np.float32, shape=tuple(i.shape)) for i in ins],
                outputs=[Tensor(name=o.name, dtype=np.float32, shape=tuple(o.shape)) for o in outs],
                config=ModelConfig(batching=False, max_batch_size=0))
    triton.run()
    print("ort serve: ready", flush=True)
    triton.serve()
'''


class Server:
    def __init__(self, command, name, log_path, ready_word):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.process.poll() is not None:
                sys.exit("serving: %s exited before serving; see %s" % (name, log_path))
            if ready_word in open(log_path).read():
                return
            time.sleep(0.5)
        sys.exit("serving: %s was not serving after 180 s; see %s" % (name, log_path))

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


def start_servers(nnc_so, onnx_path, work, threads, src):
    servers = {}
    ports = {}
    for engine in ("nnc", "ort"):
        http, grpc, metrics = free_ports(3)
        ports[engine] = grpc
        log = os.path.join(work, "%s-%s.log" % (os.path.basename(work), engine))
        if engine == "nnc":
            command = [sys.executable, "-m", "nnc.serve", nnc_so, "--name", "m", "--address", "127.0.0.1",
                       "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                       "--instances", "1", "--threads", str(threads), "--max-batch", "0"]
            servers[engine] = Server(command, engine, log, "nnc serve: model")
        else:
            command = [sys.executable, "-c", ORT_SERVER, os.path.join(src, "python"), onnx_path, "m", str(http),
                       str(grpc), str(metrics), str(threads)]
            servers[engine] = Server(command, engine, log, "ort serve: ready")
    return servers, ports


def infer_inputs(g, inputs):
    """tritonclient.grpc InferInputs holding `inputs` ({name: f32 array})."""
    tensors = []
    for name, array in inputs.items():
        t = g.InferInput(name, list(array.shape), "FP32")
        t.set_data_from_numpy(array)
        tensors.append(t)
    return tensors


def client_round(port, inputs, output, concurrency, seconds):
    """(requests/s, [latency ms]) of `concurrency` gRPC clients sending back to back for `seconds`."""
    import tritonclient.grpc as g

    latencies, lock, stop_at = [], threading.Lock(), [0.0]
    barrier = threading.Barrier(concurrency + 1)

    def worker():
        client = g.InferenceServerClient("127.0.0.1:%d" % port)
        tensors = infer_inputs(g, inputs)
        client.infer("m", tensors)  # connected and warm before the round starts
        mine = []
        barrier.wait()
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at[0]:
                break
            client.infer("m", tensors, outputs=[g.InferRequestedOutput(output)])
            mine.append((time.perf_counter() - t0) * 1e3)
        with lock:
            latencies.extend(mine)
        client.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + 1e9
    barrier.wait()
    start = time.perf_counter()
    stop_at[0] = start + seconds
    for t in threads:
        t.join()
    return len(latencies) / (time.perf_counter() - start), latencies


def answer(port, inputs, output):
    import tritonclient.grpc as g

    client = g.InferenceServerClient("127.0.0.1:%d" % port)
    result = client.infer("m", infer_inputs(g, inputs)).as_numpy(output)
    client.close()
    return result


def in_process(nnc_so, onnx_path, inputs, threads, seconds):
    import onnxruntime as ort

    import nnc

    model = nnc.load(nnc_so, threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    measured = rounds.measure({"nnc": lambda: model.run(inputs), "ort": lambda: session.run(None, inputs)}, seconds)
    model.close()
    return {k: {"median_ms": rounds.pct(v, 50), "p10_ms": rounds.pct(v, 10), "p90_ms": rounds.pct(v, 90)}
            for k, v in measured.items()}


def markdown(result):
    lines = ["# Serving: nnc vs ONNX Runtime behind Triton Inference Server (%s)" % result["date"][:10], "",
             "Machine: %s, %d cores; load at start %s; tritonserver via nvidia-pytriton %s, ORT %s, %d thread(s) "
             "per engine, one instance, exact shapes (batch 1). Client threads run on the same machine." %
             (result["cpu"], result["cores"], result["load_start"], result["pytriton"], result["ort"],
              result["threads"]), "",
             "| model | in-process nnc / ORT ms | C | nnc req/s (p10-p90) | ORT req/s (p10-p90) | nnc/ORT (p10-p90) |"
             " nnc p50/p90/p99 ms | ORT p50/p90/p99 ms |",
             "|---|---|---|---|---|---|---|---|"]
    for m in result["models"]:
        direct = "%.2f / %.2f" % (m["in_process"]["nnc"]["median_ms"], m["in_process"]["ort"]["median_ms"])
        for c in m["concurrency"]:
            n, o = c["nnc"], c["ort"]
            lines.append("| %s | %s | %d | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.2fx (%.2f-%.2f) | %.2f/%.2f/%.2f | "
                         "%.2f/%.2f/%.2f |" % (
                             m["name"], direct, c["concurrency"], n["rps"], n["rps_p10"], n["rps_p90"], o["rps"],
                             o["rps_p10"], o["rps_p90"], c["ratio"], c["ratio_p10"], c["ratio_p90"], n["p50"],
                             n["p90"], n["p99"], o["p50"], o["p90"], o["p99"]))
            direct = ""
    lines.append("")
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.dirname(here)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=os.path.join(src, "build", "models"))
    parser.add_argument("--names", default="model_mobilenetv2,model_resnet18")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--round-s", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="/tmp/nnc-serving-bench")
    parser.add_argument("--out", default=os.path.join(here, "results"))
    args = parser.parse_args()
    import importlib.metadata as md

    import onnxruntime as ort

    import nnc

    os.makedirs(args.work, exist_ok=True)
    load_start = open("/proc/loadavg").read().split()[:3]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    result = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": cpu, "cores": os.cpu_count(),
              "load_start": " ".join(load_start), "pytriton": md.version("nvidia-pytriton"), "ort": ort.__version__,
              "threads": args.threads, "round_s": args.round_s, "rounds": args.rounds, "models": []}
    levels = [int(c) for c in args.concurrency.split(",")]
    for name in args.names.split(","):
        onnx_path = os.path.join(args.models, name, "model.onnx")
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        nnc_so = os.path.join(work, "model.so")
        subprocess.run([nnc.executable(), onnx_path, "-O2", "-o", nnc_so], check=True)
        session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        inputs = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in session.get_inputs()}
        output = session.get_outputs()[0].name
        del session
        entry = {"name": name, "in_process": in_process(nnc_so, onnx_path, inputs, args.threads, 2.0),
                 "concurrency": []}
        servers, ports = start_servers(nnc_so, onnx_path, work, args.threads, src)
        try:
            a, b = answer(ports["nnc"], inputs, output), answer(ports["ort"], inputs, output)
            err = float(np.max(np.abs(a - b)) / max(1e-30, float(np.max(np.abs(b)))))
            if err > 1e-3:
                sys.exit("serving: %s: nnc's answer differs from ORT's by %g (relative to max |ORT|)" % (name, err))
            entry["max_rel_diff"] = err
            for c in levels:
                per = {"nnc": {"rps": [], "lat": []}, "ort": {"rps": [], "lat": []}}
                ratios = []
                for r in range(args.rounds):
                    order = ["nnc", "ort"] if r % 2 == 0 else ["ort", "nnc"]
                    got = {}
                    for engine in order:
                        got[engine] = client_round(ports[engine], inputs, output, c, args.round_s)
                        per[engine]["rps"].append(got[engine][0])
                        per[engine]["lat"].extend(got[engine][1])
                    ratios.append(got["nnc"][0] / got["ort"][0])
                row = {"concurrency": c, "ratio": rounds.pct(ratios, 50), "ratio_p10": rounds.pct(ratios, 10),
                       "ratio_p90": rounds.pct(ratios, 90), "load": open("/proc/loadavg").read().split()[0]}
                for engine, d in per.items():
                    row[engine] = {"rps": rounds.pct(d["rps"], 50), "rps_p10": rounds.pct(d["rps"], 10),
                                   "rps_p90": rounds.pct(d["rps"], 90), "p50": rounds.pct(d["lat"], 50),
                                   "p90": rounds.pct(d["lat"], 90), "p99": rounds.pct(d["lat"], 99),
                                   "requests": len(d["lat"])}
                entry["concurrency"].append(row)
                print("serving: %s C=%d: nnc %.0f req/s, ORT %.0f req/s, nnc/ORT %.2fx" %
                      (name, c, row["nnc"]["rps"], row["ort"]["rps"], row["ratio"]), flush=True)
        finally:
            for s in servers.values():
                s.stop()
        result["models"].append(entry)
    rounds.write(result, args.out, "serving", markdown)


if __name__ == "__main__":
    main()
