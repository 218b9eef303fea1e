#!/usr/bin/env python3
"""Generates the real-model test cases in ONNX backend-test layout.

1. export_torch.py (Debian's /usr/bin/python3 with python3-torch) exports MLP, ResNet-18,
   MobileNetV2 and a two-layer GELU transformer encoder with fixed seeds.
2. This script (python3 with the onnx and onnxruntime packages) runs each model through ONNX
   Runtime, checks ORT agrees with PyTorch, and writes OUT/<name>/test_data_set_0/{input,output}_0.pb
   with ORT's outputs as the reference that `nnc test` compares against.

Usage: make_models.py [--bench] OUT_DIR   (--bench: the full-size benchmark set of bench/README.md)
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

TORCH_PYTHON = "/usr/bin/python3"


def main(out_dir, bench=False):
    os.makedirs(out_dir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    if subprocess.call([TORCH_PYTHON, "-c", "import torch"], stderr=subprocess.DEVNULL) != 0:
        print("make_models: Debian's python3-torch is not installed; no real models generated", file=sys.stderr)
        return 1
    subprocess.check_call([TORCH_PYTHON, os.path.join(here, "export_torch.py")] + (["--bench"] if bench else []) +
                          [out_dir])
    for name in sorted(os.listdir(out_dir)):
        case = os.path.join(out_dir, name)
        if not os.path.exists(os.path.join(case, "model.onnx")):
            continue
        x = np.load(os.path.join(case, "input_0.npy"))
        torch_y = np.load(os.path.join(case, "torch_output_0.npy"))
        sess = ort.InferenceSession(os.path.join(case, "model.onnx"), providers=["CPUExecutionProvider"])
        (ort_y,) = sess.run(None, {sess.get_inputs()[0].name: x})
        # The two oracles must agree before either is trusted.
        np.testing.assert_allclose(ort_y, torch_y, rtol=1e-4, atol=1e-4)
        data = os.path.join(case, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, sess.get_inputs()[0].name).SerializeToString())
        with open(os.path.join(data, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(ort_y, sess.get_outputs()[0].name).SerializeToString())
        model = onnx.load(os.path.join(case, "model.onnx"))
        ops = sorted({n.op_type for n in model.graph.node})
        print(f"{name}: {len(model.graph.node)} nodes ({', '.join(ops)}); ORT vs torch max diff "
              f"{float(np.max(np.abs(ort_y - torch_y))):.2e}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--bench":
        sys.exit(main(sys.argv[2], bench=True))
    sys.exit(main(sys.argv[1]))
