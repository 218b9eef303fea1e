"""The nnc Python package (python/nnc), installed with `pip install .`: compile and load, run with NumPy
arrays, metadata, errors as exceptions, no copy of ready inputs, and the real models against ONNX
Runtime's outputs. Run by python/tests/run_tests.py (ctest `python_package`), which installs the
package into a scratch directory first; needs NNC_EXECUTABLE (the built nnc) and, for the real models,
NNC_MODELS (tests/models/make_models.py's output).

Uses the python3 that runs pytest (the pyenv/venv one with onnx and numpy, not Debian's torch one).
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnc


def save(model, path):
    onnx.save(model, str(path))
    return str(path)


def mlp_model(opset=17):
    """y = relu(x @ w + b), x: f32[2, 4] -> y: f32[2, 3]."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), w, b


def two_in_two_out():
    """s = x + y (f32[3]), p = x * y; a second output and two inputs."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Mul", ["x", "y"], ["p"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("p", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_installed_package_is_the_one_tested():
    site = os.environ.get("NNC_EXPECT_SITE")
    if not site:
        pytest.skip("not run by run_tests.py")
    assert os.path.abspath(nnc.__file__).startswith(os.path.abspath(site))


def test_compile_run_and_call(tmp_path):
    model, w, b = mlp_model()
    m = nnc.compile(save(model, tmp_path / "mlp.onnx"))
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 3 - 1
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    (y,) = m.run({"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m(x), want, rtol=1e-5, atol=1e-6)
    assert m.inputs == [nnc.TensorInfo("x", np.dtype(np.float32), (2, 4))]
    assert m.outputs == [nnc.TensorInfo("y", np.dtype(np.float32), (2, 3))]
    assert "inputs=[x: float32[2, 4]]" in repr(m)


def test_eager_and_threads_agree(tmp_path):
    model, _, _ = mlp_model()
    path = save(model, tmp_path / "mlp.onnx")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    fused = nnc.compile(path, opt=2, threads=2)(x)
    eager = nnc.compile(path, opt=0, threads=1)(x)
    np.testing.assert_allclose(eager, fused, rtol=1e-6, atol=1e-7)


def test_load_a_model_so_and_name_outputs(tmp_path):
    so = tmp_path / "g.so"
    nnc.compile(save(two_in_two_out(), tmp_path / "g.onnx"), output=so)
    assert so.exists(), "output= keeps the library"
    with nnc.load(str(so)) as m:
        x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
        s, p = m(x, y)
        np.testing.assert_array_equal(s, x + y)
        np.testing.assert_array_equal(p, x * y)
        (p_only,) = m.run({"x": x, "y": y}, output_names=["p"])
        np.testing.assert_array_equal(p_only, x * y)
        with pytest.raises(ValueError, match="unknown output 'q'"):
            m.run({"x": x, "y": y}, output_names=["q"])
    with pytest.raises(ValueError, match="closed"):
        m.run({"x": x, "y": y})


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_close_unloads_the_library_once_no_model_holds_it(tmp_path):
    so = tmp_path / "g.so"
    nnc.compile(save(two_in_two_out(), tmp_path / "g.onnx"), output=so)
    path = os.path.realpath(str(so))

    def mapped():
        with open("/proc/self/maps") as f:
            return path in f.read()

    x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    first, second = nnc.load(str(so)), nnc.load(str(so))
    assert mapped()
    first.close()
    assert mapped(), "the second model still holds the library"
    np.testing.assert_array_equal(second(x, y)[0], x + y)
    second.close()
    assert not mapped(), "closing the last model unloads the library"
    for _ in range(20):  # a server reloading a model: nothing accumulates
        with nnc.load(str(so)) as m:
            np.testing.assert_array_equal(m(x, y)[1], x * y)
    assert not mapped()
    with pytest.raises(ValueError, match="closed"):
        m(x, y)


def test_ready_inputs_are_not_copied_others_are_converted(tmp_path):
    model, w, b = mlp_model()
    m = nnc.compile(save(model, tmp_path / "mlp.onnx"))
    info = m.inputs[0]
    ready = np.ones((2, 4), np.float32)
    assert m._as_input(ready, info) is ready
    as_f64 = np.ones((2, 4), np.float64)
    converted = m._as_input(as_f64, info)
    assert converted is not as_f64 and converted.dtype == np.float32
    strided = np.ones((2, 8), np.float32)[:, ::2]
    assert m._as_input(strided, info).flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(m(strided), m(np.ones((2, 4), np.float32)))
    np.testing.assert_allclose(m([[1, 2, 3, 4], [5, 6, 7, 8]]), np.maximum(np.array([[1, 2, 3, 4], [5, 6, 7, 8]]) @ w + b, 0),
                               rtol=1e-5)
    with pytest.raises(TypeError, match="input 'x' is complex128; the model takes float32"):
        m(np.ones((2, 4), np.complex128))


def test_calls_from_several_threads_get_their_own_results(tmp_path):
    # A call fills data pointers into tensor descriptors the Model keeps (one set per thread): each
    # call must see only its own.
    import threading
    model, w, b = mlp_model()
    m = nnc.compile(save(model, tmp_path / "mlp.onnx"))
    xs = [np.full((2, 4), k, np.float32) for k in range(4)]
    want = [np.maximum(x @ w + b, 0) for x in xs]
    wrong = []

    def work(k):
        for _ in range(300):
            got = m(xs[k])
            if not np.allclose(got, want[k], rtol=1e-5):
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_misuse_raises_value_and_type_errors(tmp_path):
    model, _, _ = mlp_model()
    m = nnc.compile(save(model, tmp_path / "mlp.onnx"))
    with pytest.raises(ValueError, match="unknown input 'z'"):
        m.run({"x": np.zeros((2, 4), np.float32), "z": 1})
    with pytest.raises(ValueError, match="missing input 'x'"):
        m.run({})
    with pytest.raises(TypeError, match="takes 1 inputs"):
        m()
    with pytest.raises(TypeError, match="takes a dict"):
        m.run([np.zeros((2, 4), np.float32)])


def test_runtime_errors_carry_the_message_and_status(tmp_path):
    model, _, _ = mlp_model()
    m = nnc.compile(save(model, tmp_path / "mlp.onnx"))
    with pytest.raises(nnc.RunError) as e:
        m(np.zeros((3, 4), np.float32))
    assert e.value.status_name == "NNC_ERROR_SHAPE_MISMATCH"
    assert "input 0 ('x')" in str(e.value)


def test_compile_errors_are_the_compilers_diagnostics(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(nnc.CompileError, match=r"^nnc: error: .*bad\.onnx"):
        nnc.compile(str(bad))
    # Strict opsets, and the way past them.
    newer, _, _ = mlp_model(opset=999)
    path = save(newer, tmp_path / "newer.onnx")
    with pytest.raises(nnc.CompileError, match="opset 999 is newer than nnc supports"):
        nnc.compile(path)
    assert nnc.compile(path, allow_unsupported_opset=True).outputs[0].shape == (2, 3)
    with pytest.raises(nnc.Error, match="cannot load"):
        nnc.load(str(tmp_path / "missing.so"))


def bf16_host():
    """Whether this CPU computes bf16 products: AMX-BF16, or AVX512-BF16 on 512-bit vectors."""
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return (" amx_bf16" in flags and " amx_tile" in flags) or (" avx512_bf16" in flags and " avx512f" in flags)


def round_to_bf16(a):
    """float32 -> the nearest bfloat16 (ties to even), as float64."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def test_bf16_precision_rounds_the_gemm_operands_only(tmp_path):
    """precision="bf16": x @ w with both rounded to bf16, summed in f32 (float64 oracle of the rounded
    operands), the bias and ReLU in f32; refused, naming what is missing, on a CPU with neither AMX-BF16
    nor AVX512-BF16."""
    rng = np.random.default_rng(1)
    m_, k, n = 40, 300, 70
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m_, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m_, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "g.onnx")
    if not bf16_host():
        with pytest.raises(nnc.CompileError, match="needs a CPU with AMX-BF16"):
            nnc.compile(path, precision="bf16")
        return
    model = nnc.compile(path, precision="bf16")
    x = rng.standard_normal((m_, k)).astype(np.float32)
    (y,) = model.run({"x": x})
    want = np.maximum(round_to_bf16(x) @ round_to_bf16(w) + b, 0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)
    exact = np.maximum(x.astype(np.float64) @ w + b, 0)
    assert np.abs(y - exact).max() > 1e-3  # the operands really were rounded
    with pytest.raises(nnc.CompileError, match="unknown precision"):
        nnc.compile(path, precision="f8")


