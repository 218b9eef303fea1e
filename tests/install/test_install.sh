#!/usr/bin/env bash
# ctest install_tree: `cmake --install` into a temporary prefix, then move the tree elsewhere (it must
# be relocatable and need nothing from the build tree), and use it as users do:
#   1. bin/nnc compiles a real model to model.so with the installed runtime archives (`-v` names
#      where they came from), and the model.so runs through the C ABI with the right numbers;
#   2. with the CUDA toolkit: a cuda model.so from the installed nnc runs on the installed CUDA
#      emulator (lib/nnc/libnnc_cuda_emulator.so), and `nnc test --target=cuda --emulate` passes;
#   3. examples/cmake builds against the installed tree with find_package(nnc) and runs (the C++ API:
#      JIT and model.so).
# Usage: test_install.sh BUILD_DIR SOURCE_DIR MODELS_DIR
set -euo pipefail
BUILD=$1 SRC=$2 MODELS=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD" --prefix "$WORK/first" >/dev/null
mv "$WORK/first" "$WORK/moved"
PREFIX=$WORK/moved
for f in bin/nnc include/nnc/model.h include/nnc/compiler.h include/nnc/onnx.h lib/nnc/libnnc_runtime.a lib/nnc/model_so.map \
  lib/cmake/nnc/nncConfig.cmake; do
  [ -e "$PREFIX/$f" ] || { echo "install_tree: $f is missing from the installed tree"; exit 1; }
done

CASE=$MODELS/model_mlp
if [ -f "$CASE/model.onnx" ]; then
  "$PREFIX/bin/nnc" "$CASE/model.onnx" -o "$WORK/mlp.so" -v 2>"$WORK/verbose.txt"
  grep -qx "nnc: runtime archives from $PREFIX/lib/nnc" "$WORK/verbose.txt" ||
    { echo "install_tree: the installed nnc did not use its own runtime:"; cat "$WORK/verbose.txt"; exit 1; }
  python3 "$SRC/examples/python/run_model.py" "$WORK/mlp.so" "$CASE/test_data_set_0/input_0.pb" \
    "$CASE/test_data_set_0/output_0.pb"
  if [ -e "$PREFIX/lib/nnc/libnnc_cuda_emulator.so" ] && "$PREFIX/bin/nnc" "$CASE/model.onnx" --target=cuda \
      -o "$WORK/mlp_cuda.so" 2>"$WORK/cuda.txt"; then
    NNC_CUDA_EMULATE=1 NNC_CUDA_EMULATOR="$PREFIX/lib/nnc/libnnc_cuda_emulator.so" NNC_CACHE_DIR="$WORK/cache" \
      python3 "$SRC/examples/python/run_model.py" "$WORK/mlp_cuda.so" "$CASE/test_data_set_0/input_0.pb" \
      "$CASE/test_data_set_0/output_0.pb"
    NNC_CACHE_DIR="$WORK/cache" "$PREFIX/bin/nnc" test "$CASE" --target=cuda --emulate | tail -n 1 | grep -q "^1 passed" ||
      { echo "install_tree: nnc test --target=cuda --emulate failed with the installed tree"; exit 1; }
  else
    echo "install_tree: no cuda target in this build; the emulator check is skipped ($(head -c 300 "$WORK/cuda.txt"))"
  fi
else
  echo "install_tree: no real models in $MODELS; the model.so check is skipped"
fi

cmake -S "$SRC/examples/cmake" -B "$WORK/example" -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/example.log" 2>&1 &&
  cmake --build "$WORK/example" -j2 >>"$WORK/example.log" 2>&1 ||
  { echo "install_tree: examples/cmake did not build against the installed tree:"; tail -30 "$WORK/example.log"; exit 1; }
# The public headers are the whole C++ API: nothing of the compiler's own is installed.
if [ -e "$PREFIX/include/nnc/cpp" ] || [ -e "$PREFIX/include/ir" ]; then
  echo "install_tree: internal headers were installed"; exit 1
fi
"$WORK/example/nnc_cmake_example" "$WORK/example.so"
echo "install_tree: ok"
