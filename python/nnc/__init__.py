"""nnc from Python: compile ONNX models with the nnc compiler and run them through the stable C ABI of
the model.so it produces (include/nnc/model.h), NumPy arrays in and out.

    import nnc
    model = nnc.compile("model.onnx", target="cpu", opt=2, shapes={"x": (1, 3, 224, 224)})
    (y,) = model.run({"x": x})        # as onnxruntime.InferenceSession(...).run(None, {"x": x})
    y = model(x)                      # positional inputs; one output returns the array itself
    model.inputs[0].name, model.inputs[0].dtype, model.inputs[0].shape
    model = nnc.load("model.so")      # a library compiled earlier (`nnc model.onnx -o model.so`)

Why ctypes over the C ABI rather than a compiled extension: the C ABI is nnc's stable interface, the
one C and C++ callers use, so Python exercises exactly what they do, and a model.so from any nnc
version with this ABI loads. Compiling runs the `nnc` executable: NNC_EXECUTABLE, else the one
`pip install .` put inside this package (nnc/bin/nnc, with the runtime it links model.so from in
nnc/lib/nnc), else `nnc` on PATH.

Inputs that are already C-contiguous, aligned and of the model's dtype are passed without a copy;
others are converted (a copy). Errors raise nnc.CompileError (the compiler's diagnostic) or
nnc.RunError (the runtime's message and nnc_status code); misuse raises ValueError/TypeError.
"""
import _ctypes
import collections
import ctypes
import os
import shutil
import subprocess
import tempfile
import threading

import numpy as np

__all__ = ["compile", "load", "Model", "TensorInfo", "Error", "CompileError", "RunError", "executable"]
__version__ = "0.1.0"  # pyproject.toml's

_MAX_RANK = 8  # NNC_MAX_RANK

# nnc_dtype (ONNX TensorProto.DataType numbers) <-> NumPy. bf16 has no NumPy type: its tensors are
# exchanged as uint16 bit patterns.
_NNC_TO_NUMPY = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
    16: np.dtype(np.uint16),
}

_STATUS_NAMES = {
    1: "NNC_ERROR_INVALID_ARGUMENT", 2: "NNC_ERROR_SHAPE_MISMATCH", 3: "NNC_ERROR_DTYPE_MISMATCH",
    4: "NNC_ERROR_OUT_OF_MEMORY", 5: "NNC_ERROR_RUNTIME", 6: "NNC_ERROR_NO_DEVICE", 7: "NNC_ERROR_INTERNAL",
}


class Error(Exception):
    """Base class of nnc's errors."""


class CompileError(Error):
    """The compiler refused the model; the message is its diagnostic ("nnc: error: ...")."""


class RunError(Error):
    """Creating or running a model failed; `status` is the nnc_status code."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status
        self.status_name = _STATUS_NAMES.get(status, str(status))


TensorInfo = collections.namedtuple("TensorInfo", ["name", "dtype", "shape"])


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * _MAX_RANK)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64))]


class _Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("num_threads", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("device_buffers", ctypes.c_int32), ("cuda_graphs", ctypes.c_int32)]


def _bundled_executable():
    """The nnc that `pip install .` built into this package, if it did."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "nnc")
    return path if os.access(path, os.X_OK) else None


def executable():
    """The nnc compiler: $NNC_EXECUTABLE, else the one installed in this package, else `nnc` on PATH
    (not the `nnc` console script of this package, which only runs the installed one)."""
    path = os.environ.get("NNC_EXECUTABLE") or _bundled_executable() or shutil.which("nnc")
    if not path or not os.access(path, os.X_OK) or _is_console_script(path):
        raise Error("the nnc executable was not found: set NNC_EXECUTABLE or put nnc on PATH "
                    "(pip install . builds it into the package; or scripts/setup.sh, or cmake --install)")
    return path


def _is_console_script(path):
    """Whether `path` is pip's launcher for nnc._cli (a Python script), which would run itself."""
    try:
        with open(path, "rb") as f:
            head = f.read(2048)
    except OSError:
        return False
    return head.startswith(b"#!") and b"nnc._cli" in head


