#!/usr/bin/env python3
"""LSTM, GRU and RNN through nnc -O0 and -O2 against ONNX Runtime, over the attributes ONNX defines.

Run with the pip `python3` on PATH (scripts/setup.sh installs onnx, onnxruntime 1.20.1 and numpy into it):

    python3 tests/frontend/rnn_ort_difftest.py --nnc build/tools/nnc

The ONNX backend tests cover the defaults, bias, peepholes and layout 1 of each op; this covers the rest:
reverse and bidirectional directions, initial states as inputs and as constants, sequence lengths (as an
input, and constant, short and full), clip, input_forget, GRU's linear_before_reset both ways, every
activation ONNX lists with alpha/beta, omitted outputs. All the cases are nodes of one model (one compile
per level). Every output must be within 1e-5 + 1e-4 |ort| of ONNX Runtime's (ORT_DISABLE_ALL).
Exits 1 on a mismatch, 77 when onnx or onnxruntime cannot be imported (CTest SKIP_RETURN_CODE).
"""
import argparse
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"rnn_ort_difftest: skipped: {e}")
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}

# (op, attributes, options): options say which optional inputs exist and how.
CASES = [
    ("LSTM", {"direction": "reverse"}, {"bias": True}),
    ("LSTM", {"direction": "bidirectional"}, {"bias": True, "initial": "input"}),
    ("LSTM", {"direction": "bidirectional"}, {"bias": True, "lengths": "input", "initial": "const"}),
    ("LSTM", {"direction": "forward"}, {"lengths": "const-short", "peepholes": True}),
    ("LSTM", {"direction": "forward", "clip": 0.3}, {"bias": True}),
    ("LSTM", {"direction": "forward", "input_forget": 1}, {"bias": True}),
    ("LSTM", {"direction": "forward", "activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
              "activation_alpha": [0.3, 0.05], "activation_beta": [0.4]}, {"bias": True}),
    ("LSTM", {"direction": "bidirectional", "layout": 1}, {"bias": True, "initial": "input", "lengths": "input"}),
    ("LSTM", {"direction": "forward"}, {"bias": True, "outputs": ["", "h"]}),
    ("GRU", {"direction": "reverse", "linear_before_reset": 1}, {"bias": True}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 0}, {"bias": True, "initial": "input"}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1}, {"bias": True, "lengths": "input"}),
    ("GRU", {"direction": "forward", "clip": 0.5, "activations": ["Affine", "ScaledTanh"],
             "activation_alpha": [0.5, 1.5], "activation_beta": [0.1, 0.7]}, {"bias": True}),
    ("GRU", {"direction": "forward", "layout": 1}, {"bias": True, "lengths": "const-full"}),
    ("RNN", {"direction": "bidirectional", "activations": ["Elu", "LeakyRelu"], "activation_alpha": [0.7, 0.2]},
     {"bias": True, "initial": "input"}),
    ("RNN", {"direction": "reverse", "activations": ["ThresholdedRelu"], "activation_alpha": [0.1]},
     {"bias": True, "lengths": "input"}),
    ("RNN", {"direction": "forward", "activations": ["Softplus"]}, {"outputs": ["", "h"]}),
]

SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6
LENGTHS = np.array([5, 2, 4], np.int32)


