"""Serves a compiled model.so under Triton Inference Server (the real `tritonserver`, run by
nvidia-pytriton), over HTTP/REST and gRPC with Triton's KServe v2 protocol:

    nnc serve model.so [--name NAME] [--http-port 8000] [--grpc-port 8001] [--metrics-port 8002]
                       [--address 0.0.0.0] [--max-batch N] [--instances K] [--threads T]
                       [--max-queue-delay-us US]
    python -m nnc.serve model.so ...                  (the same, without the console script)

or from Python: nnc.serve.serve("model.so", http_port=8000, ...). Needs `pip install .[serve]`
(nvidia-pytriton, which bundles tritonserver and its Python backend; Linux x86-64).

Inputs and outputs are named and typed from the model's C ABI (nnc_model_input_info). A model
whose inputs and outputs all share one leading dimension B (its batch), each with at least one
dimension more, is served with Triton's dynamic batcher: the leading dim is Triton's batch dim,
concurrent requests are gathered up to --max-batch rows (default B) and the gathered rows run in
chunks of B (the last one padded with zeros, its padding rows dropped from the answers). A model
that does not (or B = 1 with --max-batch 1) is served at its exact shapes, one request per run. Triton itself refuses a request
with an unknown or missing input, a wrong dtype or shape, or more rows than --max-batch, and answers
it with an error; a run that fails (nnc.RunError) is answered with the runtime's message. Neither
stops the server.

--instances K runs K copies of the model (one nnc.Model each, its own arena and thread pool), so K
batches run at once; --threads T is each one's thread count (default: the cores / K).

Why pytriton's Python backend rather than a C++ TRITONBACKEND: pytriton ships a real tritonserver
binary and its backend on PyPI, so `pip install` gives the whole server; the backend API's headers
would otherwise have to be copied in. What the Python hop costs per request is measured by
bench/serving.py (bench/NOTES.md).
"""
import argparse
import os
import re
import signal
import sys
import sysconfig
import time

import numpy as np

from . import Error, Model

__all__ = ["serve", "triton_io", "main"]

_BF16 = 16  # nnc_dtype of bf16: no NumPy type, no pytriton mapping


def _batch_of(model):
    """The leading dim shared by every input and output (the batch), else None. Each tensor needs a dim
    besides it: Triton's batched dims may not be empty (a [B] input would need a reshape to [B, 1],
    which pytriton's configuration cannot state), so a model with a rank-1 tensor serves at exact shapes."""
    tensors = list(model.inputs) + list(model.outputs)
    if not tensors or any(len(t.shape) < 2 for t in tensors):
        return None
    batch = tensors[0].shape[0]
    return batch if batch > 0 and all(t.shape[0] == batch for t in tensors) else None


def triton_io(model, max_batch=None):
    """(inputs, outputs, max_batch_size, compiled_batch) for serving `model`: Triton's tensor
    specs as (name, dtype, shape) without the batch dim when max_batch_size > 0 (dynamic batching),
    with the whole shape when it is 0. compiled_batch is the model's batch (None when it has none)."""
    if _BF16 in model._input_codes or _BF16 in model._output_codes:
        raise Error("%s has bf16 inputs or outputs, which Triton's Python backend cannot exchange: "
                    "compile it with f32 inputs and outputs (--precision=bf16 keeps them f32)" % model.path)
    batch = _batch_of(model)
    if max_batch is not None and max_batch < 0:
        raise ValueError("--max-batch must be 0 or more")
    if batch is None or max_batch == 0 or (batch == 1 and max_batch in (None, 1)):
        if max_batch not in (None, 0, 1) and batch is None:
            raise Error("%s has no batch dim shared by all its inputs and outputs: it is served at its exact "
                        "shapes, without batching (leave --max-batch out)" % model.path)
        full = lambda infos: [(t.name, t.dtype, tuple(t.shape)) for t in infos]  # noqa: E731
        return full(model.inputs), full(model.outputs), 0, batch
    rows = lambda infos: [(t.name, t.dtype, tuple(t.shape[1:])) for t in infos]  # noqa: E731
    return rows(model.inputs), rows(model.outputs), max_batch or batch, batch


def _batched_runner(model, batch):
    """Runs a gathered batch ({input: [n, ...]}) in chunks of the compiled batch, padding the last."""
    names = [i.name for i in model.inputs]

    def run(inputs):
        n = next(iter(inputs.values())).shape[0]
        pieces = []
        for start in range(0, n, batch):
            chunk = [inputs[name][start:start + batch] for name in names]
            short = batch - chunk[0].shape[0]
            if short:
                chunk = [np.concatenate([c, np.zeros((short,) + c.shape[1:], c.dtype)]) for c in chunk]
            pieces.append(model._run(chunk))
        outs = [np.concatenate([p[k] for p in pieces])[:n] for k in range(len(model.outputs))]
        return {o.name: r for o, r in zip(model.outputs, outs)}

    return run


def _exact_runner(model):
    def run(inputs):
        results = model._run([inputs[i.name] for i in model.inputs])
        return {o.name: r for o, r in zip(model.outputs, results)}

    return run


def _model_name(path):
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.basename(path))[0])
    return name or "model"


def _python_libdir_first():
    """The Python backend's stub links libpython: where this interpreter's lies outside the loader's
    default path (pyenv, a self-built Python), tritonserver's children must find it first."""
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir and os.path.isdir(libdir):
        current = os.environ.get("LD_LIBRARY_PATH", "")
        if libdir not in current.split(":"):
            os.environ["LD_LIBRARY_PATH"] = libdir + (":" + current if current else "")


