#!/usr/bin/python3
"""PyTorch-eager timing worker for run_benchmarks.py.

Runs under Debian's /usr/bin/python3 (python3-torch 1.13, which has no torch.compile, so only eager
mode is measured). Reads a JSON spec on stdin, times the workload, writes its first output to
spec["output_npy"] (so the driver can check torch computed the same thing as ONNX Runtime) and
prints one JSON line with the per-iteration times in milliseconds.

Real models are re-created from tests/models/export_torch.py with the exporter's seeds, so the weights
are the ones in model.onnx; micro-graphs use the parameters the driver saved next to the ONNX file.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def real_model(name):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
    import export_torch  # noqa: E402  (needs the path above)

    cls, _ = export_torch.model_class(name)
    # Same seeding sequence as export_torch.main, so the weights match the exported model.onnx.
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = cls().eval()
    with torch.no_grad():
        export_torch.randomize_batchnorm(model, gen)
    return model


def micro(name, params):
    p = {k: torch.from_numpy(v) for k, v in params.items()}
    if name == "gelu_chain_1M":
        # The ONNX graph's op sequence, one eager kernel per op (tanh-approximated GELU).
        c = math.sqrt(2.0 / math.pi)
        return lambda x: (x * 0.5) * (torch.tanh((x + (x * x * x) * 0.044715) * c) + 1.0)
    if name == "softmax_1024x1024":
        return lambda x: torch.softmax(x, dim=-1)
    if name == "layernorm_4096x1024":
        # What a PyTorch user writes: the native (single-kernel) layer_norm.
        return lambda x: F.layer_norm(x, (x.shape[-1],), p["gamma"], p["beta"], 1e-5)
    if name == "rmsnorm_4096x1024":
        # The module's own ops (PyTorch 1.13 has no fused RMSNorm), one eager kernel each.
        return lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * p["weight"]
    if name == "attention_12x1024":
        # PyTorch 1.13 has no fused attention (scaled_dot_product_attention came in 2.0): its ops.
        return lambda x: torch.softmax(torch.matmul(x, x.transpose(-1, -2)) / 8.0 + p["mask"], dim=-1).matmul(x)
    if name == "matmul_bias_relu_512":
        return lambda x: torch.relu(torch.matmul(x, p["W"]) + p["b"])
    raise SystemExit(f"torch_worker: unknown micro-graph '{name}'")


def main():
    spec = json.load(sys.stdin)
    torch.set_num_threads(spec["threads"])
    x = torch.from_numpy(np.load(spec["input_npy"]))
    if spec["kind"] == "model":
        fn = real_model(spec["name"])
    else:
        params = dict(np.load(spec["params_npz"])) if spec.get("params_npz") else {}
        fn = micro(spec["name"], params)
    times = []
    with torch.inference_mode():
        y = fn(x)
        warm_until = time.perf_counter() + spec.get("warmup_ms", 0) / 1e3
        i = 0
        while i < spec["warmup"] or time.perf_counter() < warm_until:
            fn(x)
            i += 1
        for _ in range(spec["iterations"]):
            start = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - start) * 1e3)
    np.save(spec["output_npy"], y.numpy())
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(), "ms": times}))


if __name__ == "__main__":
    main()