def build(seed, batchwise):
    """The model and its feed. ONNX Runtime has no layout 1 (batchwise): with batchwise=False those cases
    are written in layout 0 with the same values transposed, which is what ONNX Runtime is given."""
    rng = np.random.default_rng(seed)
    nodes, inputs, inits, outputs, feed = [], [], [], [], {}

    def const(name, array):
        inits.append(numpy_helper.from_array(array, name))
        return name

    def graph_input(name, array):
        inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape))
        feed[name] = array
        return name

    for i, (op, attrs, opts) in enumerate(CASES):
        dirs = 2 if attrs["direction"] == "bidirectional" else 1
        g, layout = GATES[op], attrs.get("layout", 0) if batchwise else 0
        attrs = dict(attrs, **({"layout": layout} if "layout" in attrs else {}))
        state_shape = (dirs, BATCH, HIDDEN) if layout == 0 else (BATCH, dirs, HIDDEN)

        def uniform(*shape):
            return rng.uniform(-0.6, 0.6, shape).astype(np.float32)

        def sequence_major(array):  # generated as layout 0, then as the node's layout wants
            return array if layout == 0 else np.ascontiguousarray(array.swapaxes(0, 1))
        names = [graph_input(f"x{i}", sequence_major(uniform(SEQ, BATCH, INPUT))),
                 const(f"w{i}", uniform(dirs, g * HIDDEN, INPUT)),
                 const(f"r{i}", uniform(dirs, g * HIDDEN, HIDDEN))]
        names.append(const(f"b{i}", uniform(dirs, 2 * g * HIDDEN)) if opts.get("bias") else "")
        lengths = opts.get("lengths")
        if lengths == "input":
            names.append(graph_input(f"len{i}", LENGTHS))
        elif lengths == "const-short":
            names.append(const(f"len{i}", LENGTHS))
        elif lengths == "const-full":
            names.append(const(f"len{i}", np.full(BATCH, SEQ, np.int32)))
        else:
            names.append("")
        initial = opts.get("initial")
        for k in range(2 if op == "LSTM" else 1):
            if initial == "input":
                names.append(graph_input(f"s{k}_{i}", sequence_major(uniform(dirs, BATCH, HIDDEN))))
            elif initial == "const":
                names.append(const(f"s{k}_{i}", sequence_major(uniform(dirs, BATCH, HIDDEN))))
            else:
                names.append("")
        if opts.get("peepholes"):
            names.append(const(f"p{i}", uniform(dirs, 3 * HIDDEN)))
        while names and names[-1] == "":
            names.pop()
        want = opts.get("outputs", ["y", "h"] + (["c"] if op == "LSTM" else []))
        outs = [f"{o}{i}" if o else "" for o in want]
        nodes.append(helper.make_node(op, names, outs, name=f"{op.lower()}{i}", hidden_size=HIDDEN, **attrs))
        y_shape = (SEQ, dirs, BATCH, HIDDEN) if layout == 0 else (BATCH, SEQ, dirs, HIDDEN)
        for k, o in enumerate(outs):
            if o:
                outputs.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, y_shape if k == 0 else state_shape))
    graph = helper.make_graph(nodes, "rnn_cases", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feed


def case_index(output_name):
    return int("".join(c for c in output_name if c.isdigit()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nnc", default=os.path.join(REPO, "build", "tools", "nnc"))
    args = parser.parse_args()
    os.environ["NNC_EXECUTABLE"] = args.nnc
    import nnc

    model, feed = build(7, batchwise=True)
    ort_model, ort_feed = build(7, batchwise=False)
    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(ort_model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    want = dict(zip(names, session.run(None, ort_feed)))
    for name in names:  # ONNX Runtime's layout-0 outputs of the batchwise cases, as layout 1
        if CASES[case_index(name)][1].get("layout") == 1:
            want[name] = want[name].transpose((2, 0, 1, 3) if name[0] == "y" else (1, 0, 2))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rnn_cases.onnx")
        onnx.save(model, path)
        for opt in (0, 2):
            compiled = nnc.compile(path, opt=opt)
            got = dict(zip([o.name for o in compiled.outputs], compiled.run(feed)))
            for name in names:
                g, w = got[name], want[name]
                if g.shape != w.shape or not np.allclose(g, w, rtol=1e-4, atol=1e-5):
                    failures += 1
                    case = CASES[case_index(name)]
                    err = float(np.max(np.abs(g - w))) if g.shape == w.shape else float("inf")
                    print(f"-O{opt} {name} {case}: max error {err:.2e} (shape {g.shape} vs {w.shape})")
            compiled.close()
    print(f"rnn_ort_difftest: {len(CASES)} cases, {len(names)} outputs, -O0 and -O2, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
