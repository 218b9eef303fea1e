#!/usr/bin/env bash
# Test driver for the model.so examples: compiles the MLP test model with nnc, then calls it from C
# and from Python and checks both against ONNX Runtime's output.
#   run_examples.sh NNC_BINARY MODELS_DIR WORK_DIR
set -euo pipefail
NNC=$1 MODELS=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
CASE=$MODELS/model_mlp
[ -f "$CASE/model.onnx" ] || { echo "SKIP: $CASE not generated (tests/models/make_models.py)"; exit 77; }
mkdir -p "$WORK"
"$NNC" "$CASE/model.onnx" -o "$WORK/mlp.so"
# C: raw float files in and out.
python3 - "$CASE/test_data_set_0/input_0.pb" "$WORK/input.bin" <<'PY'
import sys, numpy as np
from onnx import numpy_helper, TensorProto
t = TensorProto(); t.ParseFromString(open(sys.argv[1], "rb").read())
numpy_helper.to_array(t).astype(np.float32).tofile(sys.argv[2])
PY
cc -std=c11 -Wall -Wextra -Werror "$HERE/c/main.c" -I"$HERE/../include" "$WORK/mlp.so" -Wl,-rpath,"$WORK" -o "$WORK/run_model_c"
"$WORK/run_model_c" "$WORK/input.bin" "$WORK/output.bin"
python3 - "$WORK/output.bin" "$CASE/test_data_set_0/output_0.pb" <<'PY'
import sys, numpy as np
from onnx import numpy_helper, TensorProto
t = TensorProto(); t.ParseFromString(open(sys.argv[2], "rb").read())
expected = numpy_helper.to_array(t)
got = np.fromfile(sys.argv[1], np.float32).reshape(expected.shape)
np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
print("C example matches ONNX Runtime: max abs error %.2e" % float(np.max(np.abs(got - expected))))
PY
# Python: ctypes + numpy.
python3 "$HERE/python/run_model.py" "$WORK/mlp.so" "$CASE/test_data_set_0/input_0.pb" "$CASE/test_data_set_0/output_0.pb"
