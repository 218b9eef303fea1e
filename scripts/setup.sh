#!/usr/bin/env bash
# Installs what nnc needs on a fresh Debian 12 machine and builds it.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
# Debian packages: compiler toolchain, LLVM 19 (the CPU backend), protobuf, GoogleTest, the ONNX test data, clang 14
# with its sanitizer and libFuzzer runtimes (scripts/fuzz.sh), and
# Debian's PyTorch (python3-torch, used by /usr/bin/python3 to export the real-model tests).
# PyPI (into the python3 on PATH): onnx (pinned; its backend node tests are the conformance suite),
# onnxruntime (a peer baseline and an independent oracle) and numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true

APT_PACKAGES="cmake g++ make protobuf-compiler libprotobuf-dev libgtest-dev googletest llvm-19-dev libllvm19 \
  zlib1g-dev libzstd-dev libtinfo-dev libxml2-dev libedit-dev libffi-dev libonnx-testdata python3-numpy python3-torch \
  clang-14 libclang-rt-14-dev clang-format-14"
missing=""
for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

PY=${PYTHON:-python3}
# pytest and scikit-build-core (pyproject.toml's build backend): the Python package's tests (`pip install .`,
# then pytest; tests/install/test_wheel.sh builds the wheel).
if ! $PY -c "import onnx, onnxruntime, numpy, pytest, scikit_build_core; assert onnx.__version__ == '1.17.0'" 2>/dev/null; then
  echo "setup: installing Python packages (onnx==1.17.0 onnxruntime==1.20.1 numpy pytest scikit-build-core)"
  $PY -m pip install -q --disable-pip-version-check onnx==1.17.0 onnxruntime==1.20.1 numpy pytest==8.3.3 \
    scikit-build-core==0.11.6
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} -DPython3_EXECUTABLE="$(command -v $PY)" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
