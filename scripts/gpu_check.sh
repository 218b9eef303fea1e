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
#        - one process alone on 20 node cases with each case's import/compile/run times (case_timing),
#        - `nnc test --target=cuda` at -O0 and -O2 over the ONNX backend node tests and, where
#          installed, Debian's pytorch-converted / pytorch-operator suites (cases no committed GPU
#          passing list holds first),
#        - `nnc test --target=cuda --rtol=1e-4 --atol=1e-5` over the real models,
#        - compute-sanitizer memcheck and racecheck over the real-model suite, when present,
#        - bench/gpu_bench.py: nnc eager/fused vs PyTorch eager and torch.compile on the real models,
#        - half_precision: bench/gpu_bench.py --precisions f32,bf16,fp16 on the full-size benchmark
#          models (make_models.py --bench): each precision's time and error against the f32 reference,
#      STAGES="conformance models" (stage names, or their part before '_') runs only those stages;
#      and writes $OUT/gpu_report.md (device, driver, date, each stage's result and pass counts), the
#      passing lists (cuda_passing_O0.txt, cuda_passing_O2.txt), gpu_bench.{md,json} and every log in
#      $OUT/logs.tar.xz (one archive: the device tool brings back only 8 files).
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

# prepare [BUILD_DIR]: with BUILD_DIR (an existing Release build, e.g. build/), packs that build
# instead of configuring build-gpucheck from scratch: minutes saved when the GPU lease is waiting.
prepare() {
  command -v cmake >/dev/null || die "cmake not found"
  local from=$BUILD
  if [ -n "${1:-}" ]; then
    from=$(cd "$1" && pwd) || die "no build directory $1"
    grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$from/CMakeCache.txt" || die "$from is not a Release build"
  else
    cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || die "configure failed"
  fi
  cmake --build "$from" --target nnc nnc_cuda_tests -j"${JOBS:-2}" || die "build failed"
  [ -x "$from/tests/nnc_cuda_tests" ] || die "nnc_cuda_tests was not built: is the CUDA toolkit's NVRTC installed?"
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/$BUILD_NAME/tools" "$stage/$BUILD_NAME/tests" "$stage/$BUILD_NAME/runtime" "$stage/libs"
  cp "$from/tools/nnc" "$stage/$BUILD_NAME/tools/"
  cp "$from/tests/nnc_cuda_tests" "$stage/$BUILD_NAME/tests/"
  # compileToSharedLibrary links model.so files from these archives (absolute paths compiled in).
  cp "$from"/runtime/*.a "$stage/$BUILD_NAME/runtime/"
  # The CUDA emulator (nnc_cuda_tests' EmulatedDriver/EmulatedCublasLt tests run on the CPU there too).
  cp "$from"/runtime/libnnc_cuda_emulator.so "$stage/$BUILD_NAME/runtime/"
  mkdir -p "$stage/$BUILD_NAME/builtins"
  cp "$from"/builtins/*.a "$stage/$BUILD_NAME/builtins/"
  strip --strip-unneeded "$stage/$BUILD_NAME/tools/nnc" "$stage/$BUILD_NAME/tests/nnc_cuda_tests" || true
  for bin in "$from/tools/nnc" "$from/tests/nnc_cuda_tests"; do
    ldd "$bin" | awk '/=>/ { print $1, $3 }' | while read -r name path; do
      is_system_lib "$name" && continue
      [ -f "$path" ] && cp -L "$path" "$stage/libs/$name"
    done
  done
  # Where the archives were built, so that `run` can recreate that path if the copy lives elsewhere.
  echo "$from" >"$stage/build_path.txt"
  mkdir -p "$BUNDLE_DIR"
  grep -qx '/.gpucheck/' "$REPO/.git/info/exclude" 2>/dev/null || echo '/.gpucheck/' >>"$REPO/.git/info/exclude"
  tar -C "$stage" -cJf "$BUNDLE" . || die "cannot write $BUNDLE"
  # The conformance suites CI ratchets (this machine's onnx package and Debian's libonnx-testdata):
  # a GPU image's onnx wheel may come without backend test data, or with another version's.
  local data
  data=$(mktemp -d)
  mkdir -p "$data/suites"
  local node
  node=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'))" 2>/dev/null)
  [ -d "$node" ] && cp -r "$node" "$data/suites/node"
  for d in /usr/share/libonnx-testdata/data/pytorch-converted /usr/share/libonnx-testdata/data/pytorch-operator; do
    [ -d "$d" ] && cp -r "$d" "$data/suites/"
  done
  # nnc_cuda_tests names some node tests by this machine's path: run() links it to the copy.
  echo "$node" >"$data/suites/node_path.txt"
  tar -C "$data" -cJf "$BUNDLE_DIR/testdata.tar.xz" suites || die "cannot write the test data"
  rm -rf "$data"
  # The commit the binaries were built from: the GPU machine's copy of the repository may carry an
  # older HEAD than the working tree it was sent (its report said the session's first commit).
  { git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown; } | tr -d '\n' >"$BUNDLE_DIR/commit.txt"
  git -C "$REPO" diff --quiet HEAD 2>/dev/null || echo -n "+uncommitted" >>"$BUNDLE_DIR/commit.txt"
  echo "gpu_check: wrote $BUNDLE ($(du -h "$BUNDLE" | cut -f1)); libraries bundled: $(ls "$stage/libs" | tr '\n' ' ')"
  echo "gpu_check: on the GPU machine, carry .gpucheck and run: OUT=\$OUT scripts/gpu_check.sh run"
}

# --- run (on the GPU machine) ----------------------------------------------------------------

REPORT=""

note() { echo "$*" | tee -a "$REPORT"; }

# Whether STAGES (when set) names the stage NAME or its part before '_'.
selected() {
  [ -z "${STAGES:-}" ] && return 0
  local t
  for t in $STAGES; do [ "$t" = "$1" ] || [ "$t" = "${1%%_*}" ] && return 0; done
  return 1
}

# stage NAME LIMIT_S COMMAND...: runs a stage under a time limit, logs it to $OUT/NAME.log and
# records pass/fail in the report. Stages may run in the background: failure is read back from the
# report at the end, not from a variable a subshell would lose.
stage() {
  local name=$1 limit=$2
  shift 2
  local log="$OUT/$name.log"
  local start=$SECONDS
  if ! selected "$name"; then
    note "- $name: not selected (STAGES=$STAGES)"
    return 0
  fi
  if [ "$SECONDS" -ge "$DEADLINE" ]; then
    note "- $name: FAILED, not started (the run's ${BUDGET_S} s budget was spent)"
    return 1
  fi
  local left=$((DEADLINE - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  # Through bash so that a shell function (sharded_test, exported) runs under the limit too.
  timeout --kill-after=10 "$limit" bash -c '"$@"' _ "$@" >"$log" 2>&1
  local rc=$?
  local summary
  summary=$(grep -E '[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ test|ERROR SUMMARY' "$log" |
    head -5 | tr '\n' ';')
  if [ $rc -eq 0 ]; then
    note "- $name: ok ($((SECONDS - start)) s) $summary"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    note "- $name: FAILED, stopped at its ${limit} s limit ($summary) (log: $name.log)"
  else
    note "- $name: FAILED, exit $rc ($((SECONDS - start)) s) $summary (log: $name.log)"
  fi
  return $rc
}

# sharded_test NAME SHARDS NNC_TEST_ARGS...: `nnc test` in SHARDS processes at once (NVRTC
# compiles on the CPU: one process would leave 15 of 16 cores idle), one log and passing list per
# shard, then the sums and the merged passing list, as one stage.
sharded_test() {
  local name=$1 shards=$2
  shift 2
  local k pids=()
  merge() {
    grep -hvE '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$OUT"/.$name.*.log
    awk '/^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { p += $1; f += $3; s += $5; n++ }
         END { printf "%d passed, %d failed, %d skipped (%d of '"$shards"' shards finished)\n", p, f, s, n }' \
      "$OUT"/.$name.*.log
    # From the PASS lines, not --write-passing (written only at a shard's end): a shard stopped at
    # the time limit still gives the cases it passed.
    sed -n 's/^PASS \([^ :]*\).*/\1/p' "$OUT"/.$name.*.log | sort -u >"$OUT/cuda_passing_$name.txt"
    rm -f "$OUT"/.$name.*
  }
  trap 'merge; exit 124' TERM
  for ((k = 0; k < shards; k++)); do
    NNC_TEST_TIMES=1 "$NNC" test --shard=$k/$shards "$@" >"$OUT/.$name.$k.log" 2>&1 &
    pids+=($!)
  done
  local rc=0 pid
  # Exit 1 is "some cases failed" (counted in the summary); anything else is a broken shard.
  for pid in "${pids[@]}"; do
    wait "$pid"
    local r=$?
    [ $r -gt 1 ] && rc=$r
  done
  merge
  return $rc
}
export -f sharded_test

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
    if command -v g++ >/dev/null; then export NNC_CXX=g++ NNC_EMULATE_CXX=g++; else die "no C++ compiler (c++ or g++) to link model.so files"; fi
  fi
}

