#!/usr/bin/env python3
"""Calls a model.so compiled by nnc from Python with ctypes + numpy (no nnc Python package needed).

    python3 run_model.py model.so input_0.pb [expected_output_0.pb]

Inputs/outputs are ONNX TensorProto files (read with the onnx package). With an expected output,
exits non-zero unless the result matches within rtol 1e-4 / atol 1e-5.
"""
import ctypes
import sys

import numpy as np
from onnx import numpy_helper, TensorProto

MAX_RANK = 8
NP_TO_NNC = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.int32): 6,
             np.dtype(np.int64): 7, np.dtype(np.bool_): 9, np.dtype(np.float16): 10, np.dtype(np.float64): 11}
NNC_TO_NP = {v: k for k, v in NP_TO_NNC.items()}


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_RANK)]


class NncTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64))]


class Model:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.nnc_last_error.restype = ctypes.c_char_p
        self.lib.nnc_model_last_error.restype = ctypes.c_char_p
        self.lib.nnc_model_last_error.argtypes = [ctypes.c_void_p]
        self.lib.nnc_model_num_inputs.argtypes = [ctypes.c_void_p]
        self.lib.nnc_model_num_outputs.argtypes = [ctypes.c_void_p]
        self.lib.nnc_model_num_inputs.restype = ctypes.c_size_t
        self.lib.nnc_model_num_outputs.restype = ctypes.c_size_t
        self.lib.nnc_model_destroy.argtypes = [ctypes.c_void_p]
        self.handle = ctypes.c_void_p()
        if self.lib.nnc_model_create(ctypes.byref(self.handle), None) != 0:
            raise RuntimeError(self.lib.nnc_last_error().decode())

    def _info(self, fn, i):
        info = TensorInfo()
        if fn(self.handle, ctypes.c_size_t(i), ctypes.byref(info)) != 0:
            raise RuntimeError(self.lib.nnc_model_last_error(self.handle).decode())
        return info.name.decode(), NNC_TO_NP[info.dtype], tuple(info.shape[: info.rank])

    def inputs(self):
        return [self._info(self.lib.nnc_model_input_info, i) for i in range(self.lib.nnc_model_num_inputs(self.handle))]

    def outputs(self):
        return [self._info(self.lib.nnc_model_output_info, i) for i in range(self.lib.nnc_model_num_outputs(self.handle))]

    @staticmethod
    def _tensor(array):
        shape = (ctypes.c_int64 * MAX_RANK)(*array.shape)
        return NncTensor(array.ctypes.data, array.nbytes, NP_TO_NNC[array.dtype], array.ndim, shape), shape

    def run(self, *arrays):
        ins = [np.ascontiguousarray(a) for a in arrays]
        outs = [np.empty(shape, dtype) for _, dtype, shape in self.outputs()]
        in_structs = [self._tensor(a) for a in ins]
        out_structs = [self._tensor(a) for a in outs]
        in_arr = (NncTensor * len(ins))(*[t for t, _ in in_structs])
        out_arr = (NncTensor * len(outs))(*[t for t, _ in out_structs])
        if self.lib.nnc_model_run(self.handle, in_arr, ctypes.c_size_t(len(ins)), out_arr, ctypes.c_size_t(len(outs))) != 0:
            raise RuntimeError(self.lib.nnc_model_last_error(self.handle).decode())
        return outs

    def __del__(self):
        if getattr(self, "handle", None):
            self.lib.nnc_model_destroy(self.handle)


def load_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def main():
    model = Model(sys.argv[1])
    print("inputs:", model.inputs(), "outputs:", model.outputs())
    (y,) = model.run(load_pb(sys.argv[2]))
    print("output[0, :3] =", y.reshape(y.shape[0], -1)[0, :3])
    if len(sys.argv) > 3:
        expected = load_pb(sys.argv[3])
        err = float(np.max(np.abs(y - expected)))
        print(f"max abs error vs expected: {err:.3e}")
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
        try:
            model.run(np.zeros((1, 1), np.float32))
            print("a wrong input shape was accepted", file=sys.stderr)
            return 1
        except RuntimeError as e:
            print("wrong shape rejected:", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
