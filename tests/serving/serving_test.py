#!/usr/bin/env python3
"""ctest serving: compiled models served by `python -m nnc.serve` (the real tritonserver, through
nvidia-pytriton), asked by tritonclient over HTTP and gRPC (tests/serving/test_serving.sh makes the venv
this runs in). For each server:
  - concurrent requests (16 client threads, HTTP and gRPC alternating, 1 to max-batch rows each) are all
    answered, each answer checked against a direct run of the same model.so in this process (nnc.load), and
    for the real model also against ONNX Runtime's outputs (its test data);
  - where the model is served with dynamic batching, Triton's statistics show requests gathered into fewer
    model runs than requests;
  - bad requests (an unknown input, a missing one, a wrong dtype, a wrong shape, too many rows) are answered
    with Triton's error naming the problem, a run nnc's runtime refuses (an index out of range) with the
    runtime's diagnostic, and the server still answers afterwards;
  - SIGTERM stops it (tritonserver included) within 60 s.
Usage: serving_test.py WORK_DIR   (batched.so and exact.so from make_models.py; real.so with real_input.npy and
real_output.npy, ONNX Runtime's, where the real models were generated)
Prints "serving: ..." lines; exits 1 on the first failure.
"""
import concurrent.futures
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

import numpy as np
import tritonclient.grpc as grpc_client
import tritonclient.http as http_client
from tritonclient.utils import InferenceServerException

import nnc

TRITON_DTYPES = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64", np.dtype(np.int64): "INT64"}


def fail(message):
    print("serving: FAILED: " + message, flush=True)
    sys.exit(1)


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class Server:
    """`python -m nnc.serve MODEL_SO ARGS` on loopback ports, until stop()."""

    def __init__(self, model_so, name, args, log_path):
        self.name = name
        self.http, self.grpc, self.metrics = free_ports(3)
        self.log_path = log_path
        self.log = open(log_path, "w")
        command = [sys.executable, "-m", "nnc.serve", model_so, "--name", name, "--address", "127.0.0.1",
                   "--http-port", str(self.http), "--grpc-port", str(self.grpc), "--metrics-port",
                   str(self.metrics)] + args
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.process.poll() is not None:
                fail("nnc serve exited with status %d before serving:\n%s" % (self.process.returncode, self.tail()))
            with open(log_path) as f:
                for line in f:
                    if line.startswith("nnc serve: model"):
                        self.banner = line.strip()
                        print("serving: " + self.banner, flush=True)
                        return
            time.sleep(0.5)
        self.process.kill()
        fail("nnc serve was not serving after 180 s:\n" + self.tail())

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        """Stops the server; after a failure without failing again (the first message stands)."""
        if kind is not None and not issubclass(kind, SystemExit):
            traceback.print_exception(kind, value, trace)
        self.stop(check=kind is None)
        return False

    def tail(self):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-30:])

    def stop(self, check=True):
        """SIGTERM, as a service manager stops it; with `check`, it and its tritonserver must be gone within 60 s."""
        close_clients()
        start = time.time()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            if check:
                fail("nnc serve did not stop within 60 s of SIGTERM:\n" + self.tail())
        # tritonserver and its backend stubs (in the server's session) must go with it.
        leftover = []
        while time.time() < start + 60:
            leftover = subprocess.run(["pgrep", "-s", str(self.process.pid)], capture_output=True, text=True).stdout.split()
            if not leftover:
                break
            time.sleep(0.5)
        if leftover:
            os.killpg(self.process.pid, signal.SIGKILL)
            if check:
                fail("processes of the server's session outlived it by 60 s: %s" % leftover)
        print("serving: %s stopped in %.1f s (exit %d)" % (self.name, time.time() - start, self.process.returncode),
              flush=True)


def infer(protocol, server, inputs, outputs):
    """One request: {name: array} -> {name: array}, over a client of this thread."""
    module = http_client if protocol == "http" else grpc_client
    key = "client_%s_%d" % (protocol, server.http)
    local = infer.local
    if not hasattr(local, key):
        url = "127.0.0.1:%d" % (server.http if protocol == "http" else server.grpc)
        setattr(local, key, module.InferenceServerClient(url))
        _clients.append(getattr(local, key))
    client = getattr(local, key)
    tensors = []
    for name, array in inputs.items():
        t = module.InferInput(name, list(array.shape), TRITON_DTYPES[array.dtype])
        t.set_data_from_numpy(array)
        tensors.append(t)
    result = client.infer(server.name, tensors, outputs=[module.InferRequestedOutput(o) for o in outputs])
    return {o: result.as_numpy(o) for o in outputs}


infer.local = threading.local()
_clients = []  # every client made, to close before the server stops (an open HTTP connection holds its exit)


def close_clients():
    while _clients:
        _clients.pop().close()


def check_close(got, want, what, rtol=1e-5, atol=1e-5):
    if got is None or got.shape != want.shape or got.dtype != want.dtype:
        fail("%s: got %s, want %s %s" % (what, None if got is None else (got.dtype, got.shape), want.dtype, want.shape))
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        fail("%s: max abs difference %g" % (what, float(np.max(np.abs(got.astype(np.float64) - want)))))