def serve(model_so, name=None, http_port=8000, grpc_port=8001, metrics_port=8002, address="0.0.0.0",
          max_batch=None, instances=1, threads=0, max_queue_delay_us=100, exit_timeout_s=10, ready=None, block=True):
    """Serves `model_so` until interrupted (block=True) or returns the running pytriton.Triton (block=False;
    call .stop()). ready: called with a one-line description once the model is being served. exit_timeout_s:
    how long a stopping server waits for in-flight requests (and idle client connections) before it exits."""
    try:
        from pytriton.decorators import batch as gather
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig
    except ImportError:
        raise Error("serving needs nvidia-pytriton: pip install '.[serve]' in nnc's source tree, or pip install nvidia-pytriton") from None
    if instances < 1:
        raise ValueError("--instances must be 1 or more")
    if threads <= 0:
        threads = max(1, (os.cpu_count() or 1) // instances)
    models = [Model(model_so, threads=threads) for _ in range(instances)]
    inputs, outputs, max_batch_size, compiled_batch = triton_io(models[0], max_batch)
    name = name or _model_name(model_so)

    def bind_one(model):
        if max_batch_size:
            run = _batched_runner(model, compiled_batch)

            @gather
            def infer(**gathered):
                return run(gathered)
        else:
            run = _exact_runner(model)

            def infer(requests):
                return [run(request) for request in requests]

        return infer

    _python_libdir_first()
    config = TritonConfig(http_address=address, http_port=http_port, grpc_address=address, grpc_port=grpc_port,
                          metrics_port=metrics_port, exit_timeout_secs=exit_timeout_s, log_verbose=0)
    triton = None
    serving = False  # whether the caller (block=False) now owns the running server
    try:
        for attempt in range(_BIND_ATTEMPTS):
            triton = Triton(config=config)
            triton.__enter__()
            try:
                triton.bind(
                    model_name=name,
                    infer_func=[bind_one(m) for m in models],
                    inputs=[Tensor(name=n, dtype=d, shape=s) for n, d, s in inputs],
                    outputs=[Tensor(name=n, dtype=d, shape=s) for n, d, s in outputs],
                    config=ModelConfig(batching=max_batch_size > 0, max_batch_size=max_batch_size,
                                       batcher=DynamicBatcher(max_queue_delay_microseconds=max_queue_delay_us)),
                    strict=True,
                )
                break
            except Exception as e:  # noqa: BLE001 (re-raised unless it is the transient handshake race)
                if attempt + 1 == _BIND_ATTEMPTS or not _transient_load_failure(e):
                    raise
                triton.__exit__(None, None, None)
                triton = None
                time.sleep(1.0)
        triton.run()
        if max_batch_size:
            batching = "dynamic batching up to %d rows, run in batches of %d" % (max_batch_size, compiled_batch)
        else:
            batching = "exact shapes, no batching"
        message = ("nnc serve: model '%s' (%s) on http %s:%d, grpc %s:%d, metrics :%d; %d instance(s) x %d thread(s); "
                   "%s" % (name, model_so, address, http_port, address, grpc_port, metrics_port, instances, threads,
                           batching))
        if ready:
            ready(message)
        if not block:
            serving = True
            return triton
        triton.serve()  # until SIGINT / SIGTERM
    finally:
        # Also when binding or starting failed with block=False: no tritonserver outlives the call.
        if not serving:
            if triton is not None:
                triton.__exit__(None, None, None)
            for m in models:
                m.close()
    return None


# pytriton's python-backend stub connects to a handshake socket that pytriton opens at the same time; on a
# loaded machine the stub can come first and the model load fails with ConnectionRefusedError (or a
# timeout waiting for the socket), while the same load succeeds a second later. Seen once in CI on a
# 2-vCPU host running two test jobs; pytriton issue #109 reports the timeout form. Retried on a fresh
# server, twice at most; any other failure is raised as it is.
_BIND_ATTEMPTS = 3


def _transient_load_failure(error):
    text = str(error)
    return "get_config_from_handshake_server" in text and (
        "ConnectionRefusedError" in text or "Timeout occurred while waiting for config file" in text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="nnc serve", description="Serve a model.so under Triton Inference Server.")
    parser.add_argument("model_so", help="a model.so compiled by nnc (nnc model.onnx -o model.so)")
    parser.add_argument("--name", help="the model's name on the server (default: the file's stem)")
    parser.add_argument("--address", default="0.0.0.0", help="the address HTTP and gRPC bind to")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument("--max-batch", type=int, default=None,
                        help="rows the dynamic batcher gathers (default: the model's batch; 0: no batching)")
    parser.add_argument("--instances", type=int, default=1, help="model copies running at once")
    parser.add_argument("--threads", type=int, default=0, help="threads per instance (default: cores / instances)")
    parser.add_argument("--max-queue-delay-us", type=int, default=100,
                        help="how long the batcher waits for more requests")
    args = parser.parse_args(argv)

    def interrupted(*_):
        raise KeyboardInterrupt  # pytriton's serve() then stops tritonserver and its backend

    signal.signal(signal.SIGTERM, interrupted)
    if not os.path.isfile(args.model_so):
        sys.exit("nnc serve: error: %s: no such file" % args.model_so)
    try:
        serve(args.model_so, name=args.name, http_port=args.http_port, grpc_port=args.grpc_port,
              metrics_port=args.metrics_port, address=args.address, max_batch=args.max_batch,
              instances=args.instances, threads=args.threads, max_queue_delay_us=args.max_queue_delay_us,
              ready=lambda message: print(message, flush=True))
    except (Error, ValueError) as e:
        sys.exit("nnc serve: error: %s" % e)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
