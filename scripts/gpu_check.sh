#!/usr/bin/env bash
# GPU checks for --target=cuda, in two steps, because the GPU machine usually lacks nnc's build
# dependencies (LLVM 19 and protobuf development packages, GoogleTest):
#
#   1. Here (any x86-64 machine with the build dependencies and the CUDA toolkit's NVRTC):
#        scripts/gpu_check.sh prepare
#      builds nnc and nnc_cuda_tests in build-gpucheck (Release) and packs what the GPU machine needs
#      into .gpucheck/bundle.tar.xz: the two binaries, the runtime archives a model.so is linked from,
#      and the shared libraries they load that a GPU image may lack (libLLVM-14, libprotobuf, ...).
#      .gpucheck/ is ignored by git; carry it to the GPU machine along with the working tree.
#   2. On the GPU machine (an H100/H200 with the driver, nvidia-smi, python3 with onnx/onnxruntime/
#      torch, and compute-sanitizer if present), from the repository root:
#        OUT=/some/dir scripts/gpu_check.sh run
#      unpacks the bundle, generates the real models (tests/models/make_models.py), and runs
#        - nnc_cuda_tests (GPU tests included; none may skip for want of a GPU),
#        - `nnc test --target=cuda` at -O0 and -O2 over the ONNX backend node tests and, where
#          installed, Debian's pytorch-converted / pytorch-operator suites,
#        - `nnc test --target=cuda --rtol=1e-4 --atol=1e-5` over the real models,
#        - compute-sanitizer memcheck and racecheck over the real-model suite, when present,
#        - bench/gpu_bench.py: nnc eager/fused vs PyTorch eager and torch.compile on the real models,
#      and writes $OUT/gpu_report.md (device, driver, date, each stage's result and pass counts) plus
#      the full logs and the passing lists (cuda_passing_O0.txt, cuda_passing_O2.txt).
#
# The simplest route is this one: build here and carry the build outputs. Building on the GPU
# machine itself also works where LLVM 19, protobuf and GoogleTest are installed: then
#   cmake -S . -B build-gpucheck -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpucheck \
#     --target nnc nnc_cuda_tests -j && OUT=... scripts/gpu_check.sh run
# (`run` uses an existing build-gpucheck when there is no bundle).
#
# Exit status of `run`: 0 when every stage passed, 1 otherwise; the report says which stage failed.
set -u
set -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_NAME=build-gpucheck
BUILD="$REPO/$BUILD_NAME"
BUNDLE_DIR="$REPO/.gpucheck"
BUNDLE="$BUNDLE_DIR/bundle.tar.xz"

die() {
  echo "gpu_check: $*" >&2
  exit 2
}

# Shared libraries every Linux/CUDA image has; everything else a binary loads goes into the bundle.
is_system_lib() {
  case "$1" in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libstdc++.so* | \
      libgcc_s.so* | libz.so* | libcuda.so* | libnvrtc*) return 0 ;;
  esac
  return 1
}

