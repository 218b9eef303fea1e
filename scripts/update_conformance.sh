#!/usr/bin/env bash
# Re-runs the conformance suites at -O0 and -O2 and rewrites the ratchet lists
# tests/conformance/passing_O{0,2}.txt (cpu) and passing_cuda_emulated_O{0,2}.txt (the cuda target
# through the CUDA emulator). Run after making cases pass; review the diff before
# committing (a case dropping out of a list is a regression).
#   scripts/update_conformance.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
NODE=$(python3 -c "import onnx, os; print(os.path.dirname(onnx.__file__))")/backend/test/data/node
DEB=/usr/share/libonnx-testdata/data
mkdir -p "$BUILD/conformance"
for level in 0 2; do
  "$BUILD/tools/nnc" test -O$level "$NODE" "$DEB/pytorch-converted" "$DEB/pytorch-operator" \
    --write-passing="tests/conformance/passing_O$level.txt" > "$BUILD/conformance/full_O$level.txt" || true
  tail -n 1 "$BUILD/conformance/full_O$level.txt"
done
for level in 0 2; do
  "$BUILD/tools/nnc" test -O$level --target=cuda --emulate "$NODE" "$DEB/pytorch-converted" "$DEB/pytorch-operator" \
    --write-passing="tests/conformance/passing_cuda_emulated_O$level.txt" > "$BUILD/conformance/full_cuda_emulated_O$level.txt" || true
  tail -n 1 "$BUILD/conformance/full_cuda_emulated_O$level.txt"
done