def test_auto_precision_calibrates_on_the_given_inputs(tmp_path):
    """precision="auto": a product whose terms cancel (activations 1 + 0.01 r against weights of
    alternating sign) is mostly bf16 rounding error in bf16. Calibrated on such inputs (a .pb file),
    auto keeps it f32 (float64 oracle); calibrated on generated normal inputs, it sees no harm and
    takes bf16."""
    if not bf16_host():
        pytest.skip("this CPU has neither AMX-BF16 nor AVX512-BF16")
    rng = np.random.default_rng(2)
    m_, k, n = 64, 256, 64
    sign = np.where(np.arange(k) % 2, -1.0, 1.0)[:, None]
    w = (sign * (1 + 0.01 * rng.uniform(-1, 1, (k, n)))).astype(np.float32)
    x = (1 + 0.01 * rng.uniform(-1, 1, (m_, k))).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m_, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m_, n])], [numpy_helper.from_array(w, "w")])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "g.onnx")
    calibration = tmp_path / "x.pb"
    calibration.write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    exact = x.astype(np.float64) @ w
    scale = np.abs(exact).max()
    calibrated = nnc.compile(path, precision="auto", accuracy=1e-2, calibration={"x": calibration})
    assert np.abs(calibrated(x) - exact).max() / scale < 1e-4
    generated = nnc.compile(path, precision="auto", accuracy=1e-2)
    assert np.abs(generated(x) - exact).max() / scale > 5e-2