def concurrent_requests(server, make_request, reference, count, outputs):
    """`count` requests from 16 threads, HTTP and gRPC alternating; each answer against reference(request)."""
    def one(i):
        protocol = "http" if i % 2 == 0 else "grpc"
        request = make_request(i)
        answer = infer(protocol, server, request, outputs)
        want = reference(request)
        for name in outputs:
            check_close(answer[name], want[name], "%s request %d (%s) output %s" % (server.name, i, protocol, name))
        return protocol, next(iter(request.values())).shape[0]

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        done = list(pool.map(one, range(count)))
    rows = sum(r for _, r in done)
    print("serving: %s: %d concurrent requests (%d HTTP, %d gRPC, %d rows) answered as a direct run does" %
          (server.name, count, sum(p == "http" for p, _ in done), sum(p == "grpc" for p, _ in done), rows), flush=True)
    return rows


def statistics(server):
    """(inference_count, execution_count) of the model from the server's Prometheus metrics (rows answered,
    model runs; pytriton restricts the statistics API to its own token)."""
    import urllib.request

    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % server.metrics, timeout=10).read().decode()
    counts = {}
    for line in text.splitlines():
        for metric in ("nv_inference_count", "nv_inference_exec_count"):
            if line.startswith(metric + "{") and 'model="%s"' % server.name in line:
                counts[metric] = int(float(line.rsplit(" ", 1)[1]))
    if len(counts) != 2:
        fail("the server's metrics have no inference counts for %s" % server.name)
    return counts["nv_inference_count"], counts["nv_inference_exec_count"]


def expect_error(server, protocol, inputs, outputs, words, what):
    try:
        infer(protocol, server, inputs, outputs)
    except InferenceServerException as e:
        message = str(e)
        missing = [w for w in words if w not in message]
        if missing:
            fail("%s (%s): the error does not say %s: %s" % (what, protocol, missing, message))
        print("serving: %s: %s (%s) refused: %s" % (server.name, what, protocol, message.splitlines()[0][:160]),
              flush=True)
        return
    fail("%s (%s) was answered, not refused" % (what, protocol))


def direct_reference(model_so):
    """reference(request) -> outputs of a direct run, the request's rows run in the model's batches."""
    model = nnc.load(model_so, threads=1)
    lock = threading.Lock()
    batch = model.inputs[0].shape[0]

    def reference(request):
        rows = next(iter(request.values())).shape[0]
        results = []
        with lock:
            for start in range(0, rows, batch):
                feed = {}
                for info in model.inputs:
                    chunk = request[info.name][start:start + batch]
                    pad = batch - chunk.shape[0]
                    feed[info.name] = np.concatenate([chunk, np.zeros((pad,) + chunk.shape[1:], chunk.dtype)]) if pad else chunk
                results.append(model.run(feed))
        return {o.name: np.concatenate([r[k] for r in results])[:rows] for k, o in enumerate(model.outputs)}

    return model, reference


def test_batched(work):
    model_so = os.path.join(work, "batched.so")
    with Server(model_so, "batched", ["--max-batch", "8", "--instances", "2", "--max-queue-delay-us", "20000"],
                os.path.join(work, "batched.log")) as server:
        if "dynamic batching up to 8 rows, run in batches of 4" not in server.banner:
            fail("the batched model is not served with dynamic batching: " + server.banner)
        client = http_client.InferenceServerClient("127.0.0.1:%d" % server.http)
        config = client.get_model_config("batched")
        client.close()
        got = (config["max_batch_size"], [(i["name"], i["data_type"], i["dims"]) for i in config["input"]],
               [(o["name"], o["data_type"], o["dims"]) for o in config["output"]])
        want = (8, [("x", "TYPE_FP32", [16]), ("bias", "TYPE_FP32", [8])],
                [("logits", "TYPE_FP32", [8]), ("probs", "TYPE_FP32", [8])])
        if got != want:
            fail("model config %s, want %s" % (got, want))
        _, reference = direct_reference(model_so)
        rng = random.Random(1)
        sizes = [rng.randint(1, 8) for _ in range(96)]

        def make_request(i):
            g = np.random.default_rng(i)
            n = sizes[i]
            return {"x": g.standard_normal((n, 16)).astype(np.float32), "bias": g.standard_normal((n, 8)).astype(np.float32)}

        inferences0, executions0 = statistics(server)
        rows = concurrent_requests(server, make_request, reference, len(sizes), ["logits", "probs"])
        inferences, executions = statistics(server)
        inferences -= inferences0
        executions -= executions0
        if inferences != rows:
            fail("Triton counted %d inferences (rows) for %d rows sent" % (inferences, rows))
        if executions >= len(sizes):
            fail("no request was batched with another: %d model runs for %d requests" % (executions, len(sizes)))
        print("serving: batched: %d requests ran as %d gathered batches (dynamic batching)" % (len(sizes), executions),
              flush=True)

        x, bias = np.zeros((2, 16), np.float32), np.zeros((2, 8), np.float32)
        for protocol in ("http", "grpc"):
            expect_error(server, protocol, {"input": x, "bias": bias}, ["logits"], ["input"], "an unknown input")
            expect_error(server, protocol, {"x": x}, ["logits"], ["bias"], "a missing input")
            expect_error(server, protocol, {"x": x.astype(np.float64), "bias": bias}, ["logits"], ["FP64", "FP32"],
                         "a wrong dtype")
            expect_error(server, protocol, {"x": np.zeros((2, 15), np.float32), "bias": bias}, ["logits"], ["shape"],
                         "a wrong shape")
            expect_error(server, protocol, {"x": np.zeros((9, 16), np.float32), "bias": np.zeros((9, 8), np.float32)},
                         ["logits"], ["batch-size", "8"], "too many rows")
            expect_error(server, protocol, {"x": x, "bias": bias}, ["nonesuch"], ["nonesuch"], "an unknown output")
        # Still serving, and right.
        request = make_request(0)
        check_close(infer("grpc", server, request, ["probs"])["probs"], reference(request)["probs"],
                    "batched after the bad requests")