run() {
  [ -n "${OUT:-}" ] || die "set OUT to the directory for the report"
  mkdir -p "$OUT"
  REPORT="$OUT/gpu_report.md"
  : >"$REPORT"
  # A lease is short (15 minutes of device time, the machine's start included): every stage runs
  # under a limit and the whole run under BUDGET_S, so that the report always comes back.
  BUDGET_S=${BUDGET_S:-540}
  DEADLINE=$((SECONDS + BUDGET_S))
  local jobs
  jobs=$(nproc 2>/dev/null || echo 4)
  [ "$jobs" -gt 16 ] && jobs=16
  unpack
  NNC="$BUILD/tools/nnc"
  export NNC OUT
  cd "$REPO" || die "cannot enter $REPO"
  NNC_CACHE_DIR=$(mktemp -d)  # a fresh kernel cache: every kernel really compiled on this machine
  export NNC_CACHE_DIR

  note "# nnc CUDA target: GPU check"
  note ""
  note "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  local built_from
  built_from=$(cat "$BUNDLE_DIR/commit.txt" 2>/dev/null || git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
  note "- commit: ${GPU_CHECK_COMMIT:-$built_from} (the build's; from .gpucheck/commit.txt where prepare wrote it)"
  note "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"
  note "- host: $(nproc) cores; budget ${BUDGET_S} s; conformance in $((jobs / 2)) shards per level"
  note "- compute-sanitizer: $(command -v compute-sanitizer || echo 'not found')"
  note ""
  note "## Stages"

  # The conformance suites (found before the unit tests: some of those read node tests too).
  local onnx_node suites=()
  if [ -f "$BUNDLE_DIR/testdata.tar.xz" ]; then
    # The suites the build machine's CI ratchets, carried with the bundle.
    mkdir -p "$BUILD/testdata" && tar -C "$BUILD/testdata" -xJf "$BUNDLE_DIR/testdata.tar.xz"
    for d in "$BUILD"/testdata/suites/*; do [ -d "$d" ] && suites+=("$d"); done
    local node_path
    node_path=$(cat "$BUILD/testdata/suites/node_path.txt" 2>/dev/null)
    if [ -n "$node_path" ] && [ ! -e "$node_path" ]; then
      mkdir -p "$(dirname "$node_path")" && ln -s "$BUILD/testdata/suites/node" "$node_path"
    fi
  else
    onnx_node=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'))" 2>/dev/null)
    [ -d "$onnx_node" ] && suites+=("$onnx_node")
    for d in /usr/share/libonnx-testdata/data/pytorch-converted /usr/share/libonnx-testdata/data/pytorch-operator; do
      [ -d "$d" ] && suites+=("$d")
    done
  fi
  # The real models, generated with this machine's torch (the reference is ONNX Runtime's output),
  # in the background (CPU only) while the suites are unpacked.
  local models="$BUILD/models" models_pid=""
  if [ ! -d "$models/model_mlp" ]; then
    # Without the bundled libraries: python3 and torch bring their own.
    stage make_models 240 env -u LD_LIBRARY_PATH python3 -c '
import sys
sys.path.insert(0, "tests/models")
import make_models
make_models.TORCH_PYTHON = sys.executable  # the python3 that has torch here
sys.exit(make_models.main(sys.argv[1]))' "$models" &
    models_pid=$!
  fi

  [ -n "$models_pid" ] && wait "$models_pid"  # some unit tests run the real models

  # Unit, emitter, NVRTC and GPU tests; a GPU test that skips would mean the device was not usable.
  # Alone on the GPU: DeviceMemoryStaysFlatOverCreateRunDestroy reads the device's free memory,
  # which other processes' allocations would move (it failed so beside the conformance shards).
  stage cuda_tests 240 "$BUILD/tests/nnc_cuda_tests" --gtest_output="xml:$OUT/cuda_tests.xml"
  if grep -qs 'no CUDA driver/GPU' "$OUT/cuda_tests.log"; then
    note "- cuda_tests: FAILED: GPU tests SKIPPED for want of a device: $(grep -m1 -o 'no CUDA driver/GPU: .*' "$OUT/cuda_tests.log")"
  fi

  # What one case costs, alone on the GPU (one process, 20 node cases spread over the suite): each
  # PASS/FAIL line carries its import, compile (NVRTC and module load included) and run times.
  local timing_cases=()
  if [ ${#suites[@]} -gt 0 ]; then
    mapfile -t timing_cases < <(find "${suites[0]}" -name model.onnx -printf '%h\n' | sort | awk 'NR % 60 == 1' | head -20)
    [ ${#timing_cases[@]} -gt 0 ] && stage case_timing 60 env NNC_TEST_TIMES=1 "$NNC" test --target=cuda -O2 "${timing_cases[@]}"
  fi

  # Conformance, at -O0 and -O2 at once (the CPU suites' cases; the CPU ratchet lists are not
  # applied: the counts and the passing lists are the result). A case that fails is a finding, not
  # a failed stage; a shard that crashes or runs out of time is.
  if [ ${#suites[@]} -eq 0 ]; then
    note "- conformance: FAILED, not run (no ONNX backend test data: is the onnx package installed?)"
  else
    # A lease rarely holds the whole suite: the cases no earlier GPU run passed (bench/results/gpu-*/
    # cuda_passing_O*) go first, so that run after run covers the suite.
    local level pids=() all_cases=()
    mapfile -t all_cases < <(find "${suites[@]}" -name model.onnx -printf '%h\n' | sort)
    for level in 0 2; do
      local passed_before ordered=()
      passed_before=$(cat "$REPO"/bench/results/gpu-*/cuda_passing_O${level}*.txt 2>/dev/null | sort -u)
      mapfile -t ordered < <(printf '%s\n' "${all_cases[@]}" | awk -v before="$passed_before" '
        BEGIN { n = split(before, names, "\n"); for (i = 1; i <= n; i++) seen[names[i]] = 1 }
        { name = $0; sub(/.*\//, "", name); if (name in seen) later[++m] = $0; else print }
        END { for (i = 1; i <= m; i++) print later[i] }')
      note "- conformance_O$level: ${#ordered[@]} cases, $(printf '%s\n' "$passed_before" | grep -c .) passed on an earlier GPU run (those last)"
      stage "conformance_O$level" 200 sharded_test "O$level" $((jobs / 2)) --target=cuda -O$level "${ordered[@]}" &
      pids+=($!)
    done
    wait "${pids[@]}"
  fi

  # The real models against ONNX Runtime, fp32 within rtol 1e-4 / atol 1e-5, at -O0 and -O2; then the
  # sanitizers over them; then speed.
  if [ -d "$models/model_mlp" ]; then
    local pids=()
    for level in 0 2; do
      stage "models_O$level" 120 "$NNC" test --target=cuda -O$level --rtol=1e-4 --atol=1e-5 "$models" &
      pids+=($!)
    done
    wait "${pids[@]}"
    if command -v compute-sanitizer >/dev/null; then
      pids=()
      for tool in memcheck racecheck; do
        stage "sanitizer_$tool" 150 compute-sanitizer --tool "$tool" --target-processes all --error-exitcode 9 \
          "$NNC" test --target=cuda -O2 --rtol=1e-4 --atol=1e-5 "$models" &
        pids+=($!)
      done
      wait "${pids[@]}"
    else
      note "- compute-sanitizer: not found; memcheck/racecheck did not run"
    fi
    # Speed: nnc eager/fused (with and without CUDA Graphs) beside PyTorch eager and torch.compile.
    if env -u LD_LIBRARY_PATH python3 -c "import torch, onnx" 2>/dev/null; then
      stage gpu_bench 120 env -u LD_LIBRARY_PATH NNC_LD_LIBRARY_PATH="$LD_LIBRARY_PATH" python3 bench/gpu_bench.py \
        --nnc "$NNC" --models "$models" --out "$OUT"
    else
      note "- gpu_bench: FAILED, not run (python3 lacks torch or onnx)"
    fi
    # Reduced precision on the full-size benchmark models (BERT-base's 12 layers, ResNet-50 at 224, ...):
    # nnc -O2 at --precision=f32, bf16 and fp16 (cuBLASLt's tensor cores on half operands), each with its
    # error against the f32 reference output.
    if env -u LD_LIBRARY_PATH python3 -c "import torch, onnx, onnxruntime" 2>/dev/null; then
      local bench_models="$BUILD/bench-models"
      [ -d "$bench_models/bert12_128" ] || stage make_bench_models 240 env -u LD_LIBRARY_PATH python3 -c '
import sys
sys.path.insert(0, "tests/models")
import make_models
make_models.TORCH_PYTHON = sys.executable
sys.exit(make_models.main(sys.argv[1], bench=True))' "$bench_models"
      stage half_precision 240 env -u LD_LIBRARY_PATH NNC_LD_LIBRARY_PATH="$LD_LIBRARY_PATH" python3 bench/gpu_bench.py \
        --nnc "$NNC" --models "$bench_models" --out "$OUT/half" --skip-compile --iterations 50 --warmup 10 \
        --precisions f32,bf16,fp16
    else
      note "- half_precision: FAILED, not run (python3 lacks torch, onnx or onnxruntime)"
    fi
  elif selected models || selected sanitizer || selected gpu_bench; then
    note "- models: FAILED, not run (no real models in $models)"
  fi

  note ""
  if grep -q 'FAILED' "$REPORT"; then
    note "Result: some stages FAILED or did not run (see above)."
    return 1
  fi
  note "Result: all stages passed."
  return 0
}

# The device tool brings back at most 8 files from $OUT (the first 8 by name): the logs go into one
# archive so that the report, the passing lists and the speed table always come back.
pack_logs() {
  (
    cd "$OUT" || exit
    shopt -s nullglob
    local files=(./*.log ./*.xml)
    [ ${#files[@]} -gt 0 ] && tar -cJf logs.tar.xz "${files[@]}" && rm -f "${files[@]}"
  )
}

case "${1:-}" in
  prepare) prepare "${2:-}" ;;
  run)
    run
    status=$?
    pack_logs
    exit $status
    ;;
  *)
    echo "usage: scripts/gpu_check.sh prepare   (build machine)  |  OUT=DIR scripts/gpu_check.sh run   (GPU machine)" >&2
    exit 2
    ;;
esac