def test_symbolic_shapes_are_fixed_by_shapes(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "sym.onnx")
    with pytest.raises(nnc.CompileError, match="symbolic"):
        nnc.compile(path)
    m = nnc.compile(path, shapes={"x": (5, 3)})
    x = np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(m(x), np.maximum(x, 0))


def real_models():
    root = os.environ.get("NNC_MODELS", "")
    if not os.path.isdir(root):
        return []
    return sorted(os.path.join(root, d) for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "model.onnx")))


@pytest.mark.parametrize("case", real_models() or [pytest.param(None, marks=pytest.mark.skip(reason="NNC_MODELS unset"))])
def test_real_models_match_onnx_runtime(case, tmp_path):
    m = nnc.compile(os.path.join(case, "model.onnx"))
    data = os.path.join(case, "test_data_set_0")
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "input_0.pb")))
    want = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "output_0.pb")))  # ONNX Runtime's
    np.testing.assert_allclose(m(x), want, rtol=1e-4, atol=1e-5)


def test_fp16_on_cuda_rounds_the_gemm_operands_only(tmp_path, monkeypatch):
    """target="cuda", precision="fp16", run on the CUDA emulator (no GPU needed): x @ w through cuBLASLt
    with both operands rounded to IEEE half (numpy's float16 is the oracle's rounding), summed in f32, the
    bias and ReLU in f32; bf16 rounds to fewer bits, so it is further from the exact product."""
    monkeypatch.setenv("NNC_CUDA_EMULATE", "1")
    rng = np.random.default_rng(2)
    m_, k, n = 24, 200, 40
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m_, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m_, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "g.onnx")
    x = rng.standard_normal((m_, k)).astype(np.float32)
    exact = np.maximum(x.astype(np.float64) @ w + b, 0)
    (y16,) = nnc.compile(path, target="cuda", precision="fp16").run({"x": x})
    half = lambda a: a.astype(np.float16).astype(np.float64)  # noqa: E731
    np.testing.assert_allclose(y16, np.maximum(half(x) @ half(w) + b, 0), rtol=1e-5, atol=1e-4)
    (y_bf16,) = nnc.compile(path, target="cuda", precision="bf16").run({"x": x})
    np.testing.assert_allclose(y_bf16, np.maximum(round_to_bf16(x) @ round_to_bf16(w) + b, 0), rtol=1e-5, atol=1e-4)
    assert 1e-4 < np.abs(y16 - exact).max() < np.abs(y_bf16 - exact).max() / 3