prepare() {
  command -v cmake >/dev/null || die "cmake not found"
  cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || die "configure failed"
  cmake --build "$BUILD" --target nnc nnc_cuda_tests -j"${JOBS:-2}" || die "build failed"
  [ -x "$BUILD/tests/nnc_cuda_tests" ] || die "nnc_cuda_tests was not built: is the CUDA toolkit's NVRTC installed?"
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/$BUILD_NAME/tools" "$stage/$BUILD_NAME/tests" "$stage/$BUILD_NAME/runtime" "$stage/libs"
  cp "$BUILD/tools/nnc" "$stage/$BUILD_NAME/tools/"
  cp "$BUILD/tests/nnc_cuda_tests" "$stage/$BUILD_NAME/tests/"
  # compileToSharedLibrary links model.so files from these archives (absolute paths compiled in).
  cp "$BUILD"/runtime/*.a "$stage/$BUILD_NAME/runtime/"
  strip --strip-unneeded "$stage/$BUILD_NAME/tools/nnc" "$stage/$BUILD_NAME/tests/nnc_cuda_tests" || true
  for bin in "$BUILD/tools/nnc" "$BUILD/tests/nnc_cuda_tests"; do
    ldd "$bin" | awk '/=>/ { print $1, $3 }' | while read -r name path; do
      is_system_lib "$name" && continue
      [ -f "$path" ] && cp -L "$path" "$stage/libs/$name"
    done
  done
  # Where the archives were built, so that `run` can recreate that path if the copy lives elsewhere.
  echo "$BUILD" >"$stage/build_path.txt"
  mkdir -p "$BUNDLE_DIR"
  grep -qx '/.gpucheck/' "$REPO/.git/info/exclude" 2>/dev/null || echo '/.gpucheck/' >>"$REPO/.git/info/exclude"
  tar -C "$stage" -cJf "$BUNDLE" . || die "cannot write $BUNDLE"
  echo "gpu_check: wrote $BUNDLE ($(du -h "$BUNDLE" | cut -f1)); libraries bundled: $(ls "$stage/libs" | tr '\n' ' ')"
  echo "gpu_check: on the GPU machine, carry .gpucheck and run: OUT=\$OUT scripts/gpu_check.sh run"
}

# --- run (on the GPU machine) ----------------------------------------------------------------

REPORT=""
FAILED=0

note() { echo "$*" | tee -a "$REPORT"; }

# stage NAME COMMAND...: runs a stage, logs it to $OUT/NAME.log, records pass/fail in the report.
stage() {
  local name=$1
  shift
  local log="$OUT/$name.log"
  local start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  local summary
  summary=$(grep -E '[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped|^\[  (PASSED|FAILED|SKIPPED) \]|ERROR SUMMARY' "$log" |
    head -5 | tr '\n' ';')
  if [ $rc -eq 0 ]; then
    note "- $name: ok ($((SECONDS - start)) s) $summary"
  else
    note "- $name: FAILED, exit $rc ($((SECONDS - start)) s) $summary (log: $name.log)"
    FAILED=1
  fi
  return $rc
}

unpack() {
  if [ -f "$BUNDLE" ]; then
    local tmp
    tmp=$(mktemp -d)
    tar -C "$tmp" -xJf "$BUNDLE" || die "cannot unpack $BUNDLE"
    mkdir -p "$BUILD"
    cp -a "$tmp/$BUILD_NAME/." "$BUILD/"
    mkdir -p "$BUILD/libs"
    cp -a "$tmp/libs/." "$BUILD/libs/"
    local built
    built=$(cat "$tmp/build_path.txt")
    rm -rf "$tmp"
    # The binaries name the runtime archives by the absolute path they were built at: make that
    # path lead here when this copy of the repository lives elsewhere.
    if [ "$built" != "$BUILD" ] && [ ! -e "$built" ]; then
      mkdir -p "$(dirname "$built")" && ln -s "$BUILD" "$built" || die "cannot link $built -> $BUILD"
    fi
  fi
  [ -x "$BUILD/tools/nnc" ] && [ -x "$BUILD/tests/nnc_cuda_tests" ] ||
    die "no build: run 'scripts/gpu_check.sh prepare' on a build machine and carry .gpucheck (or build $BUILD_NAME here)"
  export LD_LIBRARY_PATH="$BUILD/libs:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
  local missing
  missing=$(ldd "$BUILD/tools/nnc" "$BUILD/tests/nnc_cuda_tests" | grep 'not found' | sort -u)
  [ -z "$missing" ] || die "shared libraries missing on this machine: $missing"
  # model.so files are linked with the system C++ compiler.
  if ! command -v c++ >/dev/null; then
    if command -v g++ >/dev/null; then export NNC_CXX=g++; else die "no C++ compiler (c++ or g++) to link model.so files"; fi
  fi
}

run() {
  [ -n "${OUT:-}" ] || die "set OUT to the directory for the report"
  mkdir -p "$OUT"
  REPORT="$OUT/gpu_report.md"
  : >"$REPORT"
  unpack
  local NNC="$BUILD/tools/nnc"
  cd "$REPO" || die "cannot enter $REPO"
  NNC_CACHE_DIR=$(mktemp -d)  # a fresh kernel cache: every kernel really compiled on this machine
  export NNC_CACHE_DIR

  note "# nnc CUDA target: GPU check"
  note ""
  note "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  note "- commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown) (working tree may differ)"
  note "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"
  note "- compute-sanitizer: $(command -v compute-sanitizer || echo 'not found')"
  note ""
  note "## Stages"

  # The real models, generated with this machine's torch (the reference is ONNX Runtime's output).
  local models="$BUILD/models"
  if [ ! -d "$models/model_mlp" ]; then
    # Without the bundled libraries: python3 and torch bring their own.
    stage make_models env -u LD_LIBRARY_PATH python3 - "$models" <<'EOF'
import sys
sys.path.insert(0, "tests/models")
import make_models
make_models.TORCH_PYTHON = sys.executable  # the python3 that has torch here
sys.exit(make_models.main(sys.argv[1]))
EOF
  fi

  # Unit, emitter, NVRTC and GPU tests; a GPU test that skips would mean the device was not usable.
  stage cuda_tests "$BUILD/tests/nnc_cuda_tests" --gtest_output="xml:$OUT/cuda_tests.xml"
  if grep -q 'no CUDA driver/GPU' "$OUT/cuda_tests.log"; then
    note "- cuda_tests: GPU tests SKIPPED for want of a device: $(grep -m1 -o 'no CUDA driver/GPU: .*' "$OUT/cuda_tests.log")"
    FAILED=1
  fi

  # Conformance, at -O0 and -O2 (the CPU suites' cases; the CPU ratchet lists are not applied).
  local onnx_node
  onnx_node=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'))" 2>/dev/null)
  for level in 0 2; do
    local suites=()
    [ -d "$onnx_node" ] && suites+=("$onnx_node")
    for d in /usr/share/libonnx-testdata/data/pytorch-converted /usr/share/libonnx-testdata/data/pytorch-operator; do
      [ -d "$d" ] && suites+=("$d")
    done
    if [ ${#suites[@]} -eq 0 ]; then
      note "- conformance_O$level: SKIPPED (no ONNX backend test data: is the onnx package installed?)"
      FAILED=1
      continue
    fi
    stage "conformance_O$level" "$NNC" test --target=cuda -O$level --write-passing="$OUT/cuda_passing_O$level.txt" \
      "${suites[@]}"
  done

  # The real models against ONNX Runtime, fp32 within rtol 1e-4 / atol 1e-5, at -O0 and -O2.
  if [ -d "$models" ]; then
    for level in 0 2; do
      stage "models_O$level" "$NNC" test --target=cuda -O$level --rtol=1e-4 --atol=1e-5 "$models"
    done
    if command -v compute-sanitizer >/dev/null; then
      for tool in memcheck racecheck; do
        stage "sanitizer_$tool" compute-sanitizer --tool "$tool" --target-processes all --error-exitcode 9 \
          "$NNC" test --target=cuda -O2 --rtol=1e-4 --atol=1e-5 "$models"
      done
    else
      note "- compute-sanitizer: not found; memcheck/racecheck did not run"
    fi
    # Speed: nnc eager/fused (with and without CUDA Graphs) beside PyTorch eager and torch.compile.
    if env -u LD_LIBRARY_PATH python3 -c "import torch, onnx" 2>/dev/null; then
      stage gpu_bench env -u LD_LIBRARY_PATH NNC_LD_LIBRARY_PATH="$LD_LIBRARY_PATH" python3 bench/gpu_bench.py \
        --nnc "$NNC" --models "$models" --out "$OUT"
    else
      note "- gpu_bench: SKIPPED (python3 lacks torch or onnx)"
    fi
  else
    note "- models: SKIPPED (no real models in $models)"
    FAILED=1
  fi

  note ""
  if [ $FAILED -eq 0 ]; then note "Result: all stages passed."; else note "Result: some stages FAILED or were skipped (see above)."; fi
  return $FAILED
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *)
    echo "usage: scripts/gpu_check.sh prepare   (build machine)  |  OUT=DIR scripts/gpu_check.sh run   (GPU machine)" >&2
    exit 2
    ;;
esac
