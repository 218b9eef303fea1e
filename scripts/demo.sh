#!/usr/bin/env bash
# The main job on a bundled example: set up and build nnc, generate the example models (PyTorch
# export with fixed seeds), compile ResNet-18 to a shared library, run it, check it against ONNX
# Runtime, and show fused vs eager speed side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
NNC=build/tools/nnc
[ -f build/models/model_resnet18/model.onnx ] || python3 tests/models/make_models.py build/models

echo; echo "== compile: nnc model.onnx -o resnet18.so"
$NNC build/models/model_resnet18/model.onnx -o build/resnet18.so -v

echo; echo "== run the compiled library on the test input"
$NNC run build/resnet18.so --input input=build/models/model_resnet18/test_data_set_0/input_0.pb \
  --output-dir build/resnet18_out -v

echo; echo "== check every example model against ONNX Runtime (rtol 1e-4, atol 1e-5)"
$NNC test -O2 --rtol=1e-4 --atol=1e-5 build/models

for m in model_resnet18 model_transformer_encoder; do
  echo; echo "== fused vs eager: $m"
  $NNC bench build/models/$m/model.onnx --iterations=20 --warmup=3
done
