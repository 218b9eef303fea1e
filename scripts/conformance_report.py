#!/usr/bin/env python3
"""Conformance counts for README and docs/CONFORMANCE.md.

Classifies every case of the suites as in or out of scope (issue 2's exclusion list: control flow,
sequence/optional/string ops, random generators, training ops, DFT/STFT/windows, data-dependent
output shapes, RoiAlign, GridSample, Det, quantized ops, non-default domains, and
element types outside f32/f16/bf16/f64/int8-64/uint8-64/bool; and ImageDecoder, an image codec), then counts the cases listed in
tests/conformance/passing_O{0,2}.txt.

Usage: conformance_report.py [--markdown] [--failing]
"""
import os
import sys

import onnx

EXCLUDED_OPS = {
    # control flow
    "If", "Loop", "Scan",
    # sequences, optionals, strings
    "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength",
    "SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional", "OptionalHasElement",
    "OptionalGetElement", "StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch", "TfIdfVectorizer",
    # random generators
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
    # training
    "Adam", "Adagrad", "Momentum", "Gradient",
    # spectral and windows
    "DFT", "STFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix",
    # data-dependent output shapes
    "NonZero", "Unique", "NonMaxSuppression", "Compress",
    # others named in the issue
    "RoiAlign", "GridSample", "Det",
    # quantized
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
    "MatMulInteger",
    # an image codec (JPEG/PNG/TIFF/WebP/JPEG 2000 decoding of a byte tensor), not a tensor op
    "ImageDecoder",
}
SUPPORTED_ELEM_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def suites():
    node = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    deb = "/usr/share/libonnx-testdata/data"
    return [("onnx-node", node), ("pytorch-converted", os.path.join(deb, "pytorch-converted")),
            ("pytorch-operator", os.path.join(deb, "pytorch-operator"))]


def graph_ops(graph, out):
    for n in graph.node:
        out.add((n.domain or "", n.op_type))
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                graph_ops(a.g, out)
            for g in a.graphs:
                graph_ops(g, out)


def value_types(graph):
    for v in list(graph.input) + list(graph.output):
        t = v.type
        if t.HasField("tensor_type"):
            yield t.tensor_type.elem_type
        else:
            yield None  # sequence / optional / map


def scope(model_path, name):
    """(in_scope, reason, ops)"""
    try:
        model = onnx.load(model_path, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - a broken case file is out of scope, with its reason
        return False, f"unreadable model ({e.__class__.__name__})", set()
    ops = set()
    graph_ops(model.graph, ops)
    for dom, op in sorted(ops):
        if dom not in ("", "ai.onnx"):
            return False, f"domain {dom}", ops
        if op in EXCLUDED_OPS:
            return False, f"excluded op {op}", ops
    for et in value_types(model.graph):
        if et is None:
            return False, "non-tensor input/output", ops
        if et not in SUPPORTED_ELEM_TYPES:
            return False, f"element type {onnx.TensorProto.DataType.Name(et)}", ops
    if name.startswith("test_training_dropout") and "zero_ratio" not in name:
        return False, "random (training-mode dropout)", ops
    return True, "", ops


def read_list(level):
    path = os.path.join(ROOT, "tests", "conformance", f"passing_O{level}.txt")
    if not os.path.exists(path):
        return set()
    return {l.strip() for l in open(path) if l.strip() and not l.startswith("#")}


def main():
    markdown = "--markdown" in sys.argv
    show_failing = "--failing" in sys.argv
    passing = {level: read_list(level) for level in (0, 2)}
    rows, failing = [], {0: [], 2: []}
    for suite, path in suites():
        if not os.path.isdir(path):
            continue
        total = in_scope = 0
        passed = {0: 0, 2: 0}
        passed_out_of_scope = {0: 0, 2: 0}
        for name in sorted(os.listdir(path)):
            model = os.path.join(path, name, "model.onnx")
            if not os.path.exists(model):
                continue
            total += 1
            ok, reason, ops = scope(model, name)
            for level in (0, 2):
                if not ok:
                    passed_out_of_scope[level] += name in passing[level]
                    continue
                if name in passing[level]:
                    passed[level] += 1
                else:
                    failing[level].append((suite, name, ",".join(sorted(o for _, o in ops))))
            in_scope += ok
        rows.append((suite, total, in_scope, passed[0], passed[2], passed_out_of_scope[2]))
    tot = [sum(r[i] for r in rows) for i in range(1, 6)]
    rows.append(("all", *tot))
    if markdown:
        print("| suite | cases | in scope | pass -O0 | pass -O2 | in-scope pass rate -O0 / -O2 |")
        print("|---|---:|---:|---:|---:|---:|")
        for s, total, ins, p0, p2, _ in rows:
            print(f"| {s} | {total} | {ins} | {p0} | {p2} | {100 * p0 / max(ins, 1):.1f}% / {100 * p2 / max(ins, 1):.1f}% |")
    else:
        for s, total, ins, p0, p2, extra in rows:
            print(f"{s:18} cases {total:5}  in scope {ins:5}  pass -O0 {p0:5} ({100 * p0 / max(ins, 1):5.1f}%)  "
                  f"pass -O2 {p2:5} ({100 * p2 / max(ins, 1):5.1f}%)  (+{extra} out-of-scope cases pass)")
    if show_failing:
        for level in (0, 2):
            print(f"\nin-scope cases not passing at -O{level}: {len(failing[level])}")
            for suite, name, ops in failing[level]:
                print(f"  {suite:18} {name:60} {ops}")


if __name__ == "__main__":
    main()
