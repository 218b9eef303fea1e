#!/usr/bin/env bash
# ctest wheel: what `pip install .` gives a user, checked where the user has it:
#   1. `pip wheel .` builds the whole compiler (pyproject.toml: scikit-build-core, LLVM, protobuf and zstd
#      linked statically) into one wheel;
#   2. the wheel installs into a fresh venv with no system site packages (numpy from PyPI), and there,
#      with NNC_EXECUTABLE unset and no build tree on PATH: `nnc --version` runs; ldd of the installed nnc
#      (and of the CUDA emulator it carries) names no library beyond the base system (libc, libm,
#      libstdc++, libgcc_s, zlib): no libLLVM, no libprotobuf, no libnvrtc;
#   3. `nnc.compile(model.onnx)(x)` in that venv gives the ONNX test data's outputs, and so does the
#      model.so the `nnc` command compiles, loaded with nnc.load.
# Usage: test_wheel.sh SOURCE_DIR MODELS_DIR WORK_DIR (WORK_DIR/build: the wheel's CMake build, kept so
# that a second run rebuilds only what changed). Uses the python3 on PATH, with onnx (scripts/setup.sh).
set -euo pipefail
SRC=$(cd "$1" && pwd) MODELS=$(cd "$2" && pwd) WORK=$3
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
CASE=$MODELS/model_mlp
if [ ! -f "$CASE/model.onnx" ]; then
  echo "wheel: skipped: no real models in $MODELS (tests/models/make_models.py)"
  exit 77
fi
mkdir -p "$WORK"
rm -rf "$WORK/dist" "$WORK/venv" "$WORK/run"
mkdir -p "$WORK/run"
start=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" \
  -C build-dir="$WORK/build" "$SRC" >"$WORK/wheel.log" 2>&1 ||
  { echo "wheel: pip wheel . failed:"; tail -40 "$WORK/wheel.log"; exit 1; }
wheel=$(ls "$WORK"/dist/nnc-*.whl)
echo "wheel: built $(basename "$wheel") ($(du -m "$wheel" | cut -f1) MB) in $((SECONDS - start)) s"

python3 -m venv "$WORK/venv"
"$WORK/venv/bin/python" -c "import sys; assert sys.prefix != sys.base_prefix" # a venv
"$WORK/venv/bin/python" -c "import site, sys; sys.exit(any('dist-packages' in p for p in site.getsitepackages()))" ||
  { echo "wheel: the venv sees system site packages"; exit 1; }
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" >"$WORK/install.log" 2>&1 ||
  { echo "wheel: pip install of the wheel failed:"; tail -20 "$WORK/install.log"; exit 1; }

# The test data as .npy, read by this python3's onnx (the venv has numpy only).
python3 - "$CASE" "$WORK/run" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
case, out = sys.argv[1:]
for name in ("input_0", "output_0"):
    t = onnx.TensorProto()
    t.ParseFromString(open(f"{case}/test_data_set_0/{name}.pb", "rb").read())
    np.save(f"{out}/{name}.npy", numpy_helper.to_array(t))
PY

# The user's shell: the venv's bin, the base system, nothing of the build tree; NNC_* unset.
clean_env=(env -u NNC_EXECUTABLE -u NNC_RUNTIME_DIR -u PYTHONPATH -u LD_LIBRARY_PATH -u LD_PRELOAD
           PATH="$WORK/venv/bin:/usr/bin:/bin" HOME="$WORK/run")
cd "$WORK/run"
version=$("${clean_env[@]}" nnc --version) || { echo "wheel: nnc --version failed"; exit 1; }
echo "wheel: $version"
case "$version" in "nnc 0.1.0 (LLVM 19."*"linked statically"*) ;; *) echo "wheel: unexpected --version"; exit 1 ;; esac

site=$("$WORK/venv/bin/python" -c "import nnc, os; print(os.path.dirname(nnc.__file__))")
for binary in "$site/bin/nnc" "$site/lib/nnc/libnnc_cuda_emulator.so"; do
  [ -e "$binary" ] || { echo "wheel: $binary is not in the wheel"; exit 1; }
  foreign=$(ldd "$binary" | awk '{print $1}' |
    grep -Ev '^(linux-vdso\.so|/lib64/ld-linux-x86-64\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libstdc\+\+\.so|libgcc_s\.so|libz\.so|libpthread\.so|libdl\.so|librt\.so)' || true)
  if [ -n "$foreign" ]; then
    echo "wheel: $(basename "$binary") loads libraries from outside the base system:"; echo "$foreign"; exit 1
  fi
done

"${clean_env[@]}" python - "$CASE/model.onnx" <<'PY'
import sys, numpy as np, nnc
x, want = np.load("input_0.npy"), np.load("output_0.npy")
assert nnc.executable().startswith(sys.prefix), nnc.executable()  # the wheel's own nnc
got = nnc.compile(sys.argv[1])(x)
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
print("wheel: nnc.compile(model.onnx)(x) matches the test data")
PY
"${clean_env[@]}" nnc "$CASE/model.onnx" -o mlp.so
"${clean_env[@]}" python - <<'PY'
import numpy as np, nnc
np.testing.assert_allclose(nnc.load("mlp.so")(np.load("input_0.npy")), np.load("output_0.npy"), rtol=1e-4, atol=1e-5)
print("wheel: the model.so compiled by the nnc command matches the test data")
PY
echo "wheel: passed"