def test_exact(work):
    model_so = os.path.join(work, "exact.so")
    with Server(model_so, "exact", [], os.path.join(work, "exact.log")) as server:
        if "exact shapes, no batching" not in server.banner:
            fail("the exact-shape model is not served at its exact shapes: " + server.banner)
        model = nnc.load(model_so, threads=1)
        lock = threading.Lock()

        def reference(request):
            with lock:
                total, scaled = model.run(request)
            return {"total": total, "scaled": scaled}

        def make_request(i):
            g = np.random.default_rng(100 + i)
            return {"a": g.standard_normal((3, 5)).astype(np.float32), "b": g.standard_normal((5,)).astype(np.float32)}

        concurrent_requests(server, make_request, reference, 32, ["total", "scaled"])
        a, b = np.zeros((3, 5), np.float32), np.zeros((5,), np.float32)
        for protocol in ("http", "grpc"):
            expect_error(server, protocol, {"a": np.zeros((1, 3, 5), np.float32), "b": b}, ["total"], ["shape"],
                         "a batch dim the model does not have")
            expect_error(server, protocol, {"a": a, "b": b.astype(np.int64)}, ["total"], ["INT64", "FP32"],
                         "a wrong dtype")
        request = make_request(0)
        check_close(infer("http", server, request, ["total"])["total"], reference(request)["total"],
                    "exact after the bad requests")


def test_run_error(work):
    """A request Triton accepts but nnc's runtime refuses (a Gather index out of range) is answered with the
    runtime's diagnostic, and the server keeps serving."""
    model_so = os.path.join(work, "gather.so")
    with Server(model_so, "gather", [], os.path.join(work, "gather.log")) as server:
        table = np.arange(20, dtype=np.float32).reshape(5, 4)
        for protocol in ("http", "grpc"):
            expect_error(server, protocol, {"ids": np.array([0, 1, 7], np.int64)}, ["rows"],
                         ["Gather", "must be in [-5, 4]", "the first is 7"], "an index out of range")
            ids = np.array([4, 0, -1], np.int64)
            check_close(infer(protocol, server, {"ids": ids}, ["rows"])["rows"], table[ids],
                        "gather after the failed run (%s)" % protocol, rtol=0, atol=0)


def test_real_model(work):
    """A real model at batch 1 (MobileNetV2 from tests/models), served with --max-batch 4: requests of
    its ONNX Runtime test input, answered as ORT answered it, and noisy ones as a direct run answers."""
    x = np.load(os.path.join(work, "real_input.npy"))
    y = np.load(os.path.join(work, "real_output.npy"))
    model_so = os.path.join(work, "real.so")
    with Server(model_so, "real", ["--max-batch", "4", "--max-queue-delay-us", "20000"],
                os.path.join(work, "real.log")) as server:
        model, reference = direct_reference(model_so)
        name, out = model.inputs[0].name, model.outputs[0].name
        scale = float(np.max(np.abs(y)))
        for protocol in ("http", "grpc"):
            answer = infer(protocol, server, {name: np.concatenate([x, x, x])}, [out])[out]
            for row in range(3):
                check_close(answer[row:row + 1], y, "real model row %d (%s) against ONNX Runtime" % (row, protocol),
                            rtol=1e-3, atol=1e-4 * scale)
        print("serving: real: 3-row requests of the test input answered as ONNX Runtime does (HTTP, gRPC)", flush=True)

        def make_request(i):
            g = np.random.default_rng(200 + i)
            n = 1 + i % 4
            return {name: (np.repeat(x, n, axis=0) + 0.1 * g.standard_normal((n,) + x.shape[1:])).astype(np.float32)}

        concurrent_requests(server, make_request, lambda r: reference(r), 16, [out])


def main():
    work = sys.argv[1]
    start = time.time()
    test_batched(work)
    test_exact(work)
    test_run_error(work)
    if os.path.exists(os.path.join(work, "real.so")):
        test_real_model(work)
    else:
        print("serving: no real model (tests/models/make_models.py not run): that part is skipped", flush=True)
    print("serving: all passed in %.0f s" % (time.time() - start), flush=True)


if __name__ == "__main__":
    main()