def _bind(lib):
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    signatures = {
        "nnc_model_create": (ctypes.c_int, [ctypes.POINTER(vp), ctypes.POINTER(_Options)]),
        "nnc_model_num_inputs": (sz, [vp]),
        "nnc_model_num_outputs": (sz, [vp]),
        "nnc_model_input_info": (ctypes.c_int, [vp, sz, ctypes.POINTER(_TensorInfo)]),
        "nnc_model_output_info": (ctypes.c_int, [vp, sz, ctypes.POINTER(_TensorInfo)]),
        "nnc_model_run": (ctypes.c_int, [vp, ctypes.POINTER(_Tensor), sz, ctypes.POINTER(_Tensor), sz]),
        "nnc_model_last_error": (ctypes.c_char_p, [vp]),
        "nnc_last_error": (ctypes.c_char_p, []),
        "nnc_model_destroy": (None, [vp]),
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise Error("%s is not an nnc model library: it has no %s" % (lib._name, name)) from None
        fn.restype, fn.argtypes = restype, argtypes


class Model:
    """A compiled model loaded from its model.so. Use nnc.compile or nnc.load to make one."""

    def __init__(self, path, threads=0, cuda_graphs=None):
        try:
            self._lib = ctypes.CDLL(os.path.abspath(path))
        except OSError as e:
            raise Error("cannot load %s: %s" % (path, e)) from None
        _bind(self._lib)
        self.path = path
        options = _Options(ctypes.sizeof(_Options), int(threads), 0, 0, 0)
        if cuda_graphs is not None:
            options.cuda_graphs = 1 if cuda_graphs else 2  # NNC_CUDA_GRAPHS_ON / _OFF
        self._handle = ctypes.c_void_p()
        status = self._lib.nnc_model_create(ctypes.byref(self._handle), ctypes.byref(options))
        if status != 0:
            self._handle = None
            raise RunError(self._lib.nnc_last_error().decode(errors="replace"), status)
        ins = [self._info(self._lib.nnc_model_input_info, i) for i in range(self._lib.nnc_model_num_inputs(self._handle))]
        outs = [self._info(self._lib.nnc_model_output_info, i)
                for i in range(self._lib.nnc_model_num_outputs(self._handle))]
        self.inputs = [info for info, _ in ins]
        self.outputs = [info for info, _ in outs]
        self._input_codes = [code for _, code in ins]  # nnc_dtype: bf16 and u16 share NumPy's uint16
        self._output_codes = [code for _, code in outs]
        # The tensor descriptors of a call, built once per thread (a call cost ~15 us in Python over
        # the model's own, most of it building these).
        self._per_thread = threading.local()

    @staticmethod
    def _descriptors(infos, codes):
        tensors = (_Tensor * max(1, len(infos)))()
        for t, info, code in zip(tensors, infos, codes):
            shape = (ctypes.c_int64 * max(1, len(info.shape)))(*info.shape)
            t.size_bytes = int(np.prod(info.shape, dtype=np.int64)) * np.dtype(info.dtype).itemsize
            t.dtype, t.rank = code, len(info.shape)
            t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))  # (the array keeps `shape` alive)
        return tensors

    def _info(self, fn, index):
        info = _TensorInfo()
        status = fn(self._handle, index, ctypes.byref(info))
        if status != 0:
            raise RunError(self._last_error(), status)
        if info.dtype not in _NNC_TO_NUMPY:
            raise Error("tensor '%s' has an element type (%d) this package does not know" % (info.name, info.dtype))
        return TensorInfo(info.name.decode(), _NNC_TO_NUMPY[info.dtype], tuple(info.shape[: info.rank])), info.dtype

    def _last_error(self):
        return self._lib.nnc_model_last_error(self._handle).decode(errors="replace")

    @staticmethod
    def _as_input(value, info):
        """`value` as the array passed for input `info`: the same object when it is already
        C-contiguous, aligned and of the input's dtype (no copy), else a converted copy."""
        array = np.asarray(value)
        if array.dtype != info.dtype:
            if not np.can_cast(array.dtype, info.dtype, casting="same_kind"):
                raise TypeError("input '%s' is %s; the model takes %s" % (info.name, array.dtype, info.dtype))
            array = array.astype(info.dtype)
        flags = array.flags
        return array if flags.c_contiguous and flags.aligned else np.require(array, requirements=["C_CONTIGUOUS", "ALIGNED"])

    @staticmethod
    def _tensor(array, code, keep):
        shape = (ctypes.c_int64 * max(1, array.ndim))(*array.shape)
        keep.append(shape)  # alive until the call returns
        return _Tensor(array.ctypes.data, array.nbytes, code, array.ndim, ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)))

    def run(self, feed, output_names=None):
        """Runs on `feed` (a dict from input name to array-like: every input) and returns the outputs
        as a list of new arrays, in model order or in the order of `output_names`."""
        if self._handle is None:
            raise ValueError("the model is closed")
        if not isinstance(feed, dict):
            raise TypeError("run() takes a dict from input name to array (model(x, ...) takes positional inputs)")
        names = [i.name for i in self.inputs]
        unknown = sorted(set(feed) - set(names))
        if unknown:
            raise ValueError("unknown input %s; the model's inputs are %s" % (", ".join(map(repr, unknown)), names))
        missing = [n for n in names if n not in feed]
        if missing:
            raise ValueError("missing input %s" % ", ".join(map(repr, missing)))
        results = self._run([feed[i.name] for i in self.inputs])
        if output_names is None:
            return results
        by_name = {o.name: r for o, r in zip(self.outputs, results)}
        try:
            return [by_name[n] for n in output_names]
        except KeyError as e:
            raise ValueError("unknown output %r; the model's outputs are %s" % (e.args[0], list(by_name))) from None

    def _run(self, values):
        """Runs on `values` (one per input, in model order); returns the outputs as new arrays."""
        if self._handle is None:
            raise ValueError("the model is closed")
        arrays = [self._as_input(v, i) for v, i in zip(values, self.inputs)]
        results = [np.empty(o.shape, dtype=o.dtype) for o in self.outputs]
        # This thread's descriptors, built on its first call (shape arrays included): a call fills in
        # only the data pointers; calls from other threads have their own.
        mine = self._per_thread.__dict__
        if not mine:
            mine["ins"] = self._descriptors(self.inputs, self._input_codes)
            mine["outs"] = self._descriptors(self.outputs, self._output_codes)
        ins, outs, keep = mine["ins"], mine["outs"], []
        for k, (a, info) in enumerate(zip(arrays, self.inputs)):
            if a.shape == info.shape:
                ins[k].data = a.ctypes.data
            else:  # its own shape, for the runtime to refuse with its diagnostic (in a copy: the
                # thread's descriptors keep the model's shapes)
                if ins is mine["ins"]:
                    ins = (_Tensor * len(ins))(*ins)
                ins[k] = self._tensor(a, self._input_codes[k], keep)
        for t, r in zip(outs, results):
            t.data = r.ctypes.data
        status = self._lib.nnc_model_run(self._handle, ins, len(arrays), outs, len(results))
        if status != 0:
            raise RunError(self._last_error(), status)
        return results

    def __call__(self, *inputs):
        """model(x, y, ...): positional inputs in model order; one output is returned as the array."""
        if len(inputs) != len(self.inputs):
            raise TypeError("the model takes %d inputs (%s), %d given" %
                            (len(self.inputs), ", ".join(i.name for i in self.inputs), len(inputs)))
        if self._handle is None:
            raise ValueError("the model is closed")
        results = self._run(inputs)
        return results[0] if len(results) == 1 else tuple(results)

    def close(self):
        """Destroys the handle and unloads the model.so (also done when the model is garbage-collected):
        a process that loads model after model keeps only the ones still open mapped, their weights
        included. Each Model holds its own reference to the library (dlopen counts them), so closing one
        leaves another of the same file working."""
        if getattr(self, "_handle", None):
            self._lib.nnc_model_destroy(self._handle)
            self._handle = None
        lib = getattr(self, "_lib", None)
        if lib is not None:
            self._lib = None  # its function pointers die with the mapping
            _ctypes.dlclose(lib._handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        def fmt(infos):
            return ", ".join("%s: %s%s" % (i.name, i.dtype, list(i.shape)) for i in infos)
        return "nnc.Model(%r, inputs=[%s], outputs=[%s])" % (self.path, fmt(self.inputs), fmt(self.outputs))


def load(path, threads=0, cuda_graphs=None):
    """Loads a model.so compiled by nnc. threads: 0 = one per core (NNC_NUM_THREADS overrides)."""
    return Model(path, threads=threads, cuda_graphs=cuda_graphs)


def compile(model, target="cpu", opt=2, shapes=None, bind=None, output=None, threads=0,
            allow_unsupported_opset=False, precision="f32", accuracy=None, calibration=None, extra_args=()):
    """Compiles the ONNX file `model` with the nnc executable and loads the result.

    target: "cpu" or "cuda"; opt: 0 (eager) to 3; shapes: {input: shape} for symbolic dims;
    bind: {input: path of a TensorProto .pb} made compile-time constants; output: where to keep the
    model.so (default: a temporary file, deleted once loaded); precision: "f32" (exact) or "bf16"
    (GEMMs against constant weights with bf16 operands, f32 accumulation; CPUs with AMX-BF16 or
    AVX512-BF16, or cuda), "fp16" (the same with f16 operands; cuda only), or "auto" (cpu): bf16 per kernel group where calibration keeps the outputs within
    `accuracy` (default 1e-2) of f32, max |error| / max |output|; calibration: {input: path of a
    TensorProto .pb} to calibrate on (inputs not given are generated). Raises CompileError with
    nnc's diagnostic when the model is refused.
    """
    args = [executable(), os.fspath(model), "-O%d" % int(opt), "--target=%s" % target,
            "--precision=%s" % precision]
    if accuracy is not None:
        args.append("--accuracy=%r" % float(accuracy))
    for name, path in (calibration or {}).items():
        args += ["--input", "%s=%s" % (name, os.fspath(path))]
    for name, shape in (shapes or {}).items():
        args += ["--shape", "%s=%s" % (name, "x".join(str(int(d)) for d in shape))]
    for name, path in (bind or {}).items():
        args += ["--bind", "%s=%s" % (name, os.fspath(path))]
    if allow_unsupported_opset:
        args.append("--allow-unsupported-opset")
    args += list(extra_args)
    with tempfile.TemporaryDirectory(prefix="nnc-") as tmp:
        so = os.fspath(output) if output else os.path.join(tmp, "model.so")
        done = subprocess.run(args + ["-o", so], capture_output=True, text=True)
        if done.returncode != 0:
            message = done.stderr.strip() or "nnc exited with status %d" % done.returncode
            raise CompileError(message)
        return Model(so, threads=threads)
