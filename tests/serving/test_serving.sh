#!/usr/bin/env bash
# ctest serving: compiled models under a real Triton Inference Server (tests/serving/serving_test.py).
#   1. a venv (WORK/venv, no system site packages; kept between runs while the pins below are unchanged)
#      with nvidia-pytriton (tritonserver and its Python backend) and tritonclient from PyPI, and nnc's
#      Python package from this source tree (python/nnc, using this build's nnc);
#   2. tests/serving/make_models.py's models (python3 on PATH, with onnx) and, where tests/models made them,
#      MobileNetV2 with ONNX Runtime's test data, compiled by this build's nnc;
#   3. serving_test.py in the venv.
# Usage: test_serving.sh SOURCE_DIR NNC MODELS_DIR WORK_DIR. Exits 77 (skipped, with the reason) where the
# server cannot be had: no PyPI, or a platform pytriton has no wheel for.
set -euo pipefail
SRC=$(cd "$1" && pwd) NNC=$2 MODELS=$3 WORK=$4
PINS="nvidia-pytriton==0.7.0 tritonclient[http,grpc]==2.73.0 numpy<2"
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
if [ "$(uname -m)" != x86_64 ] || [ "$(uname -s)" != Linux ]; then
  echo "serving: skipped: pytriton's tritonserver is built for Linux x86-64 only"
  exit 77
fi
if [ ! -f "$WORK/venv/pins" ] || [ "$(cat "$WORK/venv/pins")" != "$PINS" ]; then
  rm -rf "$WORK/venv"
  python3 -m venv "$WORK/venv"
  start=$SECONDS
  # shellcheck disable=SC2086
  if ! "$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check $PINS >"$WORK/pip.log" 2>&1; then
    if grep -qiE "connection|resolve|network|temporary failure" "$WORK/pip.log"; then
      echo "serving: skipped: PyPI cannot be reached to install the server:"; tail -3 "$WORK/pip.log"; exit 77
    fi
    echo "serving: pip install of the server failed:"; tail -20 "$WORK/pip.log"; exit 1
  fi
  echo "$PINS" >"$WORK/venv/pins"
  echo "serving: installed $PINS in $((SECONDS - start)) s"
fi

rm -rf "$WORK/run" && mkdir -p "$WORK/run"
python3 "$SRC/tests/serving/make_models.py" "$WORK/run"
for m in batched exact gather; do
  "$NNC" "$WORK/run/$m.onnx" -O2 -o "$WORK/run/$m.so"
done
CASE=$MODELS/model_mobilenetv2
if [ -f "$CASE/model.onnx" ]; then
  "$NNC" "$CASE/model.onnx" -O2 -o "$WORK/run/real.so"
  python3 - "$CASE" "$WORK/run" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
case, out = sys.argv[1:]
for pb, npy in (("input_0", "real_input"), ("output_0", "real_output")):
    t = onnx.TensorProto()
    t.ParseFromString(open(f"{case}/test_data_set_0/{pb}.pb", "rb").read())
    np.save(f"{out}/{npy}.npy", numpy_helper.to_array(t))
PY
fi
# nnc's Python package from the source tree; the compiler is this build's (compiling is not served).
env -u LD_PRELOAD PYTHONPATH="$SRC/python" NNC_EXECUTABLE="$NNC" HOME="$WORK/run" \
  "$WORK/venv/bin/python" "$SRC/tests/serving/serving_test.py" "$WORK/run"
